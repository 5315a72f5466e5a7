"""The checks' vocabulary: what a check is, how it fails, and one comparator.

A check grades one exercise and its name says what it tests. Two kinds:
- `equals(exercise, name, target, cases)`: the student's `target` equals the reference's on every
  call that `cases(rng)` yields. Most checks are one of these rows.
- `@check(exercise, name)` on `def f(student, ref, rng)`: a property written by hand
  (permutations, limits, causality), comparing with `same` and `expect_close`.
Each check draws its inputs from its own generator, seeded by its name: the same inputs on every
run and in both graders. `student.call(...)` runs the student's code (in this process for
nbgrader, in the sandbox for the autograder) and returns plain values.
"""
import sys
from dataclasses import dataclass

import numpy as np

from ..sandbox.calls import StudentError  # noqa: F401 (the checks catch it)
from ..stated import CheckFailure, Student, called, describe, properties, rng_for  # noqa: F401 (the checks' vocabulary)
from ..stated.calling import Shown, tensor  # noqa: F401 (tensor: the checks' vocabulary, shared with the rules)
from ..stated.known import Reference
from ..stated.device import (DEVICE_CHECK, DEVICE_RULE, Fresh, Made, device_rules, expect_layout,  # noqa: F401
                             tensor_devices)
from ..wire import Handle, roundtrip, to_plain


@dataclass(frozen=True)
class Check:
    assignment: str
    exercise: str
    name: str          # what it tests, shown in the feedback
    weight: float      # the exercise's points are split over its checks by weight
    run: callable      # run(student, ref, seed): seed, the run's, draws a stated rule's inputs
    id: str = ""       # stable, apart from the sentence: its inputs are drawn from it


_REGISTRY = {}


class Chapter:
    """A chapter's checks, declared through it: a checks module begins
    `chapter = Chapter(ASSIGNMENT)` and declares with `chapter.check`, `chapter.equals`,
    `chapter.stated_checks` and `chapter.device_checks`. Each check gets a stable id (its function's
    name, an `equals` row's place among its exercise's rows, a stated rule's function's name), and
    draws its inputs from a generator seeded by the id (and the run's seed for a stated rule): a
    sentence can be reworded without changing what is graded."""

    def __init__(self, assignment):
        self.assignment = assignment
        self._rows = {}

    def register(self, exercise, name, weight, function, id, secret=False):
        """`function(student, ref, rng)` as a check of `exercise`."""
        key = f"{self.assignment}/{id}"
        run = lambda student, ref, seed: function(student, ref, rng_for(key, seed if secret else None))  # noqa: E731
        _REGISTRY.setdefault(self.assignment, []).append(Check(self.assignment, exercise, name, weight, run, id))

    def check(self, exercise, name, weight=1.0):
        """Decorator: `function(student, ref, rng)` is a check of `exercise`, its id the function's name."""
        def register(function):
            self.register(exercise, name, weight, function, f"{exercise}/{function.__name__}")
            return function
        return register

    def equals(self, exercise, name, target, cases, weight=1.0, **options):
        """A check: the student's `target` equals the reference's on each `call(...)` of `cases(rng)`.
        `options` go to `same` (tolerances, names of the results, a hint). Its id: its place among the
        exercise's `equals` rows."""
        def run(student, ref, rng):
            for case in cases(rng):
                same(student, ref, target, *case.args, **options, **case.kwargs)
        row = self._rows[exercise] = self._rows.get(exercise, 0) + 1
        self.register(exercise, name, weight, run, f"{exercise}/equals-{row}")

    def stated_checks(self, exercise):
        """Registers, as checks of `exercise`, the rules its text states (`autograder.stated`):
        `grade` charges them as `check` runs them, from one definition and one seed."""
        for prop in properties(self.assignment, exercise):
            def run(student, ref, rng, prop=prop):
                if not prop.known:
                    return prop.function(student, rng)
                return prop.function(student, rng, Reference(ref, _ANSWERS.get(self.assignment, {})))
            self.register(exercise, prop.name, prop.weight, run, prop.key.split("/", 1)[1], secret=True)

    def device_checks(self, options=None, values=None):
        """Registers, as checks of their exercises, the device rules of this chapter
        (`stated.device`). `options[exercise]`: the tolerances and names of `same` for its values;
        `values[exercise]`: `f(student, ref, rng, sequence)`, its own comparison on the CPU, in place
        of `same` on each call (a call that returns a module, say)."""
        for rule in device_rules(self.assignment):
            env = _WithReference(options.get(rule.exercise, {}) if options else {}, (values or {}).get(rule.exercise))
            run = lambda student, ref, rng, rule=rule, env=env: rule.run(student, rng, env.bound(ref))  # noqa: E731
            self.register(rule.exercise, rule.name, rule.weight, run, rule.key.split("/", 1)[1], secret=True)


