"""`python -m autograder grade` as an instructor uses it, on the shipped samples (graded twice: the
second run killed and resumed) and on a few notebooks that misbehave: each is one student's problem,
with a readable reason."""
import csv
import os
import signal
import subprocess
import time

import pytest
from conftest import BIN, REPO, run
from submissions import filled_notebook, write

from autograder import assignments
from autograder.notebook import exercises
from autograder.pipeline import grade_notebook
from autograder.sandbox.session import Limits

A = "01-weights"
FULL = sum(e.points for e in exercises(A))


@pytest.fixture(scope="module")
def samples_graded(tmp_path_factory):
    """The shipped samples graded once, as `make grade` does: (the run, its --out folder)."""
    out = tmp_path_factory.mktemp("samples-graded")
    return run(BIN / "python", "-m", "autograder", "grade", REPO / "samples" / "submitted", "--out", out), out


def test_grading_the_samples_prints_a_table_and_writes_rows_and_feedback(samples_graded):
    result, out = samples_graded
    assert "perfect-student" in result.stdout and f"{FULL:g}/{FULL:g}" in result.stdout
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert set(rows[0]) >= {"student", "assignment", "exercise", "score", "max_score"}
    for assignment in assignments():
        full = sum(e.points for e in exercises(assignment))
        total = {}
        for row in rows:
            if row["assignment"] == assignment:
                total[row["student"]] = total.get(row["student"], 0) + float(row["score"])
        assert total["perfect-student"] == full and total["broken-student"] == 0, assignment
        assert 0 < total["partial-student"] < full, assignment
        broken = [r for r in rows if r["student"] == "broken-student" and r["assignment"] == assignment]
        assert len(broken) == len(exercises(assignment)) and all("not a valid notebook" in r["message"] for r in broken)
        page = (out / "feedback" / "partial-student" / f"{assignment}.html").read_text()
        assert "expected" in page and "BEGIN" not in page
    assert "Class summary" in result.stdout
    summary = list(csv.DictReader(open(out / "summary.csv")))
    assert len(summary) == sum(len(exercises(a)) for a in assignments())
    assert all(row["students"] == "3" and row["not_graded"] == "1" for row in summary)


def test_the_lms_export_has_a_row_per_student_and_a_column_per_assignment(samples_graded, tmp_path):
    _, out = samples_graded
    run(BIN / "python", "-m", "autograder", "export", out / "grades.csv", "--to", tmp_path / "lms.csv")
    rows = list(csv.reader(open(tmp_path / "lms.csv")))
    assignments = sorted({r["assignment"] for r in csv.DictReader(open(out / "grades.csv"))})
    assert rows[0] == ["student"] + assignments + ["total"]
    assert rows[1][0] == "Points Possible"
    students = {r[0]: r[1:] for r in rows[2:]}
    assert set(students) == {"broken-student", "partial-student", "perfect-student"}
    assert students["perfect-student"][-1] == rows[1][-1]
    assert float(students["broken-student"][-1]) == 0


def test_a_second_run_killed_and_resumed_writes_the_same_bytes(samples_graded, tmp_path):
    """The samples graded again with the first run's seed, killed with SIGKILL once a third of them are
    journaled, then started again with no --seed (its journal keeps the seed): no row lost, none counted
    twice, every notebook graded afresh in another process, and the same bytes as the first run."""
    _, first = samples_graded
    seed = (first / ".journal" / ".seed").read_text().strip()  # the stated rules' inputs: the first run's
    command = [BIN / "python", "-m", "autograder", "grade", REPO / "samples" / "submitted", "--out", tmp_path, "--quiet"]
    killed = subprocess.Popen([str(c) for c in [*command, "--seed", seed]], cwd=REPO, start_new_session=True)
    notebooks = len(list((REPO / "samples" / "submitted").glob("*/*/*.ipynb")))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and killed.poll() is None and len(journaled(tmp_path)) < notebooks // 3:
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    kept = len(journaled(tmp_path))
    assert notebooks // 3 <= kept < notebooks, f"the kill came too late or too early ({kept} of {notebooks} journaled)"
    assert not (tmp_path / "grades.csv").exists()
    run(*command)
    assert (tmp_path / "grades.csv").read_bytes() == (first / "grades.csv").read_bytes()


def journaled(out):
    return [p for p in (out / ".journal").rglob("*.json") if p.parent.name != ".class"]


def grade(tmp_path, replacements, limits=Limits()):
    path = write(filled_notebook(A, replacements), tmp_path / f"{A}.ipynb")
    return grade_notebook("student", A, str(path), limits)


def scores(graded):
    return {row[2]: row[3] for row in graded.rows()}


def test_a_syntax_error_costs_only_its_exercise(tmp_path):
    graded = grade(tmp_path, {"hardmax": "def hardmax(scores, axis=-1):\n    return (("})
    got = scores(graded)
    assert got["hardmax"] == 0 and sum(got.values()) == FULL - 2
    assert any("SyntaxError" in note for note in graded.notes)


