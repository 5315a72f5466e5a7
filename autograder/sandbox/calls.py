"""Calling the student's code by name, in the process where it lives (worker or kernel)."""
import traceback

from ..wire import Handle, WireError, to_plain


class CallError(Exception):
    """The student's code raised or could not be called; the message is for the student."""


class StudentNamespace:
    """A notebook's globals, plus the objects the grader asked to keep (models, say)."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.objects = {}

    def call(self, target, args=(), kwargs=None, method=None, keep=False):
        """Plain result of `target(*args, **kwargs)` (or of its `method`); a Handle if `keep`."""
        function = self._resolve(target, method)
        args = [self._unwrap(a) for a in args]
        kwargs = {k: self._unwrap(v) for k, v in (kwargs or {}).items()}
        try:
            result = function(*args, **kwargs)
        except Exception as error:
            raise CallError(describe_exception(error)) from None
        if keep:
            handle = Handle(len(self.objects) + 1)
            self.objects[handle.ident] = result
            return handle
        try:
            return to_plain(result)
        except WireError as error:
            raise CallError(f"{_name(target, method)} returned {error}") from None

    def _resolve(self, target, method):
        if isinstance(target, Handle):
            obj = self.objects[target.ident]
        elif target in self.namespace:
            obj = self.namespace[target]
        else:
            raise CallError(f"`{target}` is not defined in your notebook (was it renamed, or did its cell fail?)")
        if method is not None:
            try:
                obj = getattr(obj, method)
            except Exception as error:
                raise CallError(describe_exception(error)) from None
        if not callable(obj):
            raise CallError(f"`{_name(target, method)}` is a {type(obj).__name__}, not a function")
        return obj

    def _unwrap(self, value):
        if isinstance(value, Handle):
            return self.objects[value.ident]
        if type(value) in (list, tuple):
            return type(value)(self._unwrap(v) for v in value)
        return value


def _name(target, method):
    base = "the object" if isinstance(target, Handle) else target
    return f"{base}.{method}" if method else base


def describe_exception(error):
    """`Type: message (cell N, line L)`, pointing into the student's code, not the grader's."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<cell")]
    where = f" (notebook {frames[-1].filename[1:-1]}, line {frames[-1].lineno})" if frames else ""
    message = str(error)
    return f"{type(error).__name__}: {message[:300]}{where}" if message else f"{type(error).__name__}{where}"
