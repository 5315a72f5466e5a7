"""What a check is, how it fails, and the comparisons every check uses.

A check is a function `check(student, ref)`: it calls the student's code through `student`
(in this process for nbgrader, in a sandboxed process for the autograder; results are plain
values either way), computes the expected values with the reference solution `ref`, and
raises CheckFailure with a message for the student when they differ.
"""
import zlib
from dataclasses import dataclass

import numpy as np

from ..wire import to_plain, roundtrip


class CheckFailure(AssertionError):
    """The student's code gave a wrong answer; the message says on which input and how."""


class StudentError(Exception):
    """The student's code raised, timed out or could not be called; the message says so."""


@dataclass(frozen=True)
class Check:
    assignment: str
    exercise: str
    name: str          # short description, shown in the feedback
    weight: float      # the exercise's points are split over its checks by weight
    run: callable


_REGISTRY = {}


def check(exercise, name, weight=1.0):
    """Decorator: register a check of `exercise` in the calling module's ASSIGNMENT."""
    def register(function):
        assignment = function.__globals__["ASSIGNMENT"]
        _REGISTRY.setdefault(assignment, []).append(Check(assignment, exercise, name, weight, function))
        return function
    return register


def registered(assignment, exercise=None):
    return [c for c in _REGISTRY.get(assignment, []) if exercise is None or c.exercise == exercise]


def rng_for(name):
    """A generator seeded by a check's name: the same inputs on every run and in both graders."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def plain(value):
    """The reference's value as the grader sees the student's: through the same safe format."""
    return roundtrip(to_plain(value))


def describe(value):
    """A short description of an input for messages: shape and dtype, or the value itself."""
    torch = _torch()
    if isinstance(value, np.ndarray) or (torch is not None and isinstance(value, torch.Tensor)):
        kind = "array" if isinstance(value, np.ndarray) else "tensor"
        shape = tuple(value.shape)
        if np.prod(shape, dtype=int) <= 8:
            return f"{kind} {np.asarray(value).tolist()} ({str(value.dtype).replace('torch.', '')})"
        return f"{kind} of shape {shape} ({str(value.dtype).replace('torch.', '')})"
    return repr(value)


def _torch():
    import sys
    return sys.modules.get("torch")


def _as_numpy(value, what):
    torch = _torch()
    if isinstance(value, np.ndarray):
        return value, "NumPy array"
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy(), "torch tensor"
    raise CheckFailure(f"{what}: expected an array, got {type(value).__name__} {value!r:.80}")


def _fmt_index(index):
    return "(" + ", ".join(str(int(i)) for i in index) + ")" if len(index) != 1 else f"[{int(index[0])}]"


def expect_close(got, expected, what, rtol=1e-6, atol=1e-9, check_dtype=True):
    """Compare an array result with the reference: type, shape, dtype, NaN/inf placement, values."""
    expected_array, expected_kind = _as_numpy(expected, what)
    if np.isscalar(got) and not isinstance(got, (str, bytes)) and expected_array.ndim == 0:
        got = np.asarray(got)
    got_array, got_kind = _as_numpy(got, what)
    if got_kind != expected_kind:
        raise CheckFailure(f"{what}: expected a {expected_kind}, got a {got_kind}")
    if got_array.shape != expected_array.shape:
        raise CheckFailure(f"{what}: expected shape {expected_array.shape}, got shape {got_array.shape}")
    if check_dtype and got_array.dtype != expected_array.dtype:
        raise CheckFailure(f"{what}: expected dtype {expected_array.dtype}, got {got_array.dtype}")
    if got_array.dtype.kind not in "biufc":
        raise CheckFailure(f"{what}: expected numbers, got dtype {got_array.dtype}")
    got_f = got_array.astype(np.complex128 if got_array.dtype.kind == "c" else np.float64)
    exp_f = expected_array.astype(got_f.dtype)
    got_nan, exp_nan = np.isnan(got_f), np.isnan(exp_f)
    if (got_nan & ~exp_nan).any():
        index = np.argwhere(got_nan & ~exp_nan)[0]
        raise CheckFailure(f"{what}: NaN at index {_fmt_index(index)}, expected {_short(exp_f[tuple(index)])}"
                           f" ({int((got_nan & ~exp_nan).sum())} NaN in all)")
    if (exp_nan & ~got_nan).any():
        index = np.argwhere(exp_nan & ~got_nan)[0]
        raise CheckFailure(f"{what}: expected NaN at index {_fmt_index(index)}, got {_short(got_f[tuple(index)])}")
    both = ~got_nan
    with np.errstate(invalid="ignore"):
        close = np.isclose(got_f, exp_f, rtol=rtol, atol=atol) | (got_nan & exp_nan)
    if not close.all():
        bad = np.argwhere(~close)
        index = tuple(bad[0])
        with np.errstate(invalid="ignore"):
            worst = np.nanmax(np.abs(got_f[both] - exp_f[both])) if both.any() else float("nan")
        raise CheckFailure(
            f"{what}: value at index {_fmt_index(index)} is {_short(got_f[index])}, expected {_short(exp_f[index])}"
            f" ({len(bad)} of {close.size} entries differ; largest difference {_short(worst)})")


def expect_true(condition, message):
    if not condition:
        raise CheckFailure(message)


def _short(x):
    x = complex(x) if isinstance(x, complex) else float(np.real(x))
    return f"{x:.6g}"


def student_object(student, class_name, *args, state=None, **kwargs):
    """Build the student's `class_name(*args, **kwargs)` where their code lives and return a
    Handle to it; `state` (a reference module's state_dict) is loaded into it, strictly."""
    handle = student.call(class_name, *args, keep=True, **kwargs)
    if state is not None:
        student.call(handle, plain(state), method="load_state_dict")
    return handle
