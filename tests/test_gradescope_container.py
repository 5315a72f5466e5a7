"""Gradescope where Gradescope runs: a Docker container whose default seccomp profile refuses the
namespaces bubblewrap needs. `gradescope-try --no-namespaces` makes such a container here (root
without CAP_SYS_ADMIN, unshare, setns, mount and clone's namespace flags refused); the zip must
grade there as `grade` does, with the student's code unable to reach the autograder's files."""
import ast
import os
import re
import signal
import subprocess
import sys

import nbformat
import pytest

from conftest import REPO

from autograder import gradescope
from autograder.gradescope import build_zip, try_text, try_zips
from autograder.sandbox import seccomp

A = "01-weights"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="Gradescope runs the autograder as root; so must the try")


def _container_works():
    return os.geteuid() == 0 and seccomp.no_namespaces_program() is not None and seccomp.works()


in_container = pytest.mark.skipif(not _container_works(), reason="root and a seccomp filter, to make a container")


@in_container
def test_the_bubblewrap_probe_says_no_where_namespaces_are_refused():
    """The probe's own preexec_fn (unshare, as root) fails there: that is "no namespaces", never a
    traceback instead of results.json."""
    probe = ("from autograder.sandbox import isolation; import os, subprocess, sys; "
             "print(isolation.bubblewrap_works(), isolation.student_walls_work(), "
             "subprocess.run(['unshare', '-U', 'true'], capture_output=True).returncode)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO,
                          preexec_fn=gradescope._without_namespaces)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "1"]


# A student's cell that looks for the autograder's files where the grader's command line says they
# are, tries to read and write them, and raises what it found (a cell's error reaches results.json)
REACH = '''
import os
def _reach():
    found = {"uid": os.getuid()}
    try:
        args = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
        results = args[[a.endswith(b"results.json") for a in args].index(True)].decode()
    except (OSError, ValueError) as error:
        return {**found, "found": type(error).__name__}
    root = os.path.dirname(os.path.dirname(results))
    for name, path, mode in (("checks", "source/autograder/checks/ch01_weights.py", "r"),
                             ("solutions", "source/solutions/01-weights/01-weights.ipynb", "r"),
                             ("results_read", "results/results.json", "r"), ("results_write", "results/results.json", "w"),
                             ("submission", "submission", None), ("root", ".", None)):
        try:
            open(os.path.join(root, path), mode).close() if mode else os.listdir(os.path.join(root, path))
            found[name] = "OK"
        except OSError as error:
            found[name] = type(error).__name__
    return found
raise RuntimeError(f"REACH {_reach()}")
'''


@in_container
def test_the_zip_grades_as_grade_does_where_namespaces_are_refused(tmp_path):
    try:
        gradescope._python_for_others(sys.executable)
    except gradescope.TryError as error:
        pytest.skip(str(error))
    archive = build_zip(A, tmp_path / f"{A}.zip")
    perfect = REPO / "samples" / "submitted" / "perfect-student" / A / f"{A}.ipynb"
    partial = nbformat.read(REPO / "samples" / "submitted" / "partial-student" / A / f"{A}.ipynb", as_version=4)
    partial.cells.append(nbformat.v4.new_code_cell(REACH))
    nbformat.write(partial, tmp_path / f"{A}.ipynb")
    tried = dict(zip(("perfect", "partial"), try_zips(archive, [perfect, tmp_path / f"{A}.ipynb"], no_namespaces=True)))
    for name, one in tried.items():
        results = one["results"]
        print(try_text(one).splitlines()[-1])
        assert one["same"], f"{name}:\n{try_text(one)}"  # every check and the total as `grade` gives them
        # how it ran is the instructors' note: on stdout, which Gradescope shows them alone (issue 36 §9)
        assert "graded without bubblewrap" in one["printed"] and "unprivileged user" in one["printed"], name
        assert "bubblewrap" not in results["output"] and "network" not in results["output"], name
        assert results["stdout_visibility"] == "hidden", name
        assert all(t["status"] == ("passed" if t["score"] >= t["max_score"] else "failed")
                   for t in results["tests"][1:]), name
    assert tried["perfect"]["results"]["score"] == tried["perfect"]["max_score"]
    assert 0 < tried["partial"]["results"]["score"] < tried["partial"]["max_score"]
    runs = {name: one["results"]["tests"][0] for name, one in tried.items()}
    assert runs["perfect"]["name"] == "your notebook runs" and runs["perfect"]["status"] == "passed"
    assert runs["partial"]["status"] == "failed"  # its last cell raised
    # what the student's process could reach: nothing of the autograder's, and it was not root
    reached = ast.literal_eval(re.search(r"REACH (\{.*?\})", runs["partial"]["output"]).group(1))
    assert reached.pop("uid") != 0
    assert reached == {name: "PermissionError" for name in
                       ("checks", "solutions", "results_read", "results_write", "submission", "root")}


@as_root
def test_ending_the_students_user_kills_what_left_its_session():
    """Without a PID namespace a process can leave the student's session; a user of its own (the
    zip's autograder-student) lets the grader kill it all the same before writing results.json.
    A uid that nothing on this machine runs stands in for it."""
    from autograder.sandbox.processes import end_identity, live_processes_of
    uid = 64999
    assert not live_processes_of(uid)

    def become():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    starter = subprocess.run(["/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, timeout=60, preexec_fn=become, cwd="/")
    escaped = int(starter.stdout)
    try:
        assert live_processes_of(uid) == [escaped]
        assert end_identity(uid, uid)
        assert not live_processes_of(uid)
    finally:
        try:
            os.kill(escaped, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_every_gradescope_test_has_a_status():
    """Gradescope shows a test without `status` as passed: the notebook's test fails when a cell
    raised, a check when it earned less than its points."""
    from autograder.results import CheckResult, ExerciseResult, Graded
    checks = [CheckResult("right", 1.0, 1.0), CheckResult("wrong", 0.0, 1.0, "got 2, expected 1"),
              CheckResult("part", 0.5, 1.0, "2 of 4 rows differ"), CheckResult("not run", 0.0, 1.0, "timeout", ran=False)]
    ran = Graded("s", A, [ExerciseResult("softmax", 4.0, checks)])
    raised = Graded("s", A, [ExerciseResult("softmax", 4.0, checks)],
                    notes=["only 01-weights.ipynb is graded; ignored: x.ipynb", "code cell 3 raised SyntaxError: invalid syntax"],
                    raised=[3])
    unreadable = Graded.not_graded("s", A, [], "not a notebook")
    assert [t["status"] for t in gradescope.check_tests(ran)] == ["passed", "failed", "failed", "failed"]
    assert gradescope.notebook_test(ran)["status"] == "passed"
    assert gradescope.notebook_test(Graded("s", A, [], notes=["only 01-weights.ipynb is graded; ignored: x.ipynb"]))["status"] == "passed"
    # what failed is read from the data, not from the note's words
    assert gradescope.notebook_test(Graded("s", A, [], notes=["code cell 3 raised nothing, really"]))["status"] == "passed"
    assert gradescope.notebook_test(raised)["status"] == "failed"
    assert gradescope.notebook_test(unreadable)["status"] == "failed"
