"""What grading produces: a check's result, an exercise's, a notebook's (plain data, no logic
of grading). "Not graded" is built here and only here: its exercises score 0 and their checks
say they did not run.

Their text comes from students (folder names, exception names and messages): every string is
bounded when it is set, and a notebook keeps at most MAX_NOTES notes, so no submission makes
a result, a journal entry or a feedback page large."""
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator

from .text import bounded, shortened

MAX_NOTES = 20   # a notebook of 10,000 failing cells needs one line that says so, not 10,000
MAX_NOTEBOOK_TEXT = 30_000   # characters of a notebook's messages and notes together
SUMMARY_LIMIT = 500   # characters of an exercise's message in grades.csv (the feedback page has it whole)


class _Bounded:
    """Every string field bounded (autograder.text), `notes` a Notes: a student's text is never kept whole."""

    def __setattr__(self, name: str, value: Any) -> None:  # at construction, and any change after it
        if isinstance(value, str):
            value = bounded(value)
        elif name == "notes":
            value = Notes(value)
        super().__setattr__(name, value)


class Notes(list[str]):
    """A notebook's notes: each bounded, at most MAX_NOTES (then one says that more were cut)."""
    CUT = f"(more notes were cut: at most {MAX_NOTES} are kept)"

    def __init__(self, notes: Iterable[str] = ()) -> None:
        super().__init__()
        self.extend(notes)

    def append(self, note: str) -> None:
        if len(self) < MAX_NOTES:
            super().append(bounded(note))
        elif len(self) == MAX_NOTES:
            super().append(self.CUT)

    def extend(self, notes: Iterable[str]) -> None:
        for note in notes:
            self.append(note)

    def __iadd__(self, notes: Iterable[str]) -> "Notes":  # type: ignore[override,misc]  # (bounded, not list's)
        self.extend(notes)
        return self


@dataclass
class CheckResult(_Bounded):
    name: str
    points: float
    max_points: float
    message: str = ""     # what went wrong; empty if the check passed
    ran: bool = True      # False: the check was not run (its points are not earned)

    @property
    def passed(self) -> bool:
        return self.ran and not self.message


@dataclass
class ExerciseResult(_Bounded):
    name: str
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def score(self) -> float:
        return round(sum(c.points for c in self.checks if c.ran), 6)

    @property
    def summary(self) -> str:
        """One line for grades.csv: empty when every check passed."""
        if self.checks and not any(c.ran for c in self.checks):
            return self.checks[0].message
        failed = [c for c in self.checks if not c.passed]
        if not failed:
            return ""
        return f"{len(failed)} of {len(self.checks)} checks failed; first: {failed[0].name}: {failed[0].message}"


@dataclass
class Graded(_Bounded):
    """One student's notebook for one assignment, graded."""
    student: str
    assignment: str
    exercises: list[ExerciseResult]     # in notebook order
    problem: str = ""                   # why the notebook could not be graded at all
    notes: list[str] = field(default_factory=list)   # cell errors and other things worth saying
    raised: list[int] = field(default_factory=list)  # the numbers of the code cells that raised (their notes say how)

    @property
    def score(self) -> float:
        return round(sum(e.score for e in self.exercises), 6)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    def rows(self) -> Iterator[tuple[str, str, str, float, float, str]]:
        for e in self.exercises:
            yield self.student, self.assignment, e.name, e.score, e.max_score, shortened(e.summary, SUMMARY_LIMIT)

    @classmethod
    def not_graded(cls, student: str, assignment: str, exercises: Iterable[Any], reason: str,
                   checks_of: Callable[[Any], Iterable[tuple[str, float]]] = lambda exercise: []) -> "Graded":
        """Every exercise scores 0; its checks (names from `checks_of`) are listed as not run."""
        problem = f"not graded: {reason}"
        return cls(student, assignment, [
            ExerciseResult(e.name, e.points, [CheckResult(name, 0.0, points, problem, ran=False)
                                              for name, points in checks_of(e)]
                           or [CheckResult("the notebook", 0.0, e.points, problem, ran=False)])
            for e in exercises], problem=problem)

    def bound_text(self, limit: int = MAX_NOTEBOOK_TEXT) -> "Graded":
        """All the notebook's messages and notes together at most about `limit` characters, kept
        in notebook order: past it, a failing check says only that its message was cut."""
        left = limit - sum(len(note) for note in self.notes)
        for exercise in self.exercises:
            for result in exercise.checks:
                if len(result.message) > max(left, 0):
                    result.message = f"failed (its message was cut: a notebook's feedback holds at most {limit:,} characters)"
                left -= len(result.message)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Graded":
        exercises = [ExerciseResult(e["name"], e["max_score"], [CheckResult(**c) for c in e["checks"]])
                     for e in data["exercises"]]
        return cls(data["student"], data["assignment"], exercises, data["problem"], data["notes"],
                   list(data.get("raised", [])))
