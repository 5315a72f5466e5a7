"""Calling the student's code from a rule or a check, and saying what went wrong."""
import sys

import numpy as np

from ..sandbox.calls import StudentError
from ..wire import Handle
from .register import CheckFailure


class Student:
    """The student's code as the checks call it: a failing call names its input, and an object the
    student's process holds is named by the call that made it."""

    def __init__(self, process):
        self.process = process
        self.names = {}  # Handle ident: what the object is, for messages

    def call(self, target, *args, method=None, keep=False, _time_limit=None, _label=None, _device=None, **kwargs):
        """`_label` says what the call makes (with `keep`) or what it is (a call of a function by
        name), in the words of the messages; `_device`: run it with its tensors there."""
        what = self.called(target, method, args, kwargs, _label)
        if _device is not None:
            kwargs["_device"] = _device
        try:
            value = self.process.call(target, *args, method=method, keep=keep, _time_limit=_time_limit, **kwargs)
        except StudentError as error:
            keys = self._keys(target, method, args)
            shown = f"{student_exception(error).split(':')[0]}: {keys}" if keys else student_exception(error)
            raise StudentError(f"{what} raised {shown}") from None
        if isinstance(value, Handle):
            self.names[value.ident] = _label or what
        return value

    def _keys(self, target, method, args):
        """After a failed load_state_dict, the names that differ, in full (the student's process
        bounds the message it sends, and a state of many tensors does not fit)."""
        if method != "load_state_dict" or not args or not isinstance(args[0], dict):
            return ""
        try:
            have = set(self.process.call(target, method="state_dict"))
        except (StudentError, TypeError):
            return ""
        want = set(args[0])
        missing, unexpected = sorted(have - want), sorted(want - have)
        return "; ".join(([f"the grader's state has {', '.join(unexpected)}, which your module lacks"] if unexpected else [])
                         + ([f"your module has {', '.join(missing)}, which the grader's state lacks"] if missing else []))

    def measured_call(self, target, *args, _time_limit=None, _label=None, **kwargs):
        """(value, the largest rise of the memory the student's processes hold during the call)."""
        try:
            return self.process.measured_call(target, *args, _time_limit=_time_limit, **kwargs)
        except StudentError as error:
            what = self.called(target, None, args, kwargs, _label)
            raise StudentError(f"{what} raised {student_exception(error)}") from None

    def called(self, target, method, args, kwargs, label=None):
        """A call, shown once: a function's by its name (or its label, which shows the call), an
        object's by what it is (the label, else the call that made it)."""
        if isinstance(target, str):
            return label or called(target, method, args, kwargs, self.names)
        name = label or self.names.get(target.ident, "your object")
        shown = called(name, method, args, kwargs, self.names)
        if method in (None, "__call__") and not name.endswith(")"):  # "… loaded into it, on (x)"
            shown = f"{name}, on {shown[len(name):]}"
        return shown


def student_exception(error):
    """`KeyError: 'x' (in f, code cell 3, line 2)`: the student's exception, once, without the
    grader's wrappers."""
    text = str(error)
    return text if text else type(error).__name__


def called(target, method, args, kwargs, names=None):
    """`name(the inputs, described)`, as the messages show a call."""
    name = target if isinstance(target, str) else "your object"
    if method == "__call__" or method is None:
        method = None
    elif method in ("load_state_dict", "state_dict", "double", "get_parameter"):
        args, kwargs = (), {}  # the grader's own plumbing: its arguments say nothing to the student
    shown = ", ".join([describe(a, names) for a in args] + [f"{k}={describe(v, names)}" for k, v in kwargs.items()])
    return f"{name}.{method}({shown})" if method else f"{name}({shown})"


