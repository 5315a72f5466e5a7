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
        self.used = set()  # the student's functions and classes called by name (`check` says what a failure may come from)

    def call(self, target, *args, method=None, keep=False, _time_limit=None, _label=None, _device=None, _forbid=None,
             **kwargs):
        """`_label` says what the call makes (with `keep`) or what it is (a call of a function by
        name), in the words of the messages; `_device`: run it with its tensors there; `_forbid`: the
        functions the exercise's text forbids, which fail the call ({"functions": {where it lives: its
        name in the message}, "why": what to do instead}, `sandbox.calls.Forbidden`)."""
        what = self.called(target, method, args, kwargs, _label)
        if isinstance(target, str):
            self.used.add(target)
        if method == "load_state_dict" and len(args) == 1 and isinstance(args[0], dict) and not kwargs and not keep:
            return self._load(target, args[0], what, _time_limit)
        if _device is not None:
            kwargs["_device"] = _device
        if _forbid is not None:
            kwargs["_forbid"] = _forbid
        try:
            value = self.process.call(target, *args, method=method, keep=keep, _time_limit=_time_limit, **kwargs)
        except StudentError as error:
            raise StudentError(f"{what} raised {student_exception(error)}") from None
        if isinstance(value, Handle):
            self.names[value.ident] = _label or what
        return value

    def _load(self, target, state, what, time_limit=None):
        """The grader's parameters loaded into the student's module around its buffers: a buffer
        (register_buffer, persistent or not) that the grader's state lacks is kept as it is; a
        parameter it lacks, or a name the module lacks, is the student's error, named in full (the
        student's process bounds the message it sends, and a state of many tensors does not fit)."""
        try:
            result = self.process.call(target, state, method="load_state_dict", strict=False, _time_limit=time_limit)
        except StudentError as error:
            raise StudentError(f"{what} raised {student_exception(error)}") from None
        if not (isinstance(result, (tuple, list)) and len(result) == 2 and all(
                isinstance(keys, list) and all(isinstance(k, str) for k in keys) for keys in result)):
            raise StudentError(f"{what} returned {describe(result)}, not nn.Module's (missing_keys, unexpected_keys)")
        missing, unexpected = result
        lacking = _parameter_names(self, target, "your module", missing)
        if unexpected or lacking:
            raise StudentError(f"{what} raised RuntimeError: " + "; ".join(  # as a strict load says it
                ([f"the grader's state has {', '.join(sorted(unexpected))}, which your module lacks"] if unexpected else [])
                + ([f"your module has {', '.join(sorted(lacking))}, which the grader's state lacks"] if lacking else [])))

    def measured_call(self, target, *args, _time_limit=None, _label=None, **kwargs):
        """(value, the largest rise of the memory the student's processes hold during the call)."""
        if isinstance(target, str):
            self.used.add(target)
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


class Shown:
    """An argument shown in a message by words of its own (`words(value)`): a module the grader
    made, by its label. `describe` shows it whole."""

    def __init__(self, value, words):
        self.value, self.words = value, words

    def __repr__(self):
        return self.words(self.value)


def describe(value, names=None):
    """A short description of a value for messages: the values if few, else shape and dtype."""
    if isinstance(value, Shown):
        return repr(value)
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


def tensor(rng, shape, dtype=None, scale=1.0):
    import torch
    return torch.from_numpy(rng.normal(0.0, scale, shape)).to(dtype or torch.float32)


def _pair(value, what):
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise CheckFailure(f"{what} should return a pair (out, weights), got {describe(value)}")
    import torch
    return tuple(torch.as_tensor(np.asarray(v)) for v in value)


def close_enough(got, expected, rtol, atol):
    return got.shape == expected.shape and bool(np.isclose(np.asarray(got, dtype=np.float64),
                                                           np.asarray(expected, dtype=np.float64),
                                                           rtol=rtol, atol=atol).all())


# ---- what several chapters' rules ask of a call --------------------------------------------------

def _parameter_names(student, module, label, names=None):
    """The names, among `names` (else among its state_dict's), of `module`'s parameters: a buffer
    (register_buffer, persistent or not) is not a parameter, and the rules never ask it for one."""
    if names is None:
        state = student.call(module, method="state_dict", _label=label)
        names = list(state) if isinstance(state, dict) else []
    found = []
    for name in names:
        try:
            student.call(module, name, method="get_parameter", keep=True, _label=f"{label}.{name}")
        except StudentError:  # a buffer, or no tensor of that name
            continue
        found.append(name)
    return found


def parameter_shapes(student, module, label):
    """{name: shape} of `module`'s parameters (its buffers left out)."""
    state = student.call(module, method="state_dict", _label=label)
    if not isinstance(state, dict):
        raise CheckFailure(f"{label}.state_dict() returned {describe(state)}, not a dict of tensors")
    return {name: tuple(np.shape(state[name])) for name in _parameter_names(student, module, label, list(state))}


def expect_parameter_shapes(student, module, label, expected, hint=""):
    """`module` holds exactly the parameters `expected` ({name: shape}); its buffers, persistent or
    not, are its own. A stated parameter made a buffer is named as such."""
    found = parameter_shapes(student, module, label)
    if found == expected:
        return
    state = student.call(module, method="state_dict", _label=label)
    buffers = sorted(n for n in expected if n in state and n not in found)
    said = (f"{', '.join(buffers)} {'is a buffer' if len(buffers) == 1 else 'are buffers'} (register_buffer), which "
            f"training never changes: make {'it an nn.Parameter' if len(buffers) == 1 else 'them nn.Parameters'}"
            if buffers else hint)
    raise CheckFailure(f"{label} should have the parameters {expected} (name: shape), found {found} (buffers "
                       "left out: a module may keep any)" + (f": {said}" if said else ""))


def backward_gradients(student, module, loss, names, label, what):
    """`loss.backward()` in the student's process, then {name: the .grad of `module`'s parameter
    `name`} (`names`: its parameters, `_parameter_names`); a backward that fails, or a parameter
    left without a gradient, is the student's failure, described as `what`."""
    try:
        student.call(loss, method="backward", _label=what)
    except StudentError as error:
        graphless = "does not require grad" in str(error)  # PyTorch's words for an output with no graph
        raise CheckFailure(f"{error}" + (": the output carries no gradient graph back to the parameters (no "
                                         "torch.no_grad(), .detach() or .data between them and the output)"
                                         if graphless else "")) from None
    grads = {name: student.call(student.call(module, name, method="get_parameter", keep=True, _label=f"{label}.{name}"),
                                "grad", method="__getattribute__", _label=f"{label}.{name}.grad") for name in names}
    missing = [n for n, g in grads.items() if g is None]
    if missing:
        raise CheckFailure(f"{what}: {', '.join(missing)} got no gradient, so training could never change "
                           f"{'it' if len(missing) == 1 else 'them'}. No torch.no_grad(), .detach() or .data on the "
                           "way from a parameter to the output")
    return grads


IN_PLACE_HINT = "work on new arrays (x - m, q * scale), not in place (x -= m, q *= scale, np.exp(x, out=x))"


def expect_unchanged(student, target, args, names, what, hint=IN_PLACE_HINT, **kwargs):
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
