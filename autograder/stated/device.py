"""The device rule, which every exercise on tensors states: run with its inputs on another device,
a call computes there and returns its tensors there.

`check` and `grade` run it alike, on the same cases, without the reference: each exercise's cases
(below, by chapter) are run twice by the student's own code, on the CPU, then with every tensor
and module on an emulated accelerator (`sandbox/emulated.py`: the CPU's arithmetic, with values,
and a GPU's rules: a tensor made on the CPU cannot meet its tensors, `.numpy()` refuses them;
`.item()`, boolean masks and `nonzero` work as on a GPU). No GPU is needed. The call on the
device must run, return its tensors all on the device, and return what the same call returns on
the CPU (the same tensors' shapes and dtypes, the same structure). `grade` adds, out of sight,
that the same calls on the CPU give the reference's values (`checks.core.device_checks`): the
device's points go with a correct result.

A rule's cases: `cases(make, rng)` returns sequences of calls (`on(...)`), each sequence run in
order with fresh objects (`Fresh("KVCache")`: a new cache per run, shared by the calls of the
sequence); `make(class_name, *init, **options)` builds the student's module (`check`: as the
student's constructor builds it; `grade`: holding parameters the grader draws).
"""
from dataclasses import dataclass, field

import numpy as np

from ..sandbox.emulated import NAME as DEVICE
from .calling import Shown, StudentError, called, describe, tensor
from .register import CheckFailure

DEVICE_RULE = ("outputs keep the input's device: make new tensors on it (torch.zeros(n, device=x.device), "
               "torch.arange(n, device=x.device), mask.to(x.device)) and move a module you build with "
               ".to(device=..., dtype=...)")
DEVICE_CHECK = ("keeps the input's device: run on an emulated GPU (the CPU's arithmetic, a GPU's rules), no tensor "
                "is made on the CPU")
ON_DEVICE = "with its inputs on the emulated GPU (device 'emulated': the CPU's arithmetic, a GPU's rules)"
COPIED = ("to numpy",)
MIXED = ("same device", "devices", "expected device", "device cpu")  # the emulated device's errors, and torch's own


@dataclass
class Made:
    """An object the student's process holds (`handle`), named `label` in the messages; `module`:
    the grader's own object holding the same parameters, where there is one (`grade`'s values)."""
    handle: object
    label: str
    module: object = None


@dataclass(frozen=True, eq=False)
class Fresh:
    """A new `class_name()` of the student's for each run of a sequence (a KVCache): one object
    per marker, shared by the calls of the sequence that name it."""
    class_name: str


@dataclass
class On:
    """One call of a sequence: `target` a function's name or a `Made`."""
    target: object
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def what(self):
        label = self.target.label if isinstance(self.target, Made) else self.target
        return called(label, None, tuple(Shown(a, _words) if _grader_object(a) else a for a in self.args), self.kwargs)


def _grader_object(value):
    """Whether `value` holds a Made or a Fresh, which only their label or kind can show."""
    if isinstance(value, (Made, Fresh)):
        return True
    return type(value) in (list, tuple) and any(_grader_object(v) for v in value)


def on(target, *args, **kwargs):
    return On(target, args, kwargs)


