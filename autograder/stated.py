"""The properties an exercise's text states, checked alike by `check` and by `grade`.

A hidden check may keep its inputs secret; a rule the text states may not be a surprise. The
properties here are the rules the texts state (what a result must be on inputs the text
describes), written without the reference solutions: their expected values are computed here,
from the definitions (PyTorch's own modules, exact attention in float64). `grade` registers them
as checks of their exercise (`checks.core.stated_checks`), and `python -m autograder check` runs
them on the student's notebook, so a student's copy of the course, which has neither the
solutions nor `autograder/checks/`, learns before grading every point these can cost.

This module also holds what both need to call the student's code and say what went wrong:
`CheckFailure`, `Student` and `describe`.
"""
import math
import sys
import zlib
from dataclasses import dataclass

import numpy as np

from .sandbox.calls import StudentError
from .wire import Handle


class CheckFailure(AssertionError):
    """The student's code gave a wrong answer; the message says on which input and how."""


SEED_VARIABLE = "AUTOGRADER_SEED"
_seed = None  # this process's run seed; None: drawn at its first use


def fresh_seed():
    """A new run seed: 63 bits from the operating system, which nobody can compute in advance."""
    import secrets
    return secrets.randbits(63)


def parse_seed(text):
    """A seed as a user writes it (decimal); ValueError, saying what is expected, for anything else."""
    try:
        seed = int(str(text).strip())
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed {text!r}: expected a whole number from 0 to {2**63 - 1}")
    return seed


def set_seed(seed):
    """Seed this process's stated rules: `grade` sets its run's seed (kept in its journal) in each
    grading process; None draws a fresh one at the next use."""
    global _seed
    _seed = None if seed is None else parse_seed(seed)


def run_seed():
    """The seed of this run's stated rules: the one `set_seed` set, else $AUTOGRADER_SEED (to
    reproduce a run of nbgrader or `check`), else a fresh one, drawn once per process."""
    global _seed
    if _seed is None:
        import os
        given = os.environ.get(SEED_VARIABLE, "").strip()
        _seed = parse_seed(given) if given else fresh_seed()
    return _seed


def rng_for(name, secret=False):
    """The generator of one check, seeded by its name. A hidden check's (`secret=False`) gives the
    same inputs on every run, in every grader: nobody who is graded can read it. A stated rule's
    (`secret=True`) is seeded by the run's seed too (`run_seed`): its code ships to the students,
    and inputs drawn from a seed they can read could be computed, and answered, in advance."""
    key = zlib.crc32(name.encode())
    return np.random.default_rng([key, run_seed()] if secret else key)


@dataclass(frozen=True)
class Property:
    assignment: str
    exercise: str
    name: str          # the rule, as the feedback and `check` show it
    weight: float      # in `grade`, its share of the exercise's points, as a check's
    function: callable  # function(student, rng), student a `Student`

    def run(self, student):
        return self.function(student, rng_for(f"{self.assignment}/{self.name}", secret=True))


_PROPERTIES = []


def stated(assignment, exercise, name, weight=1.0):
    """Decorator: `function(student, rng)` checks a rule the text of `exercise` states."""
    def register(function):
        _PROPERTIES.append(Property(assignment, exercise, name, weight, function))
        return function
    return register


def properties(assignment, exercise):
    return [p for p in _PROPERTIES if p.assignment == assignment and p.exercise == exercise]


# ---- calling the student's code ---------------------------------------------------------------

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


# ---- chapter 4: MultiHeadAttention ------------------------------------------------------------

@stated("04-multi-head", "MultiHeadAttention", "the formula of the text: the same per-head weights and output as "
        "nn.MultiheadAttention holding the same parameters (out_proj applied once to the merged heads)")
def mha_as_torch(student, rng):
    """Three results compared, so the message says which step differs: the per-head weights, the
    merged heads (out_proj set to the identity) and the output."""
    import torch
    dim, heads, n_q, n_k = 12, 3, 5, 7
    draw = {name: _tensor(rng, shape, scale=0.5) for name, shape in
            (("q", (dim, dim)), ("k", (dim, dim)), ("v", (dim, dim)), ("out", (dim, dim)),
             ("q_b", (dim,)), ("k_b", (dim,)), ("v_b", (dim,)), ("out_b", (dim,)))}
    query, key = _tensor(rng, (2, n_q, dim)), _tensor(rng, (2, n_k, dim))
    label = f"MultiHeadAttention({dim}, {heads}) with parameters the grader loaded into it"
    module = student.call("MultiHeadAttention", dim, heads, keep=True, _label=label)
    results = {}
    for case, out, out_b in (("merged heads", torch.eye(dim), torch.zeros(dim)), ("output", draw["out"], draw["out_b"])):
        state = {"q_proj.weight": draw["q"], "q_proj.bias": draw["q_b"], "k_proj.weight": draw["k"],
                 "k_proj.bias": draw["k_b"], "v_proj.weight": draw["v"], "v_proj.bias": draw["v_b"],
                 "out_proj.weight": out, "out_proj.bias": out_b}
        reference = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        reference.load_state_dict({"in_proj_weight": torch.cat([draw["q"], draw["k"], draw["v"]]),
                                   "in_proj_bias": torch.cat([draw["q_b"], draw["k_b"], draw["v_b"]]),
                                   "out_proj.weight": out, "out_proj.bias": out_b})
        student.call(module, state, method="load_state_dict")
        got = _pair(student.call(module, query, key, key, _label=label), f"{label}(query, key, key)")
        with torch.no_grad():
            expected = reference(query, key, key, average_attn_weights=False)
        results[case] = [_close(g, e, 1e-4, 1e-5) for g, e in zip(got, expected)]
    weights_ok = results["merged heads"][1] and results["output"][1]
    heads_ok, out_ok = results["merged heads"][0], results["output"][0]
    if weights_ok and heads_ok and out_ok:
        return
    said = ", ".join(f"the {what} {'match' if ok else 'differ'}" for what, ok in
                     (("per-head weights", weights_ok), ("merged heads (out_proj set to the identity)", heads_ok),
                      ("final outputs", out_ok)))
    hint = ("the weights returned: every head's, (B, H, Nq, Nk), not their mean" if heads_ok and out_ok else
            "the scores: q_proj and k_proj, split_heads, divided once by sqrt(d_h) where d_h = embed_dim / num_heads"
            if not weights_ok else "the values: v_proj, split_heads, weights @ v per head, merge_heads" if not heads_ok
            else "out_proj, applied once to the merged heads")
    raise CheckFailure(f"{label}, on query {describe(query)} and key = value {describe(key)}, against "
                       f"nn.MultiheadAttention({dim}, {heads}, batch_first=True) holding the same parameters: {said}. "
                       f"Look at {hint}")


