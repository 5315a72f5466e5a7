"""Warm zygotes, the grader's side: start one under bubblewrap, ask it to fork a student's
process, hear that the student's process ended and all is clean. Any surprise (a hang, garbage
on its channel, a dirty namespace) and it is killed; the next submission gets a new one."""
import os
import select
import signal
import socket
import subprocess
import time

from ..wire import WireError
from . import channel
from .isolation import apply_limits, zygote_command
from .processes import OutputDrain, StudentProcess, describe_exit_text, student_env


class Zygote:
    """A warm, bubblewrapped process that forks the students' processes (`zygote.zygote`)."""

    def __init__(self, limits, modules):
        self.limits, self.modules = limits, modules
        self.control, theirs = socket.socketpair()
        command, home = zygote_command(theirs.fileno(), modules)
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd="/", env=student_env(home), pass_fds=(theirs.fileno(),),
            preexec_fn=lambda: apply_limits(limits), start_new_session=True)
        theirs.close()
        self.output = OutputDrain(self.process.stdout)
        self.busy = False
        self.early_ready = None  # a "ready" that came while a question about memory was asked
        self.walls = bool(self._expect_ready(120).get("walls"))

    def alive(self):
        return self.process.poll() is None

    def _reply(self, seconds):
        try:
            return channel.receive(self.control.fileno(), time.monotonic() + seconds, max_bytes=4096)
        except channel.ReplyTooLarge:
            raise WireError("the zygote's reply is too long") from None

    def _expect_ready(self, seconds):
        reply, self.early_ready = self.early_ready or self._reply(seconds), None
        while "answer" in reply:  # the late answer to a question about a child that has ended
            reply = self._reply(seconds)
        if not (reply.get("ready") and reply.get("clean")):
            raise WireError(f"the zygote is not clean: {reply}")
        self.busy = False
        return reply

    def ask(self, op):
        """A question to the zygote's watcher about the running child ("mark", "rise"); None if
        the child has ended."""
        if self.early_ready is not None:
            return None
        channel.send(self.control.fileno(), {"op": op}, time.monotonic() + 10)
        reply = self._reply(10)
        if "answer" not in reply:
            self.early_ready = reply
            return None
        return reply["answer"]

    def fork(self):
        channel.send(self.control.fileno(), {"op": "fork", "max_tasks": self.limits.processes,
                                             "max_scratch_bytes": self.limits.scratch_bytes,
                                             "max_memory_bytes": self.limits.memory_bytes}, time.monotonic() + 30)
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

    def memory(self, op):
        """Asked of the zygote, outside the student's namespaces: see `zygote.ProcessWatcher`."""
        try:
            return self.zygote.ask(op)
        except (OSError, TimeoutError, EOFError, WireError):
            return None

    def death(self):
        self._finish()
        return describe_exit_text(self.exit_status) if self.exit_status else "it closed its channel"

    def _finish(self):
        if self.socket is None:
            return
        self.socket.close()
        self.socket = None
        try:
            self.exit_status = self.zygote.child_ended(self.limits.grace_seconds)
        except (OSError, TimeoutError, EOFError, WireError):
            self.zygote.kill()  # a child that does not end, or a namespace left dirty

    def end(self):
        self._finish()
