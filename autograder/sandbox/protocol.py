"""What the checks ask of a student's code, wherever it runs: `SandboxedStudent` (the autograder: its
own process, within the limits) and `InProcessStudent` (nbgrader's kernel) both are one."""
from typing import Any, Callable, Protocol

from ..wire import Handle


class StudentProcess(Protocol):
    callbacks: dict[str, Callable[..., Any]]  # what the student's code may ask the grader mid-call (probes, stand-ins)

    def call(self, target: "str | Handle", *args: Any, method: str | None = None, keep: bool = False,
             _time_limit: float | None = None, _device: str | None = None, _forbid: Any = None,
             **kwargs: Any) -> Any:
        """`target(*args, **kwargs)` (or `target.method(...)`) in the student's code: a plain value
        (`wire`), or a Handle to it with `keep`; `StudentError` says what went wrong there."""
        ...

    def measured_call(self, target: "str | Handle", *args: Any, _time_limit: float | None = None,
                      **kwargs: Any) -> tuple[Any, int]:
        """(`call`'s value, the largest rise in bytes of the memory the student's code held during it)."""
        ...

    def use_known_good(self, spec: Any, probes: Any = ()) -> None:
        """Stand-ins, computed by the grader, in place of the exercises already graded."""
        ...