def _torch_object(student, name, *args, _label, **kwargs):
    """`torch.nn.<name>(*args, **kwargs)` made in the student's process (a Handle)."""
    nn = student.call("torch", "nn", method="__getattribute__", keep=True, _label="torch.nn")
    made = student.call(nn, name, method="__getattribute__", keep=True, _label=f"nn.{name}")
    return student.call(made, *args, keep=True, _label=_label, **kwargs)


def _unchanged(student, module, x, change, label, what, hint, expected):
    """`module(x, x, x)` gives `expected`, the (out, weights) of the model it copies (so that a
    module that copies nothing does not pass), and the same after `change()`."""
    import torch
    before = _pair(student.call(module, x, x, x, _label=label), f"{label}(x, x, x)")
    if not all(_close(b, e, 1e-4, 1e-5) for b, e in zip(before, expected)):
        said = " and ".join(name for name, b, e in zip(("out", "the per-head weights"), before, expected)
                            if not _close(b, e, 1e-4, 1e-5))
        raise CheckFailure(f"{label}(x, x, x) for x {describe(x)}: {said} differ from the model's it was made from "
                           "(tolerance rtol=1e-4, atol=1e-5), so whether it is a copy is not judged: it must first "
                           "compute what the model computes")
    change()
    after = _pair(student.call(module, x, x, x, _label=label), f"{label}(x, x, x)")
    if not all(torch.equal(b, a) for b, a in zip(before, after)):
        raise CheckFailure(f"{label}(x, x, x) for x {describe(x)} changed after {what}: your module holds "
                           f"tensors of the model it was copied from, not copies of them. {hint}")


@stated("04-multi-head", "mha_from_torch", "a copy: loading new parameters into m afterwards does not change the "
        "module mha_from_torch(m) returned")
def from_torch_copies(student, rng):
    import torch
    dim, heads = 6, 2
    label = f"nn.MultiheadAttention({dim}, {heads}, batch_first=True)"
    m = _torch_object(student, "MultiheadAttention", dim, heads, batch_first=True, _label=label)
    shapes = {"in_proj_weight": (3 * dim, dim), "in_proj_bias": (3 * dim,), "out_proj.weight": (dim, dim),
              "out_proj.bias": (dim,)}
    first, second = ({n: _tensor(rng, s, scale=0.5) for n, s in shapes.items()} for _ in range(2))
    student.call(m, first, method="load_state_dict")
    mine = student.call("mha_from_torch", m, keep=True, _label=f"mha_from_torch(m = {label})")
    x = _tensor(rng, (2, 4, dim))
    model = torch.nn.MultiheadAttention(dim, heads, batch_first=True)  # m as it was, here
    model.load_state_dict(first)
    with torch.no_grad():
        expected = model(x, x, x, average_attn_weights=False)
    _unchanged(student, mine, x, lambda: student.call(m, second, method="load_state_dict"),
               f"mha_from_torch(m = {label})", "m.load_state_dict(new parameters)",
               "Copy the values (load_state_dict, or proj.weight.copy_(w) under torch.no_grad()): nn.Parameter(w), "
               "w.detach() and .data keep the storage of w, a view of m's in_proj_weight", expected)


@stated("04-multi-head", "mha_from_bert", "a copy: changing the model the state came from does not change the "
        "module mha_from_bert(state, num_heads) returned")
def from_bert_copies(student, rng):
    import torch
    dim, heads = 8, 2
    linear = lambda: _torch_object(student, "Linear", dim, dim, _label=f"nn.Linear({dim}, {dim})")  # noqa: E731
    attention = _torch_object(student, "ModuleDict", [
        ("self", _torch_object(student, "ModuleDict", [("query", linear()), ("key", linear()), ("value", linear())],
                               _label="nn.ModuleDict")),
        ("output", _torch_object(student, "ModuleDict", [("dense", linear()), ("LayerNorm", _torch_object(
            student, "LayerNorm", dim, _label=f"nn.LayerNorm({dim})"))], _label="nn.ModuleDict"))],
        _label="a BERT attention block")
    names = [f"{layer}.{p}" for layer in ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm")
             for p in ("weight", "bias")]
    draw = lambda: {n: _tensor(rng, (dim, dim) if n.endswith("weight") and "Norm" not in n else (dim,), scale=0.5)  # noqa: E731
                    for n in names}
    first = draw()
    student.call(attention, first, method="load_state_dict")
    state = student.call(attention, method="state_dict", keep=True, _label="a BERT block's attention.state_dict()")
    mine = student.call("mha_from_bert", state, heads, keep=True, _label=f"mha_from_bert(a BERT block's state, {heads})")
    x = _tensor(rng, (2, 4, dim))
    model = torch.nn.MultiheadAttention(dim, heads, batch_first=True)  # the block's attention, as the text defines it
    model.load_state_dict({"in_proj_weight": torch.cat([first[f"self.{n}.weight"] for n in ("query", "key", "value")]),
                           "in_proj_bias": torch.cat([first[f"self.{n}.bias"] for n in ("query", "key", "value")]),
                           "out_proj.weight": first["output.dense.weight"],
                           "out_proj.bias": first["output.dense.bias"]})
    with torch.no_grad():
        expected = model(x, x, x, average_attn_weights=False)
    _unchanged(student, mine, x, lambda: student.call(attention, draw(), method="load_state_dict"),
               f"mha_from_bert(a BERT block's state, {heads})", "new parameters were loaded into the BERT block",
               "Copy the values (load_state_dict, or weight.copy_(state[name]) under torch.no_grad()): "
               "nn.Parameter(state[name]) and .data = state[name] keep the model's storage (a state_dict()'s tensors "
               "are the model's own)", expected)


