"""Memory that no resource limit sees (issue 28 §4): pages written to a memfd and never mapped,
and System V shared memory, are counted by neither RLIMIT_AS, nor resident memory, nor the
in-memory folders' size. The kernel bounds them: a cgroup per student process tree where the grader
may make one (it kills the tree at the limit), and a seccomp filter everywhere (it refuses the
calls). Each attacker tries to hold 3 GB (48 x 64 MB) for 8 s under a 512 MB limit; it must be
stopped within a couple of seconds, the host's shared memory must not rise by much more than the
limit, and a control student graded with it must get its normal grade."""
import csv
import os
import shutil
import threading
import time

import nbformat
import pytest
from conftest import BIN, run
from submissions import filled_notebook, write

from autograder.notebook import exercises
from autograder.sandbox import cgroups, isolation, processes, seccomp, session, zygotes
from autograder.sandbox.session import Limits, SandboxedStudent

MB = 2**20
LIMIT = 512 * MB
HOLD = "time.sleep(8)\n"  # what the attacker would do with the memory: hold it

MEMFD = ("import os, time\nfds = []\nfor i in range(48):\n    fd = os.memfd_create('hoard')\n"
         "    os.write(fd, b'x' * (64 * 2**20))  # never mapped: no RLIMIT_AS, no resident memory\n"
         "    fds.append(fd)\n" + HOLD)
SHMGET = ("import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
          "for i in range(48):\n    ident = libc.shmget(0, 64 * 2**20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600\n"
          "    if ident < 0:\n        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
          "    address = libc.shmat(ident, None, 0)\n    ctypes.memset(address, 1, 64 * 2**20)\n"
          "    libc.shmdt(ctypes.c_void_p(address))  # detached: no longer resident in any process\n" + HOLD)
ATTACKS = {"memfd": MEMFD, "shmget": SHMGET}
STOPPED = ("Cannot allocate memory", "memory limit was reached")  # refused (seccomp), killed (cgroup)


def shared_bytes():
    with open("/proc/meminfo") as meminfo:
        return next(int(line.split()[1]) for line in meminfo if line.startswith("Shmem:")) * 1024


class SharedMemoryPeak:
    """The largest rise of the host's shared memory (tmpfs, memfd, System V) while it runs."""

    def __enter__(self):
        self.base = self.peak = shared_bytes()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.stop.wait(0.005):
            self.peak = max(self.peak, shared_bytes())

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.rise = self.peak - self.base


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
MODES = {
    "cgroup and seccomp": (True, True),
    "cgroup alone": (True, False),      # where the kernel takes no seccomp filter
    "seccomp alone": (False, True),     # a Gradescope container: no cgroup to make
}


@pytest.fixture
def guards(request, monkeypatch):
    """The sandbox in one mode: what `isolation.memory_guards` would find on such a host."""
    use_cgroups, use_seccomp = MODES[request.param]
    if use_cgroups and cgroups.why_not() is not None:
        pytest.skip(f"no cgroup here: {cgroups.why_not()}")
    if use_seccomp and not seccomp.works():
        pytest.skip("the kernel takes no seccomp filter here")
    for module in (zygotes, processes):
        monkeypatch.setattr(module, "memory_guards", lambda: (use_cgroups, use_seccomp))
    _drop_zygote()  # a zygote is started with its filter, or without: one per mode
    yield request.param
    _drop_zygote()


def _drop_zygote():
    if zygotes._zygote is not None:
        zygotes._zygote.kill()
        zygotes._zygote = None


def _attack(cell):
    """(the attacker's notebook errors, seconds until it was stopped, rise of shared memory)."""
    with SharedMemoryPeak() as shm:
        start = time.monotonic()
        with SandboxedStudent([(0, "x = 1"), (1, cell)], Limits(memory_bytes=LIMIT), ["numpy"]) as student:
            seconds = time.monotonic() - start
            errors = dict(student.cell_errors)
    return errors, seconds, shm.rise


