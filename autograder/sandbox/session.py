"""The grader's side of the sandbox: get a student process, send it calls, enforce limits.

Under bubblewrap a student's process is forked from a warm *zygote* (see `worker.zygote`) that
has already imported what the assignment needs, so a submission does not pay for numpy or
torch; the zygote's namespace is emptied between submissions. Without bubblewrap each
submission gets a fresh process. Any surprise from a zygote (a hang, garbage on its channel, a
dirty namespace) and it is killed; the next submission gets a new one.
"""
import functools
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

from ..wire import WireError, decode, encode
from .calls import StudentError
from .procfs import session_members, task_count
from .isolation import apply_limits, bubblewrap_works, worker_command, zygote_command


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 60.0        # one cell of the notebook (the cell is stopped, the next runs)
    notebook_seconds: float = 180.0   # all of the notebook's cells (the process is killed)
    call_seconds: float = 20.0        # one call of a student's function (the call is stopped)
    exercise_seconds: float = 120.0   # all the calls of one exercise's checks; later ones fail at once
    submission_seconds: float = 600.0 # everything for one notebook; later calls fail at once
    grace_seconds: float = 5.0        # after which a process that ignores its time limit is killed
    cpu_seconds: int = 300            # CPU time of one student process
    memory_bytes: int = 4 * 2**30     # address space
    file_bytes: int = 64 * 2**20      # largest file the student's code may write
    restarts: int = 2                 # times a crashed or hung process is started again
    processes: int = 256              # processes and threads at once (in the sandbox, or the session without it)
    scratch_bytes: int = 256 * 2**20  # written to the sandbox's in-memory folders (home, /tmp, /dev/shm)
    reply_bytes: int = 64 * 2**20     # one value sent back by the student's code


class ReplyTooLarge(Exception):
    pass