@stated("04-multi-head", "count_parameters", "from the formula: count_parameters(10**9, 8) is the right int (a "
        "module of 4·10¹⁸ parameters cannot be built)")
def count_from_formula(student, rng):
    try:
        got = student.call("count_parameters", 10**9, 8)
    except StudentError as error:
        raise CheckFailure(f"{error}: count the parameters from the formula; the module would need 16 million TB") from None
    if not (isinstance(got, int) and not isinstance(got, bool)):
        raise CheckFailure(f"count_parameters(1000000000, 8) should be an int, got {describe(got)}")
    dim = 10**9
    expected = 4 * (dim * dim + dim)  # q_proj, k_proj, v_proj and out_proj: nn.Linear(D, D) with a bias each
    if got != expected:
        raise CheckFailure(f"count_parameters(1000000000, 8) should be {expected} (four nn.Linear(D, D), each D·D "
                           f"weights and D biases), got {got}")


# ---- chapter 5: what the functions do to their arguments and to the gradients ----------------

@stated("05-self-masked", "graph_mask", "the caller's adjacency is left as it was: the mask is a new tensor")
def graph_leaves_adjacency(student, rng):
    import torch
    directed = torch.from_numpy(rng.random((2, 4, 4)) < 0.5)
    for adjacency in (directed, directed.long(), directed * torch.from_numpy(rng.normal(size=(2, 4, 4)))):
        adjacency.diagonal(dim1=-2, dim2=-1).fill_(0)  # no self-loops yet: writing them in shows
        what = f"graph_mask(adjacency {describe(adjacency)}, no self-loops)"
        got = _expect_unchanged(student, "graph_mask", (adjacency,), ("adjacency",), what, hint="write the self-loops "
                                "into a new tensor (`|` and torch.eye make new ones; torch.as_tensor returns the very "
                                "tensor it is given)")
        expected = (adjacency != 0) | torch.eye(4, dtype=torch.bool)
        got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
        if not (isinstance(got, torch.Tensor) and got.dtype == torch.bool and torch.equal(got, expected)):
            raise CheckFailure(f"{what} returned {describe(got)}, expected the bool mask {describe(expected)}, True "
                               "where the adjacency is nonzero and on the diagonal: whether it leaves the adjacency as "
                               "it was is judged on a right mask")


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


def _expect_gradients(student, class_name, init, x, name="x"):
    """`class_name(*init)`'s output on `x` (called `name`), summed and backpropagated in the
    student's process, leaves a gradient on every parameter."""
    label = f"{class_name}{init}"
    module = student.call(class_name, *init, keep=True, _label=label)
    out = student.call(module, x, keep=True, _label=label)
    loss = student.call(out, method="sum", keep=True, _label=f"{label}({name}).sum()")
    _backward_gradients(student, module, loss, list(student.call(module, method="state_dict")), label,
                        f"{label} on {name} {describe(x)}: its output's sum().backward()")


@stated("05-self-masked", "CausalSelfAttention", "trainable: sum(output).backward() gives every parameter a gradient")
def layer_gradients(student, rng):
    _expect_gradients(student, "CausalSelfAttention", (8, 2), _tensor(rng, (2, 5, 8)))


@stated("05-self-masked", "TinyLM", "trainable: sum(logits).backward() gives every parameter a gradient")
def lm_gradients(student, rng):
    import torch
    _expect_gradients(student, "TinyLM", (11, 12, 2, 2, 10), torch.from_numpy(rng.integers(0, 11, size=(2, 6))), "tokens")


@stated("05-self-masked", "generate", "under torch.no_grad(): the logits it returns carry no gradient graph, with "
        "the cache and without")
def generate_without_gradients(student, rng):
    import torch
    label = "TinyLM(13, 16, 2, 2, 12)"
    model = student.call("TinyLM", 13, 16, 2, 2, 12, keep=True, _label=label)
    prompt = torch.from_numpy(rng.integers(0, 13, size=(2, 3)))
    for use_cache in (True, False):
        what = f"generate({label}, prompt {describe(prompt)}, 3, use_cache={use_cache})"
        result = student.call("generate", model, prompt, 3, use_cache=use_cache, keep=True, _label=what)
        logits = student.call(result, 1, method="__getitem__", keep=True, _label=f"{what}[1]")
        if student.call(logits, "requires_grad", method="__getattribute__", _label=f"{what}[1].requires_grad"):
            raise CheckFailure(f"{what}: the logits it returns require grad, so every step recorded a graph for "
                               "backward that nothing uses (memory and time): run the loop under torch.no_grad()")
        got = tuple(student.call(result, i, method="__getitem__", _label=f"{what}[{i}]") for i in (0, 1))
        _expect_greedy(student, model, prompt, got, what, label)


def _expect_greedy(student, model, prompt, got, what, label):
    """`got` is greedy decoding's (tokens, logits) from `prompt`, as the text defines it: each new token
    the arg-max of the model's logits at the last position, those logits returned. The model's
    logits are its own on the tokens returned, computed in one call without a cache here."""
    import torch
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise CheckFailure(f"{what} should return a pair (tokens, logits), got {describe(got)}")
    tokens, logits = (torch.as_tensor(np.asarray(v)) for v in got)
    n0, n_new = prompt.shape[-1], 3
    if tokens.shape != (prompt.shape[0], n0 + n_new) or not torch.equal(tokens[:, :n0], prompt):
        raise CheckFailure(f"{what}: tokens should be the prompt followed by {n_new} new ones, shape "
                           f"{(prompt.shape[0], n0 + n_new)}, got {describe(tokens)}: whether it runs under "
                           "torch.no_grad() is judged on a right result")
    own = torch.as_tensor(np.asarray(student.call(model, tokens[:, :-1], _label=label)))[:, n0 - 1:]
    if logits.shape != own.shape or not _close(logits, own, 1e-4, 1e-5) or not torch.equal(tokens[:, n0:],
                                                                                         own.argmax(-1)):
        raise CheckFailure(f"{what}: the tokens and logits are not greedy decoding's (each new token the arg-max of "
                           f"the model's logits at the last position; logits {describe(logits)}, expected "
                           f"{describe(own)}, from {label} on the tokens returned): whether it runs under "
                           "torch.no_grad() is judged on a right result")


# ---- chapter 6: LearnedKernelRegression -------------------------------------------------------

