"""The class summary an instructor reads before office hours: per assignment and exercise, the
mean score, how many students lost points, and the check that failed most often, with one of
its messages. Written as summary.csv beside grades.csv, and printed after grading."""
import csv
import io
import os
from collections import Counter
from dataclasses import dataclass

from .files import atomic_write
from .report import shown
from .text import for_csv_cell, for_terminal, shortened

COLUMNS = ["assignment", "exercise", "max_score", "students", "mean_score", "lost_points",
           "not_graded", "most_common_failure", "failure_count", "example_message"]


@dataclass
class ExerciseSummary:
    assignment: str
    exercise: str
    max_score: float
    students: int = 0
    total: float = 0.0
    lost_points: int = 0        # students who scored below the maximum, not graded ones included
    not_graded: int = 0
    failures: Counter = None    # check name -> students whose first failing check it was
    examples: dict = None       # check name -> the first message seen for it

    @property
    def mean_score(self):
        return self.total / self.students if self.students else 0.0

    def most_common(self):
        """(check name, count, example message) of the most frequent first failure, or None."""
        if not self.failures:
            return None
        name, count = self.failures.most_common(1)[0]
        return name, count, self.examples[name]


def summarise(graded_list):
    """[ExerciseSummary] in the order assignments and exercises first appear."""
    found = {}
    for graded in graded_list:
        for exercise in graded.exercises:
            key = (graded.assignment, exercise.name)
            s = found.setdefault(key, ExerciseSummary(*key, exercise.max_score, failures=Counter(), examples={}))
            s.students += 1
            s.total += exercise.score
            if exercise.score < exercise.max_score:
                s.lost_points += 1
            if graded.problem:
                s.not_graded += 1
                continue  # one reason for the whole notebook, not this exercise's failure
            failed = [c for c in exercise.checks if not c.passed]
            if failed:  # a student's first failing check: the one to fix first
                s.failures[failed[0].name] += 1
                s.examples.setdefault(failed[0].name, failed[0].message)
    return list(found.values())


LATE_COLUMNS = ["late_students", "mean_after_penalty"]   # at the end, with deadlines (`grade --deadlines`)


def late_by_exercise(graded_list, late):
    """{(assignment, exercise): (students penalized, mean score after the penalty)}."""
    found = {}
    for graded in graded_list:
        lateness = late.get((graded.student, graded.assignment))
        for exercise in graded.exercises:
            count, total, students = found.get((graded.assignment, exercise.name), (0, 0.0, 0))
            penalized = bool(lateness and lateness.percent)
            found[graded.assignment, exercise.name] = (count + penalized, total + (
                lateness.apply(exercise.score) if lateness else exercise.score), students + 1)
    return {key: (count, total / students) for key, (count, total, students) in found.items()}


def write_summary(graded_list, out_dir, late=None):
    """summary.csv; with `late` ({(student, assignment): late.Late}) LATE_COLUMNS at the end."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS + LATE_COLUMNS * (late is not None))
    penalties = late_by_exercise(graded_list, late) if late is not None else {}
    for s in summarise(graded_list):
        name, count, message = s.most_common() or ("", 0, "")
        row = [for_csv_cell(s.assignment), for_csv_cell(s.exercise), shown(s.max_score), s.students,
               shown(s.mean_score), s.lost_points, s.not_graded, for_csv_cell(name), count,
               for_csv_cell(shortened(message, 300))]
        if late is not None:
            late_students, mean = penalties[s.assignment, s.exercise]
            row += [late_students, shown(mean)]
        writer.writerow(row)
    path = os.path.join(out_dir, "summary.csv")
    atomic_write(path, buffer.getvalue())
    return path


def text(graded_list, width=110, late=None):
    """The summary as a plain-text table, one line per exercise and the top failure under it.
    Names and messages are printed through for_terminal: a student's escapes do not act.
    With `late`, each assignment's line says how many notebooks were penalized for lateness."""
    lines = [f"{'exercise':<34} {'mean':>11} {'lost points':>12} {'not graded':>11}  most common failure"]
    assignment = None
    for s in summarise(graded_list):
        if s.assignment != assignment:
            assignment = s.assignment
            penalized = sorted(student for (student, a), lateness in (late or {}).items()
                               if a == assignment and lateness.percent)
            lines.append(f"{for_terminal(assignment)}:" + (
                f"  late, penalized: {len(penalized)} ({', '.join(map(for_terminal, penalized))})" if penalized
                else "  nobody late" if late is not None else ""))
        top = s.most_common()
        failure = f"{for_terminal(top[0])} ({top[1]})" if top else "-"
        mean = f"{shown(s.mean_score)}/{shown(s.max_score)}"
        lost = f"{s.lost_points} of {s.students}"
        lines.append(f"  {for_terminal(s.exercise):<32} {mean:>11} {lost:>12} {s.not_graded:>11}  {failure}")
        if top:
            example = f"  {'':<32}   e.g. {for_terminal(top[2])}"
            lines.append(example if len(example) <= width else example[:width - 1] + "…")  # whole in summary.csv
    return "\n".join(lines)
