"""The grader's side of the sandbox: start the student's process, send it calls, enforce limits."""
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from ..checks.core import StudentError
from ..wire import MAX_FRAME_BYTES, WireError, decode, encode
from .isolation import apply_limits, worker_command


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 60.0        # one cell of the notebook (the cell is stopped, the next runs)
    notebook_seconds: float = 180.0   # all of the notebook's cells (the process is killed)
    call_seconds: float = 20.0        # one call of a student's function (the call is stopped)
    submission_seconds: float = 600.0 # everything for one notebook; later calls fail at once
    grace_seconds: float = 5.0        # after which a process that ignores its time limit is killed
    cpu_seconds: int = 300            # CPU time of the whole student process
    memory_bytes: int = 4 * 2**30     # address space
    file_bytes: int = 64 * 2**20      # largest file the student's code may write
    output_bytes: int = 64 * 2**10    # what is kept of the student's printed output (the tail)
    restarts: int = 2                 # times a crashed or hung process is started again


class SandboxedStudent:
    """A student's notebook running in its own process; `call` has InProcessStudent's interface."""

    def __init__(self, cells, limits=Limits()):
        self.cells = cells
        self.limits = limits
        self.process = None
        self.cell_errors = {}
        self.restarts_left = limits.restarts
        self.last_failure = None
        self.deadline = time.monotonic() + limits.submission_seconds
        self._start()

    # -- the interface the checks use -------------------------------------------------------

    def call(self, target, *args, method=None, keep=False, _time_limit=None, **kwargs):
        seconds = _time_limit or self.limits.call_seconds
        request = {"op": "call", "target": target, "args": list(args), "kwargs": kwargs,
                   "method": method, "keep": keep, "seconds": float(seconds)}
        name = "a method of your object" if not isinstance(target, str) else target
        return self._request(request, f"calling {name}", seconds)

    def run_code(self, code):
        """Run test code (the visible asserts) in the notebook's namespace; None or an error."""
        try:
            self._request({"op": "exec", "code": code, "seconds": self.limits.call_seconds},
                          "running the visible tests", self.limits.call_seconds)
            return None
        except StudentError as error:
            return str(error)

    # -- the process ------------------------------------------------------------------------

    def _start(self):
        self.scratch = tempfile.TemporaryDirectory(prefix="autograder-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        command, home = worker_command(self.scratch.name, to_child_r, from_child_w)
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{home}/.mpl",
               "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "TMPDIR": home, "PYTHONWARNINGS": "ignore", "LANG": "C.UTF-8"}
        limits = self.limits
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=self.scratch.name, env=env, pass_fds=(to_child_r, from_child_w),
            preexec_fn=lambda: apply_limits(limits), start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self.output = OutputTail(self.process.stdout, self.limits.output_bytes)
        try:
            self._send({"op": "run", "cells": [list(c) for c in self.cells],
                        "cell_seconds": self.limits.cell_seconds})
            reply = self._receive(self.limits.notebook_seconds, "running your notebook")
            self.cell_errors = {index: error for index, error in reply["cells"] if error}
        except StudentError as error:
            self.cell_errors = {None: str(error)}
            self.last_failure = str(error)
            self.restarts_left = 0  # the notebook itself does not run: starting again would not help

    def _request(self, request, doing, seconds):
        if time.monotonic() > self.deadline:
            raise StudentError(f"not run: your notebook used up its {self.limits.submission_seconds:g} s "
                               "of grading time (look for slow or endless loops)")
        if self.process is None or self.process.poll() is not None:
            if self.restarts_left <= 0:
                raise StudentError(f"not run: your notebook's process stopped earlier ({self.last_failure})")
            self.restarts_left -= 1
            self.close()
            self._start()
        self._send(request)
        reply = self._receive(seconds + self.limits.grace_seconds, doing)
        if "error" in reply:
            raise StudentError(reply["error"])
        return reply["value"]

    def _send(self, request):
        try:
            payload = encode(request)
            os.write(self.to_child, struct.pack("<Q", len(payload)))
            _write_all(self.to_child, payload)
        except (BrokenPipeError, OSError):
            pass  # the process is gone; _receive reports why

    def _receive(self, seconds, doing):
        try:
            head = self._read_exact(8, seconds)
            (size,) = struct.unpack("<Q", head)
            if size > MAX_FRAME_BYTES:
                raise WireError("a reply over the size limit")
            return decode(self._read_exact(size, seconds))
        except TimeoutError:
            failure = f"time limit: {doing} took more than {seconds:g} s"
        except EOFError:
            failure = f"your notebook's process ended while {doing} ({self._death()})"
        except WireError as error:
            failure = f"unreadable reply while {doing}: {error}"
        self.kill()
        self.last_failure = failure
        raise StudentError(failure)

    def _read_exact(self, size, seconds):
        deadline = time.monotonic() + seconds
        chunks, remaining = [], size
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.from_child], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.from_child, min(remaining, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _death(self):
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "it closed its channel"
        if code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGKILL": "killed: memory or CPU limit?", "SIGXCPU": "CPU time limit",
                    "SIGXFSZ": "file size limit", "SIGSEGV": "crashed"}.get(name, "signal")
            return f"{name}, {hint}"
        return f"exit status {code}: the code called os._exit(), killed its own process, or crashed"

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def close(self):
        self.kill()
        for fd in (getattr(self, "to_child", None), getattr(self, "from_child", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_child = self.from_child = None
        self.output.join(timeout=2)  # a grandchild that escaped may still hold the pipe
        self.scratch.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class OutputTail(threading.Thread):
    """Drains what the student's code prints, keeping only the last `keep` bytes: a flood of
    output costs neither memory nor disk, and never blocks the student's process."""

    def __init__(self, stream, keep):
        super().__init__(daemon=True)
        self.stream, self.keep, self.total, self.tail = stream, keep, 0, b""
        self.start()

    def run(self):
        for chunk in iter(lambda: self.stream.read1(1 << 16), b""):
            self.total += len(chunk)
            self.tail = (self.tail + chunk)[-self.keep:]
        self.stream.close()

    def text(self):
        note = f"[{self.total - len(self.tail)} bytes of earlier output dropped]\n" if self.total > len(self.tail) else ""
        return note + self.tail.decode("utf-8", "replace")


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
