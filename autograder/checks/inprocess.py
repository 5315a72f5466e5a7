"""The student's code in this very process: nbgrader's hidden test cells grade this way.

Results take the same safe round trip as from the sandbox, so both graders see the same values.
"""
from typing import Any, Callable

from ..sandbox.calls import CallError, StudentError, StudentNamespace
from ..sandbox.protocol import StudentProcess
from ..wire import Handle, WireError, roundtrip


class InProcessStudent(StudentProcess):
    def __init__(self, namespace: dict[str, Any]) -> None:
        self.callbacks: dict[str, Callable[..., Any]] = {}  # as SandboxedStudent's: what a probe may ask the grader during a call
        self.calls = StudentNamespace(namespace, self._ask)

    def _ask(self, name: str, *args: Any) -> Any:
        if name not in self.callbacks:
            raise RuntimeError("the grader answers no such question now")
        return roundtrip(self.callbacks[name](*roundtrip(list(args))))

    def call(self, target: "str | Handle", *args: Any, method: str | None = None, keep: bool = False,
             _time_limit: float | None = None, _device: str | None = None, _forbid: Any = None, **kwargs: Any) -> Any:
        """`target(*args, **kwargs)` (or `target.method(...)`): a plain value, or a Handle to the
        result if `keep`; with `_device`, run there and described; with `_forbid`, failing if it calls
        a function the exercise's text forbids (`StudentNamespace.call`). `_time_limit` (seconds)
        matters only in the sandbox."""
        try:
            # the student's code gets copies, as in the sandbox: changing them in place
            # cannot change what the reference is then given
            args, kwargs = roundtrip((list(args), kwargs))
            result = self.calls.call(target, args, kwargs, method=method, keep=keep, device=_device, forbid=_forbid)
            return result if isinstance(result, Handle) else roundtrip(result)
        except (CallError, WireError) as error:
            raise StudentError(str(error)) from None

    def measured_call(self, target: "str | Handle", *args: Any, _time_limit: float | None = None,
                      **kwargs: Any) -> tuple[Any, int]:
        """(`call`'s value, the largest rise of this process's resident memory during the call).
        nbgrader runs the student's code in the kernel that grades it: this is measured there,
        by a thread, and is only as trustworthy as that kernel (the autograder measures from
        outside the student's processes)."""
        import threading
        sampled, done = [_resident_bytes()], threading.Event()

        def watch():
            while not done.wait(0.001):
                sampled.append(_resident_bytes())
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            value = self.call(target, *args, **kwargs)
        finally:
            done.set()
            watcher.join()
        sampled.append(_resident_bytes())
        lowest, rise = sampled[0], 0
        for resident in sampled:
            lowest = min(lowest, resident)
            rise = max(rise, resident - lowest)
        return value, rise

    def use_known_good(self, spec: Any, probes: Any = ()) -> None:
        self.calls.use_known_good(roundtrip(spec), roundtrip(list(probes)))

    def restore(self) -> None:
        """The notebook's own definitions back (nbgrader's kernel runs on after the test cell)."""
        self.calls.restore()


def _resident_bytes() -> int:
    from ..sandbox.procfs import resident_bytes
    import os
    return resident_bytes(os.getpid())
