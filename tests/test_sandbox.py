"""The sandbox between two students: nothing the first leaves behind reaches the second, even
when both are forked from the same warm zygote."""
import os
import shutil
import time
import uuid

import pytest

from autograder.sandbox.calls import StudentError
from autograder.sandbox.session import Limits, SandboxedStudent

FIRST = [(0, """
import os, subprocess
at_start = {'home': sorted(os.listdir('.')), 'tmp': sorted(os.listdir('/tmp')), 'sleepers': 0}
def what_was_there():
    return at_start
open('leftover', 'w').write('x')
open('/tmp/leftover', 'w').write('x')
subprocess.Popen(['sh', '-c', 'sleep 300'], start_new_session=True)
""")]
SECOND = [(0, """
import os
def what_is_left():
    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) > os.getpid() + 0 and p != str(os.getpid())]
    return {'home': sorted(os.listdir('.')), 'tmp': sorted(os.listdir('/tmp')),
            'sleepers': sum(b'sleep' in open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit())}
""")]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_next_student_finds_nothing_left():
    with SandboxedStudent(FIRST, Limits(), ["numpy"]) as first:
        assert first.cell_errors == {}
        at_start = first.call("what_was_there")
    with SandboxedStudent(SECOND, Limits(), ["numpy"]) as second:
        left = second.call("what_is_left")
    assert "leftover" not in at_start["home"] + at_start["tmp"]
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
        with pytest.raises(StudentError, match="too many processes"):
            student.call("flood", 100)
    deadline = time.monotonic() + 5
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not marked(marker), "processes of the student's session survived it"


def test_a_process_that_stops_reading_costs_its_call_not_the_run():
    """Every write to the student's channel has a deadline: a process that stays alive but stops
    reading (here, stopped by its own thread once its cells have run) cannot hang the grader."""
    import numpy as np
    cells = [(1, "import os, signal, threading, time\n"
                 "threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGSTOP)), daemon=True).start()\n"
                 "def size(x):\n    return len(x)")]
    with SandboxedStudent(cells, Limits(call_seconds=2, grace_seconds=1, restarts=0), ["numpy"]) as student:
        time.sleep(1.5)
        start = time.monotonic()
        with pytest.raises(StudentError, match="stopped reading"):
            student.call("size", np.zeros(2_000_000))  # 16 MB: far more than a socket's buffer
        assert time.monotonic() - start < 10