@dataclass(frozen=True)
class Call:
    args: tuple
    kwargs: dict


def call(*args, **kwargs):
    """One input of an `equals` row."""
    return Call(args, kwargs)


_ANSWERS = {}


def known_answers(assignment, **helpers):
    """The grader-side answers a chapter's stated rules ask by name (`known.answer(name, ...)`) that
    are not one function of the reference: `helper(ref, *args, **kwargs)`. Here, not in
    `autograder/stated/`: the students' copy ships that, and these compute answers."""
    _ANSWERS.setdefault(assignment, {}).update(helpers)


def answer_helpers(assignment):
    return _ANSWERS.get(assignment, {})


def registered(assignment, exercise):
    return [c for c in _REGISTRY.get(assignment, []) if c.exercise == exercise]


# ---- calling the student's code ---------------------------------------------------------------

@dataclass
class Pair:
    """The student's object (a Handle) and the reference's, holding the same parameters."""
    handle: Handle
    module: object
    label: str


def module_pair(student, ref, class_name, *init, rng, scale=0.7, double=False, by_shape=False):
    """`class_name(*init)` built on both sides with the same random parameters (drawn from `rng`).
    `by_shape`: the student may name the parameters freely; each gets the reference's value of the
    same shape (the shapes must match one to one)."""
    import torch
    with torch.random.fork_rng(devices=[]):  # in nbgrader's kernel, the student's code shares the global RNG
        module = getattr(ref, class_name)(*init)
    state = {n: tensor(rng, tuple(p.shape), scale=scale) for n, p in module.state_dict().items()}
    tied = {}  # a parameter registered under two names (a tied head) gets one value: the student may register
    for name, parameter in module.named_parameters(remove_duplicate=False):  # them in either order
        state[name] = state[tied.setdefault(id(parameter), name)]
    module.load_state_dict(state)
    handle = student.call(class_name, *init, keep=True)
    label = f"{class_name}({', '.join(map(repr, init))})"
    if by_shape:
        state = match_by_shape(student.call(handle, method="state_dict"), state, label)
    student.call(handle, plain(state), method="load_state_dict")
    if double:
        handle, module, label = student.call(handle, method="double", keep=True), module.double(), label + ".double()"
    module.eval()
    return Pair(handle, module, label + " with parameters the grader loaded into it, on ")


def model_pair(student, ref, class_name, sizes, rng, scale=0.5, double=False, **options):
    """`class_name(*sizes, **options)` (a whole model: chapter 9's LlamaLM, chapter 10's Transformer)
    on both sides holding the same random parameters, the call shown with its options in the
    messages; a tied model's embedding and head get one value (the student may register them in
    either order)."""
    import torch
    with torch.random.fork_rng(devices=[]):  # in nbgrader's kernel, the student's code shares the global RNG
        module = getattr(ref, class_name)(*sizes, **options)
    state = {n: tensor(rng, tuple(p.shape), scale=scale) for n, p in module.state_dict().items()}
    if options.get("tie_embeddings", True):
        state["lm_head.weight"] = state["embed.weight"]
    module.load_state_dict(state)
    shown = ", ".join([*map(repr, sizes), *(f"{k}={v!r}" for k, v in options.items())])
    label = f"{class_name}({shown})"
    handle = student.call(class_name, *sizes, keep=True, _label=label, **options)
    student.call(handle, plain(state), method="load_state_dict", _label=label)
    if double:
        handle, module, label = student.call(handle, method="double", keep=True, _label=label), module.double(), \
            label + ".double()"
    module.eval()
    return Pair(handle, module, label + " with parameters the grader loaded into it, on ")


