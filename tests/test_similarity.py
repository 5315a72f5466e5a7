"""The similarity report flags two copied submissions and not the others (issue 29 §5).

A class of chapter 5: `original` (the reference solutions), `copier` (the same code with its
comments, blank lines and some names changed), `independent` (the course's other correct
solutions, written differently) and `blank` (the untouched notebook). Run as the instructors'
page shows: `python -m autograder similarity SUBMISSIONS --out DIR`.
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
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(submissions), "--out", str(root / "out")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(root / "out" / "similarity.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, (root / "out" / "similarity.html").read_text()


def test_the_copied_pair_is_flagged_in_most_exercises_and_no_other_pair_in_any(report):
    rows, page = report
    flagged = [r for r in rows if r["flagged"] == "1"]
    pairs = {tuple(sorted((r["student"], r["other"]))) for r in flagged}
    assert pairs == {("copier", "original")}, flagged
    compared = {r["exercise"] for r in rows if {r["student"], r["other"]} == {"copier", "original"}}
    assert len(flagged) >= 4 and len(flagged) >= len(compared) - 1, (len(flagged), compared)
    assert "<b>copier</b> and <b>original</b>" in page


def test_the_given_code_and_blank_notebooks_are_not_compared(report):
    rows, _ = report
    assert rows and not any("blank" in (r["student"], r["other"]) for r in rows)
