"""The grader's death costs nothing already done (issue 35).

Whatever kills the grading process (the kernel's OOM killer, a kill -9), the same command run
again resumes; the notebook that was being graded has an attempt recorded in the journal before
its grading started, and one whose grading killed the grader twice is charged 0 with the reason,
not tried a third time, while the rest of the class is graded. With -j N, a worker that dies
does not lose the rest of the class: the run goes on.

The "grader killer" is simulated from outside, with no hook in the grader: this test watches
the journal and, as soon as the grader records that it starts grading the killer's notebook,
SIGKILLs the process that recorded it (the grader itself with -j 1, the worker with -j 2), as
the kernel's OOM killer kills the process whose memory a notebook made grow.
"""
import csv
import html
import json
import os
import signal
import subprocess
import time

from conftest import BIN, REPO
from submissions import filled_notebook, write

ASSIGNMENT = "01-weights"
KILLED = "the grader's process was killed twice while grading this notebook"


def _class(tmp_path, *students):
    for student in students:
        write(filled_notebook(ASSIGNMENT), tmp_path / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return tmp_path / "submitted"


def _command(submissions, out, jobs):
    return [str(BIN / "python"), "-m", "autograder", "grade", str(submissions), "--out", str(out), "--quiet",
            "-j", str(jobs), "--seed", "7"]


def _start(command, log):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _attempts(out, student):
    try:
        return json.loads((out / ".journal" / student / f"{ASSIGNMENT}.attempts").read_text())["attempts"]
    except (OSError, ValueError, KeyError):
        return []


def _run_with_killer(command, out, killer, tmp_path, timeout=120):
    """Run the grader; each time it records an attempt at the killer's notebook, SIGKILL the
    process that recorded it. (exit status, kills, what it printed)."""
    log_path = tmp_path / f"log-{time.monotonic_ns()}"
    with open(log_path, "w") as log:
        grader = _start(command, log)
        seen, kills, deadline = len(_attempts(out, killer)), 0, time.monotonic() + timeout
        try:
            while grader.poll() is None and time.monotonic() < deadline:
                tried = _attempts(out, killer)
                if len(tried) > seen:
                    seen = len(tried)
                    try:
                        os.kill(tried[-1]["pid"], signal.SIGKILL)
                        kills += 1
                    except ProcessLookupError:
                        pass
                time.sleep(0.005)
            assert grader.poll() is not None, f"the grader ran past {timeout} s"
        finally:
            if grader.poll() is None:
                os.killpg(grader.pid, signal.SIGKILL)
            grader.wait()
    return grader.returncode, kills, log_path.read_text()


def _grades(out):
    totals = {}
    with open(out / "grades.csv", newline="") as f:
        for row in csv.DictReader(f):
            score, most, messages = totals.get(row["student"], (0.0, 0.0, []))
            totals[row["student"]] = (score + float(row["score"]), most + float(row["max_score"]),
                                      messages + [row["message"]])
    return totals


def _full_marks(grades, student):
    score, most, _ = grades[student]
    return most > 0 and score == most


def test_a_killed_run_records_the_notebook_in_grading_and_resumes(tmp_path):
    submissions = _class(tmp_path, "a-first", "b-second", "c-third")
    out = tmp_path / "out"
    with open(tmp_path / "log", "w") as log:
        grader = _start(_command(submissions, out, 1), log)
        deadline = time.monotonic() + 90
        while grader.poll() is None and time.monotonic() < deadline and not _attempts(out, "b-second"):
            time.sleep(0.005)
        os.killpg(grader.pid, signal.SIGKILL)  # as the OOM killer would: no last word
        grader.wait()
    first = out / ".journal" / "a-first" / f"{ASSIGNMENT}.json"
    assert first.exists(), (tmp_path / "log").read_text()
    assert len(_attempts(out, "b-second")) == 1, "the notebook being graded when the grader died has no attempt recorded"
    assert not (out / ".journal" / "b-second" / f"{ASSIGNMENT}.json").exists()
    assert not (out / "grades.csv").exists()
    before = first.stat()

    with open(tmp_path / "log2", "w") as log:
        rerun = _start(_command(submissions, out, 1), log)
        assert rerun.wait(timeout=120) == 0, (tmp_path / "log2").read_text()
    grades = _grades(out)
    assert sorted(grades) == ["a-first", "b-second", "c-third"]
    assert all(_full_marks(grades, s) for s in grades), grades
    after = first.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "a finished notebook was regraded"
    assert not list(out.rglob("*.attempts")), "a result did not replace its attempts"


def test_a_notebook_that_killed_the_grader_twice_is_charged_and_the_class_graded(tmp_path):
    submissions = _class(tmp_path, "a-control", "b-killer", "c-control")
    out = tmp_path / "out"
    command = _command(submissions, out, 1)
    for run_number in (1, 2):
        status, kills, printed = _run_with_killer(command, out, "b-killer", tmp_path)
        assert (status, kills) == (-signal.SIGKILL, 1), f"run {run_number}: exit {status}, {kills} kills\n{printed}"
        assert len(_attempts(out, "b-killer")) == run_number
        assert not (out / "grades.csv").exists()
    assert not (out / ".journal" / "c-control").exists(), "the notebook whose grader died was not graded first"

    status, kills, printed = _run_with_killer(command, out, "b-killer", tmp_path)
    assert (status, kills) == (0, 0), f"third run: exit {status}, {kills} kills (tried a third time?)\n{printed}"
    grades = _grades(out)
    assert _full_marks(grades, "a-control") and _full_marks(grades, "c-control"), grades
    score, most, messages = grades["b-killer"]
    assert score == 0 and most > 0 and all(KILLED in m and "tell your instructor" in m for m in messages), messages
    assert "b-killer/01-weights: the grader's process was killed 2 times" in printed, printed
    assert KILLED in html.unescape((out / "feedback" / "b-killer" / f"{ASSIGNMENT}.html").read_text())
    assert not list(out.rglob("*.attempts"))

    status, kills, printed = _run_with_killer(command, out, "b-killer", tmp_path)  # stable: charged from the journal
    assert (status, kills, _grades(out)) == (0, 0, grades), printed
    # --student tries it again as never before (here it no longer kills: the grader was fixed, say)
    again = _start(command + ["--student", "b-killer"], subprocess.DEVNULL)
    assert again.wait(timeout=120) == 0
    assert _full_marks(_grades(out), "b-killer")


def test_a_dead_worker_does_not_lose_the_class(tmp_path):
    students = ("a-control", "b-killer", "c-control", "d-control")
    submissions = _class(tmp_path, *students)
    out = tmp_path / "out"
    status, kills, printed = _run_with_killer(_command(submissions, out, 2), out, "b-killer", tmp_path)
    assert (status, kills) == (0, 2), f"exit {status}, {kills} kills\n{printed}"
    grades = _grades(out)
    assert sorted(grades) == list(students)
    assert all(_full_marks(grades, s) for s in students if s != "b-killer"), grades
    score, _, messages = grades["b-killer"]
    assert score == 0 and all(KILLED in m for m in messages), messages
    assert "a grading worker died" in printed and "b-killer/01-weights: the grader's process was killed 2" in printed
    assert not list(out.rglob("*.attempts"))


def test_ctrl_c_is_not_a_death(tmp_path):
    """The notebook that Ctrl-C stopped was not killed: its attempt is withdrawn, so two Ctrl-C
    never charge a notebook 0."""
    submissions = _class(tmp_path, "a-first", "b-second")
    out = tmp_path / "out"
    with open(tmp_path / "log", "w") as log:
        grader = _start(_command(submissions, out, 1), log)
        deadline = time.monotonic() + 90
        while grader.poll() is None and time.monotonic() < deadline and not _attempts(out, "b-second"):
            time.sleep(0.005)
        os.killpg(grader.pid, signal.SIGINT)  # as Ctrl-C does
        assert grader.wait(timeout=30) == 130, (tmp_path / "log").read_text()
    assert (out / ".journal" / "a-first" / f"{ASSIGNMENT}.json").exists()
    assert not list(out.rglob("*.attempts")), "Ctrl-C was counted as the grader's death"
