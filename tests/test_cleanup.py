"""No process of a grading run outlives it: not after `kill -9` of its main process, not after
Ctrl-C, which stops it within 2 s with one line, and a rerun resumes it to the same grades.

The class: 01-weights of the sample students, and a student whose notebook starts a process
that leaves its session and its parent (setsid, then a second fork, then sleeps; found by a mark
in its command line), then sleeps itself: grading is under way when the signal comes."""
import difflib
import os
import shutil
import signal
import subprocess
import time
import uuid

import nbformat
import pytest

from conftest import BIN, REPO, run
from submissions import filled_notebook, write

from autograder.sandbox.isolation import bubblewrap_works

ASSIGNMENT = "01-weights"
ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{mark}"])
    os._exit(0)
time.sleep({seconds})
"""


def a_class(folder, mark=None, seconds=30):
    for sample in (REPO / "samples" / "submitted").iterdir():
        shutil.copytree(sample / ASSIGNMENT, folder / sample.name / ASSIGNMENT)
    if mark:
        nb = filled_notebook(ASSIGNMENT)
        nb.cells.append(nbformat.v4.new_code_cell(ESCAPE.format(mark=mark, seconds=seconds)))
        write(nb, folder / "aa-escaper" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return folder


def grade(submissions, out, *more, env=None):
    command = [str(BIN / "python"), "-m", "autograder", "grade", str(submissions), "--out", str(out), "--quiet",
               "--seed", "7", "-j", "2", *more]
    return subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True)


def processes():
    """{pid: (parent, state, command line)} of every process now."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, IndexError):
                continue
            found[int(entry)] = (int(fields[1]), fields[0].decode(), command)
    return found


def descendants(pid, now):
    children = {}
    for p, (parent, _, _) in now.items():
        children.setdefault(parent, []).append(p)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def is_student(command):
    return "autograder.sandbox.start" in command


def watch_until(grader, ready, seconds=60):
    """Record the grader's processes (they are reparented once it dies) until `ready(seen, now)`."""
    seen, deadline = set(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = processes()
        seen |= descendants(grader.pid, now)
        if ready(seen, now):
            return seen
        assert grader.poll() is None, f"the grader ended first: {grader.stderr.read()}"
        time.sleep(0.05)
    raise AssertionError("the grading never got under way")


def left_running(pids, mark, seconds):
    """The processes among `pids` (and those marked `mark`) still running after `seconds` at most."""
    deadline = time.monotonic() + seconds
    while True:
        now = processes()
        alive = {p: now[p][2][:120] for p in now if now[p][1] not in "ZX" and (p in pids or (mark and mark in now[p][2]))
                 and p != os.getpid()}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def cgroups_of(pids):
    roots = ["/sys/fs/cgroup", *(f"/sys/fs/cgroup/{c}" for c in ("memory", "pids"))]
    return [os.path.join(folder, name) for root in roots if os.path.isdir(root)
            for folder, names, _ in os.walk(root) for name in names
            if name.startswith("autograder-") and name.split("-")[1] in {str(p) for p in pids}]


SANDBOXES = ["bubblewrap", "none"] if bubblewrap_works() else ["none"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_nothing_outlives_a_killed_grader(tmp_path, sandbox):
    mark = f"cleanup-test-{uuid.uuid4().hex}"
    submissions = a_class(tmp_path / "submitted", mark)
    env = dict(os.environ, **({"AUTOGRADER_SANDBOX": "none"} if sandbox == "none" else {}))
    grader = grade(submissions, tmp_path / "out", env=env)
    try:
        seen = watch_until(grader, lambda seen, now: any(mark in now[p][2] for p in now)
                           and any(is_student(now[p][2]) for p in seen if p in now))
        seen |= {p for p, (_, _, command) in processes().items() if mark in command}
    finally:
        grader.kill()
        grader.wait()
    left = left_running(seen, mark, seconds=5)
    for pid in left:  # not to leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running 5 s after the grader's kill -9: {left}"
    assert not cgroups_of(seen), f"cgroups left: {cgroups_of(seen)}"


def test_ctrl_c_stops_at_once_and_the_run_resumes(tmp_path):
    submissions = a_class(tmp_path / "submitted")
    (submissions / "perfect-student-2").mkdir()
    shutil.copytree(submissions / "perfect-student" / ASSIGNMENT, submissions / "perfect-student-2" / ASSIGNMENT)
    clean = grade(submissions, tmp_path / "clean")
    assert clean.wait(timeout=120) == 0, clean.stderr.read()

    out = tmp_path / "interrupted"
    grader = grade(submissions, out)
    journal = out / ".journal"
    seen = watch_until(grader, lambda seen, now: journal.is_dir() and any(journal.rglob("*.json"))
                       and any(is_student(now[p][2]) for p in seen if p in now))
    interrupted = time.monotonic()
    os.killpg(grader.pid, signal.SIGINT)  # as Ctrl-C does: the terminal's foreground process group
    try:
        status = grader.wait(timeout=10)
    finally:
        grader.kill()
    seconds = time.monotonic() - interrupted
    said = grader.stderr.read()
    assert status == 130, said
    assert seconds < 2, f"{seconds:.1f} s to stop"
    assert "Traceback" not in said and said.strip().count("\n") == 0, said
    assert said.startswith("interrupted: ") and "of 4 notebooks graded" in said, said
    left = left_running(seen, None, seconds=1)
    assert not left, f"still running after Ctrl-C: {left}"
    assert not (out / "grades.csv").exists()
    kept = len(list(journal.rglob("*.json")))
    assert 1 <= kept < 4, f"{kept} of 4 journaled: the interruption came too late"

    run(BIN / "python", "-m", "autograder", "grade", submissions, "--out", out, "--quiet", "-j", "2")
    resumed, expected = ((tmp_path / o / "grades.csv").read_text().splitlines() for o in ("interrupted", "clean"))
    assert resumed == expected, "\n".join(difflib.unified_diff(expected, resumed, "clean", "resumed", lineterm=""))
