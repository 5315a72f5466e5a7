"""The host is safe from a student's code where the sandbox has the least to work with (issue 35).

- `gradescope-try --no-namespaces`: a student's process that leaves its session and its parent
  (setsid, a second fork) once outlived the try as the host's `nobody`, kept writing to the host's
  /tmp, and later killed the sandboxes of an ordinary `grade` run, which bubblewrap runs as that
  same `nobody`. The try now runs each submission's code as a throwaway user of its own, kills
  every process of it, removes every file it owns where anyone may write, and deletes it.
- No cgroup (a Gradescope container, a non-root instructor): AF_UNIX socketpairs with 4 MB
  SO_SNDBUF held 2.2 GB of the machine's memory under a 1 GB limit. The seccomp filter now refuses
  sockets, larger socket buffers and larger pipes, and RLIMIT_NOFILE bounds the pipes a process
  holds: what the kernel holds behind a student's descriptors stays far below the limit.
"""
import csv
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import BIN, REPO, run
from submissions import filled_notebook, write

from autograder import gradescope
from autograder.notebook import exercises
from autograder.sandbox import isolation, processes, seccomp, session, zygotes
from autograder.sandbox.session import Limits, SandboxedStudent

A = "01-weights"
MB = 2**20


def _container_works():
    return os.geteuid() == 0 and seccomp.no_namespaces_program() is not None and seccomp.works()


in_container = pytest.mark.skipif(not _container_works(), reason="root and a seccomp filter, to make a container")

# -- gradescope-try --no-namespaces: nothing of the student's outlives the try ---------------------

# A process that leaves the student's session and parent, then writes 1 MB to each shared folder
# every 0.2 s (and a folder, and a link to /etc/passwd, which must survive the cleanup); the
# notebook itself goes on and is graded.
LINGER = """
import os, sys, time
mark = sys.argv[1]
os.makedirs(f"/tmp/{mark}-dir/inner", exist_ok=True)
open(f"/tmp/{mark}-dir/inner/kept", "wb").write(b"x" * 2**20)
os.symlink("/etc/passwd", f"/tmp/{mark}-link")
for i in range(10**6):
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(f"{folder}/{mark}-{i}", "wb") as f:
                f.write(b"x" * 2**20)
        except OSError:
            pass
    time.sleep(0.2)
"""
ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", {linger!r}, "{mark}"])
    os._exit(0)
time.sleep(1)
if os.path.exists("/tmp/{mark}-0"):  # it is under way: the cell says so (it costs no point)
    raise RuntimeError("ESCAPED as uid " + str(os.stat("/tmp/{mark}-0").st_uid))