class StudentProcess:
    """One student's process as the grader sees it: a channel, and how to end it."""

    def send(self, request, seconds):
        """Write a request; TimeoutError if the process stops reading it."""
        payload = encode(request)
        try:
            _write_all(self.write_fd, struct.pack("<Q", len(payload)) + payload, time.monotonic() + seconds)
        except TimeoutError:
            raise
        except OSError:
            pass  # the process is gone; receive() reports why

    def receive(self, seconds, max_bytes):
        """A reply; TimeoutError, EOFError or WireError otherwise."""
        deadline = time.monotonic() + seconds
        (size,) = struct.unpack("<Q", _read_exact(self.read_fd, 8, deadline))
        if size > max_bytes:
            for _ in range(size // 2**20):  # read and dropped, never held: the process may go on
                _read_exact(self.read_fd, 2**20, deadline)
            _read_exact(self.read_fd, size % 2**20, deadline)
            raise ReplyTooLarge(f"returned a value of {size / 2**20:.0f} MB, more than the {max_bytes // 2**20} MB "
                                "accepted")
        return decode(_read_exact(self.read_fd, size, deadline))


class FreshProcess(StudentProcess):
    """A new worker process for one submission (bubblewrapped if it can be)."""

    def __init__(self, limits, modules):
        _remove_stale_scratch()
        self.scratch = tempfile.TemporaryDirectory(prefix=f"autograder-{os.getpid()}-")
        to_child_r, self.write_fd = os.pipe()
        self.read_fd, from_child_w = os.pipe()
        command, home = worker_command(self.scratch.name, to_child_r, from_child_w, modules)
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=self.scratch.name, env=_student_env(home), pass_fds=(to_child_r, from_child_w),
            preexec_fn=lambda: apply_limits(limits), start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self.output = OutputDrain(self.process.stdout)
        self.watcher = SessionWatcher(self.process.pid, limits.processes)

    def death(self):
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "it closed its channel"
        if self.watcher.tripped:
            return f"too many processes and threads (more than {self.watcher.limit}): killed"
        return _describe_exit(code)

    def end(self):
        self.watcher.stop()
        kill_session(self.process.pid)
        self.process.wait()
        for fd in (self.write_fd, self.read_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.output.join(timeout=2)  # a grandchild that escaped may still hold the pipe
        self.scratch.cleanup()


class SessionWatcher(threading.Thread):
    """Without bubblewrap there is no PID namespace: this counts the processes of the student's
    session instead, and past the limit kills them all. A process that starts a session of its
    own escapes it (one more reason to install bubblewrap)."""

    def __init__(self, session, limit):
        super().__init__(daemon=True)
        self.session, self.limit, self.tripped, self.stopped = session, limit, False, threading.Event()
        self.start()

    def run(self):
        while not self.stopped.wait(0.05):
            if sum(task_count(pid) for pid in session_members(self.session)) > self.limit:
                self.tripped = True
                kill_session(self.session)
                return

    def stop(self):
        self.stopped.set()
        self.join()


def kill_session(session, seconds=5.0):
    """Kill every process of the session, again until none is left (they may be forking)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        members = session_members(session)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


class Zygote:
    """A warm, bubblewrapped process that forks the students' processes (worker.zygote)."""

    def __init__(self, limits, modules):
        self.limits, self.modules = limits, modules
        self.control, theirs = socket.socketpair()
        command, home = zygote_command(theirs.fileno(), modules)
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd="/", env=_student_env(home), pass_fds=(theirs.fileno(),),
            preexec_fn=lambda: apply_limits(limits), start_new_session=True)
        theirs.close()
        self.output = OutputDrain(self.process.stdout)
        self.busy = False
        self._expect_ready(120)

    def alive(self):
        return self.process.poll() is None

    def _expect_ready(self, seconds):
        deadline = time.monotonic() + seconds
        (size,) = struct.unpack("<Q", _read_exact(self.control.fileno(), 8, deadline))
        if size > 4096:
            raise WireError("the zygote's reply is too long")
        reply = decode(_read_exact(self.control.fileno(), size, deadline))
        if not (reply.get("ready") and reply.get("clean")):
            raise WireError(f"the zygote is not clean: {reply}")
        self.busy = False
        return reply

    def fork(self):
        payload = encode({"op": "fork", "max_tasks": self.limits.processes,
                          "max_scratch_bytes": self.limits.scratch_bytes})
        _write_all(self.control.fileno(), struct.pack("<Q", len(payload)) + payload, time.monotonic() + 30)
        ready, _, _ = select.select([self.control], [], [], 30)
        if not ready:
            raise TimeoutError
        data, fds, _, _ = socket.recv_fds(self.control, 1, 1)
        if data != b"F" or len(fds) != 1:
            raise WireError("the zygote did not fork")
        self.busy = True
        return socket.socket(fileno=fds[0])

    def child_ended(self, seconds):
        """Wait for the zygote's word that the child ended and all is clean; its exit status."""
        return self._expect_ready(seconds)["exited"]

    def kill(self):
        if self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        self.control.close()
        self.output.join(timeout=2)


_zygote = None  # one per grading process: the last one used


def _zygote_for(limits, modules):
    global _zygote
    if _zygote is not None and (not _zygote.alive() or _zygote.busy or _zygote.modules != modules
                                or _zygote.limits != limits):
        _zygote.kill()
        _zygote = None
    if _zygote is None:
        _zygote = Zygote(limits, modules)
    return _zygote


class ForkedProcess(StudentProcess):
    """A student's process forked from the zygote, on its own socket."""

    def __init__(self, limits, modules):
        self.limits = limits
        for attempt in range(2):  # a zygote that fails to fork is replaced once
            try:
                self.zygote = _zygote_for(limits, modules)
                self.socket = self.zygote.fork()
                break
            except (OSError, TimeoutError, EOFError, WireError):
                if _zygote is not None:
                    _zygote.kill()
                    globals()["_zygote"] = None
                if attempt:
                    raise
        self.read_fd = self.write_fd = self.socket.fileno()
        self.exit_status = None

    def death(self):
        self._finish()
        return _describe_exit_text(self.exit_status) if self.exit_status else "it closed its channel"

    def _finish(self):
        if self.socket is None:
            return
        self.socket.close()
        self.socket = None
        try:
            self.exit_status = self.zygote.child_ended(self.limits.grace_seconds)
        except (OSError, TimeoutError, EOFError, WireError, struct.error):
            self.zygote.kill()  # a child that does not end, or a namespace left dirty

    def end(self):
        self._finish()


def _open_process(limits, modules):
    return ForkedProcess(limits, modules) if bubblewrap_works() else FreshProcess(limits, modules)


class SandboxedStudent:
    """A student's notebook running in its own process; `call` has InProcessStudent's interface."""

    def __init__(self, cells, limits=Limits(), modules=("numpy",)):
        self.cells = cells
        self.limits = limits
        self.modules = list(modules)
        self.process = None
        self.cell_errors = {}
        self.restarts_left = limits.restarts
        self.last_failure = None
        self.deadline = time.monotonic() + limits.submission_seconds
        self.exercise_deadline = float("inf")
        self.known_good = None  # the request that put known-good code in place, re-sent after a restart
        self._start()

    def start_exercise(self):
        """Calls from now on count against a new exercise's time budget."""
        self.exercise_deadline = time.monotonic() + self.limits.exercise_seconds

    # -- the interface the checks use -------------------------------------------------------

    def call(self, target, *args, method=None, keep=False, _time_limit=None, **kwargs):
        seconds = _time_limit or self.limits.call_seconds
        request = {"op": "call", "target": target, "args": list(args), "kwargs": kwargs,
                   "method": method, "keep": keep, "seconds": float(seconds)}
        name = "a method of your object" if not isinstance(target, str) else target
        return self._request(request, f"calling {name}", seconds)

    def use_known_good(self, sources, names):
        """The reference solutions of exercises already checked replace the student's own."""
        self.known_good = {"op": "known_good", "sources": sources, "names": names, "seconds": self.limits.call_seconds}
        self._request(self.known_good, "loading known-good versions of the earlier exercises", self.limits.call_seconds)

    # -- the process ------------------------------------------------------------------------

    def _start(self):
        try:
            self.process = _open_process(self.limits, self.modules)
        except (OSError, TimeoutError, EOFError, WireError) as error:
            self.process = None
            self.cell_errors = {None: f"the grader could not start a process for your notebook ({error})"}
            self.restarts_left = 0
            return
        try:
            self._send({"op": "run", "cells": [list(c) for c in self.cells], "cell_seconds": self.limits.cell_seconds},
                       "sending your notebook's cells", self.limits.notebook_seconds)
            reply = self._receive(self.limits.notebook_seconds, "running your notebook")
            self.cell_errors = {index: error for index, error in reply["cells"] if error}
        except StudentError as error:
            self.cell_errors = {None: str(error)}
            self.restarts_left = 0  # the notebook itself does not run: starting again would not help

    def _request(self, request, doing, seconds):
        if time.monotonic() > self.deadline:
            raise StudentError(f"not run: your notebook used up its {self.limits.submission_seconds:g} s "
                               "of grading time (look for slow or endless loops)")
        if time.monotonic() > self.exercise_deadline:
            raise StudentError(f"not run: this exercise's checks used up their {self.limits.exercise_seconds:g} s")
        if self.process is None:
            if self.restarts_left <= 0:
                raise StudentError(f"not run: your notebook's process stopped earlier ({self.last_failure})")
            self.restarts_left -= 1
            self._start()
            if self.process is None:
                raise StudentError(f"not run: {self.cell_errors.get(None)}")
            if self.known_good is not None and request is not self.known_good:
                self._request(self.known_good, "loading known-good versions of the earlier exercises", seconds)
        self._send(request, doing, seconds + self.limits.grace_seconds)
        reply = self._receive(seconds + self.limits.grace_seconds, doing)
        if "error" in reply:
            raise StudentError(reply["error"])
        return reply["value"]

    def _send(self, request, doing, seconds):
        try:
            self.process.send(request, seconds)
        except TimeoutError:
            self._fail(f"time limit: your notebook's process stopped reading while {doing}")

    def _receive(self, seconds, doing):
        try:
            reply = self.process.receive(seconds, self.limits.reply_bytes)
            if isinstance(reply, dict) and ("value" in reply or "error" in reply or "cells" in reply):
                return reply
            failure = f"unreadable reply while {doing}"
        except ReplyTooLarge as error:
            raise StudentError(f"{doing}: {error}") from None
        except TimeoutError:
            failure = f"time limit: {doing} took more than {seconds:g} s"
        except EOFError:
            failure = f"your notebook's process ended while {doing} ({self.process.death()})"
        except (WireError, struct.error) as error:
            failure = f"unreadable reply while {doing}: {error}"
        self._fail(failure)

    def _fail(self, failure):
        """End the process (the next call starts a new one, if restarts are left) and say why."""
        self.process.end()
        self.process = None
        self.last_failure = failure
        raise StudentError(failure)

    def close(self):
        if self.process is not None:
            self.process.end()
            self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class OutputDrain(threading.Thread):
    """Reads and drops what the student's code prints: a flood of output costs neither memory
    nor disk, and never blocks the student's process on a full pipe."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.start()

    def run(self):
        while self.stream.read1(1 << 16):
            pass
        self.stream.close()


@functools.cache  # once per grading process
def _remove_stale_scratch():
    """Scratch folders (`autograder-<pid>-...`) of grading processes that were killed."""
    import re
    import shutil
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        match = re.fullmatch(r"autograder-(\d+)-\w+", name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _student_env(home):
    return {"PATH": "/usr/bin:/bin", "HOME": home, "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{home}/.mpl",
            "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "TMPDIR": home, "PYTHONWARNINGS": "ignore", "LANG": "C.UTF-8"}


def _describe_exit(code):
    if code < 0:
        name = signal.Signals(-code).name
        hint = {"SIGKILL": "killed: memory or CPU limit?", "SIGXCPU": "CPU time limit",
                "SIGXFSZ": "file size limit", "SIGSEGV": "crashed"}.get(name, "signal")
        return f"{name}, {hint}"
    return f"exit status {code}: the code called os._exit(), killed its own process, or crashed"


def _describe_exit_text(text):
    if text.startswith("killed by"):
        return f"{text}: a memory or CPU limit, or the code killed its own process"
    return f"{text}: the code called os._exit() or exit, or crashed"


def _read_exact(fd, size, deadline):
    chunks, remaining = [], size
    while remaining:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _write_all(fd, data, deadline):
    """Write everything before the deadline (TimeoutError), however slowly the reader reads."""
    view = memoryview(data)
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
    finally:
        os.set_blocking(fd, blocking)