def test_an_infinite_loop_is_stopped_and_other_exercises_are_graded(tmp_path):
    limits = Limits(call_seconds=2, cell_seconds=2)
    graded = grade(tmp_path, {"entropy": "def entropy(weights, axis=-1):\n    while True:\n        pass"}, limits)
    got = scores(graded)
    assert got["entropy"] == 0 and got["softmax"] == 4
    assert "time limit" in " ".join(c.message for e in graded.exercises for c in e.checks)


def test_os_exit_in_a_function_is_reported(tmp_path):
    graded = grade(tmp_path, {"weighted_average": "def weighted_average(items, weights):\n    import os; os._exit(0)"})
    got = scores(graded)
    assert got["weighted_average"] == 0 and got["softmax"] == 4


def test_explore_cells_are_not_run(tmp_path):
    nb = filled_notebook(A)
    explore = [c for c in nb.cells if "explore" in c.metadata.get("tags", [])]
    assert explore, f"{A} has no explore cell"
    for cell in explore:
        cell.source = "import os\nwhile True:\n    pass\nos._exit(1)"
    path = write(nb, tmp_path / f"{A}.ipynb")
    graded = grade_notebook("student", A, str(path), Limits(cell_seconds=2, notebook_seconds=4))
    assert sum(scores(graded).values()) == FULL and not graded.notes


def test_a_crash_names_the_call_and_where_in_the_students_code(tmp_path):
    graded = grade(tmp_path, {"entropy": "def entropy(weights, axis=-1):\n    weights = weights + 0\n    raise ValueError('no')"})
    messages = [c.message for e in graded.exercises if e.name == "entropy" for c in e.checks]
    assert messages and all("ValueError: no (in entropy, code cell " in m and ", line 3)" in m for m in messages)
    assert any(m.startswith("entropy(float64 array of shape (") for m in messages), messages


def test_a_notebook_that_is_not_graded_shows_no_check_as_passed(tmp_path):
    from autograder.report import feedback_html
    path = tmp_path / A / f"{A}.ipynb"
    path.parent.mkdir()
    path.write_text("{ not json")
    page = feedback_html(grade_notebook("student", A, str(path)))
    assert "not a valid notebook" in page and "✓" not in page and "✗" not in page
    assert page.count("not run") == sum(len(e.checks) for e in grade_notebook("student", A, str(path)).exercises)


def test_symlinks_and_huge_notebooks_are_refused_with_a_message_and_hard_links_graded(tmp_path):
    """A notebook is graded only as a regular file: a symlink to the solutions (or to another
    student's notebook) would otherwise score full marks. A hard link is graded (it may be the
    student's own file; tests/test_layout.py has the pair of students and the solutions)."""
    from autograder.notebook import MAX_CELLS, source_path
    (tmp_path / "link" / A).mkdir(parents=True)
    os.symlink(source_path(A), tmp_path / "link" / A / f"{A}.ipynb")
    (tmp_path / "hard" / A).mkdir(parents=True)
    own = write(filled_notebook(A), tmp_path / "elsewhere.ipynb")
    os.link(own, tmp_path / "hard" / A / f"{A}.ipynb")
    (tmp_path / "folder-link").mkdir()
    os.symlink(tmp_path / "link" / A, tmp_path / "folder-link" / A)
    (tmp_path / "cells" / A).mkdir(parents=True)
    (tmp_path / "cells" / A / f"{A}.ipynb").write_text(
        '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [' + ",".join(['{"cell_type": "markdown", "metadata": {}, "source": ""}'] * (MAX_CELLS + 1)) + "]}")
    expected = {"link": "symbolic link", "cells": "cells, more than"}
    for student, reason in expected.items():
        graded = grade_notebook(student, A, str(tmp_path / student / A / f"{A}.ipynb"))
        assert graded.score == 0 and reason in graded.problem, (student, graded.problem)
    assert grade_notebook("hard", A, str(tmp_path / "hard" / A / f"{A}.ipynb")).score == FULL
    from autograder.pipeline import discover
    found, problems = discover(tmp_path)
    refused = [job for job in found if job.student == "folder-link"]
    assert [job.assignment for job in refused] == [A] and not refused[0].path
    assert "folder-link/01-weights is a symbolic link, not a folder" in refused[0].refusal
    assert any("folder-link/01-weights: a symbolic link" in text for _, text in problems)
    from autograder.gradescope import results_json
    (tmp_path / "gs").mkdir()
    os.symlink(source_path(A), tmp_path / "gs" / f"{A}.ipynb")
    data = results_json(A, tmp_path / "gs", tmp_path / "results.json")
    assert data["score"] == 0 and "symbolic link" in data["output"]


def test_feedback_and_table_show_scores_to_two_decimals_and_the_csv_keeps_them(tmp_path):
    from autograder.report import feedback_html, table, write_grades
    from autograder.results import CheckResult, ExerciseResult, Graded
    third = 2 / 3
    graded = Graded("student", A, [ExerciseResult("softmax", 2.0, [CheckResult("a", third, third),
                                                                    CheckResult("b", 0.0, 2 - third, "wrong")])])
    page, text = feedback_html(graded), table([graded])
    assert "0.67 / 2" in page and "0.67&nbsp;/&nbsp;0.67" in page and "0.666667" not in page
    assert "0.67/2" in text
    write_grades([graded], tmp_path)
    assert "0.666667" in (tmp_path / "grades.csv").read_text()
