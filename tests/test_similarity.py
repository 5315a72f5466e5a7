"""The similarity report flags two copied submissions and not the others (issue 29 §5).

A class of chapter 5: `original` (the reference solutions), `copier` (the same code with its
comments, blank lines and some names changed), `independent` (the course's other correct
solutions, written differently) and `blank` (the untouched notebook); `broken` handed in a file
that is not a notebook and `empty` an empty assignment folder: both are skipped and listed, never
a crash (issue 36 §3). Run as the instructors' page shows: `python -m autograder similarity
SUBMISSIONS --out DIR`.
"""
import csv
import re
import subprocess
import sys

import pytest

from autograder import REPO_ROOT
from mutants.ch05_self_masked import ALTERNATIVE
from submissions import filled_notebook, reference_solutions, student_notebook, write

A = "05-self-masked"
RENAMED = {"generator": "rng", "optimizer": "opt", "losses": "history", "windows": "batch", "chosen_from": "picked"}


def disguised(source):
    """A copy as a student hides one: names changed, comments added, lines spread out."""
    for old, new in RENAMED.items():
        source = re.sub(rf"\b{old}\b", new, source)
    return "\n\n".join(f"{line}  # mine" if line.strip() and not line.rstrip().endswith(":") else line
                       for line in source.splitlines())


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("similarity")
    submissions = root / "submitted"
    write(filled_notebook(A), submissions / "original" / A / f"{A}.ipynb")
    write(filled_notebook(A, {e: disguised(s) for e, s in reference_solutions(A).items()}),
          submissions / "copier" / A / f"{A}.ipynb")
    write(filled_notebook(A, ALTERNATIVE), submissions / "independent" / A / f"{A}.ipynb")
    write(student_notebook(A), submissions / "blank" / A / f"{A}.ipynb")
    (submissions / "broken" / A).mkdir(parents=True)
    (submissions / "broken" / A / f"{A}.ipynb").write_text("not a notebook")
    (submissions / "empty" / A).mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(submissions), "--out", str(root / "out")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(root / "out" / "similarity.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, (root / "out" / "similarity.html").read_text(), done


def test_the_copied_pair_is_flagged_in_most_exercises_and_no_other_pair_in_any(report):
    rows, page, _ = report
    flagged = [r for r in rows if r["flagged"] == "1"]
    pairs = {tuple(sorted((r["student"], r["other"]))) for r in flagged}
    assert pairs == {("copier", "original")}, flagged
    compared = {r["exercise"] for r in rows if {r["student"], r["other"]} == {"copier", "original"}}
    assert len(flagged) >= 4 and len(flagged) >= len(compared) - 1, (len(flagged), compared)
    assert "<b>copier</b> and <b>original</b>" in page


def test_the_given_code_and_blank_notebooks_are_not_compared(report):
    rows, _, _ = report
    assert rows and not any("blank" in (r["student"], r["other"]) for r in rows)


def test_an_unreadable_notebook_and_an_empty_folder_are_skipped_and_listed(report):
    rows, page, done = report
    assert not any({"broken", "empty"} & {r["student"], r["other"]} for r in rows)
    listed = page[page.index("<h2>Not compared</h2>"):]
    assert f"<b>broken</b> {A}: {A}.ipynb is not a valid notebook file" in listed, listed
    assert f"<b>empty</b> {A}: no notebook: {A}/ does not hold {A}.ipynb" in listed, listed
    assert f"not compared: broken/{A}: " in done.stderr and f"not compared: empty/{A}: no notebook" in done.stderr
    assert "2 not compared" in done.stdout and "Traceback" not in done.stderr


def run_similarity(submissions, out):
    return subprocess.run([sys.executable, "-m", "autograder", "similarity", str(submissions), "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_a_class_with_only_an_empty_assignment_folder_gets_a_message_and_a_report(tmp_path):
    (tmp_path / "submitted" / "dave" / A).mkdir(parents=True)
    done = run_similarity(tmp_path / "submitted", tmp_path / "out")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"not compared: dave/{A}: no notebook: {A}/ does not hold {A}.ipynb" in done.stderr
    assert "<b>dave</b>" in (tmp_path / "out" / "similarity.html").read_text()


@pytest.mark.parametrize("layout", ["no folder", "empty folder"])
def test_no_class_to_compare_is_a_usage_error_not_a_traceback(tmp_path, layout):
    if layout == "empty folder":
        (tmp_path / "submitted").mkdir()
    done = run_similarity(tmp_path / "submitted", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "error:" in done.stderr and str(tmp_path / "submitted") in done.stderr
