"""The grader's answers to a student's questions, computed in a process of their own.

A stand-in or a probe in the student's process asks the grader mid-call (`session._receive`), and
the answer runs reference code on what the student sent. Computed in the grader, it had none of
the student's bounds: two ints made it build a 5 GB mask, and a memory limit then killed the whole
class's run. Here every answer is computed in a *reference worker*: a child forked from the grader
(so it holds the callbacks as the checks registered them, and the references already loaded),
one per student and generation of callbacks, with bounds of its own: address space over what it
was forked with, CPU time, files, no new privileges and the student's seccomp filter, one thread;
and the student's call's time, after which the grader kills it. If it dies or goes over, the
student's call fails with the reason (it is charged to the student's exercise), the next question
forks a new one, and the grader and the other students are untouched. Nothing here knows what a
callback computes: a callback is any callable the checks put in `Callbacks`; the attributes it
names in `shared` (plain data, such as a probe's count of calls) are copied back after each answer.
"""
import os
import resource
import signal
import sys
import time
import weakref

import numpy as np

from ..text import bounded
from ..wire import WireError, frame
from . import channel, lifeline, seccomp

ADDRESS_SPACE_BYTES = 2**30   # a worker's memory beyond what it was forked with (the answers need ~0.2 GB)
CPU_SECONDS = 120             # a worker's CPU time; each answer is also bounded by its call's time
OPEN_FILES = 64


class Callbacks(dict):
    """What the student's process may ask the grader now, by name. Every change is a new
    generation: the worker forked with the old callbacks is replaced at the next question."""

    def __init__(self):
        super().__init__()
        self.generation = 0

    def __setitem__(self, name, callback):
        super().__setitem__(name, callback)
        self.generation += 1

    def __delitem__(self, name):
        super().__delitem__(name)
        self.generation += 1

    def pop(self, name, *default):
        self.generation += 1
        return super().pop(name, *default)


class ReferenceWorker:
    """One student's reference worker: `answer(callbacks, name, args, seconds)`."""

    def __init__(self, reply_bytes=64 * 2**20):
        _warm_once()  # here, before any call: a student's call waits for its answers, never for the grader's set-up
        self.reply_bytes = reply_bytes
        self.pid = self.to_fd = self.from_fd = None
        self.serving = None   # (the Callbacks, its generation) the worker was forked with
        self.forks = 0

    def answer(self, callbacks, name, args, seconds, question=None):
        """The answer as the student's process reads it: a frame's bytes, made by the worker (the
        grader passes them on without reading them again: the answers of a training loop are many),
        or {"error": why} when it is refused, fails, or is past `seconds`. `question`: its number."""
        if not isinstance(name, str) or name not in callbacks or not isinstance(args, list):
            return {"error": "the grader answers no such question now"}
        if self.pid is None or self.serving != (id(callbacks), callbacks.generation):
            self.end()
            self._fork(callbacks)
        deadline = time.monotonic() + seconds
        try:
            channel.send(self.to_fd, {"name": name, "args": args, "q": question}, deadline)
            reply = channel.receive(self.from_fd, deadline, self.reply_bytes)
        except TimeoutError:
            self.end()
            return {"error": f"time limit: the grader's answer took more than the call's {seconds:.3g} s left"}
        except (EOFError, OSError, WireError, channel.ReplyTooLarge) as error:
            why = self._death() if isinstance(error, (EOFError, OSError)) else str(error)
            self.end()
            return {"error": f"the grader could not answer: {why}"}
        for attribute, value in (reply.get("shared") or {}).items():
            if attribute in getattr(callbacks[name], "shared", ()):
                setattr(callbacks[name], attribute, value)
        if "frame" in reply:
            return reply["frame"].tobytes()
        return {"error": bounded(str(reply.get("error")))}

    def _fork(self, callbacks):
        _warm_once()  # no-op unless torch came after __init__
        to_child, self.to_fd = os.pipe()
        self.from_fd, from_child = os.pipe()
        grader = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            code = 1
            try:
                _serve(callbacks, to_child, from_child, grader)
                code = 0
            finally:
                os._exit(code)
        os.close(to_child)
        os.close(from_child)
        self.pid, self.serving = pid, (id(callbacks), callbacks.generation)
        self.forks += 1
        _running.add(self)

    def _death(self):
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "its process ended"
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            if signum == signal.SIGXCPU:
                return f"its process used up its {CPU_SECONDS} s of CPU time"
            return f"its process was killed ({signal.Signals(signum).name})"
        return f"its process ended (exit code {os.WEXITSTATUS(status)})"

    def end(self):
        """Kill the worker (its state goes with it) and wait for it."""
        _running.discard(self)
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        for fd in (self.to_fd, self.from_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.pid = self.to_fd = self.from_fd = self.serving = None

    def kill_now(self):
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


_running = weakref.WeakSet()
_warmed = False


def _warm_once():
    """PyTorch's set-up for `meta` (1 s), done in the grader once it holds torch: each worker forked
    starts with it done."""
    global _warmed
    if not _warmed and "torch" in sys.modules:
        from .worker import warm_meta_device
        warm_meta_device()
        _warmed = True


def kill_running():
    for worker in list(_running):
        worker.kill_now()


def _serve(callbacks, read_fd, write_fd, grader):
    """In the worker: bound this process, then answer questions until the grader closes the channel."""
    _bound(keep=(read_fd, write_fd), grader=grader)
    while True:
        try:
            question = channel.receive(read_fd, time.monotonic() + 86400, 2**31)
        except (EOFError, TimeoutError, OSError):
            return
        callback = callbacks[question["name"]]
        try:
            answer = {"value": callback(*question["args"]), "q": question["q"]}
            reply = {"frame": np.frombuffer(frame(answer), dtype=np.uint8)}  # the student's frame, made here
        except WireError as error:
            reply = {"error": bounded(f"the answer cannot be sent: {error}")}
        except Exception as error:  # noqa: BLE001 (MemoryError included: the student's call's error)
            # the student's side raises it as a RuntimeError: its name is not said twice
            said = str(error) if type(error) is RuntimeError else f"{type(error).__name__}: {error}"
            reply = {"error": bounded(said)}
        reply["shared"] = {a: getattr(callback, a) for a in getattr(callback, "shared", ())}
        try:
            channel.send(write_fd, reply, time.monotonic() + 60)
        except (TimeoutError, OSError, WireError):
            return


def _bound(keep, grader):
    """The worker's bounds, set once it is forked: it dies with the grader, holds no other file of
    the grader's, runs one thread, and cannot grow past ADDRESS_SPACE_BYTES nor run for ever."""
    lifeline.die_with_parent(grader)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the grader's: it kills this worker
    signal.setitimer(signal.ITIMER_REAL, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the references' warnings are nobody's to read
    for fd in _open_fds():
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    _lower(resource.RLIMIT_AS, _address_space() + ADDRESS_SPACE_BYTES)
    _lower(resource.RLIMIT_CPU, CPU_SECONDS)
    _lower(resource.RLIMIT_NOFILE, OPEN_FILES)
    _lower(resource.RLIMIT_FSIZE, 0)  # it writes no file (SIGXFSZ ignored: the write fails)
    _lower(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    seccomp.install()  # the student's filter: no memfd, no System V memory, no foreign syscall table


def _lower(kind, value):
    """Set a limit to `value`, or leave it where the grader's own is lower (an instructor's
    `ulimit -v`): raising a hard limit would fail, and the worker with it."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _open_fds():
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def _address_space():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0
