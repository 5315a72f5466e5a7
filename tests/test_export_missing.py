"""Missing work is exported blank, not 0 (issue 36 §7): Canvas and Moodle write a 0 over a grade
already there (an extension's, given by hand) but leave a blank cell alone. Missing is a student
with no notebook for the assignment (no rows, or the refusal rows of an empty folder or of a roster
student with no folder); a notebook that scored 0, or could not be read, was handed in: 0.

The grades.csv is written by the grader's own pieces (discover's and the roster's refusals,
report.write_grades), so a change of the refusals' wording shows here."""
import argparse
import csv
import io

from conftest import BIN, run

from autograder import cli
from autograder.export import CANVAS_COLUMNS, export
from autograder.notebook import exercises
from autograder.pipeline import discover
from autograder.report import write_grades
from autograder.results import CheckResult, ExerciseResult, Graded
from autograder.roster import read as read_roster

A, B = "01-weights", "02-global-attention"
ROSTER = """folder,name,lms_id,sis_user_id,sis_login_id,section,email
ada,Ada,101,S1,ada1,A,ada@example.edu
bob,Bob,102,S2,bob2,A,bob@example.edu
carol,Carol,103,S3,carol3,B,carol@example.edu
eve,Eve,105,S5,eve5,B,eve@example.edu
"""


def scored(student, assignment, fraction):
    return Graded(student, assignment, [ExerciseResult(e.name, e.points, [
        CheckResult("values", fraction * e.points, e.points, "" if fraction == 1 else "wrong values")])
        for e in exercises(assignment)])


def graded_class(tmp_path):
    """ada: A full marks, B a file that is not a notebook (handed in: 0); bob: A all wrong (0), no B
    (missing); carol: an empty folder (missing); eve: in the roster, no folder (missing)."""
    submitted = tmp_path / "submitted"
    for student, assignment in (("ada", A), ("ada", B), ("bob", A)):
        (submitted / student / assignment).mkdir(parents=True)
        (submitted / student / assignment / f"{assignment}.ipynb").write_text("{}")
    (submitted / "carol").mkdir()
    (tmp_path / "roster.csv").write_text(ROSTER)
    roster = read_roster(tmp_path / "roster.csv")
    args = argparse.Namespace(submissions=str(submitted), roster=str(tmp_path / "roster.csv"))
    jobs, _ = cli._with_roster(discover(str(submitted)), roster, args)
    marks = {("ada", A): 1, ("bob", A): 0}
    graded = [Graded.not_graded(j.student, j.assignment, exercises(j.assignment), j.refusal) if j.refusal
              else scored(j.student, j.assignment, marks[j.student, j.assignment]) if (j.student, j.assignment) in marks
              else Graded.not_graded(j.student, j.assignment, exercises(j.assignment),
                                     f"{j.assignment}.ipynb is not a Jupyter notebook")
              for j in jobs]
    assert {(j.student, j.assignment) for j in jobs if j.refusal} == {("carol", A), ("carol", B), ("eve", A), ("eve", B)}
    write_grades(graded, tmp_path, roster)
    return tmp_path / "grades.csv", tmp_path / "roster.csv", roster


def table(text):
    return list(csv.reader(io.StringIO(text)))


def points(assignment):
    return format(sum(e.points for e in exercises(assignment)), "g")


def test_canvas_leaves_missing_work_blank_and_writes_0_only_when_told(tmp_path):
    grades, roster_csv, _ = graded_class(tmp_path)
    for missing in (None, "zero"):
        out = tmp_path / f"canvas-{missing}.csv"
        run(BIN / "python", "-m", "autograder", "export", grades, "--to", out, "--format", "canvas",
            "--roster", roster_csv, *(["--missing", missing] if missing else []))
        blank = "0" if missing == "zero" else ""
        assert table(out.read_text()) == [
            CANVAS_COLUMNS + [A, B],
            ["Points Possible", "", "", "", "", points(A), points(B)],
            ["Ada", "101", "S1", "ada1", "A", points(A), "0"],     # B handed in, not a notebook: 0
            ["Bob", "102", "S2", "bob2", "A", "0", blank],         # A handed in, all wrong: 0; no B
            ["Carol", "103", "S3", "carol3", "B", blank, blank],   # an empty folder
            ["Eve", "105", "S5", "eve5", "B", blank, blank]]       # in the roster, no folder


def test_moodle_leaves_missing_work_blank_and_the_plain_table_keeps_its_0(tmp_path):
    grades, _, roster = graded_class(tmp_path)
    text, _ = export(grades, "moodle", roster)
    assert table(text) == [["Email address", A, B], ["ada@example.edu", points(A), "0"],
                           ["bob@example.edu", "0", ""], ["carol@example.edu", "", ""], ["eve@example.edu", "", ""]]
    assert table(export(grades, "moodle", roster, missing="zero")[0])[3:] == [["carol@example.edu", "0", "0"],
                                                                            ["eve@example.edu", "0", "0"]]
    plain = table(export(grades, "plain", roster)[0])   # the plain table's total needs every cell
    assert ["carol", "Carol", "0", "0", "0"] in plain and ["bob", "Bob", "0", "0", "0"] in plain
