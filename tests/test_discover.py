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


# ---- browser and Colab names (issue 36 §4): one rule, notebook.assignment_of_filename, on every route

from autograder import notebook  # noqa: E402
from autograder.notebook import assignment_of_filename, pick_notebook  # noqa: E402

KNOWN = assignments()
M = "05-self-masked"


@pytest.mark.parametrize("name", [f"{M}.ipynb", f"{M} (1).ipynb", f"{M}(2).ipynb", f"{M}-1.ipynb", f"{M}_2.ipynb",
                                  f"Copy of {M}.ipynb", f"Copy of {M} (1).ipynb", f"{M} - Copy.ipynb",
                                  f"{M} copy.ipynb", "05_Self_Masked.ipynb", f"{M.upper()}.IPYNB"])
def test_browser_names_stand_for_their_assignment(name):
    assert assignment_of_filename(name, KNOWN) == M


@pytest.mark.parametrize("name", ["Untitled.ipynb", "Untitled1.ipynb", "notes.ipynb", f"{M}.py", f"{M}.ipynb.txt"])
def test_other_names_stand_for_nothing(name):
    assert assignment_of_filename(name, KNOWN) is None


def test_each_assignment_is_its_own_name():
    assert [assignment_of_filename(f"{a}.ipynb", KNOWN) for a in KNOWN] == KNOWN
    assert [assignment_of_filename(f"{a} (1).ipynb", KNOWN) for a in KNOWN] == KNOWN


def test_the_exact_name_wins_then_the_latest_download():
    assert pick_notebook([f"{M} (1).ipynb", f"{M}.ipynb"], M, KNOWN) == f"{M}.ipynb"
    assert pick_notebook([f"{M} (1).ipynb", f"{M} (10).ipynb", f"{M} (2).ipynb", "x.ipynb"], M, KNOWN) == f"{M} (10).ipynb"
    assert pick_notebook(["x.ipynb", f"{A}.ipynb"], M, KNOWN) is None


def test_discover_grades_a_browser_renamed_notebook_in_its_folder_with_one_note(tmp_path):
    root = layout(tmp_path, [f"alice/{M}/{M} (1).ipynb", f"bob/{M}/{M}.ipynb", f"bob/{M}/{M} (1).ipynb",
                             f"carol/{M}/untitled.ipynb"])
    jobs, problems = discover(root)
    by = {j.student: j for j in jobs}
    assert by["alice"].path.endswith(f"alice/{M}/{M} (1).ipynb")
    assert by["alice"].notes == (notebook.renamed_note(f"{M} (1).ipynb", M),)
    assert by["bob"].path.endswith(f"bob/{M}/{M}.ipynb") and by["bob"].notes == ()
    assert by["carol"].path.endswith(f"carol/{M}/{M}.ipynb")  # not a name for it: refused at loading, "rename it"
    assert sum("alice" in text and "is graded as" in text for _, text in problems) == 1


def test_a_copied_folder_beside_the_assignment_is_ignored_not_foreign(tmp_path):
    root = layout(tmp_path, [f"alice/{M}/{M}.ipynb", f"alice/{M} (1)/{M}.ipynb"])
    jobs, problems = discover(root)
    assert [j.path for j in jobs if j.student == "alice"][0].endswith(f"alice/{M}/{M}.ipynb")
    assert any(f"alice/{M} (1): ignored" in text for _, text in problems)
    assert not any("not an assignment of this course" in text for _, text in problems)


def test_a_browser_renamed_notebook_is_graded_end_to_end(tmp_path):
    """`01-weights (1).ipynb` in its folder: full marks, one note in the feedback, no mtime warning."""
    root = tmp_path / "class"
    write(filled_notebook(A), root / "alice" / A / f"{A} (1).ipynb")
    deadlines = tmp_path / "due.csv"
    deadlines.write_text(f"assignment,due\n{A},2999-01-01T00:00:00+00:00\n")
    out = tmp_path / "out"
    done = run(BIN / "python", "-m", "autograder", "grade", root, "--out", out, "-j", "1", "--quiet",
               "--deadlines", deadlines)
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert sum(float(r["score"]) for r in rows) == FULL
    page = (out / "feedback" / "alice" / f"{A}.html").read_text()
    assert page.count("is graded as") == 1 and "only " not in page and "rename it to" not in page
    assert "mtime" not in done.stdout + done.stderr and "no late penalty" not in done.stdout + done.stderr
