"""Building submissions for the tests and the samples: the student notebook, filled in.

Every solution cell gets the reference solution from solutions/ (markers removed) unless a
replacement is given for its exercise: a wrong or alternative implementation, or anything else.
"""
import copy
import re

import nbformat

from autograder import NOTEBOOKS_DIR
from autograder.notebook import exercises, nbgrader_meta


def reference_solutions(assignment):
    """{grade_id: source of the solution cell with the markers removed}."""
    return {e.name: e.solution for e in exercises(assignment)}


def student_notebook(assignment):
    return nbformat.read(NOTEBOOKS_DIR / assignment / f"{assignment}.ipynb", as_version=4)


def filled_notebook(assignment, replacements=None, untouched=()):
    """The student notebook with every solution cell filled: `replacements[exercise]` if given,
    the stub left as is for exercises in `untouched`, the reference otherwise."""
    replacements = replacements or {}
    reference = reference_solutions(assignment)
    nb = copy.deepcopy(student_notebook(assignment))
    for cell in nb.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and grade_id not in untouched:
            cell.source = replacements[grade_id].strip("\n") if grade_id in replacements else reference[grade_id]
    return nb


def write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def student_id(*parts):
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
