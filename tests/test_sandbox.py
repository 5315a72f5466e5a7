"""The sandbox between two students: nothing the first leaves behind reaches the second, even
when both are forked from the same warm zygote."""
import os
import shutil
import time
import uuid

import pytest

from autograder.sandbox import zygotes
from autograder.sandbox.calls import StudentError
from autograder.sandbox.session import Limits, SandboxedStudent
from conftest import setuid_files_since

LOOK = """
import ctypes, os, subprocess
def look():
    sysv = sum(len(open(f'/proc/sysvipc/{k}').read().splitlines()) - 1 for k in ('shm', 'msg', 'sem'))
    return {'home': sorted(os.listdir('.')), 'tmp': sorted(os.listdir('/tmp')), 'shm': sorted(os.listdir('/dev/shm')),
            'dev': sorted(os.listdir('/dev')), 'root': sorted(os.listdir('/')), 'sysv': sysv,
            'sleepers': sum(b'sleep' in open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit())}
"""
FIRST = [(0, LOOK + """
at_start = look()
def what_was_there():
    return at_start
def writable(path):
    try:
        open(path, 'w').write('x')
        return True
    except OSError:
        return False
for path in ('leftover', '/tmp/leftover', '/dev/shm/leftover'):
    open(path, 'w').write('x')
refused = [p for p in ('/dev/leftover', '/leftover', '/etc/leftover') if not writable(p)]
libc = ctypes.CDLL(None)
libc.shmget(1234, 4096, 0o1666), libc.msgget(1235, 0o1666), libc.semget(1236, 1, 0o1666)
subprocess.Popen(['sh', '-c', 'sleep 300'], start_new_session=True)
def what_was_refused():
    return refused
""")]
SECOND = [(0, LOOK + """
def what_is_left():
    return look()
""")]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_next_student_finds_nothing_left():
    # a fresh zygote, whose imports write caches to its home (matplotlib, torch): the first student
    # finds none of them either (it did, when an earlier test's zygote had been replaced)
    if zygotes._zygote is not None:
        zygotes._zygote.kill()
        zygotes._zygote = None
    with SandboxedStudent(FIRST, Limits(), ["numpy", "torch", "matplotlib.pyplot"]) as first:
        assert first.cell_errors == {}
        at_start = first.call("what_was_there")
        assert at_start["home"] == []
        assert first.call("what_was_refused") == ["/dev/leftover", "/leftover", "/etc/leftover"]
    with SandboxedStudent(SECOND, Limits(), ["numpy"]) as second:
        left = second.call("what_is_left")
    assert "leftover" not in at_start["home"] + at_start["tmp"] + at_start["shm"] and at_start["sysv"] == 0
    assert left == at_start  # (the sandbox's own mount points may show in /tmp)


def test_values_cross_on_plain_data_only():
    cells = [(0, "import numpy as np\nclass Liar(np.ndarray):\n    def __eq__(self, o): return True\n"
                 "def f():\n    return np.zeros(3).view(Liar)\ndef g():\n    return object()")]
    with SandboxedStudent(cells) as student:
        value = student.call("f")
        assert type(value).__name__ == "ndarray" and not (value == 1).any()
        with pytest.raises(Exception, match="cannot be sent"):
            student.call("g")


FLOOD = [(0, """
import subprocess
def flood(n):
    kids = [subprocess.Popen(['sh', '-c', 'sleep 600; : {marker}']) for _ in range(n)]
    return len(kids)
""")]


def marked(marker):
    return [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p)]


def _cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        return ""


def test_without_bubblewrap_the_process_limit_still_holds(monkeypatch):
    from autograder.sandbox import isolation, session
    monkeypatch.setattr(isolation, "bubblewrap_works", lambda: False)
    monkeypatch.setattr(session, "bubblewrap_works", lambda: False)
    marker = f"flood-{uuid.uuid4().hex}"
    cells = [(0, FLOOD[0][1].replace("{marker}", marker))]
    with SandboxedStudent(cells, Limits(processes=20, restarts=0)) as student:
        assert student.call("flood", 5) == 5  # under the limit: fine
        # the watcher kills the session, or the kernel refuses the fork first (the student's cgroup)
        with pytest.raises(StudentError, match="too many processes|Resource temporarily unavailable"):
            student.call("flood", 100)
    deadline = time.monotonic() + 5
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not marked(marker), "processes of the student's session survived it"