def _words(value):
    """A Made by its label, a Fresh by its kind, lists and tuples item by item, the rest described."""
    if isinstance(value, Made):
        return value.label
    if isinstance(value, Fresh):
        return f"a {value.class_name}"
    if type(value) in (list, tuple):
        inner = ", ".join(_words(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return describe(value)


class OwnCode:
    """How `check` runs the rule: the student's modules as their constructors build them, and no
    values to compare with (they are the solutions')."""

    def module(self, student, rng, class_name, *init, double=False, **_):
        label = f"{class_name}({', '.join(map(repr, init))})"
        handle = student.call(class_name, *init, keep=True, _label=label)
        if double:
            handle, label = student.call(handle, method="double", keep=True, _label=label + ".double()"), label + ".double()"
        return Made(handle, label)

    def values(self, student, rng, sequence):
        pass


@dataclass(frozen=True)
class DeviceRule:
    assignment: str
    exercise: str
    name: str
    weight: float
    cases: callable  # cases(make, rng) -> [[On]]

    @property
    def key(self):
        """The rule's stable name, which seeds its inputs: not its sentence's."""
        return f"{self.assignment}/{self.exercise}/device"

    def run(self, student, rng, env=OwnCode()):
        """Each sequence of `cases` on the CPU, then on the emulated GPU (fresh objects each time), compared call
        by call (the CPU first: a call that fails there too tells nothing of devices); then
        `env.values` (`grade`: the reference's values on the CPU). `rng`: `rng_for(self.key, the run's
        seed)`."""
        for sequence in self.cases(Maker(student, rng, env), rng):
            on_cpu = _run(student, sequence, "cpu")
            on_device = _run(student, sequence, DEVICE)
            for run, there, cpu in zip(sequence, on_device, on_cpu):
                what = f"{run.what()} {ON_DEVICE}"
                if not tensor_devices(there):  # None, a number: nothing was seen to keep the device
                    raise CheckFailure(f"{what} returned no tensor ({describe_layout(there)}): it should return "
                                       "its result's tensors, on the inputs' device")
                for where, found in tensor_devices(there):
                    if found != DEVICE:
                        raise CheckFailure(f"{what} returned {where} on the {found}: {DEVICE_RULE}")
                expect_layout(there, cpu, what, against="the same call on the CPU")
            env.values(student, rng, sequence)


class Maker:
    """`make(class_name, *init, **options)`: the student's module, built as `env` builds it."""

    def __init__(self, student, rng, env):
        self.student, self.rng, self.env = student, rng, env

    def __call__(self, class_name, *init, **options):
        return self.env.module(self.student, self.rng, class_name, *init, **options)


_RULES = []


def device_rule(assignment, exercise, cases, name=DEVICE_CHECK, weight=0.5):
    """Registers the device rule of `exercise` on the calls of `cases(make, rng)`."""
    _RULES.append(DeviceRule(assignment, exercise, name, weight, cases))


def device_rules(assignment, exercise=None):
    return [r for r in _RULES if r.assignment == assignment and exercise in (None, r.exercise)]


def _run(student, sequence, device):
    """The layouts of the calls of `sequence`, run in order with every tensor and module on `device`."""
    fresh = {}

    def resolve(value):
        if isinstance(value, Made):
            return value.handle
        if isinstance(value, Fresh):
            if id(value) not in fresh:
                fresh[id(value)] = student.call(value.class_name, keep=True, _label=f"{value.class_name}()")
            return fresh[id(value)]
        if type(value) in (list, tuple):
            return type(value)(resolve(v) for v in value)
        return value

    layouts = []
    for run in sequence:
        target = run.target.handle if isinstance(run.target, Made) else run.target
        label = run.target.label if isinstance(run.target, Made) else None
        try:
            layouts.append(student.call(target, *resolve(run.args), _device=device, _label=label, **run.kwargs))
        except StudentError as error:
            if device == "cpu":
                raise CheckFailure(f"{error}, on the CPU: the device rule compares a call on the emulated GPU with "
                                   "the same call on the CPU, which must run") from None
            if any(t in str(error) for t in COPIED):
                happened = "converted a tensor of the device to NumPy (.numpy(): copy it with .cpu() first, or keep the work in torch), on the line named: "
            elif any(t in str(error) for t in MIXED):
                happened = "met a tensor made on the CPU, on the line named: "
            else:  # no sign of a device in the error: say only where it happened (a hint needs its evidence)
                raise CheckFailure(f"{error}. That is {ON_DEVICE}, where the same call on the CPU ran: look at what "
                                   f"differs between the two on the line named. {DEVICE_RULE}") from None
            raise CheckFailure(f"{error}. {ON_DEVICE[0].upper()}{ON_DEVICE[1:]}, this call {happened}{DEVICE_RULE}"
                               ) from None
    return layouts


def tensor_devices(description, where="the result"):
    """[(where, device)] of every tensor in a `layout`."""
    if isinstance(description, dict) and isinstance(description.get("device"), str):
        return [(f"{where} (a tensor)" if where == "the result" else where, description["device"])]
    if isinstance(description, dict) and set(description) == {"module"} and isinstance(description["module"], dict):
        return [pair for name, d in description["module"].items()
                for pair in tensor_devices(d, f"the module's {name}")]
    if isinstance(description, dict):
        return [pair for key, d in description.items() for pair in tensor_devices(d, f"{where}[{key!r}]")]
    if isinstance(description, (list, tuple)):
        return [pair for i, d in enumerate(description) for pair in tensor_devices(d, f"{where}[{i}]")]
    return []


def describe_layout(g):
    """A `layout` in words: `a float32 tensor of shape (2, 3)`, `a NoneType`, `2 values`."""
    if isinstance(g, dict) and isinstance(g.get("shape"), list):
        return f"a {g.get('dtype')} tensor of shape {tuple(g['shape'])}"
    if isinstance(g, dict) and set(g) == {"type"}:
        return f"a {g['type']}"
    if isinstance(g, dict) and set(g) == {"module"}:
        return "a module"
    if isinstance(g, (list, tuple)):
        return f"{len(g)} values"
    return "a dict" if isinstance(g, dict) else describe(g)


def expect_layout(got, expected, what, where="the result", against="the reference"):
    """`got`, a `layout`, is made as `expected` is: the same tensors' shapes and dtypes, the same
    structure (a module: at least `expected`'s tensors, by shape and dtype, whatever their names)."""
    say = describe_layout
    fail = lambda: CheckFailure(f"{what} returned, as {where}, {say(got)}; {against} returns {say(expected)}")  # noqa: E731
    if isinstance(expected, dict) and isinstance(expected.get("shape"), list):
        if not (isinstance(got, dict) and (got.get("shape"), got.get("dtype")) == (expected["shape"], expected["dtype"])):
            raise fail()
    elif isinstance(expected, dict) and set(expected) == {"module"}:
        if not (isinstance(got, dict) and set(got) == {"module"} and isinstance(got["module"], dict)):
            raise fail()
        have = sorted((tuple(t.get("shape", ())), t.get("dtype"))
                      for t in got["module"].values() if isinstance(t, dict))
        for name, t in expected["module"].items():
            key = (tuple(t["shape"]), t["dtype"])
            if key not in have:
                raise CheckFailure(f"{what} returned a module without a {t['dtype']} tensor of shape {key[0]} "
                                   f"({against}'s {name}): make its parameters on the device and in the dtype "
                                   "of what it copies")
            have.remove(key)
    elif isinstance(expected, (list, tuple)):
        if not (isinstance(got, (list, tuple)) and len(got) == len(expected)):
            raise fail()
        for i, (g, e) in enumerate(zip(got, expected)):
            expect_layout(g, e, what, f"item {i} of the result" if where == "the result" else f"{where}[{i}]", against)
    elif isinstance(expected, dict) and set(expected) == {"type"}:
        if got != expected:
            raise fail()
    elif isinstance(expected, dict):
        if not (isinstance(got, dict) and set(got) == set(expected)):
            raise fail()
        for key in expected:
            expect_layout(got[key], expected[key], what, f"{where}[{key!r}]", against)


# ---- the inputs ----------------------------------------------------------------------------------

def _padding(rng, shape):
    """Right padding (True = a real item), at least one real item per row."""
    import torch
    *batch, n = shape
    return torch.from_numpy(np.arange(n) < rng.integers(1, n + 1, size=batch)[..., None])


def _mask(rng, shape, p=0.6):
    """A boolean mask (True = may attend) with at least one True in every row."""
    import torch
    mask = rng.random(shape) < p
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(len(rows)), rng.integers(0, shape[-1], len(rows))] = True
    return torch.from_numpy(rows.reshape(shape))


def _sizes(rng, count):
    """`count` different sizes from 2 to 7: a wrong axis cannot pass by accident."""
    return [int(n) for n in rng.choice(np.arange(2, 8), size=count, replace=False)]


def _tokens(rng, vocab, shape):
    import torch
    return torch.from_numpy(rng.integers(0, vocab, size=shape))


# ---- chapter 2 -----------------------------------------------------------------------------------
# train_classifier is not run there: it reads its losses with .item(), which the meta device (it
# has no data) cannot answer; benchmarks/cuda_references.py runs it on a GPU.

def _pool_cases(make, rng):
    cases = []
    for shape in ((3, 5, 4), (2, 7, 3)):
        x, scores = tensor(rng, shape), tensor(rng, shape[:-1], scale=2.0)
        cases += [[on("attention_pool", x, scores)], [on("attention_pool", x, scores, _padding(rng, shape[:-1]))]]
    return cases


def _gap_cases(make, rng):
    module, x = make("GlobalAttentionPooling", 4), tensor(rng, (2, 5, 4))
    return [[on(module, x)], [on(module, x, _padding(rng, (2, 5)))]]


def _classifier_cases(make, rng):
    module = make("AttentionDocClassifier", 30, 8, 4, by_shape=True)
    return [[on(module, _tokens(rng, 30, (3, 7)), _padding(rng, (3, 7)))]]


def _mass_cases(make, rng):
    import torch
    cases = []
    for shape in ((3, 5), (2, 2, 4)):
        weights = torch.from_numpy(rng.random(shape))
        cases.append([on("attention_mass", (weights / weights.sum(-1, keepdim=True)).float(),
                         torch.from_numpy(rng.random(shape) < 0.4))])
    return cases


device_rule("02-global-attention", "attention_pool", _pool_cases)
device_rule("02-global-attention", "GlobalAttentionPooling", _gap_cases)
device_rule("02-global-attention", "AttentionDocClassifier", _classifier_cases)
device_rule("02-global-attention", "attention_mass", _mass_cases)


# ---- chapter 3 -----------------------------------------------------------------------------------

def _lookup_cases(make, rng):
    return [[on("soft_lookup", tensor(rng, (3,)), tensor(rng, (6, 3)), tensor(rng, (6, 2)), 0.5)],
            [on("soft_lookup", tensor(rng, (7, 3)), tensor(rng, (5, 3)), tensor(rng, (5, 4)), 1.0)]]


def _scores_cases(name):
    return lambda make, rng: [[on(name, tensor(rng, (2, 3, 5)), tensor(rng, (2, 4, 5)))]]


def _score_module_cases(class_name, *init):
    def cases(make, rng):
        module = make(class_name, *init, by_shape=True)
        return [[on(module, tensor(rng, (2, 4, 3)), tensor(rng, (2, 6, 5)))]]
    return cases


def _masked_softmax_cases(make, rng):
    scores, empty = tensor(rng, (2, 3, 5)), _mask(rng, (2, 3, 5))
    empty[0, 1] = False  # a row with every key masked
    return [[on("masked_softmax", scores)], [on("masked_softmax", scores, empty)],
            [on("masked_softmax", scores, _mask(rng, (5,)))]]


def _attention_cases(make, rng):
    import torch
    cases = []
    for batch, dtype, masks in (((), torch.float32, [None]), ((2, 3), torch.float64, ["full", "shared"])):
        nq, nk, dk, dv = _sizes(rng, 4)
        q, k, v = (tensor(rng, batch + shape, dtype) for shape in ((nq, dk), (nk, dk), (nk, dv)))
        for mask in masks:
            shape = batch + (nq, nk) if mask == "full" else (nq, nk)
            cases.append([on("attention", q, k, v, *([] if mask is None else [_mask(rng, shape, p=0.5)]))])
    return cases


device_rule("03-qkv", "soft_lookup", _lookup_cases)
device_rule("03-qkv", "dot_product_scores", _scores_cases("dot_product_scores"))
device_rule("03-qkv", "scaled_dot_product_scores", _scores_cases("scaled_dot_product_scores"))
device_rule("03-qkv", "GeneralScore", _score_module_cases("GeneralScore", 3, 5))
device_rule("03-qkv", "AdditiveScore", _score_module_cases("AdditiveScore", 3, 5, 4))
device_rule("03-qkv", "masked_softmax", _masked_softmax_cases)
device_rule("03-qkv", "attention", _attention_cases)


# ---- chapter 4 -----------------------------------------------------------------------------------
# count_parameters takes and returns numbers only.

BERT_NAMES = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense")


def _split_cases(make, rng):
    n, h, d_h = _sizes(rng, 3)
    return [[on("split_heads", tensor(rng, (2, n, h * d_h)), h)]]


def _merge_cases(make, rng):
    n, h, d_h = _sizes(rng, 3)
    return [[on("merge_heads", tensor(rng, (2, h, n, d_h)))]]


def _mha_cases(make, rng):
    n, h, d_h = _sizes(rng, 3)
    module = make("MultiHeadAttention", h * d_h, h, True)
    q, k, v = tensor(rng, (2, n, h * d_h)), tensor(rng, (2, n + 1, h * d_h)), tensor(rng, (2, n + 1, h * d_h))
    return [[on(module, q, k, v)], [on(module, q, k, v, _padding(rng, (2, 1, 1, n + 1)))]]


def torch_mha(student, rng, dim, heads, bias=True):
    """nn.MultiheadAttention(dim, heads, bias, batch_first=True) with random parameters, in the
    student's process and here (torch's own module: no reference in it)."""
    import torch
    module = torch.nn.MultiheadAttention(dim, heads, bias=bias, batch_first=True)
    state = {name: tensor(rng, tuple(p.shape), scale=0.5) for name, p in module.state_dict().items()}
    module.load_state_dict(state)
    label = f"nn.MultiheadAttention({dim}, {heads}, bias={bias}, batch_first=True)"
    nn = student.call("torch", "nn", method="__getattribute__", keep=True, _label="torch.nn")
    made = student.call(nn, "MultiheadAttention", method="__getattribute__", keep=True, _label="nn.MultiheadAttention")
    handle = student.call(made, dim, heads, bias=bias, batch_first=True, keep=True, _label=label)
    student.call(handle, state, method="load_state_dict")
    return Made(handle, label, module.eval())


def bert_state(rng, dim):
    """A random state of a BERT attention block, with BERT's names (the exercise's text lists them)."""
    state = {}
    for name in BERT_NAMES:
        key = name.removeprefix("attention.")
        state[f"{key}.weight"], state[f"{key}.bias"] = tensor(rng, (dim, dim), scale=0.5), tensor(rng, (dim,), scale=0.5)
    state["output.LayerNorm.weight"], state["output.LayerNorm.bias"] = tensor(rng, (dim,)), tensor(rng, (dim,))
    return state


def _from_torch_cases(make, rng):
    return [[on("mha_from_torch", torch_mha(make.student, rng, 6, 2))]]


def _from_bert_cases(make, rng):
    return [[on("mha_from_bert", bert_state(rng, 8), 2)]]


def _bert_mask_cases(make, rng):
    import torch
    lengths = rng.integers(1, 8, size=3)
    return [[on("bert_padding_mask", torch.from_numpy((np.arange(int(lengths.max()) + 1) < lengths[:, None])
                                                      .astype(np.int64)))]]


device_rule("04-multi-head", "split_heads", _split_cases)
device_rule("04-multi-head", "merge_heads", _merge_cases)
device_rule("04-multi-head", "MultiHeadAttention", _mha_cases)
device_rule("04-multi-head", "mha_from_torch", _from_torch_cases, DEVICE_CHECK + "; the copy's parameters on m's device")
device_rule("04-multi-head", "bert_padding_mask", _bert_mask_cases)
device_rule("04-multi-head", "mha_from_bert", _from_bert_cases,
            DEVICE_CHECK + "; the module's parameters on the state's device")


# ---- chapter 5 -----------------------------------------------------------------------------------
# causal_mask and sliding_window_mask take sizes only: their masks are made on the CPU, and the
# code that uses them moves them (mask.to(x.device)). train_lm is not run on the meta device: it
# reads each loss with .item(), which a device without data cannot answer.

TINY_LM = (11, 12, 2, 2, 10)  # vocab_size, embed_dim, num_heads, num_layers, context
GENERATE_LM = (13, 16, 2, 2, 12)


def _padding_mask_cases(make, rng):
    import torch
    return [[on("padding_mask", torch.from_numpy(rng.integers(1, 6, size=3)), 5)]]


def _graph_cases(make, rng):
    import torch
    directed = torch.from_numpy(rng.random((5, 5)) < 0.4)
    directed.fill_diagonal_(False)
    batched = torch.from_numpy((rng.random((2, 4, 4)) < 0.5).astype(np.int64))
    weighted = torch.from_numpy(rng.random((3, 3)) * (rng.random((3, 3)) < 0.5))
    return [[on("graph_mask", a)] for a in (directed, batched, weighted)]


def _layer_cases(make, rng):
    heads = int(rng.integers(1, 4))
    dim = heads * int(rng.integers(2, 5))
    layer, x, cache = make("CausalSelfAttention", dim, heads), tensor(rng, (2, 5, dim)), Fresh("KVCache")
    return [[on(layer, x)], [on(layer, x[:, :3], cache), on(layer, x[:, 3:], cache)]]


def _lm_cases(make, rng):
    model, x = make("TinyLM", *TINY_LM, scale=0.5), _tokens(rng, TINY_LM[0], (2, 6))
    held = [Fresh("KVCache") for _ in range(TINY_LM[3])]
    return [[on(model, x)], [on(model, x[:, :4], held), on(model, x[:, 4:], held)]]


def _generate_cases(make, rng):
    model, prompt = make("TinyLM", *GENERATE_LM, scale=0.5), _tokens(rng, GENERATE_LM[0], (2, 3))
    return [[on("generate", model, prompt, 4, use_cache=use_cache)] for use_cache in (True, False)]


device_rule("05-self-masked", "padding_mask", _padding_mask_cases)
device_rule("05-self-masked", "graph_mask", _graph_cases)
device_rule("05-self-masked", "CausalSelfAttention", _layer_cases, DEVICE_CHECK + ", with a KVCache too")
device_rule("05-self-masked", "TinyLM", _lm_cases, DEVICE_CHECK + ", with caches too")
device_rule("05-self-masked", "generate", _generate_cases, DEVICE_CHECK + " (greedy, with and without the cache)")


# ---- chapter 6 -----------------------------------------------------------------------------------
# The kernels and the estimators before LearnedKernelRegression are NumPy; its fit reads each loss
# with .item(), which the meta device (it has no data) cannot answer: its forward is run there.

def _learned_cases(make, rng):
    import torch
    model = make("LearnedKernelRegression", 1.0)
    x = np.sort(rng.uniform(0.0, 5.0, 12))
    x, y = torch.from_numpy(x), torch.from_numpy(2 * np.sin(x) + x ** 0.8 + rng.normal(0, 0.5, 12))
    queries = torch.from_numpy(np.sort(rng.uniform(-0.5, 5.5, 9)))
    return [[on(model, queries, x, y)], [on(model, x, x, y, leave_one_out=True)]]


device_rule("06-nadaraya-watson", "LearnedKernelRegression", _learned_cases,
            DEVICE_CHECK + " (forward, leave_one_out too)")


# ---- chapter 7 -----------------------------------------------------------------------------------
# online_softmax is NumPy and hbm_traffic counts; the Triton kernel runs on the data of its inputs'
# device (interpreted on the CPU here): benchmarks/cuda_references.py runs it on a GPU.

def _tiled_cases(make, rng):
    import torch

    def qkv(n_q, n_k, dtype=torch.float64):
        return tensor(rng, (2, n_q, 8), dtype), tensor(rng, (2, n_k, 8), dtype), tensor(rng, (2, n_k, 6), dtype)
    return [[on("tiled_attention", *qkv(20, 28), block_q=8, block_k=8)],
            [on("tiled_attention", *qkv(20, 28), block_q=8, block_k=8, causal=True)],
            [on("tiled_attention", *qkv(12, 12, torch.float32), block_q=8, block_k=4, causal=True)]]


device_rule("07-flash-tiling", "tiled_attention", _tiled_cases)


# ---- chapter 8 -----------------------------------------------------------------------------------
# sinusoidal_positions and alibi_bias take sizes only: their tensors are made on the CPU, and the
# code that uses them moves them. kv_cache_bytes is a number. block_from_llama copies a layer that
# lives on the CPU (its text says so).

DECODER_BLOCK = (16, 4, 2, 24)  # embed_dim, num_heads, num_kv_heads, hidden_dim


def _rope_cases(make, rng):
    import torch
    return [[on("apply_rope", tensor(rng, (2, 3, 5, 8)), torch.arange(5))],
            [on("apply_rope", tensor(rng, (2, 3, 5, 8)), torch.arange(10).reshape(2, 1, 5))]]


def _gqa_cases(make, rng):
    module, x, cache = make("GroupedQueryAttention", 16, 4, 2), tensor(rng, (2, 5, 16)), Fresh("KVCache")
    return [[on(module, x, None, _padding(rng, (2, 1, 1, 5)))],
            [on(module, x[:, :3], None, None, cache), on(module, x[:, 3:], None, None, cache)]]


def _block_cases(make, rng):
    block, x, cache = make("DecoderBlock", *DECODER_BLOCK, scale=0.5), tensor(rng, (2, 4, 16)), Fresh("KVCache")
    return [[on(block, x)], [on(block, x[:, :2], None, None, cache), on(block, x[:, 2:], None, None, cache)]]


device_rule("08-transformer", "apply_rope", _rope_cases)
device_rule("08-transformer", "GroupedQueryAttention", _gqa_cases,
            DEVICE_CHECK + ", with a padding mask and a KVCache too")
device_rule("08-transformer", "DecoderBlock", _block_cases, DEVICE_CHECK + ", with a KVCache too")