def describe(value, names=None):
    """A short description of a value for messages: the values if few, else shape and dtype."""
    torch = sys.modules.get("torch")
    if isinstance(value, np.ndarray) or (torch is not None and isinstance(value, torch.Tensor)):
        kind = "array" if isinstance(value, np.ndarray) else "tensor"
        dtype = str(value.dtype).replace("torch.", "")
        if int(np.prod(tuple(value.shape), dtype=int)) <= 6:
            return f"{dtype} {kind} {value.tolist()}"
        return f"{dtype} {kind} of shape {tuple(value.shape)}"
    if isinstance(value, Handle):
        return (names or {}).get(value.ident, "your object")
    if isinstance(value, (tuple, list)) and len(value) <= 4:
        inner = ", ".join(describe(v, names) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v, names)}" for k, v in list(value.items())[:6]) + "}"
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} {text[:57]}..."


def _tensor(rng, shape, dtype=None, scale=1.0):
    import torch
    return torch.from_numpy(rng.normal(0.0, scale, shape)).to(dtype or torch.float32)


def _pair(value, what):
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise CheckFailure(f"{what} should return a pair (out, weights), got {describe(value)}")
    import torch
    return tuple(torch.as_tensor(np.asarray(v)) for v in value)


def _close(got, expected, rtol, atol):
    return got.shape == expected.shape and bool(np.isclose(np.asarray(got, dtype=np.float64),
                                                           np.asarray(expected, dtype=np.float64),
                                                           rtol=rtol, atol=atol).all())


# ---- what several chapters' rules ask of a call --------------------------------------------------

def _backward_gradients(student, module, loss, names, label, what):
    """`loss.backward()` in the student's process, then {name: the .grad of `module`'s parameter
    `name`}; a backward that fails, a name that is no parameter, or a parameter left without a
    gradient is the student's failure, described as `what`."""
    try:
        student.call(loss, method="backward", _label=what)
        grads = {name: student.call(student.call(module, name, method="get_parameter", keep=True, _label=f"{label}.{name}"),
                                    "grad", method="__getattribute__", _label=f"{label}.{name}.grad") for name in names}
    except StudentError as error:
        raise CheckFailure(f"{error}: training needs the gradient of every parameter (a parameter is an nn.Parameter, "
                           "not a buffer; no torch.no_grad(), .detach() or .data between it and the output)") from None
    missing = [n for n, g in grads.items() if g is None]
    if missing:
        raise CheckFailure(f"{what}: {', '.join(missing)} got no gradient, so training could never change "
                           f"{'it' if len(missing) == 1 else 'them'}. No torch.no_grad(), .detach() or .data on the "
                           "way from a parameter to the output")
    return grads


IN_PLACE_HINT = "work on new arrays (x - m, q * scale), not in place (x -= m, q *= scale, np.exp(x, out=x))"


def _expect_unchanged(student, target, args, names, what, hint=IN_PLACE_HINT, **kwargs):
    """`target(*args, **kwargs)` run on copies of `args` that the student's process keeps, which
    must be as they were after the call; `hint` says how to leave them so. Returns the call's result,
    which the caller compares with the right one: a rule about the arguments holds only on a call
    that also computes what it should (`return None` leaves its arguments alone too)."""
    kept = [student.call("np", a, method="copy", keep=True, _label=name) if isinstance(a, np.ndarray) else
            student.call("torch", a, method="clone", keep=True, _label=name) for a, name in zip(args, names)]
    result = student.call(target, *kept, _label=what, **kwargs)
    for before, handle, name in zip(args, kept, names):
        after = np.asarray(student.call(handle, method="copy" if isinstance(before, np.ndarray) else "clone", _label=name))
        if not np.array_equal(after, np.asarray(before), equal_nan=True):
            differ = ~((after == np.asarray(before)) | (np.isnan(after) & np.isnan(np.asarray(before))))
            index = tuple(int(i) for i in np.argwhere(differ)[0])
            raise CheckFailure(f"{what} changed its argument {name} in place ({name}{list(index)} was "
                               f"{np.asarray(before)[index]:.6g}, is {after[index]:.6g} after the call): {hint}")
    return result