@stated("06-nadaraya-watson", "LearnedKernelRegression", "trainable: the gradient of forward's output reaches "
        "log_bandwidth (no .item(), float() or .detach() on the way), with leave_one_out and without", weight=0.5)
def learned_gradient(student, rng):
    import torch
    x = torch.from_numpy(np.sort(rng.uniform(0, 5, 10)))
    y, x_query = torch.sin(x) + torch.from_numpy(rng.normal(0, 0.3, 10)), torch.from_numpy(rng.uniform(0, 5, 7))
    label = "LearnedKernelRegression(0.7)"
    for queries, leave_one_out in ((x_query, False), (x, True)):
        what = f"{label}(x_query {describe(queries)}, x_train {describe(x)}, y_train, leave_one_out={leave_one_out})"
        module = student.call("LearnedKernelRegression", 0.7, keep=True, _label=label)
        out = student.call(module, queries, x, y, leave_one_out=leave_one_out, keep=True, _label=label)
        try:
            student.call(student.call(out, method="sum", keep=True, _label=what), method="backward",
                         _label=f"{what}.sum()")
            parameter = student.call(module, "log_bandwidth", method="get_parameter", keep=True,
                                     _label=f"{label}.log_bandwidth")
            got = student.call(parameter, "grad", method="__getattribute__", _label=f"{label}.log_bandwidth.grad")
        except StudentError as error:
            raise CheckFailure(f"{error}: no gradient reaches log_bandwidth through forward, so fit could never "
                               "change it. Compute the scores from self.bandwidth as a tensor: no .item(), float(), "
                               ".detach() or torch.no_grad() on the way") from None
        log_h = torch.tensor(math.log(0.7), dtype=torch.float64, requires_grad=True)  # the definition, here
        scores = -(queries[:, None] - x[None, :]) ** 2 / (2 * log_h.exp() ** 2)
        if leave_one_out:
            scores = scores.masked_fill(torch.eye(len(x), dtype=torch.bool), -math.inf)
        (torch.softmax(scores, dim=-1) @ y).sum().backward()
        if got is None or not _close(torch.as_tensor(np.asarray(got)), log_h.grad, 1e-8, 1e-10):
            raise CheckFailure(f"{what}.sum().backward(): log_bandwidth.grad is {describe(got)}, expected "
                               f"{log_h.grad.item():.6g}" + (": no gradient reached it (.item(), float() or .detach() "
                                                             "of the bandwidth cut the graph)" if got is None else ""))


# ---- chapter 7: tiled_attention ---------------------------------------------------------------

def exact_attention(q, k, v, causal=False, rows=1024):
    """(out, lse) of softmax(q kᵀ / √d) v in float64, `rows` queries at a time (N = 8192 fits)."""
    import torch
    q, k, v = q.double(), k.double(), v.double()
    n_q, n_k = q.shape[-2], k.shape[-2]
    outs, lses = [], []
    for start in range(0, n_q, rows):
        scores = q[..., start:start + rows, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            seen = torch.arange(n_k) <= torch.arange(start, start + scores.shape[-2])[:, None] + n_k - n_q
            scores = scores.masked_fill(~seen, -math.inf)
        lse = torch.logsumexp(scores, dim=-1)
        weights = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(scores - lse[..., None]))
        outs.append(weights @ v)
        lses.append(lse)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def expect_attention(got, q, k, v, what, causal=False, rows=None, rtol=1e-10, atol=1e-12, dtype=None):
    """`got` is the pair (out, lse) of exact attention, in `dtype` (the inputs' by default); only
    the queries `rows` (a slice) when given."""
    import torch
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise CheckFailure(f"{what} should return a pair (out, lse), got {describe(got)}")
    expected = exact_attention(q, k, v, causal)
    dtype = dtype or q.dtype
    for name, g, e in zip(("out", "lse"), got, expected):
        g = torch.as_tensor(np.asarray(g))
        if g.dtype != dtype:
            raise CheckFailure(f"{what}: {name} should keep the inputs' dtype {str(dtype)[6:]}, got {str(g.dtype)[6:]}")
        if rows is not None:
            g, e = g[..., rows, :] if name == "out" else g[..., rows], e[..., rows, :] if name == "out" else e[..., rows]
        if g.shape != e.shape:
            raise CheckFailure(f"{what}: {name} should have shape {tuple(e.shape)}, got {tuple(g.shape)}")
        g64 = g.double()
        bad = ~(torch.isclose(g64, e, rtol=rtol, atol=atol) | (torch.isneginf(g64) & torch.isneginf(e)))
        if bad.any():
            index = tuple(int(i) for i in torch.nonzero(bad)[0])
            nan = int(torch.isnan(g64).sum())
            raise CheckFailure(f"{what}: {name}{list(index)} is {g64[index].item():.10g}, expected {e[index].item():.10g}"
                               f" ({int(bad.sum())} of {bad.numel()} entries differ"
                               + (f", {nan} of them NaN" if nan else "") + f"; tolerance rtol={rtol:g}, atol={atol:g})")


@stated("07-flash-tiling", "tiled_attention", "causal: the key blocks after a query block's last visible key are "
        "skipped, not masked (NaN in keys and values a query block never sees leaves its output clean)")
def tiled_skips(student, rng):
    import torch
    q, k, v = (_tensor(rng, (1, 48, 8), torch.float64) for _ in range(3))
    k_nan, v_nan = k.clone(), v.clone()
    k_nan[..., 16:, :], v_nan[..., 16:, :] = math.nan, math.nan  # never seen by queries 0 ... 15
    got = student.call("tiled_attention", q, k_nan, v_nan, block_q=16, block_k=16, causal=True)
    expect_attention(got, q, k, v, "tiled_attention(q, k, v of shape (1, 48, 8), block_q=16, block_k=16, causal=True), "
                     "with NaN in keys and values 16 to 47, which queries 0 to 15 never see: rows 0 to 15 (a NaN "
                     "there means the blocks after the query block's last visible key were computed and masked, not "
                     "skipped)", causal=True, rows=slice(0, 16))


