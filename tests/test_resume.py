"""A run killed with SIGKILL and started again loses no row and counts none twice."""
import difflib
import os
import shutil
import signal
import subprocess
import time

from conftest import BIN, REPO, run

LIGHT = "0[1-4]-*"  # the samples of chapters 1 to 4: what resumes is the same for every chapter


def test_a_killed_run_resumes_to_the_same_grades(tmp_path):
    submissions = tmp_path / "submitted"
    for notebook in (REPO / "samples" / "submitted").glob(f"*/{LIGHT}/*.ipynb"):  # 12 notebooks, the lightest
        shutil.copytree(notebook.parent, submissions / notebook.relative_to(REPO / "samples" / "submitted").parent)
    command = [BIN / "python", "-m", "autograder", "grade", submissions, "--quiet", "-j", "1"]
    run(*command, "--seed", "11", "--out", tmp_path / "clean")  # the killed run keeps its own seed in its journal

    killed = subprocess.Popen([str(c) for c in command + ["--seed", "11", "--out", tmp_path / "killed"]],
                              start_new_session=True)
    journal = tmp_path / "killed" / ".journal"
    deadline = time.monotonic() + 120
    notebooks = len(list(submissions.rglob("*.ipynb")))
    while time.monotonic() < deadline and len(list(journal.rglob("*.json"))) < notebooks // 3:
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    kept = len(list(journal.rglob("*.json")))
    assert notebooks // 3 <= kept < notebooks, f"the kill came too late or too early ({kept} of {notebooks} journaled)"
    assert not (tmp_path / "killed" / "grades.csv").exists()

    run(*command, "--out", tmp_path / "killed")  # no --seed: the one its journal keeps
    resumed, clean = ((tmp_path / out / "grades.csv").read_text().splitlines() for out in ("killed", "clean"))
    assert resumed == clean, "\n".join(difflib.unified_diff(clean, resumed, "clean", "resumed", lineterm="", n=0))
