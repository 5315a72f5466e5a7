"""The checks both graders share, and the entry point of nbgrader's hidden test cells.

`grade(assignment, exercise, globals())` in a test cell runs the exercise's checks against the
notebook's own functions and returns the points earned (nbgrader reads that as partial credit);
the autograder runs the same checks on a sandboxed student process (see `pipeline`). Either way
the exercises before it are replaced by stand-ins that the grader computes with their reference
solutions (`known_good`), so an exercise is judged on its own code only.
"""
import contextlib
import importlib
import io
import warnings

from .. import GUIDE, REPO_ROOT, CourseError, checks_file, notebook, reference, stated
from ..results import CheckResult, ExerciseResult
from ..sandbox.calls import StudentError
from ..sandbox.protocol import StudentProcess
from ..stated.failure import failure_of
from .core import Student, registered
from .inprocess import InProcessStudent
from .known_good import KnownGood


def checks_module(assignment):
    """The module that registers the assignment's checks; CourseError, saying what to add, for an
    assignment of solutions/ that has none (a chapter being added)."""
    path = checks_file(assignment)
    if not path.is_file():
        names = ", ".join(e.name for e in notebook.exercises(assignment))
        raise CourseError(f"{assignment} has no checks, so it cannot be graded: add {path.relative_to(REPO_ROOT)}, "
                          f"with ASSIGNMENT = {assignment!r} and checks for each of its exercises ({names}); "
                          f"see {GUIDE}")
    module = importlib.import_module(f"{__name__}.{path.stem}")
    if getattr(module, "ASSIGNMENT", None) != assignment:  # a copied module still registering for its original
        raise CourseError(f"{path.relative_to(REPO_ROOT)} must set ASSIGNMENT = {assignment!r} "
                          f"(it sets {getattr(module, 'ASSIGNMENT', None)!r}); see {GUIDE}")
    return module


def exercise_checks(assignment, exercise):
    """[(check, max points)]: the exercise's points split over its checks by weight."""
    checks_module(assignment)
    points = {e.name: e.points for e in notebook.exercises(assignment)}[exercise]
    checks = registered(assignment, exercise)
    if not checks:  # its points could never be earned
        raise CourseError(f"exercise {exercise} of {assignment} has no checks, so it cannot be graded: register them "
                          f"in {checks_file(assignment).relative_to(REPO_ROOT)}; see {GUIDE}")
    total = sum(c.weight for c in checks)
    return [(c, points * c.weight / total) for c in checks]


def run_exercise(assignment: str, exercise: str, student: StudentProcess, ref=None, *, seed: int) -> ExerciseResult:
    """Every check of one exercise, with known-good versions of the exercises before it; a failing
    check costs its share, nothing more. `seed`: the run's, which draws the stated rules' inputs."""
    ref = ref if ref is not None else reference.load(assignment)
    names = notebook.known_good(assignment, exercise)
    student.callbacks.pop("known_good", None)
    if names:
        standins = KnownGood(ref, names)
        student.callbacks["known_good"] = standins
        with contextlib.suppress(StudentError):  # then the checks' own calls say what is wrong
            student.use_known_good(standins.spec())
    results = []
    for check, max_points in exercise_checks(assignment, exercise):
        message = failure_of(check.run, Student(student), ref, seed)
        results.append(CheckResult(check.name, 0.0 if message else max_points, max_points, message))
    points = {e.name: e.points for e in notebook.exercises(assignment)}[exercise]
    return ExerciseResult(exercise, points, results)


def format_result(result):
    lines = [f"{result.name}: {result.score:.4g} / {result.max_score:.4g} points"]
    for r in result.checks:
        mark = "passed" if r.passed else "FAILED"
        lines.append(f"  [{mark}] {r.name} ({r.points:.3g}/{r.max_points:.3g})" + (f": {r.message}" if r.message else ""))
    return "\n".join(lines)


def grade(assignment, exercise, namespace):
    """nbgrader's hidden tests: print the report, return the points for partial credit."""
    student = InProcessStudent(namespace)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")  # a warning on stderr would cost all the cell's points
        try:
            result = run_exercise(assignment, exercise, student, seed=stated.seed_from_environment())
        finally:
            student.restore()
    print(format_result(result))
    return result.score