@stated("07-flash-tiling", "tiled_attention", "out and lse keep the input dtype: float32 and float16, causal or not")
def tiled_dtypes(student, rng):
    import torch
    for dtype, tolerance in ((torch.float32, (1e-4, 1e-5)), (torch.float16, (1e-2, 1e-2))):
        for causal in (False, True):
            q, k, v = (_tensor(rng, (2, n, 8), dtype) for n in (40, 33, 33))
            got = student.call("tiled_attention", q, k, v, block_q=16, block_k=16, causal=causal)
            expect_attention(got, q, k, v, f"tiled_attention(q, k, v of shapes (2, 40, 8), (2, 33, 8), (2, 33, 8), "
                             f"{str(dtype)[6:]}, block_q=16, block_k=16, causal={causal})", causal=causal,
                             rtol=tolerance[0], atol=tolerance[1])


MEMORY_N, MEMORY_D, MEMORY_BLOCK = 8192, 16, 256
MEMORY_TRIES = 3


@stated("07-flash-tiling", "tiled_attention", "holds one block_q x block_k tile of scores at a time (N = 8192: under "
        "6 MB)", weight=2)
def tiled_memory(student, rng):
    label = (f"tiled_attention(q, k, v of shape (1, {MEMORY_N}, {MEMORY_D}), float32, block_q={MEMORY_BLOCK}, "
             f"block_k={MEMORY_BLOCK})")
    output = MEMORY_N * MEMORY_D * 4 + MEMORY_N * 4
    tile = MEMORY_BLOCK * MEMORY_BLOCK * 4
    allowed = 4 * output + 16 * tile  # the result, its copies on the way back, and a few tiles' work
    # A first call, not measured, pays for torch's one-time set-up (the same whatever N: two blocks
    # of queries and keys are enough, and cost a thousandth of N = 8192). Its inputs come from a
    # generator of their own, unrelated to the run's seed, and each measured call's from a generator
    # spawned from the run's seed (`rng`): no call's inputs tell anything of a measured call's, so no
    # call can compute a measured call's answer in advance and serve it from a cache.
    warm_up = [_tensor(np.random.default_rng(i), (1, 2 * MEMORY_BLOCK, MEMORY_D)) for i in range(3)]
    student.call("tiled_attention", *warm_up, block_q=MEMORY_BLOCK, block_k=MEMORY_BLOCK, _time_limit=60, _label=label)
    # Up to three measurements, the lowest kept: a collection of earlier garbage during a call, seen
    # by the watcher on a busy machine, reads as a rise of a few MB; a whole matrix is there every time.
    rises, tries = [], rng.spawn(MEMORY_TRIES)
    while len(rises) < MEMORY_TRIES and (not rises or min(rises) > allowed):
        q, k, v = (_tensor(tries[len(rises)], (1, MEMORY_N, MEMORY_D)) for _ in range(3))
        got, raised = student.measured_call("tiled_attention", q, k, v, block_q=MEMORY_BLOCK, block_k=MEMORY_BLOCK,
                                            _time_limit=60, _label=label)
        expect_attention(got, q, k, v, label, rtol=1e-4, atol=1e-5)
        rises.append(raised)
    if min(rises) > allowed:
        raise CheckFailure(
            f"{label} raised the memory your notebook's processes hold by {min(rises) / 2**20:.1f} MB (the lowest of "
            f"{len(rises)} calls); allowed {allowed / 2**20:.1f} MB (the output and its copies, and 16 tiles of "
            f"{tile / 2**20:.2f} MB). The full matrix of scores is {MEMORY_N ** 2 * 4 / 2**20:.0f} MB and one query "
            f"block against all keys {MEMORY_BLOCK * MEMORY_N * 4 / 2**20:.0f} MB: loop over key blocks inside each "
            "query block")


# ---- chapter 7: the caller's arrays -----------------------------------------------------------

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


@stated("07-flash-tiling", "online_softmax", "the caller's x is left as it was (float64 and float32)")
def online_leaves_x(student, rng):
    for dtype in (np.float64, np.float32):
        x = rng.normal(0, 3, (3, 10)).astype(dtype)
        what = f"online_softmax(x {describe(x)}, 4)"
        got = _expect_unchanged(student, "online_softmax", (x,), ("x",), what, block_size=4)
        weights = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
        expected = weights / weights.sum(axis=-1, keepdims=True)  # softmax along the last axis, as the text defines it
        if not (isinstance(got, np.ndarray) and got.shape == x.shape and got.dtype.kind == "f"
                and _close(got, expected, 1e-5, 1e-7)):
            raise CheckFailure(f"{what} returned {describe(got)}, not the softmax of x along its last axis (tolerance "
                               "rtol=1e-5, atol=1e-7): whether it leaves x as it was is judged on a right result")


@stated("07-flash-tiling", "tiled_attention", "the caller's q, k and v are left as they were (causal)")
def tiled_leaves_inputs(student, rng):
    import torch
    q, k, v = (_tensor(rng, (2, n, 8), torch.float64) for n in (12, 20, 20))
    what = ("tiled_attention(q, k, v of shapes (2, 12, 8), (2, 20, 8), (2, 20, 8), float64, block_q=8, block_k=8, "
            "causal=True)")
    got = _expect_unchanged(student, "tiled_attention", (q, k, v), ("q", "k", "v"), what,
                            block_q=8, block_k=8, causal=True)
    expect_attention(got, q, k, v, what + " (whether it leaves q, k and v as they were is judged on a right result)",
                     causal=True)


# ---- chapter 8: the caller's x, the gradients, RMSNorm as built -----------------------------------

@stated("08-transformer", "apply_rope", "returns a new tensor: the caller's x is left as it was (heads, float32 and "
        "float64)", weight=0.5)
def rope_leaves_x(student, rng):
    import torch
    for dtype in (torch.float32, torch.float64):
        x = _tensor(rng, (2, 3, 5, 8), dtype)
        what = f"apply_rope(x {describe(x)}, positions {describe(torch.arange(5))})"
        got = _expect_unchanged(student, "apply_rope", (x, torch.arange(5)), ("x", "positions"), what,
                                hint="return a new tensor (torch.cat of the rotated halves), not x with its halves "
                                "written over (x[..., :half] = ...)")
        _expect_formula(got, _rope(x, torch.arange(5)), what + " (whether it leaves x as it was is judged on a right "
                        "result)", 1e-4, 1e-5, "rotate feature i with feature i + d_h/2 by the angle position * "
                        "base^(-2i/d_h)", dtype=dtype)