def expect_parameters(student, ref, class_name, *init, hint=""):
    """The student's `class_name(*init)` holds the reference's parameters: the same names and
    shapes. Returns the student's object."""
    expected = {name: tuple(p.shape) for name, p in getattr(ref, class_name)(*init).state_dict().items()}
    handle = student.call(class_name, *init, keep=True)
    state = student.call(handle, method="state_dict")
    found = {n: tuple(getattr(v, "shape", ())) for n, v in state.items()} if isinstance(state, dict) else state
    expect_true(found == expected, f"{class_name}{init} should have the parameters {expected} (name: shape), found "
                f"{found}" + (f": {hint}" if hint else ""))
    return handle


def match_by_shape(student_state, reference_state, label):
    """{student's parameter name: the reference's value of the same shape}."""
    want = sorted(tuple(v.shape) for v in reference_state.values())
    have = {name: tuple(getattr(v, "shape", ())) for name, v in student_state.items()}
    if sorted(have.values()) != want:
        raise CheckFailure(f"{label} should hold tensors of shapes {want}; its state_dict has "
                           f"{', '.join(f'{n} {s}' for n, s in have.items()) or 'nothing'}")
    by_shape = {}  # parameters of one shape are matched in the order the modules list them
    for value in reference_state.values():
        by_shape.setdefault(tuple(value.shape), []).append(value)
    return {name: by_shape[shape].pop(0) for name, shape in have.items()}


def same(student, ref, target, *args, what=None, names=None, rtol=None, atol=None, nan_hint="", **kwargs):
    """The student's `target(*args, **kwargs)` equals the reference's (a function's name, or a
    Pair of objects; a Pair among the arguments is the student's object on its side, the
    reference's here); returns the student's value. `names` label the items of a tuple result."""
    mine, theirs = _side(args, student=True), _side(args, student=False)
    if isinstance(target, Pair):
        import torch
        got = student.call(target.handle, *mine, _label=target.label.removesuffix(", on "), **kwargs)
        with torch.no_grad():
            expected = target.module(*theirs, **kwargs)
        what = what or target.label + ", ".join(_shown(a) for a in args)
    else:
        got = student.call(target, *mine, **kwargs)
        expected = getattr(ref, target)(*theirs, **kwargs)
        what = what or called(target, None, _displayed(args), kwargs)
    expect_same(got, plain(expected), what, names=names, rtol=rtol, atol=atol, nan_hint=nan_hint)
    return got


# ---- devices ----------------------------------------------------------------------------------
# The device rule is stated, and `check` runs it (autograder/stated/device.py: its cases, the run on
# meta against the same call on the CPU); `grade` adds that those calls on the CPU give the
# reference's values, so that the device's points go with a correct result.

# ---- devices ----------------------------------------------------------------------------------
# The device rule is stated, and `check` runs it (autograder/stated/device.py: its cases, the run on
# the emulated GPU against the same call on the CPU); `grade` adds that those calls on the CPU give
# the reference's values, so that the device's points go with a correct result (`Chapter.device_checks`).

# what a device rule's failure on the reference's values says first: `check` ran the rule and said it holds
# (it has no values to compare with), and `grade` withholds the device's share only for a wrong value
WITHHELD = "device share not given: the values on the CPU are wrong — "


class _WithReference:
    """How `grade` runs a device rule: modules holding parameters the grader draws, loaded into the
    reference's too (`module_pair`), and each sequence's calls on the CPU compared with the
    reference's, with fresh objects (`Fresh`) on both sides."""

    def __init__(self, options, values, ref=None):
        self.options, self.custom, self.ref = options, values, ref

    def bound(self, ref):
        return _WithReference(self.options, self.custom, ref)

    def module(self, student, rng, class_name, *init, **options):
        pair = module_pair(student, self.ref, class_name, *init, rng=rng, **options)
        return Made(pair.handle, pair.label.removesuffix(", on "), pair.module)

    def values(self, student, rng, sequence):
        if self.custom:
            try:
                return self.custom(student, self.ref, rng, sequence)
            except CheckFailure as failure:
                raise CheckFailure(f"{WITHHELD}{failure}") from None
        fresh = {}

        def pair(value):
            if isinstance(value, Made):
                return Pair(value.handle, value.module, value.label + ", on ")
            if isinstance(value, Fresh):
                if id(value) not in fresh:
                    fresh[id(value)] = Pair(student.call(value.class_name, keep=True, _label=f"{value.class_name}()"),
                                            getattr(self.ref, value.class_name)(), f"a {value.class_name}")
                return fresh[id(value)]
            if type(value) in (list, tuple):
                return type(value)(pair(v) for v in value)
            return value
        for run in sequence:
            same(student, self.ref, pair(run.target), *pair(run.args), what=f"{WITHHELD}{run.what()}, on the CPU",
                 **self.options, **run.kwargs)