@needs_bwrap
@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("guards", sorted(MODES), indirect=True)
def test_the_attacker_is_stopped_at_the_limit(guards, attack):
    errors, seconds, rise = _attack(ATTACKS[attack])
    message = " ".join(errors.values())
    assert any(stopped in message for stopped in STOPPED), errors
    if guards.startswith("cgroup and") or guards == "seccomp alone":
        assert errors.get(1, "").startswith("OSError: [Errno 12]"), errors  # refused: the notebook runs on
    else:
        assert f"more than {LIMIT // MB} MB of memory together" in errors[None], errors  # killed by the kernel
    assert seconds < 6, f"held its memory for {seconds:.1f} s"  # 8 s if nothing stops it; zygote start included
    assert rise < LIMIT + 64 * MB, f"the host's shared memory rose by {rise / MB:.0f} MB"


@needs_bwrap
@pytest.mark.parametrize("guards", ["cgroup alone"], indirect=True)
def test_the_cgroup_kills_the_whole_tree_and_is_removed(guards):
    """cgroup v1's OOM killer kills one process: the grader, told by the kernel, kills the rest at
    once; the student's cgroup is gone when its process has ended."""
    four = ("import subprocess, sys, time\nkids = [subprocess.Popen([sys.executable, '-c', "
            "'import os, time; fd = os.memfd_create(\"m\"); os.write(fd, b\"x\" * (200 * 2**20)); time.sleep(30)']) "
            "for _ in range(4)]\ntime.sleep(20)")
    start = time.monotonic()
    with SandboxedStudent([(0, four)], Limits(memory_bytes=LIMIT, restarts=0), ["numpy"]) as student:
        # the kernel's OOM killer, or the watcher that samples the same total every 50 ms, whichever
        # comes first (on a busy machine the watcher sometimes does): either kills the whole tree
        assert f"more than {LIMIT // MB} MB of memory together" in student.cell_errors[None], student.cell_errors
        assert time.monotonic() - start < 10
    version, folders = cgroups._setup()
    assert all(not any(name.startswith("student-") for name in _listdir(folder)) for folder in folders.values())


@needs_bwrap
@pytest.mark.parametrize("guards", ["cgroup and seccomp"], indirect=True)
def test_without_bubblewrap_the_bounds_still_hold(guards, monkeypatch):
    monkeypatch.setattr(isolation, "bubblewrap_works", lambda: False)
    monkeypatch.setattr(session, "bubblewrap_works", lambda: False)
    for cell in ATTACKS.values():
        errors, seconds, rise = _attack(cell)
        assert errors.get(1, "").startswith("OSError: [Errno 12]"), errors
        assert rise < LIMIT + 64 * MB


def _listdir(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


# -- a class graded as the instructor grades it ----------------------------------------------------

A = "01-weights"


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    base = tmp_path_factory.mktemp("memory")
    for name, cell in (("a-memfd-hoarder", MEMFD), ("a-shmget-hoarder", SHMGET), ("z-control", "")):
        nb = filled_notebook(A)
        if cell:
            nb.cells.append(nbformat.v4.new_code_cell(cell))
        write(nb, base / "class" / name / A / f"{A}.ipynb")
    with SharedMemoryPeak() as shm:
        run(BIN / "python", "-m", "autograder", "grade", base / "class", "--out", base / "out", "-j", "1", "--quiet",
            "--memory-mb", str(LIMIT // MB), timeout=600)
    with open(base / "out" / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    feedback = {name: (base / "out" / "feedback" / name / f"{A}.html").read_text() for name in {r["student"] for r in rows}}
    return rows, feedback, shm.rise


@needs_bwrap
def test_a_class_with_hoarders(graded_class):
    rows, feedback, rise = graded_class
    by_student = {}
    for row in rows:
        by_student.setdefault(row["student"], []).append(row)
    full = sum(e.points for e in exercises(A))
    assert sum(float(r["score"]) for r in by_student["z-control"]) == full
    for attacker in ("a-memfd-hoarder", "a-shmget-hoarder"):
        said = " ".join(r["message"] for r in by_student[attacker]) + feedback[attacker]
        assert any(stopped in said for stopped in STOPPED), attacker
    assert rise < LIMIT + 64 * MB, f"the host's shared memory rose by {rise / MB:.0f} MB"