GRADIENT_STEP = 1e-6  # central differences in float64: error about 1e-12 against the gradient's 1e-6 tolerance


def _expect_true_gradients(student, rng, class_name, init, x):
    """`class_name(*init).double()`, holding parameters drawn here: the gradient backward gives for
    (r * output).sum(), parameter by parameter, equals the derivative of the module's own forward
    along a random direction (central differences). No reference is needed: a detached path, a
    parameter under torch.no_grad(), or a buffer where a parameter is stated, shows."""
    import torch
    label = f"{class_name}{init}.double()"
    made = student.call(class_name, *init, keep=True, _label=f"{class_name}{init}")
    module = student.call(made, method="double", keep=True, _label=label)
    state = {name: _tensor(rng, tuple(np.shape(value)), torch.float64, scale=0.5)
             for name, value in student.call(module, method="state_dict").items()}
    names = list(state)
    student.call(module, state, method="load_state_dict")
    r = _tensor(rng, tuple(x.shape), torch.float64)
    what = f"{label} with parameters the grader loaded into it, on x {describe(x)}: (r * output).sum().backward()"
    out = student.call(module, x, keep=True, _label=label)
    loss = student.call(student.call(out, r, method="mul", keep=True, _label=f"{label}(x) * r"), method="sum",
                        keep=True, _label=f"({label}(x) * r).sum()")
    grads = _backward_gradients(student, module, loss, names, label, what)
    for name in names:
        direction = _tensor(rng, tuple(state[name].shape), torch.float64)
        values = []
        for sign in (1, -1):
            student.call(module, {**state, name: state[name] + sign * GRADIENT_STEP * direction}, method="load_state_dict")
            values.append(float((torch.as_tensor(np.asarray(student.call(module, x, _label=label))) * r).sum()))
        student.call(module, state, method="load_state_dict")
        numeric = (values[0] - values[1]) / (2 * GRADIENT_STEP)
        analytic = float((torch.as_tensor(np.asarray(grads[name])) * direction).sum())
        if not math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-7):
            raise CheckFailure(f"{what}: the gradient of {name} is not the derivative of your forward (along a random "
                               f"direction: {analytic:.8g} by backward, {numeric:.8g} by moving {name} a little). A "
                               ".detach() or torch.no_grad() cuts a path on the way from it to the output")


@stated("08-transformer", "GroupedQueryAttention", "trainable: backward gives every parameter the gradient of forward "
        "(no torch.no_grad(), .detach() or .data on the way), in float64", weight=0.5)
def gqa_gradients(student, rng):
    import torch
    _expect_true_gradients(student, rng, "GroupedQueryAttention", (8, 4, 2), _tensor(rng, (2, 4, 8), torch.float64))


@stated("08-transformer", "DecoderBlock", "trainable: backward gives every parameter of the block, the norms' weights "
        "included, the gradient of forward (no torch.no_grad(), .detach() or .data on the way), in float64", weight=0.5)
def block_gradients(student, rng):
    import torch
    _expect_true_gradients(student, rng, "DecoderBlock", (8, 2, 1, 12), _tensor(rng, (2, 3, 8), torch.float64))


@stated("08-transformer", "DecoderBlock", "RMSNorm(dim) as built: weight initialised to ones, eps 1e-6 by default "
        "(inputs of about 1e-3, where eps counts)", weight=0.5)
def rms_norm_as_built(student, rng):
    import torch
    for dtype in (torch.float32, torch.float64):
        x = _tensor(rng, (3, 6), dtype, scale=1e-3)
        got = student.call("RMSNorm", 6, keep=True, _label="RMSNorm(6)")
        got = torch.as_tensor(np.asarray(student.call(got, x, _label="RMSNorm(6)")))
        expected = x.double() / torch.sqrt(x.double().pow(2).mean(dim=-1, keepdim=True) + 1e-6)
        if got.dtype != dtype or not _close(got, expected, 1e-5 if dtype == torch.float32 else 1e-9, 0.0):
            raise CheckFailure(f"RMSNorm(6), as built, on x {describe(x)}: got {describe(got)}"
                               + (f" ({got.flatten()[:3].tolist()} ...)" if got.shape == x.shape else "")
                               + f", expected x / sqrt(mean(x^2) + 1e-6) ({expected.flatten()[:3].tolist()} ...), "
                               f"{str(dtype)[6:]}: weight starts at ones (torch.ones(dim)), eps defaults to 1e-6")


# ---- chapter 8: the rules of the text, on the student's own modules -------------------------------

@stated("08-transformer", "apply_rope", "relative: the scores of rotated queries and keys are unchanged when every "
        "position shifts by the same amount", weight=0.5)
def rope_relative(student, rng):
    import torch
    n, d_h = 6, 8
    q, k = _tensor(rng, (n, d_h), torch.float64), _tensor(rng, (n, d_h), torch.float64)
    scores = []
    for shift in (0, 13):
        positions = torch.arange(n) + shift
        rotated_q, rotated_k = (torch.as_tensor(np.asarray(student.call("apply_rope", x, positions))) for x in (q, k))
        for x, rotated in ((q, rotated_q), (k, rotated_k)):  # each a rotation, as the text defines it
            _expect_formula(rotated, _rope(x, positions), f"apply_rope(x {describe(x)}, positions "
                            f"{describe(positions)})", 1e-5, 1e-6, "whether the scores are relative is judged on "
                            "right rotations: feature i with feature i + d_h/2, by position * base^(-2i/d_h)",
                            dtype=torch.float64)
        scores.append(rotated_q @ rotated_k.T)
    if not torch.allclose(scores[0], scores[1], atol=1e-9):
        raise CheckFailure("apply_rope: q_m . k_n changes when both positions m and n are shifted by 13 (largest change "
                           f"{(scores[0] - scores[1]).abs().max():.2e}): rotate each pair by position * theta_i, the "
                           "same angle for the query and the key at one position")


def _expect_state(student, class_name, init, expected):
    """`class_name(*init)` holds exactly the tensors `expected` ({name: shape}), as the text lists them."""
    handle = student.call(class_name, *init, keep=True, _label=f"{class_name}{init}")
    state = student.call(handle, method="state_dict", _label=f"{class_name}{init}")
    found = {n: tuple(np.shape(v)) for n, v in state.items()} if isinstance(state, dict) else state
    if found != expected:
        raise CheckFailure(f"{class_name}{init} should have the parameters {expected} (name: shape), found {found}")