"""


def marked_processes(mark):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def marked_files(mark):
    return [os.path.join(folder, name) for folder in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(folder)
            for name in os.listdir(folder) if mark in name]


def files_of(uid, folders):
    found = []
    for top in folders:
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                try:
                    if os.lstat(os.path.join(folder, name)).st_uid == uid:
                        found.append(os.path.join(folder, name))
                except OSError:
                    pass
    return found


@pytest.fixture(scope="module")
def gradescope_root(tmp_path_factory):
    """/autograder as the try lays it out, with a venv a user of no rights of its own can run: the
    try installs the zip's requirements into a fresh one (minutes); here a venv of the system's
    Python that reads this one's packages (the same Python version) stands in for it."""
    try:
        python = gradescope._python_for_others(sys.executable)
    except gradescope.TryError as error:
        pytest.skip(str(error))
    packages = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    if not isolation._others_can_reach(packages):
        pytest.skip(f"{packages} is out of reach of other users")
    archive = gradescope.build_zip(A, tmp_path_factory.mktemp("zip") / f"{A}.zip")
    root = Path(tempfile.mkdtemp(prefix="gradescope-try-"))  # not pytest's, which others cannot cross
    try:
        root.chmod(0o755)
        zipfile.ZipFile(archive).extractall(root / "source")
        run(python, "-m", "venv", "--without-pip", root / "venv")
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        (root / "venv" / "lib" / version / "site-packages" / "course.pth").write_text(f"{packages}\n")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@in_container
def test_a_try_without_namespaces_leaves_no_process_and_no_file(gradescope_root, tmp_path):
    """Through `run_submission`, which `gradescope-try --no-namespaces` runs for each submission
    (the venv's install is all the try adds): a notebook whose process escapes its session and
    writes to /tmp, /var/tmp and /dev/shm, then an honest one."""
    mark = f"linger-{uuid.uuid4().hex}"
    escaper = filled_notebook(A)
    escaper.cells.append(nbformat.v4.new_code_cell(ESCAPE.format(linger=LINGER, mark=mark)))
    write(escaper, tmp_path / "escaper" / f"{A}.ipynb")
    perfect = REPO / "samples" / "submitted" / "perfect-student" / A / f"{A}.ipynb"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    folders = processes.writable_by_anyone()
    try:
        escaped = gradescope.run_submission(gradescope_root, tmp_path / "escaper" / f"{A}.ipynb", env, timeout=300,
                                            no_namespaces=True, folders=folders)
        name, uid = escaped["student_user"]
        assert name.startswith("ag-try-") and uid not in (0, isolation.NOBODY)
        # the instructors' note, in what run_autograder printed (Gradescope shows it to instructors only)
        assert f"as the unprivileged user {name} (uid {uid})" in escaped["printed"]
        assert "ended every process of that user" in escaped["printed"]
        assert "unprivileged user" not in escaped["results"].get("output", "")
        assert f"ESCAPED as uid {uid}" in escaped["results"]["tests"][0]["output"]  # it ran, and wrote
        assert not processes.live_processes_of(uid), "a process of the student's user outlived the try"
        assert not marked_processes(mark)
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
        time.sleep(0.5)  # a writer still alive would have written again by now
        assert not marked_files(mark), marked_files(mark)
        assert not files_of(uid, folders), files_of(uid, folders)
        assert os.path.isfile("/etc/passwd")  # the link was removed, not what it points to

        honest = gradescope.run_submission(gradescope_root, perfect, env, timeout=300, no_namespaces=True,
                                           folders=folders)
        assert honest["student_user"][1] != 0 and honest["student_user"][0] != name
        full = sum(e.points for e in exercises(A))
        assert honest["results"]["score"] == full, honest["results"]
        assert escaped["results"]["score"] == full, escaped["results"]  # the escape cost nothing else
    finally:  # not to leave them to the next test, should the assertions fail
        for pid in marked_processes(mark):
            os.kill(pid, 9)
        for path in marked_files(mark):
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) and not os.path.islink(path) \
                else os.unlink(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a user")
def test_the_throwaway_user_removes_only_what_is_its_own(tmp_path):
    """`ThrowawayUser.remove`: a process of its in a session of its own is killed, its files and
    folders in a shared folder removed, root's file beside them kept, and the user gone; a link of
    it is removed, never followed."""
    shared, elsewhere = (Path(tempfile.mkdtemp(prefix="throwaway-")) for _ in range(2))
    shared.chmod(0o1777)
    (elsewhere / "target").write_text("kept")
    user = processes.ThrowawayUser()
    try:
        def become():
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
        script = (f"mkdir {shared}/own && echo x > {shared}/own/a && echo y > {shared}/file && "
                  f"ln -s {elsewhere}/target {shared}/link && setsid sleep 300 </dev/null >/dev/null 2>&1 &")
        subprocess.run(["/bin/sh", "-c", script], check=True, timeout=60, preexec_fn=become, cwd="/")
        (shared / "root-file").write_text("kept")
        time.sleep(0.2)
        assert processes.live_processes_of(user.uid)
        left = user.remove(folders=[str(shared)])
        assert left == {"processes": [], "files": [], "user": None}
        assert sorted(os.listdir(shared)) == ["root-file"]
        assert (elsewhere / "target").read_text() == "kept"
        with pytest.raises(KeyError):
            pwd.getpwnam(user.name)
    finally:
        if processes.live_processes_of(user.uid):
            processes.end_identity(user.uid, user.gid)
        subprocess.run(["userdel", user.name], capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(elsewhere, ignore_errors=True)


# -- no cgroup: what the kernel holds behind a student's descriptors stays bounded -----------------

LIMIT = 1024 * MB
# socketpairs with 4 MB send buffers, filled both ways; then pipes of 1 MB, filled; held while the
# host's memory is measured. What the kernel took is counted by the attacker itself.
HOARD = """
import fcntl, os, socket, time
held, refused, kept = 0, set(), []
for i in range(200):
    try:
        a, b = socket.socketpair()
    except OSError as error:
        refused.add(f"socketpair: {error.strerror}")
        break
    kept += [a, b]
    for end in (a, b):
        try:
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 2**20)
        except OSError as error:
            refused.add(f"SO_SNDBUF: {error.strerror}")
        end.setblocking(False)
        try:
            while True:
                held += end.send(b"x" * 2**16)
        except OSError:
            pass
for i in range(200):
    try:
        r, w = os.pipe()
    except OSError as error:
        refused.add(f"pipe: {error.strerror}")
        break
    try:
        fcntl.fcntl(w, 1031, 2**20)  # F_SETPIPE_SZ
    except OSError as error:
        refused.add(f"F_SETPIPE_SZ: {error.strerror}")
    os.set_blocking(w, False)
    try:
        while True:
            held += os.write(w, b"x" * 2**16)
    except OSError:
        pass
    os.close(w)
    kept.append(r)
time.sleep(3)
raise RuntimeError(f"HELD {held} REFUSED {sorted(refused)}")
"""
BOUND = isolation.OPEN_FILES * 64 * 1024  # a pipe's 64 KiB per descriptor at most


def available_bytes():
    with open("/proc/meminfo") as meminfo:
        return next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:")) * 1024


class MemoryDrop:
    """The largest fall of the host's available memory while it runs (other processes of the
    machine move it too: a margin of the limit itself)."""

    def __enter__(self):
        self.base = self.lowest = available_bytes()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.stop.wait(0.01):
            self.lowest = min(self.lowest, available_bytes())

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.drop = self.base - self.lowest


def _drop_zygote():
    if zygotes._zygote is not None:
        zygotes._zygote.kill()
        zygotes._zygote = None


SANDBOXES = ["bubblewrap", "none"] if isolation.bubblewrap_works() else ["none"]


@pytest.mark.skipif(not seccomp.works(), reason="the kernel takes no seccomp filter here")
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_without_a_cgroup_socket_and_pipe_buffers_stay_bounded(sandbox, monkeypatch):
    for module in (zygotes, processes):  # as `memory_guards` finds a host without cgroups
        monkeypatch.setattr(module, "memory_guards", lambda: (False, True))
    if sandbox == "none":  # a Gradescope container: no bubblewrap either
        monkeypatch.setattr(isolation, "bubblewrap_works", lambda: False)
        monkeypatch.setattr(session, "bubblewrap_works", lambda: False)
    _drop_zygote()
    try:
        with MemoryDrop() as memory:
            with SandboxedStudent([(0, "x = 1"), (1, HOARD)], Limits(memory_bytes=LIMIT), ["numpy"]) as student:
                errors = dict(student.cell_errors)
    finally:
        _drop_zygote()
    said = re.search(r"HELD (\d+) REFUSED (.*)", errors.get(1, ""))
    assert said, errors
    held = int(said.group(1))
    assert held <= BOUND, f"the kernel held {held / MB:.0f} MB of the student's buffers"
    assert memory.drop < LIMIT, f"the host's available memory fell by {memory.drop / MB:.0f} MB"
    assert "socketpair: Operation not permitted" in said.group(2), said.group(2)
    assert "F_SETPIPE_SZ: Operation not permitted" in said.group(2), said.group(2)


@pytest.mark.skipif(not seccomp.works(), reason="the kernel takes no seccomp filter here")
def test_a_class_graded_without_cgroups(tmp_path):
    """As an instructor grades where no cgroup can be made: the hoarder is refused, and the honest
    student beside it keeps full marks. (The host's memory is measured above, around the student's
    process alone: here it would count the grader's own.)"""
    hoarder = filled_notebook(A)
    hoarder.cells.append(nbformat.v4.new_code_cell(HOARD))
    write(hoarder, tmp_path / "class" / "a-hoarder" / A / f"{A}.ipynb")
    write(filled_notebook(A), tmp_path / "class" / "z-control" / A / f"{A}.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_SECCOMP"}
    subprocess.run([str(BIN / "python"), "-m", "autograder", "grade", str(tmp_path / "class"), "--out",
                    str(tmp_path / "out"), "-j", "1", "--quiet", "--memory-mb", str(LIMIT // MB)],
                   cwd=REPO, env={**env, "AUTOGRADER_CGROUPS": "off"}, check=True, capture_output=True, timeout=600)
    with open(tmp_path / "out" / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    full = sum(e.points for e in exercises(A))
    assert sum(float(r["score"]) for r in rows if r["student"] == "z-control") == full
    feedback = (tmp_path / "out" / "feedback" / "a-hoarder" / f"{A}.html").read_text()
    held = re.search(r"HELD (\d+)", feedback)
    assert held and int(held.group(1)) <= BOUND, feedback[-2000:]
    assert "Operation not permitted" in feedback
