"""The checks both graders share, and the entry point of nbgrader's hidden test cells.

`grade(assignment, exercise, globals())` in a test cell runs the exercise's checks against the
notebook's own functions and returns the points earned (nbgrader reads that as partial credit);
the autograder runs the same checks on a sandboxed student process (see `pipeline`).
"""
import contextlib
import importlib
import io
import warnings
from dataclasses import dataclass

from .. import notebook, reference
from .core import CheckFailure, StudentError, registered
from .inprocess import InProcessStudent


@dataclass
class CheckResult:
    exercise: str
    name: str
    points: float
    max_points: float
    message: str = ""

    @property
    def passed(self):
        return not self.message


def checks_module(assignment):
    return importlib.import_module(f"{__name__}.ch{assignment.replace('-', '_')}")


def exercise_checks(assignment, exercise):
    """[(check, max points)]: the exercise's points split over its checks by weight."""
    checks_module(assignment)
    points = {e.name: e.points for e in notebook.exercises(assignment)}[exercise]
    checks = registered(assignment, exercise)
    total = sum(c.weight for c in checks)
    return [(c, points * c.weight / total) for c in checks]


def run_exercise(assignment, exercise, student, ref=None):
    """Run every check of one exercise; a failing check costs its share, nothing more."""
    ref = ref if ref is not None else reference.load(assignment)
    results = []
    for check, max_points in exercise_checks(assignment, exercise):
        try:
            check.run(student, ref)
            message = ""
        except (CheckFailure, StudentError) as failure:
            message = str(failure) or type(failure).__name__
        except Exception as error:  # an answer so odd that the comparison itself failed
            message = f"could not check the answer ({type(error).__name__}: {error})"
        results.append(CheckResult(exercise, check.name, 0.0 if message else max_points, max_points, message))
    return results


def format_results(exercise, results):
    earned, possible = sum(r.points for r in results), sum(r.max_points for r in results)
    lines = [f"{exercise}: {earned:.4g} / {possible:.4g} points"]
    for r in results:
        mark = "passed" if r.passed else "FAILED"
        lines.append(f"  [{mark}] {r.name} ({r.points:.3g}/{r.max_points:.3g})" + (f": {r.message}" if r.message else ""))
    return "\n".join(lines)


def grade(assignment, exercise, namespace):
    """nbgrader's hidden tests: print the report, return the points for partial credit."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")  # a warning on stderr would cost all the cell's points
        results = run_exercise(assignment, exercise, InProcessStudent(namespace))
    print(format_results(exercise, results))
    return round(sum(r.points for r in results), 6)