def test_a_process_that_stops_reading_costs_its_call_not_the_run():
    """Every write to the student's channel has a deadline: a process that stays alive but stops
    reading (here, its own thread holds the interpreter once its cells have run: the student's
    process, PID 1 of its namespace, cannot SIGSTOP itself) cannot hang the grader."""
    import numpy as np
    cells = [(1, "import os, signal, threading, time\n"
                 "threading.Thread(target=lambda: (time.sleep(0.5), sum(range(10**12))), daemon=True).start()\n"
                 "def size(x):\n    return len(x)")]
    with SandboxedStudent(cells, Limits(call_seconds=2, grace_seconds=1, restarts=0), ["numpy"]) as student:
        time.sleep(1.5)
        start = time.monotonic()
        with pytest.raises(StudentError, match="stopped reading"):
            student.call("size", np.zeros(2_000_000))  # 16 MB: far more than a socket's buffer
        assert time.monotonic() - start < 10


def _real_uid(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        return None


def _unprivileged_namespaces():
    """Whether this kernel lets a user with no rights make namespaces, as bwrap run as nobody must."""
    for switch in ("kernel/unprivileged_userns_clone", "user/max_user_namespaces",
                   "kernel/apparmor_restrict_unprivileged_userns"):
        try:
            value = int(open(f"/proc/sys/{switch}").read())
        except OSError:
            continue
        if (value == 1) if switch.endswith("restrict_unprivileged_userns") else (value == 0):
            return False
    return True


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None, reason="the grader as root, with bubblewrap")
def test_student_code_is_never_root_on_the_host_and_leaves_no_file_there():
    """A setuid copy of a program, made in the student's home, would be a root shell for any local
    user if that home were a host folder and the student's uid the grader's. Student code runs as
    the host's nobody wherever the kernel lets nobody make namespaces, even with Python installed
    where nobody cannot read it (pyenv under /root)."""
    import tempfile

    from autograder.sandbox.isolation import drops_identity
    start = time.time()
    cells = [(0, "import os, shutil\nshutil.copy('/usr/bin/env', 'env')\nos.chmod('env', 0o4755)\n"
                 "def mode():\n    return os.stat('env').st_mode")]
    with SandboxedStudent(cells, Limits(), ["numpy"]) as student:
        assert student.call("mode") & 0o4000  # inside, the file is there
        workers = [p for p in os.listdir("/proc") if p.isdigit() and "autograder.sandbox.start" in _cmdline(p)]
        uids = {_real_uid(p) for p in workers} - {None}
        assert uids == ({65534} if _unprivileged_namespaces() else {0})
        assert drops_identity() == _unprivileged_namespaces()
    assert not setuid_files_since(tempfile.gettempdir(), start)


WALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def seen():
    caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))]
    return {'pid': os.getpid(), 'ppid': os.getppid(), 'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
            'caps': caps, 'new_user_namespace': libc.unshare(0x10000000) == 0, 'session': os.getsid(0) == os.getpid()}
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_each_student_is_walled_off_from_the_grader():
    """PID 1 of its own namespaces: no process of the grader's to name, no capability, no way to
    make a user namespace of its own (and mount a tmpfs the watcher would not see)."""
    from autograder.sandbox.isolation import student_walls_work
    assert student_walls_work()
    with SandboxedStudent([(0, WALLS + "\nimport subprocess\nchild = subprocess.Popen(['sleep', '30'])")],
                          Limits(), ["numpy"]) as student:
        assert student.cell_errors == {}
        seen = student.call("seen")
    assert (seen["pid"], seen["ppid"]) == (1, 0)
    assert seen["pids"] == [1, 2]  # itself and its own child: nothing of the grader's
    assert seen["caps"] == ["0000000000000000"] * 3
    assert not seen["new_user_namespace"] and seen["session"]


def test_memory_is_measured_and_bounded_from_outside():
    """The rise of the memory all the student's processes hold, over its lowest point during the
    call; four processes under the per-process limit are killed together past the submission's."""
    # held 0.1 s, as a computation holds its arrays: the watcher samples every 2 ms, and on a busy
    # machine a buffer freed as soon as it is filled can be gone before a sample sees all of it
    grow = "import time\ndef hold(mb):\n    x = bytearray(mb * 2**20)\n    time.sleep(0.1)\n    return len(x)\n"
    with SandboxedStudent([(0, grow)], Limits(), ["numpy"]) as student:
        (_, small), (_, big) = student.measured_call("hold", 1), student.measured_call("hold", 200)
    assert small < 8 * 2**20 and 190 * 2**20 < big < 260 * 2**20
    four = ("import subprocess, sys\nkids = [subprocess.Popen([sys.executable, '-c', "
            "'import time; x = bytearray(150 * 2**20); time.sleep(30)']) for _ in range(4)]\nimport time\ntime.sleep(20)")
    limits = Limits(memory_bytes=400 * 2**20, notebook_seconds=60, restarts=0)
    start = time.monotonic()
    with SandboxedStudent([(0, four)], limits, ["numpy"]) as student:
        assert "MB of memory together" in student.cell_errors[None]
    assert time.monotonic() - start < 20
