"""Who is a student: every folder of SUBMISSIONS, whatever its name (issue 28 §6: a student whose
folder is named like an assignment must not stop the class), and the one real mistake, one
student's folder given for the class's, still refused."""
import csv

import pytest
from conftest import BIN, run
from submissions import filled_notebook, write

from autograder import assignments
from autograder.notebook import exercises
from autograder.pipeline import NothingToGrade, discover

A = "01-weights"
FULL = sum(e.points for e in exercises(A))
LAST = assignments()[-1]  # the last chapter's


def layout(root, paths):
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("{}")
    return root


@pytest.mark.parametrize("name", [LAST, A, "02_global_attention"])
def test_a_student_named_like_an_assignment_is_a_student(tmp_path, name):
    root = layout(tmp_path, [f"alice/{A}/{A}.ipynb", f"{name}/{A}/{A}.ipynb"])
    jobs, problems = discover(root)
    assert sorted((j.student, j.assignment, j.path != "") for j in jobs) == sorted([("alice", A, True), (name, A, True)])
    assert not any(name in text and "holds no assignment folder" in text for _, text in problems)


def test_an_assignment_folder_in_a_class_is_graded_as_a_student_and_said(tmp_path):
    root = layout(tmp_path, [f"alice/{A}/{A}.ipynb", f"{LAST}/{LAST}.ipynb"])
    jobs, problems = discover(root)
    assert {(j.student, j.assignment) for j in jobs} >= {("alice", A), (LAST, LAST)}
    assert any(student == LAST and "holds no assignment folder" in text for student, text in problems)


@pytest.mark.parametrize("paths", [
    [f"{A}/{A}.ipynb"],
    [f"{A}/{A}.ipynb", f"{LAST}/{LAST}.ipynb"],
    [f"{A}/{A}.ipynb", "02_global_attention/02-global-attention.ipynb", "notes/todo.txt"],
])
def test_one_students_folder_is_still_refused(tmp_path, paths):
    with pytest.raises(NothingToGrade, match="an assignment: give the folder that holds the students' folders"):
        discover(layout(tmp_path, paths))


def test_a_class_with_a_student_named_like_an_assignment_is_graded(tmp_path):
    root = tmp_path / "class"
    for student in ("control", LAST):
        write(filled_notebook(A), root / student / A / f"{A}.ipynb")
    out = tmp_path / "out"
    run(BIN / "python", "-m", "autograder", "grade", root, "--out", out, "-j", "1", "--quiet")
    totals = {}
    for row in csv.DictReader(open(out / "grades.csv")):
        totals[row["student"], row["assignment"]] = totals.get((row["student"], row["assignment"]), 0) + float(row["score"])
    assert totals == {("control", A): FULL, (LAST, A): FULL}
