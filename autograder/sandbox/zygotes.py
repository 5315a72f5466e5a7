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
from . import channel, lifeline, seccomp
from .isolation import apply_limits, memory_guards, zygote_command
from .processes import (OutputDrain, StudentProcess, describe_exit_text, memory_limit_text, student_cgroup,
                        student_env)


CGROUP_TASK_MARGIN = 16  # processes the watcher tolerates above a cgroup's own limit


class Zygote:
    """A warm, bubblewrapped process that forks the students' processes (`zygote.zygote`)."""

    def __init__(self, limits, modules):
        self.limits, self.modules = limits, modules
        self.control, theirs = socket.socketpair()
        self.use_cgroups, self.use_seccomp = memory_guards()
        # bwrap loads the filter into the zygote and all it forks; the zygote makes each student's
        # socketpair, and its child refuses sockets before any student code runs ("refuse_sockets")
        filter_fd = seccomp.program_fd(seccomp.zygote_program()) if self.use_seccomp else None
        command, home = zygote_command(theirs.fileno(), modules, scratch_bytes=limits.scratch_bytes,
                                       seccomp_fd=filter_fd)
        fds = (theirs.fileno(),) + ((filter_fd,) if filter_fd is not None else ())
        grader = os.getpid()

        def prepare():  # bwrap --die-with-parent does it too, after its own changes of identity
            apply_limits(limits)
            lifeline.die_with_parent(grader)

        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd="/", env=student_env(home), pass_fds=fds, preexec_fn=prepare, start_new_session=True)
        finally:
            theirs.close()
            if filter_fd is not None:
                os.close(filter_fd)
        self.output = OutputDrain(self.process.stdout)
        self.busy = False
        self.early_ready = None  # a "ready" that came while a question about memory was asked
        self.walls = bool(self._expect_ready(120).get("walls"))
        self.host_pid = self._find_zygote() if self.use_cgroups else None

    def _find_zygote(self):
        """The zygote's PID on the host: at the end of the chain bwrap, bwrap (the sandbox's init),
        zygote, each the only child of the one before (it has no child yet)."""
        pid = self.process.pid
        for _ in range(8):
            below = _children(pid)
            if not below:
                return pid
            if len(below) > 1:
                break
            pid = below[0]
        raise WireError("the zygote's process could not be found")

    def forked_child(self):
        """The zygote's child just forked (its host PID): the zygote's only child between forks."""
        children = _children(self.host_pid)
        if len(children) != 1:
            raise WireError(f"the zygote has {len(children)} children, not one")
        return children[0]

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
        # With a cgroup, its pids limit refuses the fork past the limit, in the kernel, and the
        # notebook goes on; the watcher's count (a sampled one) then only backs it up, a margin
        # above, so that the two never race to decide the same flood two ways.
        max_tasks = self.limits.processes + (CGROUP_TASK_MARGIN if self.use_cgroups else 0)
        channel.send(self.control.fileno(), {"op": "fork", "max_tasks": max_tasks,
                                             "max_scratch_bytes": self.limits.scratch_bytes,
                                             "max_memory_bytes": self.limits.memory_bytes,
                                             "refuse_sockets": self.use_seccomp}, time.monotonic() + 30)
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


def _children(pid):
    """The processes whose parent is `pid` (host PIDs)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    if int(stat.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


_zygote = None  # one per grading process: the last one used


def kill_running():
    """SIGKILL this process's zygote, and with it its sandbox, waiting for nothing (Ctrl-C)."""
    if _zygote is not None and _zygote.alive():
        try:
            os.killpg(_zygote.process.pid, signal.SIGKILL)
        except OSError:
            pass


def _zygote_for(limits, modules):
    """This process's zygote, if it has imported at least `modules`; else a new one that imports
    these and what the last one had: the assignments come in order, and after the first that
    needs PyTorch one zygote serves the rest (it starts in seconds; a fork in milliseconds)."""
    global _zygote
    wanted = tuple(modules)
    if _zygote is not None and (not _zygote.alive() or _zygote.busy or not set(wanted) <= set(_zygote.modules)
                                or _zygote.limits != limits):
        if _zygote.alive() and _zygote.limits == limits:
            wanted = tuple(dict.fromkeys([*_zygote.modules, *wanted]))
        _zygote.kill()
        _zygote = None
    if _zygote is None:
        _zygote = Zygote(limits, wanted)
    return _zygote


class ForkedProcess(StudentProcess):
    """A student's process forked from the zygote, on its own socket."""

    def __init__(self, limits, modules):
        self.limits = limits
        self.cgroup, self.memory_limit_reached = None, False
        for attempt in range(2):  # a zygote that fails to fork is replaced once
            try:
                self.zygote = _zygote_for(limits, modules)
                self.socket = self.zygote.fork()
                if self.zygote.use_cgroups:
                    self._enter_cgroup(limits)
                break
            except (OSError, TimeoutError, EOFError, WireError):
                if _zygote is not None:
                    _zygote.kill()
                    globals()["_zygote"] = None
                if attempt:
                    raise
        self.read_fd = self.write_fd = self.socket.fileno()
        self.exit_status = None

    def _enter_cgroup(self, limits):
        """The child and the student's process it forks (`walls`) into a cgroup of their own,
        before the grader sends the notebook: until then they run nothing of the student's."""
        self.cgroup = student_cgroup(limits, extra_tasks=2)  # the waiting child, and a margin
        if self.cgroup is None:
            return
        try:
            self.cgroup.adopt_tree(self.zygote.forked_child())
        except (OSError, WireError):
            self.socket.close()  # the zygote is replaced (`__init__`)
            self.cgroup.remove()
            self.cgroup = None
            raise

    def memory(self, op):
        """Asked of the zygote, outside the student's namespaces: see `zygote.ProcessWatcher`."""
        try:
            return self.zygote.ask(op)
        except (OSError, TimeoutError, EOFError, WireError):
            return None

    def death(self):
        self._finish()
        if self.memory_limit_reached:
            return memory_limit_text(self.limits.memory_bytes)
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
        if self.cgroup is not None:
            self.memory_limit_reached = self.cgroup.memory_limit_reached()
            self.cgroup.remove()
            self.cgroup = None

    def end(self):
        self._finish()
