"""The grader's side of the sandbox: run a student's notebook in its own process and call its
functions there, within the limits (the request protocol; `processes` and `zygotes` hold the
processes themselves, `channel` the framing).

Under bubblewrap a student's process is forked from a warm *zygote* that has already imported
what the assignment needs, so a submission does not pay for numpy or torch; the zygote's
namespace is emptied between submissions. Without bubblewrap each submission gets a fresh
process.
"""
import time

from ..text import bounded  # every message from the student's process, before it is kept
from ..wire import WireError
from .calls import StudentError
from .channel import ReplyTooLarge
from .isolation import bubblewrap_works
from . import answers, processes, zygotes
from .answers import Callbacks, ReferenceWorker
from .limits import Limits
from .protocol import StudentProcess
from .processes import FreshProcess
from .zygotes import ForkedProcess

__all__ = ["Limits", "SandboxedStudent", "StudentError"]


def kill_sandboxes_here():
    """SIGKILL the student processes and the zygote this process started (Ctrl-C): their
    owners' code then finds them dead and closes them at once."""
    processes.kill_running()
    zygotes.kill_running()
    answers.kill_running()


def open_process(limits, modules):
    return ForkedProcess(limits, modules) if bubblewrap_works() else FreshProcess(limits, modules)


class SandboxedStudent(StudentProcess):
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
        self.known_good = None  # the request that put the stand-ins in place, re-sent after a restart
        self.callbacks = Callbacks()  # name -> function: what a probe may ask the grader during a call
        self.reference = ReferenceWorker(limits.reply_bytes)  # where the grader computes those answers
        self.requests = 0       # each request's id: a reply to another one is dropped
        self.seconds = {}       # stage -> seconds ("start": the process, "cells": the notebook's cells)
        self._start()

    def start_exercise(self):
        """Calls from now on count against a new exercise's time budget."""
        self.exercise_deadline = time.monotonic() + self.limits.exercise_seconds

    # -- the interface the checks use -------------------------------------------------------

    def call(self, target, *args, method=None, keep=False, _time_limit=None, _device=None, _forbid=None, **kwargs):
        seconds = _time_limit or self.limits.call_seconds
        request = {"op": "call", "target": target, "args": list(args), "kwargs": kwargs,
                   "method": method, "keep": keep, "seconds": float(seconds), "device": _device, "forbid": _forbid}
        name = "a method of your object" if not isinstance(target, str) else target
        return self._request(request, f"calling {name}", seconds)

    def measured_call(self, target, *args, _time_limit=None, **kwargs):
        """(`call`'s value, the largest rise of the memory held by all the student's processes
        during the call), measured outside the student's reach (`zygote.ProcessWatcher`)."""
        if self.process is None or self.process.memory("mark") is None:
            raise StudentError("its memory could not be measured: your notebook's process had stopped")
        value = self.call(target, *args, _time_limit=_time_limit, **kwargs)
        rise = self.process.memory("rise") if self.process is not None else None
        if rise is None:
            raise StudentError("its memory could not be measured: your notebook's process ended during the call")
        return value, rise

    def use_known_good(self, spec, probes=()):
        """Stand-ins for the exercises already checked replace the student's own; their calls
        come back as the callback `known_good`, which the checks register."""
        self.known_good = {"op": "known_good", "spec": spec, "probes": list(probes),
                           "seconds": self.limits.call_seconds}
        self._request(self.known_good, "loading known-good versions of the earlier exercises", self.limits.call_seconds)

    # -- the process ------------------------------------------------------------------------

    def _start(self):
        started = time.perf_counter()
        try:
            self.process = open_process(self.limits, self.modules)
        except (OSError, TimeoutError, EOFError, WireError) as error:
            self.process = None
            self.cell_errors = {None: f"the grader could not start a process for your notebook ({error})"}
            self.restarts_left = 0
            return
        self.seconds["start"] = self.seconds.get("start", 0.0) + time.perf_counter() - started
        started = time.perf_counter()
        try:
            self._send({"op": "run", "cells": [list(c) for c in self.cells], "cell_seconds": self.limits.cell_seconds},
                       "sending your notebook's cells", self.limits.notebook_seconds)
            reply = self._receive(self.limits.notebook_seconds, "running your notebook")
            self.cell_errors = {index: bounded(error) for index, error in reply["cells"][:100_000] if error}
        except StudentError as error:
            self.cell_errors = {None: str(error)}
            self.restarts_left = 0  # the notebook itself does not run: starting again would not help
        finally:
            self.seconds["cells"] = self.seconds.get("cells", 0.0) + time.perf_counter() - started

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
        self.requests += 1
        self._send(dict(request, id=self.requests), doing, seconds + self.limits.grace_seconds)
        reply = self._receive(seconds + self.limits.grace_seconds, doing, self.requests)
        if "error" in reply:
            raise StudentError(bounded(reply["error"]))
        return reply["value"]

    def _answer(self, question, seconds):
        """The grader's answer to a probe's question: only the callbacks a check has registered,
        computed in the student's reference worker (`answers.py`), within the `seconds` left to the
        student's call; whatever goes wrong is the student's call's error, not the grader's."""
        started = time.perf_counter()
        try:
            answer = self.reference.answer(self.callbacks, question.get("callback"), question.get("args"), seconds,
                                           question.get("q"))
        finally:
            self.seconds["grader's answers"] = self.seconds.get("grader's answers", 0.0) + time.perf_counter() - started
        return answer if isinstance(answer, bytes) else dict(answer, q=question.get("q"))

    def _send(self, request, doing, seconds):
        try:
            self.process.send(request, seconds)
        except TimeoutError:
            self._fail(f"time limit: your notebook's process stopped reading while {doing}")

    def _receive(self, seconds, doing, request_id=None):
        """The reply to request `request_id` (the notebook's run: None), answering the questions
        asked meanwhile; a frame that answers anything else (a reply that came after its time) is
        dropped, so the channel stays in step whatever times out."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                reply = self.process.receive(max(deadline - time.monotonic(), 0.1), self.limits.reply_bytes)
                if isinstance(reply, dict) and "callback" in reply:  # a probe asks the grader, mid-call
                    answer = self._answer(reply, max(deadline - time.monotonic(), 0.1))
                    send = self.process.send_frame if isinstance(answer, bytes) else self.process.send
                    send(answer, max(deadline - time.monotonic(), 0.1))
                elif isinstance(reply, dict) and reply.get("id") == request_id:
                    break
                elif not (isinstance(reply, dict) and "id" in reply):
                    failure = f"unreadable reply while {doing}"
                    self._fail(failure)
            if "value" in reply or "error" in reply or "cells" in reply:
                return reply
            failure = f"unreadable reply while {doing}"
        except ReplyTooLarge as error:
            raise StudentError(f"{doing}: returned {error}") from None
        except TimeoutError:
            failure = f"time limit: {doing} took more than {seconds:g} s"
        except EOFError:
            failure = f"your notebook's process ended while {doing} ({self.process.death()})"
        except WireError as error:
            failure = f"unreadable reply while {doing}: {error}"
        self._fail(failure)

    def _fail(self, failure):
        """End the process (the next call starts a new one, if restarts are left) and say why."""
        self.process.end()
        self.process = None
        self.last_failure = failure
        raise StudentError(failure)

    def close(self):
        self.reference.end()
        if self.process is not None:
            self.process.end()
            self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
