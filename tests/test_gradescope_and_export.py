"""When a class outgrows one machine: the Gradescope zip grades like `grade`, and the LMS export
has one row per student and one column per assignment."""
import csv
import json
import os
import subprocess
import zipfile

from conftest import BIN, REPO, run
from submissions import filled_notebook, write

from autograder.notebook import exercises

A = "01-weights"


def test_the_gradescope_zip_grades_a_submission_into_results_json(tmp_path):
    archive = tmp_path / "autograder.zip"
    run(BIN / "python", "-m", "autograder", "gradescope", A, "--out", archive)
    names = zipfile.ZipFile(archive).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt", f"solutions/{A}/{A}.ipynb",
            "autograder/pipeline.py"} <= set(names)
    assert not any(n.startswith(("notebooks/", "tests/", "samples/")) for n in names)

    root = tmp_path / "gradescope"  # Gradescope's /autograder, laid out as it lays it out
    zipfile.ZipFile(archive).extractall(root / "source")
    partial = filled_notebook(A, {"entropy": "def entropy(weights, axis=-1):\n    return np.log2(len(weights)) + 0 * np.sum(weights, axis)"})
    write(partial, root / "submission" / f"{A}.ipynb")
    os.chmod(root / "source" / "run_autograder", 0o755)
    env = {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": str(BIN / "python")}
    subprocess.run(["bash", root / "source" / "run_autograder"], check=True, env={**os.environ, **env},
                   capture_output=True, timeout=300)
    results = json.loads((root / "results" / "results.json").read_text())
    assert set(results) >= {"score", "tests"}
    assert all({"name", "max_score", "visibility"} <= set(t) for t in results["tests"])
    assert {t["visibility"] for t in results["tests"]} == {"visible", "after_published"}
    scored = sum(t.get("score", 0) for t in results["tests"])
    assert abs(scored - results["score"]) < 1e-6 and 0 < results["score"] < 12
    entropy = [t for t in results["tests"] if t["name"].startswith("entropy:") and t.get("max_score")]
    assert any(t["score"] < t["max_score"] for t in entropy)
    assert "BEGIN" not in (root / "results" / "results.json").read_text()


def test_the_lms_export_has_a_row_per_student_and_a_column_per_assignment(tmp_path):
    run(BIN / "python", "-m", "autograder", "grade", REPO / "samples" / "submitted", "--out", tmp_path, "--quiet")
    run(BIN / "python", "-m", "autograder", "export", tmp_path / "grades.csv", "--to", tmp_path / "lms.csv")
    rows = list(csv.reader(open(tmp_path / "lms.csv")))
    assignments = sorted({r["assignment"] for r in csv.DictReader(open(tmp_path / "grades.csv"))})
    assert rows[0] == ["student"] + assignments + ["total"]
    assert rows[1][0] == "Points Possible"
    students = {r[0]: r[1:] for r in rows[2:]}
    assert set(students) == {"broken-student", "partial-student", "perfect-student"}
    assert students["perfect-student"][-1] == rows[1][-1]
    assert float(students["broken-student"][-1]) == 0


def test_the_lms_export_makes_every_text_cell_inert(tmp_path):
    """A student's folder name is a cell in the export: a formula there would run in the
    instructor's spreadsheet, an escape would act in a terminal. Numbers stay numbers."""
    from autograder.report import write_grades
    from autograder.results import CheckResult, ExerciseResult, Graded
    names = ['=HYPERLINK("http://x","y")', "@SUM(1+1)", "+1", "-1", "\x1b]0;pwned\x07esc", "\tcell"]
    write_grades([Graded(n, A, [ExerciseResult("softmax", 4.0, [CheckResult("c", 4.0, 4.0)])]) for n in names], tmp_path)
    by_hand = tmp_path / "by-hand.csv"  # as an older version or an editor writes it: raw
    by_hand.write_text("student,assignment,exercise,score,max_score,message\n" +
                       "".join(f'"{n.replace(chr(34), 2 * chr(34))}",{A},softmax,-0.5,4,\n' for n in names))
    for grades in (tmp_path / "grades.csv", by_hand):
        run(BIN / "python", "-m", "autograder", "export", grades, "--to", tmp_path / "lms.csv")
        text = (tmp_path / "lms.csv").read_text()
        assert all(line.isprintable() for line in text.split("\n")), grades
        students = {r[0]: r[1:] for r in list(csv.reader(open(tmp_path / "lms.csv")))[2:]}
        assert set(students) == {"'=HYPERLINK(\"http://x\",\"y\")", "'@SUM(1+1)", "+1", "-1",
                                 "\\x1b]0;pwned\\x07esc", "\\tcell"}, grades
        assert all(float(cell) in (4, -0.5) for row in students.values() for cell in row)


def test_gradescope_refuses_to_grade_unisolated_unless_told(tmp_path, monkeypatch):
    from autograder import gradescope
    monkeypatch.setattr(gradescope, "bubblewrap_works", lambda: False)
    write(filled_notebook(A), tmp_path / "submission" / f"{A}.ipynb")
    monkeypatch.delenv("AUTOGRADER_ALLOW_UNISOLATED", raising=False)
    refused = gradescope.results_json(A, tmp_path / "submission", tmp_path / "results.json")
    assert refused["score"] == 0 and "Not graded" in refused["output"] and "AUTOGRADER_ALLOW_UNISOLATED" in refused["output"]
    monkeypatch.setenv("AUTOGRADER_ALLOW_UNISOLATED", "1")
    graded = gradescope.results_json(A, tmp_path / "submission", tmp_path / "results.json")
    assert graded["score"] == sum(e.points for e in exercises(A)) and graded["output"].startswith("WARNING")