def _attention_shapes(dim, heads, kv_heads, prefix=""):
    d_h = dim // heads
    return {f"{prefix}q_proj.weight": (heads * d_h, dim), f"{prefix}k_proj.weight": (kv_heads * d_h, dim),
            f"{prefix}v_proj.weight": (kv_heads * d_h, dim), f"{prefix}o_proj.weight": (dim, heads * d_h)}


@stated("08-transformer", "GroupedQueryAttention", "q_proj (D, H*d_h), k_proj and v_proj (D, G*d_h), o_proj: no "
        "biases, no other parameter", weight=0.5)
def gqa_parameters(student, rng):
    for dim, heads, kv_heads in ((16, 4, 2), (12, 3, 1)):
        _expect_state(student, "GroupedQueryAttention", (dim, heads, kv_heads), _attention_shapes(dim, heads, kv_heads))


@stated("08-transformer", "DecoderBlock", "attn_norm, attention, mlp_norm, gate_proj, up_proj, down_proj, and no "
        "other parameter", weight=0.5)
def block_parameters(student, rng):
    for dim, heads, kv_heads, hidden in ((16, 4, 2, 24), (12, 3, 1, 20)):
        _expect_state(student, "DecoderBlock", (dim, heads, kv_heads, hidden),
                      {"attn_norm.weight": (dim,), **_attention_shapes(dim, heads, kv_heads, "attention."),
                       "mlp_norm.weight": (dim,), "gate_proj.weight": (hidden, dim), "up_proj.weight": (hidden, dim),
                       "down_proj.weight": (dim, hidden)})


def _fed_in_pieces(student, rng, class_name, init, x, pieces, hint, whole):
    """`class_name(*init)`, holding parameters drawn here, fed x in `pieces` through one KVCache, gives
    what the same module gives for x fed whole: the rule of the text, on the student's own module.
    Judged on a module whose output on x fed whole is right, `whole(module, state, x, label)` as the
    text's formula gives it: a module that returns x, or zeros, gives the same in pieces too."""
    import torch
    label = f"{class_name}{init} with parameters the grader loaded into it"
    module = student.call(class_name, *init, keep=True, _label=label)
    state = {n: _tensor(rng, tuple(np.shape(v)), scale=0.5) for n, v in student.call(module, method="state_dict").items()}
    student.call(module, state, method="load_state_dict")
    expected = student.call(module, x, _label=label)
    right = whole(module, state, x, label)
    expected = torch.as_tensor(np.asarray(expected)) if isinstance(expected, (np.ndarray, torch.Tensor)) else expected
    if not (isinstance(expected, torch.Tensor) and _close(expected, right, 1e-4, 1e-5)):
        shown = (f"largest difference {(expected - right).abs().max():.3g}" if isinstance(expected, torch.Tensor)
                 and expected.shape == right.shape else f"{describe(expected)}, expected shape {tuple(right.shape)}")
        raise CheckFailure(f"{label}, on x {describe(x)} fed whole without a cache: not the text's formula, computed "
                           f"here from the module's parameters ({shown}; tolerance rtol=1e-4, atol=1e-5); feeding x in "
                           "pieces through a KVCache is judged on a module whose whole output is right")
    cache = student.call("KVCache", keep=True, _label="KVCache()")
    for start, stop in pieces:
        got = student.call(module, x[:, start:stop], cache=cache, _label=f"{label} with a KVCache holding {start} tokens")
        got = torch.as_tensor(np.asarray(got))
        want = expected[:, start:stop]
        if not _close(got, want, 1e-4, 1e-5):
            shown = (f"largest difference {(got - want).abs().max():.3g}" if got.shape == want.shape
                     else f"shape {tuple(got.shape)}, expected {tuple(want.shape)}")
            outputs = f"{start}" if stop == start + 1 else f"{start} to {stop - 1}"
            raise CheckFailure(f"{label}, fed x {describe(x)} in pieces through one KVCache: outputs {outputs} differ "
                               f"from your module's on x fed whole ({shown}; tolerance rtol=1e-4, atol=1e-5): {hint}")


@stated("08-transformer", "GroupedQueryAttention", "with a KVCache: a sequence fed in pieces (3 tokens, then 1, then 2) "
        "gives the outputs of the whole sequence fed without a cache (keys rotated before they are cached, positions "
        "continue after the cached tokens)", weight=1.5)
def gqa_cache(student, rng):
    _fed_in_pieces(student, rng, "GroupedQueryAttention", (16, 4, 2), _tensor(rng, (2, 6, 16)), ((0, 3), (3, 4), (4, 6)),
                   "the new tokens are at positions L, ..., L + N - 1; rotate the new keys at those positions, then "
                   "append them", lambda module, state, x, label: _gqa_formula(state, x, 4, 2, label))


def _gqa_formula(state, x, heads, kv_heads, label):
    """GroupedQueryAttention as the text defines it, in float64, from its parameters: causal (bottom-
    right), RoPE (base 10000) at positions 0 ... N - 1 on the queries and keys, query head h with
    key/value head h // (H / G), o_proj of the merged heads."""
    import torch
    import torch.nn.functional as F
    needed = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight")
    if any(name not in state for name in needed):
        raise CheckFailure(f"{label}: its state_dict lacks {', '.join(n for n in needed if n not in state)}")
    *batch, n, dim = x.shape
    d_h = dim // heads
    split = lambda t, h: t.reshape(*batch, n, h, d_h).transpose(-3, -2)  # noqa: E731
    project = lambda name, h: split(F.linear(x.double(), state[name].double()), h)  # noqa: E731
    positions = torch.arange(n)
    q, k = _rope(project("q_proj.weight", heads), positions), _rope(project("k_proj.weight", kv_heads), positions)
    v = project("v_proj.weight", kv_heads)
    k, v = (t.repeat_interleave(heads // kv_heads, dim=-3) for t in (k, v))
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d_h)).masked_fill(~causal, -math.inf)
    out = (torch.softmax(scores, dim=-1) @ v).transpose(-3, -2).reshape(*batch, n, heads * d_h)
    return F.linear(out, state["o_proj.weight"].double())