def _displayed(args):
    """The arguments for `called`: a Pair (or a list of them) shown by its label, the rest as they are."""
    return tuple(Shown(a, _shown) if isinstance(a, Pair) or (type(a) in (list, tuple) and any(isinstance(v, Pair) for v in a))
                 else a for a in args)


def _shown(value):
    if isinstance(value, Pair):
        return value.label.removesuffix(" with parameters the grader loaded into it, on ").removesuffix(", on ")
    if type(value) in (list, tuple) and any(isinstance(v, Pair) for v in value):
        inner = ", ".join(_shown(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return describe(value)


def _side(value, student):
    """Arguments as one side gets them: a Pair is the student's Handle there, the reference's object here."""
    if isinstance(value, Pair):
        return value.handle if student else value.module
    if type(value) in (list, tuple):
        return type(value)(_side(v, student) for v in value)
    return value


def expect_same(got, expected, what, names=None, **tolerance):
    """Arrays compared by `expect_close`; tuples item by item (`names` label the items)."""
    if isinstance(expected, (tuple, list)):
        expect_tuple(got, what, names or [f"item {i}" for i in range(len(expected))])
        for i, (g, e) in enumerate(zip(got, expected)):
            expect_same(g, e, f"{what}: {names[i] if names else f'item {i}'}", **tolerance)
    elif type(expected) in (int, float):
        expect_number(got, expected, what, **tolerance)
    else:
        expect_close(got, expected, what, **tolerance)


def expect_number(got, expected, what, rtol=None, atol=None, nan_hint=""):
    """A Python number: an int must be the same int; a float close (tolerance as for float64)."""
    if type(expected) is int:
        expect_true(isinstance(got, int) and not isinstance(got, bool) and got == expected,
                    f"{what}: expected the int {expected}, got {describe(got)}")
        return
    expect_close(np.asarray(got) if isinstance(got, (int, float)) else got, np.asarray(expected), what,
                 rtol=rtol, atol=atol, nan_hint=nan_hint)


def expect_tuple(got, what, names):
    """The student's result is a tuple of len(names) values; returns it."""
    kind = {2: "a pair", 3: "a triple"}.get(len(names), f"{len(names)} values")
    expect_true(isinstance(got, (tuple, list)) and len(got) == len(names),
                f"{what} should return {kind} ({', '.join(names)}), got {describe(got)}")
    return got


def plain(value):
    """The reference's value as the grader sees the student's: through the same safe format."""
    return roundtrip(to_plain(value))


# ---- inputs -----------------------------------------------------------------------------------

def random_mask(rng, shape, p=0.6):
    """A boolean torch mask (True = may attend) with at least one True in every row."""
    import torch
    mask = rng.random(shape) < p
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(len(rows)), rng.integers(0, shape[-1], len(rows))] = True
    return torch.from_numpy(rows.reshape(shape))


def padding_mask(rng, shape, empty_rows=0):
    """Right padding (True = a real item), at least one real item per row; the first
    `empty_rows` rows (of the flattened batch) are all padding instead."""
    import torch
    *batch, n = shape
    mask = np.arange(n) < rng.integers(1, n + 1, size=batch)[..., None]
    flat = mask.reshape(-1, n)
    flat[:empty_rows] = False
    return torch.from_numpy(flat.reshape(shape))


# ---- comparing --------------------------------------------------------------------------------

def tolerance(dtype):
    """(rtol, atol) for a result of this dtype: exact for integers and booleans."""
    kind = np.dtype(dtype).kind
    if kind in "biu":
        return 0.0, 0.0
    return (1e-5, 1e-6) if np.dtype(dtype).itemsize <= 4 else (1e-9, 1e-11)


def _as_numpy(value, what):
    torch = sys.modules.get("torch")
    if isinstance(value, np.ndarray):
        return value, "NumPy array"
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy(), "torch tensor"
    raise CheckFailure(f"{what}: expected an array, got {type(value).__name__} {value!r:.80}")


def _fmt_index(index):
    return "(" + ", ".join(str(int(i)) for i in index) + ")" if len(index) != 1 else f"[{int(index[0])}]"


def _at(index):
    """" at index (i, j)", or nothing for a 0-dimensional value."""
    return f" at index {_fmt_index(index)}" if len(index) else ""


def expect_close(got, expected, what, rtol=None, atol=None, check_dtype=True, nan_hint=""):
    """Compare an array result with the expected one: type, shape, dtype, NaN/inf placement,
    values (tolerance from the expected dtype unless given). `nan_hint` is said only when the
    student's result has NaN where it should not."""
    expected_array, expected_kind = _as_numpy(expected, what)
    if np.isscalar(got) and not isinstance(got, (str, bytes)) and expected_array.ndim == 0:
        got = np.asarray(got)
    got_array, got_kind = _as_numpy(got, what)
    if got_kind != expected_kind:
        raise CheckFailure(f"{what}: expected a {expected_kind}, got a {got_kind}")
    if got_array.shape != expected_array.shape:
        raise CheckFailure(f"{what}: expected shape {expected_array.shape}, got shape {got_array.shape}")
    if check_dtype and got_array.dtype != expected_array.dtype:
        if expected_array.ndim == 0 and expected_array.dtype.kind == "f" and got_array.dtype.kind in "iu":
            raise CheckFailure(f"{what}: expected a {expected_array.dtype} value, got the integer {int(got_array)} "
                               "(a position in a list where the value at that position is expected?)")
        raise CheckFailure(f"{what}: expected dtype {expected_array.dtype}, got {got_array.dtype}")
    if got_array.dtype.kind not in "biufc":
        raise CheckFailure(f"{what}: expected numbers, got dtype {got_array.dtype}")
    default_rtol, default_atol = tolerance(expected_array.dtype)
    rtol, atol = default_rtol if rtol is None else rtol, default_atol if atol is None else atol
    got_f = got_array.astype(np.complex128 if got_array.dtype.kind == "c" else np.float64)
    exp_f = expected_array.astype(got_f.dtype)
    got_nan, exp_nan = np.isnan(got_f), np.isnan(exp_f)
    if (got_nan & ~exp_nan).any():
        index = np.argwhere(got_nan & ~exp_nan)[0]
        raise CheckFailure(f"{what}: NaN{_at(index)}, expected {_short(exp_f[tuple(index)])}"
                           f" ({int((got_nan & ~exp_nan).sum())} NaN in all)" + (f" ({nan_hint})" if nan_hint else ""))
    if (exp_nan & ~got_nan).any():
        index = np.argwhere(exp_nan & ~got_nan)[0]
        raise CheckFailure(f"{what}: expected NaN{_at(index)}, got {_short(got_f[tuple(index)])}")
    with np.errstate(invalid="ignore"):
        close = np.isclose(got_f, exp_f, rtol=rtol, atol=atol) | (got_nan & exp_nan)
    if not close.all():
        bad = np.argwhere(~close)
        index = tuple(bad[0])
        both = ~got_nan
        with np.errstate(invalid="ignore"):
            worst = np.nanmax(np.abs(got_f[both] - exp_f[both])) if both.any() else float("nan")
        shown, wanted = _short(got_f[index]), _short(exp_f[index])
        exact = ""
        if shown == wanted:  # six digits hide the difference: show all of them, and what is allowed
            digits = 9 if expected_array.dtype.itemsize <= 4 else 17
            shown, wanted = _short(got_f[index], digits), _short(exp_f[index], digits)
            exact = (f"; compared as {expected_array.dtype}, to within {atol:g} + {rtol:g} × |expected| "
                     f"= {atol + rtol * abs(exp_f[index]):.3g} here")
        where = f"value at index {_fmt_index(index)}" if index else "the value"  # a 0-dimensional result: no index
        raise CheckFailure(
            f"{what}: {where} is {shown}, expected {wanted}"
            f" ({len(bad)} of {close.size} entries differ; largest difference {_short(worst)}{exact})")


def expect_true(condition, message):
    if not condition:
        raise CheckFailure(message)


def _short(x, digits=6):
    x = complex(x) if isinstance(x, complex) else float(np.real(x))
    return f"{x:.{digits}g}"
