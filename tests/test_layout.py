"""No student disappears from grades.csv or the LMS export, whatever the collected folder looks
like; a hard-linked notebook costs nobody (tests/adversarial/layout.py); `grade --student`
regrades one student and keeps the others from the journal; a run that grades nothing fails."""
import csv
import json
import os
import shutil

import pytest
from adversarial.layout import A, FULL, LAYOUT_CASES
from conftest import BIN, run
from submissions import filled_notebook, write

from autograder.notebook import exercises

GRADE = [BIN / "python", "-m", "autograder", "grade"]
PARTIAL = {"entropy": "def entropy(weights, axis=-1):\n    return 0 * np.sum(weights, axis=axis)"}  # 2 points lost


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("layout")
    root = base / "submitted"
    write(filled_notebook(A, PARTIAL), root / "carol" / f"{A}.ipynb")  # no assignment folder
    (root / "dave").mkdir(parents=True)                                  # nothing handed in
    (root / "erin" / "week1").mkdir(parents=True)                        # an unknown folder only
    for name, case in LAYOUT_CASES.items():
        victim = write(filled_notebook(A), root / f"victim-of-{name}" / A / f"{A}.ipynb")
        case.arrange(root / name, victim)
    result = run(*GRADE, root, "--out", base / "out", "-j", "2", "--quiet")
    run(BIN / "python", "-m", "autograder", "export", base / "out" / "grades.csv", "--to", base / "lms.csv")
    return {"base": base, "root": root, "out": base / "out", "stderr": result.stderr,
            "rows": list(csv.DictReader(open(base / "out" / "grades.csv"))),
            "lms": list(csv.DictReader(open(base / "lms.csv")))}


def totals(rows):
    found = {}
    for row in rows:
        found[row["student"]] = found.get(row["student"], 0.0) + float(row["score"])
    return found


def feedback(graded, student):
    return (graded["out"] / "feedback" / student / f"{A}.html").read_text()


def test_every_folder_is_a_student_in_grades_and_the_export(graded):
    folders = set(os.listdir(graded["root"]))
    assert {row["student"] for row in graded["rows"]} == folders
    assert {row["student"] for row in graded["lms"]} - {"Points Possible"} == folders
    for student in folders:  # a row per exercise, whatever happened
        assert [r["exercise"] for r in graded["rows"] if r["student"] == student] == [e.name for e in exercises(A)]


def test_a_notebook_outside_its_folder_is_graded_with_a_note(graded):
    assert totals(graded["rows"])["carol"] == FULL - 2
    note = f"found carol/{A}.ipynb: graded as {A}; its place is carol/{A}/{A}.ipynb"
    assert note in feedback(graded, "carol") and note in graded["stderr"]


@pytest.mark.parametrize("student, found", [("dave", "it is empty"), ("erin", "found week1/")])
def test_a_student_with_nothing_gradable_gets_zero_and_the_layout_expected(graded, student, found):
    rows = [r for r in graded["rows"] if r["student"] == student]
    assert rows and all(float(r["score"]) == 0 for r in rows)
    reason = f"nothing to grade in {student}/ ({found}): hand in {student}/<assignment>/<assignment>.ipynb"
    assert all(reason in r["message"] for r in rows) and reason in graded["stderr"]
    assert "the rest of the class handed in" in rows[0]["message"]


@pytest.mark.parametrize("name", sorted(LAYOUT_CASES))
def test_a_layout_attack_never_costs_its_victim(graded, name):
    case, got = LAYOUT_CASES[name], totals(graded["rows"])
    victim = f"victim-of-{name}"
    assert got[victim] == FULL, f"{name}: {case.guarantee}"
    assert got[name] == case.attacker_points, f"{name}: {case.guarantee}"
    assert ("same file as" in feedback(graded, victim)) == case.flagged
    if case.flagged:
        assert f"same file as {victim}'s" in feedback(graded, name).replace("&#x27;", "'")
        assert f"same file as {name}'s" in feedback(graded, victim).replace("&#x27;", "'")
        assert f"{name} and {victim} handed in one file" in graded["stderr"]


def test_a_hard_link_to_the_course_solutions_is_refused(tmp_path, monkeypatch):
    """Read in process against a stand-in solutions folder: the real one may sit on another disk."""
    from autograder import notebook
    solutions = tmp_path / "solutions" / A
    source = write(filled_notebook(A), solutions / f"{A}.ipynb")
    monkeypatch.setattr(notebook, "SOLUTIONS_DIR", tmp_path / "solutions")
    (tmp_path / "mallory").mkdir()
    os.link(source, tmp_path / "mallory" / f"{A}.ipynb")
    with pytest.raises(notebook.NotebookError, match="hard link to the course's reference notebook"):
        notebook.read_notebook_bytes(tmp_path / "mallory" / f"{A}.ipynb")
    other = write(filled_notebook(A), tmp_path / "bob" / f"{A}.ipynb")
    os.link(other, tmp_path / "mallory" / "copy.ipynb")
    assert notebook.read_notebook_bytes(tmp_path / "mallory" / "copy.ipynb") == other.read_bytes()


def test_student_regrades_that_student_and_keeps_the_others_from_the_journal(graded, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(graded["out"], out)
    kept = "victim-of-symlink-to-another-student"
    for student in ("carol", kept):  # marks that only a journaled result carries
        entry = out / ".journal" / student / f"{A}.json"
        data = json.loads(entry.read_text())
        data["graded"]["notes"] = ["FROM THE JOURNAL"]
        entry.write_text(json.dumps(data))
    run(*GRADE, graded["root"], "--out", out, "-j", "1", "--quiet", "--student", "carol")
    def page(student):
        return (out / "feedback" / student / f"{A}.html").read_text()
    assert "FROM THE JOURNAL" in page(kept), "another student was graded again"
    assert "FROM THE JOURNAL" not in page("carol"), "--student carol did not grade carol again"
    assert "FROM THE JOURNAL" not in (out / ".journal" / "carol" / f"{A}.json").read_text()
    assert (out / "grades.csv").read_bytes() == (graded["out"] / "grades.csv").read_bytes()
    unknown = run(*GRADE, graded["root"], "--out", out, "--student", "zed", check=False)
    assert unknown.returncode == 2 and "--student zed: no such student folder" in unknown.stderr


@pytest.mark.parametrize("layout, says", [
    ({}, "no student folder in"),
    ({"alice/notes.txt": "hi"}, "no notebook to grade in"),
    ({f"{A}/{A}.ipynb": "{}"}, f"holds {A}/, an assignment: give the folder that holds the students' folders"),
])
def test_a_run_that_grades_nothing_fails_and_says_why(tmp_path, layout, says):
    root = tmp_path / "submitted"
    root.mkdir()
    for path, text in layout.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    result = run(*GRADE, root, "--out", tmp_path / "out", check=False)
    assert result.returncode != 0 and says in result.stderr and "<assignment>/<assignment>.ipynb" in result.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()
    misspelt = run(*GRADE, tmp_path / "submited", "--out", tmp_path / "out", check=False)
    assert misspelt.returncode != 0 and "is not a folder" in misspelt.stderr