@stated("08-transformer", "DecoderBlock", "with a KVCache: 2 tokens, then 3, give the outputs of the whole sequence fed "
        "without a cache", weight=0.5)
def block_cache(student, rng):
    _fed_in_pieces(student, rng, "DecoderBlock", (16, 4, 2, 24), _tensor(rng, (2, 5, 16)), ((0, 2), (2, 5)),
                   "pass the cache to the attention", lambda module, state, x, label: _block_formula(
                       student, module, state, x, label))


# ---- chapter 8: angles in float64, as the texts say -------------------------------------------------

def _rope(x, positions, base=10000.0):
    """RoPE as the text defines it, in float64: feature i rotated with feature i + d_h/2 by the angle
    position * base^(-2i/d_h)."""
    import torch
    half = x.shape[-1] // 2
    angle = positions.double()[..., None] * base ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()], dim=-1)


def _expect_formula(got, expected, what, rtol, atol, hint, dtype=None):
    """`got` is `expected` (float64, from the text's formula) in `dtype` (float32 unless given)."""
    import torch
    dtype = dtype or torch.float32
    got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
    if not isinstance(got, torch.Tensor):
        raise CheckFailure(f"{what}: expected a {str(dtype)[6:]} tensor of shape {tuple(expected.shape)}, got "
                           f"{describe(got)}")
    if got.dtype != dtype or got.shape != expected.shape:
        raise CheckFailure(f"{what}: expected {str(dtype)[6:]} {tuple(expected.shape)}, got {got.dtype} "
                           f"{tuple(got.shape)}")
    if not _close(got, expected, rtol, atol):
        bad = ~torch.isclose(got.double(), expected, rtol=rtol, atol=atol)
        index = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise CheckFailure(f"{what}: value at index {list(index)} is {got[index].item():.9g}, expected "
                           f"{expected[index].item():.9g} ({int(bad.sum())} of {bad.numel()} entries differ; tolerance "
                           f"rtol={rtol:g}, atol={atol:g}): {hint}")


@stated("08-transformer", "sinusoidal_positions", "a long sequence, 4,096 positions: angles computed in float64 (in "
        "float32, position * frequency is off by 1e-4 there)", weight=0.5)
def sinusoidal_long(student, rng):
    import torch
    n, dim = 4096, 8
    angle = torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    expected = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)
    _expect_formula(student.call("sinusoidal_positions", n, dim), expected, f"sinusoidal_positions({n}, {dim})", 1e-5,
                    1e-5, "compute position * base^(-2i/dim) in float64 (torch.arange(n, dtype=torch.float64)), and "
                    "convert to float32 only at the end")


@stated("08-transformer", "apply_rope", "float32 x at positions up to 100,000 (a long context): angles computed in "
        "float64, then cos and sin converted", weight=0.5)
def rope_long(student, rng):
    import torch
    x, positions = _tensor(rng, (2, 6, 16)), torch.from_numpy(rng.integers(0, 100_000, size=6))
    _expect_formula(student.call("apply_rope", x, positions), _rope(x, positions),
                    f"apply_rope(x {describe(x)}, positions {describe(positions)})", 1e-4, 1e-5, "compute the angles "
                    "position * theta_i in float64, then convert cos and sin to x's dtype (in float32, the angles are "
                    "off by 1e-4 at these positions)")


BLOCK_NAMES = ("attn_norm.weight", "mlp_norm.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def _expect_block_names(state, label):
    if any(name not in state for name in BLOCK_NAMES):
        raise CheckFailure(f"{label}: its state_dict lacks {', '.join(n for n in BLOCK_NAMES if n not in state)}")


def _block_formula(student, block, state, x, label):
    """The block's output on x as the text defines it, from the block's own parameters (`state`) and its
    own attention, which the student's process runs: x + attention(attn_norm(x)), then that plus
    down(SiLU(gate(h)) * up(h)) with h its mlp_norm."""
    import torch
    import torch.nn.functional as F
    _expect_block_names(state, label)
    norm = lambda x, w: w * x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)  # noqa: E731
    attention = student.call(block, "attention", method="get_submodule", keep=True, _label=f"{label}.attention")
    normed = norm(x, state["attn_norm.weight"])
    middle = x + torch.as_tensor(np.asarray(student.call(attention, normed, _label=f"{label}.attention")))
    h = norm(middle, state["mlp_norm.weight"])
    return middle + F.linear(F.silu(F.linear(h, state["gate_proj.weight"])) * F.linear(h, state["up_proj.weight"]),
                             state["down_proj.weight"])


@stated("08-transformer", "DecoderBlock", "the formula of the text, on the block's own parameters and attention: "
        "x + attention(attn_norm(x)), then that plus down(SiLU(gate(h)) * up(h)) with h its mlp_norm", weight=0.5)
def block_formula(student, rng):
    import torch
    dim, heads, kv_heads, hidden = 8, 2, 1, 12
    label = f"DecoderBlock{(dim, heads, kv_heads, hidden)} with parameters the grader loaded into it"
    block = student.call("DecoderBlock", dim, heads, kv_heads, hidden, keep=True, _label=label)
    state = {n: _tensor(rng, tuple(np.shape(v)), scale=0.5) for n, v in student.call(block, method="state_dict").items()}
    student.call(block, state, method="load_state_dict")
    _expect_block_names(state, label)
    x = _tensor(rng, (2, 4, dim))
    expected = _block_formula(student, block, state, x, label)
    got = torch.as_tensor(np.asarray(student.call(block, x, _label=label)))
    if not _close(got, expected, 1e-4, 1e-5):
        shown = (f"largest difference {(got - expected).abs().max():.3g}" if got.shape == expected.shape
                 else f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
        raise CheckFailure(f"{label}, on x {describe(x)}: not x + attention(attn_norm(x)), then that plus "
                           f"down(SiLU(gate(h)) * up(h)) with h its mlp_norm, computed here from the block's own "
                           f"parameters and attention ({shown}; tolerance rtol=1e-4, atol=1e-5): look at the residuals "
                           "(pre-norm: the norm's output goes into the sub-layer, its input is added to the result), "
                           "and SiLU on the gate branch only")
