"""The course's autograder: load → run sandboxed → check → report.

- `notebook`   reads submissions and the source notebooks (exercises, points, reference solution cells);
- `sandbox`    runs a student's notebook in a separate process and answers calls on plain values;
- `wire`       the safe format those values travel in (JSON + .npy, never pickle);
- `checks`     the checks, shared with nbgrader's hidden test cells;
- `reference`  the reference solutions, read from solutions/ (the single source of truth);
- `results`    what grading produces (check, exercise and notebook results), as plain data;
- `pipeline`   grades a folder of submissions; `journal` keeps results as they come; `report`
               writes grades.csv and feedback (`files` writes atomically); `summary` the class
               summary beside them;
- `selfcheck`  a student's pre-flight check of one notebook (`python -m autograder check`): the
               notebook run as `grade` runs it, with its visible tests, never the hidden checks.
"""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


GUIDE = "CONTRIBUTING.md (\"Adding a chapter\")"  # what the errors below point to


class CourseError(Exception):
    """The course lacks a file that an assignment needs (a chapter being added): the message says
    which file, and how to make it."""


def checks_file(assignment):
    """autograder/checks/ch<a>.py, where the assignment's hidden checks are registered."""
    return REPO_ROOT / "autograder" / "checks" / f"ch{assignment.replace('-', '_')}.py"


def released_notebook(assignment):
    """notebooks/<a>/<a>.ipynb, the student notebook `make release` generates from solutions/."""
    return NOTEBOOKS_DIR / assignment / f"{assignment}.ipynb"


def has_solutions():
    """False in a student's copy of the course, which has notebooks/ but not solutions/."""
    return SOLUTIONS_DIR.is_dir()


def assignments():
    """Assignment names in chapter order: the folders of solutions/ (of notebooks/ in a student's copy)."""
    root = SOLUTIONS_DIR if has_solutions() else NOTEBOOKS_DIR
    return sorted(p.name for p in root.iterdir() if (p / f"{p.name}.ipynb").is_file())
