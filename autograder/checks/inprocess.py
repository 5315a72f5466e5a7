"""The student's code in this very process: nbgrader's hidden test cells grade this way.

Results take the same safe round trip as from the sandbox, so both graders see the same values.
"""
from ..sandbox.calls import CallError, StudentError, StudentNamespace
from ..wire import Handle, WireError, roundtrip


class InProcessStudent:
    def __init__(self, namespace):
        self.calls = StudentNamespace(namespace)

    def call(self, target, *args, method=None, keep=False, _time_limit=None, **kwargs):
        """`target(*args, **kwargs)` (or `target.method(...)`): a plain value, or a Handle to the
        result if `keep`. `_time_limit` (seconds) matters only in the sandbox."""
        try:
            # the student's code gets copies, as in the sandbox: changing them in place
            # cannot change what the reference is then given
            args, kwargs = roundtrip((list(args), kwargs))
            result = self.calls.call(target, args, kwargs, method=method, keep=keep)
            return result if isinstance(result, Handle) else roundtrip(result)
        except (CallError, WireError) as error:
            raise StudentError(str(error)) from None

    def use_known_good(self, sources, names):
        self.calls.use_known_good(sources, names)

    def restore(self):
        """The notebook's own definitions back (nbgrader's kernel runs on after the test cell)."""
        self.calls.restore()
