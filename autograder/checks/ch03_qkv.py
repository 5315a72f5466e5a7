"""Checks of chapter 3, "Queries, keys and values" (PyTorch)."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from .core import check, expect_close, expect_true, plain, rng_for, student_object

ASSIGNMENT = "03-qkv"

DTYPES = (torch.float32, torch.float64)


# ---- inputs and comparisons ------------------------------------------------------------------

def tensor(rng, shape, dtype=torch.float32, scale=1.0):
    return torch.from_numpy(rng.normal(0.0, scale, shape)).to(dtype)


def tolerance(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-11)


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def describe(value):
    """A short description of an input for messages: shape and dtype, or the values if few."""
    if isinstance(value, torch.Tensor):
        dtype = dtype_name(value.dtype)
        if value.numel() <= 6:
            return f"tensor {value.tolist()} ({dtype})"
        return f"tensor of shape {tuple(value.shape)} ({dtype})"
    return repr(value)


def shown(*args):
    return ", ".join(describe(a) for a in args)


def qkv_cases(rng, dtypes=DTYPES):
    """(batch, Nq, Nk, d_k, d_v, dtype): no, one and two batch dimensions; Nq, Nk, d_k all
    different (a wrong axis or a scale by the wrong size cannot pass by accident)."""
    cases = []
    for batch, dtype in zip(((), (3,), (2, 3)), dtypes * 2):
        nq, nk, dk, dv = (int(n) for n in rng.choice(np.arange(2, 12), size=4, replace=False))
        cases.append((batch, nq, nk, dk, dv, dtype))
    return cases


def random_mask(rng, shape, p=0.6):
    """A boolean mask (True = may attend) with at least one allowed key in every row."""
    mask = rng.random(shape) < p
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(len(rows)), rng.integers(0, shape[-1], len(rows))] = True
    return torch.from_numpy(rows.reshape(shape))


def expect_same_call(student, ref, name, *args, what=None, dtype=torch.float32):
    got = student.call(name, *args)
    expected = plain(getattr(ref, name)(*args))
    expect_close(got, expected, what or f"{name}({shown(*args)})", **tolerance(dtype))
    return got


def expect_pair(got, what):
    """attention returns (out, weights)."""
    expect_true(isinstance(got, (tuple, list)) and len(got) == 2,
                f"{what} must return a pair (out, weights), got {type(got).__name__}"
                + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
    return got


def expect_attention(got, expected_out, expected_weights, what, dtype):
    out, weights = expect_pair(got, what)
    expect_close(out, plain(expected_out), f"{what}: out", **tolerance(dtype))
    if expected_weights is not None:
        expect_close(weights, plain(expected_weights), f"{what}: weights", **tolerance(dtype))
    return out, weights


def ref_module(ref, class_name, args, rng, dtype=torch.float32):
    """The reference's module with random (seeded) parameters."""
    module = getattr(ref, class_name)(*args)
    state = {name: tensor(rng, tuple(p.shape), scale=0.7) for name, p in module.state_dict().items()}
    module.load_state_dict(state)
    return module.to(dtype)


def student_module(student, class_name, args, module, dtype=torch.float32):
    """The student's module with the reference module's parameters loaded, in `dtype`."""
    handle = student_object(student, class_name, *args, state=module.float().state_dict())
    module.to(dtype)
    if dtype == torch.float64:
        handle = student.call(handle, method="double", keep=True)
    return handle


def student_function(student, name):
    """A Handle to the student's own function `name` (to pass it as an argument): the function's
    globals are the notebook's namespace, and the function is the value of its name there."""
    namespace = student.call(name, "__globals__", method="__getattribute__", keep=True)
    return student.call(namespace, name, method="get", keep=True)


def sdpa(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# ---- soft_lookup -----------------------------------------------------------------------------

def lookup_table(rng, n, d, dv, dtype=torch.float64):
    """Keys of very different lengths, two of them pointing the same way (k and 2k): the nearest
    key is not the one with the largest dot product."""
    keys = tensor(rng, (n, d), dtype) * torch.from_numpy(rng.uniform(0.3, 3.0, (n, 1))).to(dtype)
    keys[1] = 2 * keys[0]
    assert torch.cdist(keys, keys).add(torch.eye(n, dtype=dtype) * 10).min() > 0.3  # well separated
    return keys, tensor(rng, (n, dv), dtype)


@check("soft_lookup", "equals softmax(-||q - k_i||^2 / T)-weighted values for one query (d,)", weight=1.0)
def soft_lookup_reference(student, ref):
    rng = rng_for("soft_lookup_reference")
    for dtype in DTYPES:
        keys, values = lookup_table(rng, 6, 3, 2, dtype)
        for temperature in (0.5, 2.0, 10.0):
            query = tensor(rng, (3,), dtype)
            got = student.call("soft_lookup", query, keys, values, temperature)
            expected = plain(ref.soft_lookup(query, keys, values, temperature))
            expect_close(got, expected, f"soft_lookup(query {describe(query)}, keys {describe(keys)}, "
                         f"values {describe(values)}, temperature={temperature})", **tolerance(dtype))


@check("soft_lookup", "batch dimensions, and many queries (M, d) against one table (N, d)", weight=1.0)
def soft_lookup_batch(student, ref):
    rng = rng_for("soft_lookup_batch")
    cases = [((4, 3), (4, 5, 3), (4, 5, 2)),       # a batch: each query has its own table
             ((7, 3), (5, 3), (5, 4)),             # many queries, one table
             ((2, 3, 4), (2, 3, 6, 4), (2, 3, 6, 1))]
    for query_shape, keys_shape, values_shape in cases:
        query, keys, values = (tensor(rng, s, torch.float64) for s in (query_shape, keys_shape, values_shape))
        got = student.call("soft_lookup", query, keys, values, 1.5)
        expect_close(got, plain(ref.soft_lookup(query, keys, values, 1.5)),
                     f"soft_lookup(query {query_shape}, keys {keys_shape}, values {values_shape}, temperature=1.5)",
                     **tolerance(torch.float64))


@check("soft_lookup", "an exact lookup as T -> 0: the value of the nearest key", weight=1.0)
def soft_lookup_cold(student, ref):
    rng = rng_for("soft_lookup_cold")
    keys, values = lookup_table(rng, 6, 3, 2)
    for i in range(6):
        query = keys[i] + tensor(rng, (3,), keys.dtype, scale=1e-3)
        nearest = int(torch.argmin(((query - keys) ** 2).sum(-1)))
        for temperature in (1e-4, 1e-6):
            got = student.call("soft_lookup", query, keys, values, temperature)
            expect_close(got, values[nearest], f"soft_lookup(query = key {i} + noise of size 1e-3, "
                         f"keys {describe(keys)}, temperature={temperature}) should be the value of the nearest "
                         f"key {nearest} (the keys have different lengths: similarity is the negative squared "
                         "distance, not the dot product)", rtol=1e-6, atol=1e-6)


@check("soft_lookup", "uniform weights as T -> infinity: the mean of the values", weight=1.0)
def soft_lookup_hot(student, ref):
    rng = rng_for("soft_lookup_hot")
    keys, values = lookup_table(rng, 5, 4, 3)
    query = tensor(rng, (4,), keys.dtype)
    got = student.call("soft_lookup", query, keys, values, 1e7)
    expect_close(got, values.mean(0), f"soft_lookup(query, keys {describe(keys)}, temperature=1e7) should be "
                 "the mean of the values (the temperature divides the similarities)", rtol=1e-5, atol=1e-5)


# ---- dot_product_scores ----------------------------------------------------------------------

@check("dot_product_scores", "equals q @ k^T on random shapes with Nq, Nk and d_k all different", weight=1.0)
def dot_random(student, ref):
    rng = rng_for("dot_random")
    for batch, nq, nk, dk, _, _ in qkv_cases(rng):
        q, k = tensor(rng, batch + (nq, dk)), tensor(rng, batch + (nk, dk))
        expect_same_call(student, ref, "dot_product_scores", q, k)


@check("dot_product_scores", "square shapes (Nq = Nk = d_k): s[i, j] = q_i . k_j, not k_i . q_j", weight=1.0)
def dot_square(student, ref):
    rng = rng_for("dot_square")
    for batch in ((), (2,)):
        q, k = tensor(rng, batch + (4, 4)), tensor(rng, batch + (4, 4))
        expect_same_call(student, ref, "dot_product_scores", q, k)


@check("dot_product_scores", "any number of leading batch dimensions (0 to 3)", weight=1.0)
def dot_batch(student, ref):
    rng = rng_for("dot_batch")
    for batch in ((), (5,), (2, 3), (2, 1, 3)):
        q, k = tensor(rng, batch + (3, 6)), tensor(rng, batch + (5, 6))
        expect_same_call(student, ref, "dot_product_scores", q, k)
    q, k = tensor(rng, (2, 1, 3, 6)), tensor(rng, (1, 4, 5, 6))      # batch dimensions broadcast
    expect_same_call(student, ref, "dot_product_scores", q, k)


@check("dot_product_scores", "float64 in, float64 out", weight=1.0)
def dot_dtype(student, ref):
    rng = rng_for("dot_dtype")
    q, k = tensor(rng, (2, 3, 5), torch.float64), tensor(rng, (2, 4, 5), torch.float64)
    expect_same_call(student, ref, "dot_product_scores", q, k, dtype=torch.float64)


# ---- scaled_dot_product_scores ---------------------------------------------------------------

@check("scaled_dot_product_scores", "equals q @ k^T / sqrt(d_k) on random shapes (Nq, Nk, d_k all different)",
       weight=1.0)
def scaled_random(student, ref):
    rng = rng_for("scaled_random")
    for batch, nq, nk, dk, _, dtype in qkv_cases(rng):
        q, k = tensor(rng, batch + (nq, dk), dtype), tensor(rng, batch + (nk, dk), dtype)
        expect_same_call(student, ref, "scaled_dot_product_scores", q, k, dtype=dtype)


@check("scaled_dot_product_scores", "divides by sqrt(d_k), the key dimension, not by sqrt(number of tokens)",
       weight=1.0)
def scaled_factor(student, ref):
    rng = rng_for("scaled_factor")
    nq, nk, dk = 6, 9, 16
    q, k = tensor(rng, (2, nq, dk), torch.float64), tensor(rng, (2, nk, dk), torch.float64)
    got = student.call("scaled_dot_product_scores", q, k)
    expected = plain(ref.scaled_dot_product_scores(q, k))
    expect_true(isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(expected.shape),
                f"scaled_dot_product_scores(q (2, {nq}, {dk}), k (2, {nk}, {dk})) must return a tensor "
                f"of shape {tuple(expected.shape)}")
    raw = (q @ k.transpose(-2, -1)).numpy()
    factor = float(np.median(got.numpy() / raw))
    for size, name in ((nk, "the number of keys Nk"), (nq, "the number of queries Nq"), (dk, "d_k")):
        expect_true(not np.isclose(factor, 1 / size, rtol=1e-3),
                    f"scaled_dot_product_scores(q (2, {nq}, {dk}), k (2, {nk}, {dk})): the dot products were "
                    f"divided by {size} = {name}; divide by sqrt(d_k) = sqrt({dk}) = {math.sqrt(dk):g}")
    for size, name in ((nk, "Nk, the number of keys (tokens)"), (nq, "Nq, the number of queries")):
        expect_true(not np.isclose(factor, 1 / math.sqrt(size), rtol=1e-3),
                    f"scaled_dot_product_scores(q (2, {nq}, {dk}), k (2, {nk}, {dk})): the dot products were "
                    f"divided by sqrt({size}), the square root of {name}; the scale is sqrt(d_k) = sqrt({dk}), "
                    "the dimension of the keys")
    expect_close(got, expected, f"scaled_dot_product_scores(q (2, {nq}, {dk}), k (2, {nk}, {dk}))",
                 **tolerance(torch.float64))


@check("scaled_dot_product_scores", "unit-variance q and k give scores of variance about 1 at every d_k",
       weight=1.0)
def scaled_variance(student, ref):
    rng = rng_for("scaled_variance")
    for dk in (8, 256):
        q, k = tensor(rng, (2, 8, dk)), tensor(rng, (2, 12, dk))
        got = student.call("scaled_dot_product_scores", q, k)
        expect_true(isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 8, 12),
                    f"scaled_dot_product_scores(q (2, 8, {dk}), k (2, 12, {dk})) must return a tensor of shape "
                    f"(2, 8, 12), got {describe(got)}")
        variance = float(got.double().var())
        expect_true(0.6 < variance < 1.6,
                    f"scaled_dot_product_scores of unit-variance q (2, 8, {dk}) and k (2, 12, {dk}): the scores "
                    f"have variance {variance:.3g}, expected about 1 (q . k has variance d_k = {dk})")


@check("scaled_dot_product_scores", "any leading batch dimensions; float64 in, float64 out", weight=1.0)
def scaled_batch(student, ref):
    rng = rng_for("scaled_batch")
    for batch, dtype in (((), torch.float64), ((4,), torch.float32), ((2, 2), torch.float64)):
        q, k = tensor(rng, batch + (3, 7), dtype), tensor(rng, batch + (6, 7), dtype)
        expect_same_call(student, ref, "scaled_dot_product_scores", q, k, dtype=dtype)


# ---- GeneralScore ----------------------------------------------------------------------------

def expect_parameters(student, handle, expected, what):
    state = student.call(handle, method="state_dict")
    expect_true(isinstance(state, dict), f"{what}.state_dict() should be a dict")
    shapes = {name: tuple(value.shape) for name, value in state.items() if hasattr(value, "shape")}
    expect_true(shapes == expected, f"{what} should have the parameters {expected} (name: shape), "
                f"found {shapes}: keep the attribute names, the dimensions and bias=False")


@check("GeneralScore", "W = nn.Linear(key_dim, query_dim, bias=False): parameter W.weight (query_dim, key_dim)",
       weight=1.0)
def general_parameters(student, ref):
    for dq, dk in ((3, 5), (6, 2)):
        handle = student.call("GeneralScore", dq, dk, keep=True)
        expect_parameters(student, handle, {"W.weight": (dq, dk)}, f"GeneralScore(query_dim={dq}, key_dim={dk})")


@check("GeneralScore", "score = q . (W k) with query_dim != key_dim and Nq != Nk", weight=1.0)
def general_random(student, ref):
    rng = rng_for("general_random")
    for batch, nq, nk, dq, dk, _ in qkv_cases(rng, (torch.float32,)):
        module = ref_module(ref, "GeneralScore", (dq, dk), rng)
        handle = student_module(student, "GeneralScore", (dq, dk), module)
        q, k = tensor(rng, batch + (nq, dq)), tensor(rng, batch + (nk, dk))
        expect_close(student.call(handle, q, k), plain(module(q, k)),
                     f"GeneralScore({dq}, {dk}) with the grader's W, on q {describe(q)} and k {describe(k)}",
                     **tolerance(torch.float32))


@check("GeneralScore", "square (query_dim = key_dim): W applies to the keys, s_ij = q_i^T W k_j", weight=1.0)
def general_square(student, ref):
    rng = rng_for("general_square")
    module = ref_module(ref, "GeneralScore", (4, 4), rng)
    handle = student_module(student, "GeneralScore", (4, 4), module)
    q, k = tensor(rng, (2, 3, 4)), tensor(rng, (2, 5, 4))
    expect_close(student.call(handle, q, k), plain(module(q, k)),
                 f"GeneralScore(4, 4) with a non-symmetric W, on q {describe(q)} and k {describe(k)} "
                 "(s_ij = q_i . (W k_j), not (W q_i) . k_j)", **tolerance(torch.float32))


@check("GeneralScore", "float64 and any leading batch dimensions", weight=1.0)
def general_float64(student, ref):
    rng = rng_for("general_float64")
    module = ref_module(ref, "GeneralScore", (3, 5), rng, torch.float64)
    handle = student_module(student, "GeneralScore", (3, 5), module, torch.float64)
    for batch in ((), (2, 2)):
        q, k = tensor(rng, batch + (4, 3), torch.float64), tensor(rng, batch + (6, 5), torch.float64)
        expect_close(student.call(handle, q, k), plain(module(q, k)),
                     f"GeneralScore(3, 5).double() on q {describe(q)} and k {describe(k)}", **tolerance(torch.float64))


# ---- AdditiveScore ---------------------------------------------------------------------------

@check("AdditiveScore", "parameters W_q (hidden, query_dim), W_k (hidden, key_dim), v (1, hidden), no biases",
       weight=1.0)
def additive_parameters(student, ref):
    for dq, dk, h in ((3, 5, 7), (4, 2, 6)):
        handle = student.call("AdditiveScore", dq, dk, h, keep=True)
        expect_parameters(student, handle, {"W_q.weight": (h, dq), "W_k.weight": (h, dk), "v.weight": (1, h)},
                          f"AdditiveScore(query_dim={dq}, key_dim={dk}, hidden_dim={h})")


@check("AdditiveScore", "score = v . tanh(W_q q_i + W_k k_j), shape (..., Nq, Nk), query_dim != key_dim",
       weight=1.0)
def additive_random(student, ref):
    rng = rng_for("additive_random")
    for batch, nq, nk, dq, dk, _ in qkv_cases(rng, (torch.float32,)):
        h = int(rng.integers(3, 9))
        module = ref_module(ref, "AdditiveScore", (dq, dk, h), rng)
        handle = student_module(student, "AdditiveScore", (dq, dk, h), module)
        q, k = tensor(rng, batch + (nq, dq), scale=2.0), tensor(rng, batch + (nk, dk), scale=2.0)
        expect_close(student.call(handle, q, k), plain(module(q, k)),
                     f"AdditiveScore({dq}, {dk}, {h}) with the grader's weights, on q {describe(q)} and "
                     f"k {describe(k)}", **tolerance(torch.float32))


@check("AdditiveScore", "tanh bounds the hidden units: large inputs give scores of at most sum|v|", weight=1.0)
def additive_saturation(student, ref):
    rng = rng_for("additive_saturation")
    module = ref_module(ref, "AdditiveScore", (3, 3, 5), rng)
    handle = student_module(student, "AdditiveScore", (3, 3, 5), module)
    q, k = tensor(rng, (2, 4, 3), scale=100.0), tensor(rng, (2, 6, 3), scale=100.0)
    expect_close(student.call(handle, q, k), plain(module(q, k)),
                 f"AdditiveScore(3, 3, 5) on large inputs q {describe(q)} and k {describe(k)} "
                 "(tanh is applied to the sum W_q q_i + W_k k_j)", **tolerance(torch.float32))


@check("AdditiveScore", "float64 and any leading batch dimensions", weight=1.0)
def additive_float64(student, ref):
    rng = rng_for("additive_float64")
    module = ref_module(ref, "AdditiveScore", (3, 5, 4), rng, torch.float64)
    handle = student_module(student, "AdditiveScore", (3, 5, 4), module, torch.float64)
    for batch in ((), (2, 2)):
        q, k = tensor(rng, batch + (4, 3), torch.float64), tensor(rng, batch + (6, 5), torch.float64)
        expect_close(student.call(handle, q, k), plain(module(q, k)),
                     f"AdditiveScore(3, 5, 4).double() on q {describe(q)} and k {describe(k)}",
                     **tolerance(torch.float64))


# ---- masked_softmax --------------------------------------------------------------------------

@check("masked_softmax", "mask=None: a softmax over the last axis (the keys), any shape, float32 and float64",
       weight=1.0)
def masked_softmax_plain(student, ref):
    rng = rng_for("masked_softmax_plain")
    for shape, dtype in (((4, 6), torch.float32), ((2, 3, 5), torch.float64), ((2, 2, 4, 3), torch.float32)):
        scores = tensor(rng, shape, dtype, scale=3.0)
        expect_same_call(student, ref, "masked_softmax", scores, dtype=dtype)


@check("masked_softmax", "mask True = may attend: masked pairs get weight exactly 0, the rest sum to one",
       weight=1.0)
def masked_softmax_mask(student, ref):
    rng = rng_for("masked_softmax_mask")
    for shape, dtype in (((2, 4, 7), torch.float32), ((3, 5, 4), torch.float64)):
        scores, mask = tensor(rng, shape, dtype, scale=2.0), random_mask(rng, shape, p=0.5)
        got = expect_same_call(student, ref, "masked_softmax", scores, mask,
                               what=f"masked_softmax(scores {describe(scores)}, random mask {describe(mask)}, "
                               "True = may attend)", dtype=dtype)
        expect_true(bool((got[~mask] == 0).all()),
                    f"masked_softmax(scores {describe(scores)}, mask): pairs where the mask is False must get "
                    "weight exactly 0")


@check("masked_softmax", "masks broadcast: padding (B, 1, Nk), shared (Nq, Nk), per key (Nk,)", weight=1.0)
def masked_softmax_broadcast(student, ref):
    rng = rng_for("masked_softmax_broadcast")
    scores = tensor(rng, (3, 4, 6), scale=2.0)
    for mask_shape in ((3, 1, 6), (4, 6), (6,)):
        mask = random_mask(rng, mask_shape, p=0.5)
        expect_same_call(student, ref, "masked_softmax", scores, mask,
                         what=f"masked_softmax(scores {describe(scores)}, mask {describe(mask)})")


@check("masked_softmax", "a row with every key masked gets all-zero weights: not NaN, not uniform", weight=1.0)
def masked_softmax_empty_rows(student, ref):
    rng = rng_for("masked_softmax_empty_rows")
    scores = tensor(rng, (2, 4, 5), scale=2.0)
    mask = random_mask(rng, (2, 4, 5))
    mask[0, 1] = False
    mask[1, 3] = False
    got = student.call("masked_softmax", scores, mask)
    what = f"masked_softmax(scores {describe(scores)}, mask {describe(mask)} whose rows [0, 1] and [1, 3] are all False)"
    expect_true(isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 4, 5),
                f"{what} must return a tensor of shape (2, 4, 5), got {describe(got)}")
    for b, i in ((0, 1), (1, 3)):
        row = got[b, i]
        expect_true(not row.isnan().any(), f"{what}: row [{b}, {i}] is NaN; a query with nothing allowed gets zeros")
        expect_true(bool((row == 0).all()), f"{what}: row [{b}, {i}] is {row.tolist()}; a query with nothing allowed "
                    "gets all-zero weights (filling with a large negative number instead of -inf gives uniform weights)")
    expect_close(got, plain(ref.masked_softmax(scores, mask)), what, **tolerance(torch.float32))
    everything = torch.zeros(3, dtype=torch.bool)
    expect_same_call(student, ref, "masked_softmax", tensor(rng, (3,)), everything,
                     what="masked_softmax(scores (3,), mask all False)")


@check("masked_softmax", "masked scores that are NaN, inf or 1e10 never reach the weights", weight=1.0)
def masked_softmax_garbage(student, ref):
    rng = rng_for("masked_softmax_garbage")
    for garbage in (float("nan"), float("inf"), 1e10):
        for dtype in DTYPES:
            scores = tensor(rng, (2, 3, 6), dtype)
            mask = random_mask(rng, (2, 3, 6), p=0.5)
            scores[~mask] = garbage
            expect_same_call(student, ref, "masked_softmax", scores, mask, dtype=dtype,
                             what=f"masked_softmax(scores {describe(scores)} holding {garbage} where the mask is "
                             "False, mask) (select with torch.where: do not add or multiply)")


# ---- attention -------------------------------------------------------------------------------

def qkv(rng, batch, nq, nk, dk, dv, dtype=torch.float32):
    return (tensor(rng, batch + (nq, dk), dtype), tensor(rng, batch + (nk, dk), dtype),
            tensor(rng, batch + (nk, dv), dtype))


@check("attention", "no mask: equals scaled_dot_product_attention (Nq, Nk, d_k, d_v differ; float64; batch dims)",
       weight=1.0)
def attention_unmasked(student, ref):
    rng = rng_for("attention_unmasked")
    for batch, nq, nk, dk, dv, dtype in qkv_cases(rng):
        q, k, v = qkv(rng, batch, nq, nk, dk, dv, dtype)
        got = student.call("attention", q, k, v)
        expect_attention(got, sdpa(q, k, v), ref.masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(dk)),
                         f"attention(q {describe(q)}, k {describe(k)}, v {describe(v)})", dtype)


@check("attention", "boolean masks (True = may attend): equals scaled_dot_product_attention(attn_mask=mask)",
       weight=2.0)  # 8 shares of 0.5 point: no rounding between the graders
def attention_masked(student, ref):
    rng = rng_for("attention_masked")
    for batch, nq, nk, dk, dv, dtype in qkv_cases(rng):
        q, k, v = qkv(rng, batch, nq, nk, dk, dv, dtype)
        for mask_shape in (batch + (nq, nk), batch + (1, nk), (nq, nk)):
            mask = random_mask(rng, mask_shape, p=0.5)
            got = student.call("attention", q, k, v, mask)
            expect_attention(got, sdpa(q, k, v, mask), ref.attention(q, k, v, mask)[1],
                             f"attention(q {describe(q)}, k {describe(k)}, v {describe(v)}, mask {describe(mask)})",
                             dtype)


@check("attention", "mask polarity: a query allowed a single key returns that key's value", weight=1.0)
def attention_polarity(student, ref):
    rng = rng_for("attention_polarity")
    q, k, v = qkv(rng, (2,), 4, 6, 3, 5, torch.float64)
    chosen = rng.integers(0, 6, (2, 4))
    mask = torch.zeros(2, 4, 6, dtype=torch.bool)
    for b in range(2):
        for i in range(4):
            mask[b, i, chosen[b, i]] = True
    got = expect_pair(student.call("attention", q, k, v, mask), "attention")
    expected = torch.stack([v[b, chosen[b]] for b in range(2)])
    expect_close(got[0], expected, f"attention(q {describe(q)}, k, v, mask with one True per row): query i may "
                 "attend only to the key where its mask is True, so its output is that key's value "
                 "(True = may attend)", **tolerance(torch.float64))


@check("attention", "a query with every key masked gets zero output and zero weights, never NaN", weight=1.0)
def attention_empty_rows(student, ref):
    rng = rng_for("attention_empty_rows")
    for dtype in DTYPES:
        q, k, v = qkv(rng, (2,), 5, 4, 3, 2, dtype)
        mask = random_mask(rng, (2, 5, 4))
        mask[0, 2] = False
        mask[1, 0] = False
        mask[1, 4] = False
        got = student.call("attention", q, k, v, mask)
        expected_out, expected_weights = ref.attention(q, k, v, mask)
        expect_attention(got, expected_out, expected_weights,
                         f"attention(q {describe(q)}, k, v, mask whose rows [0, 2], [1, 0] and [1, 4] are all False)",
                         dtype)


@check("attention", "NaN, inf or 1e10 in masked (padding) keys and values never reach the output", weight=1.0)
def attention_garbage(student, ref):
    rng = rng_for("attention_garbage")
    lengths = torch.tensor([5, 2, 0])
    padding = (torch.arange(5) < lengths[:, None])[:, None, :]       # (B, 1, Nk), True = a real token
    for garbage in (float("nan"), float("inf"), -float("inf"), 1e10):
        for dtype in DTYPES:
            q, k, v = qkv(rng, (3,), 4, 5, 3, 2, dtype)
            expected_out, expected_weights = ref.attention(q, k, v, padding)
            k_bad, v_bad = k.clone(), v.clone()
            pad = ~padding[:, 0, :]
            k_bad[pad] = garbage
            v_bad[pad] = garbage
            got = student.call("attention", q, k_bad, v_bad, padding)
            expect_attention(got, expected_out, expected_weights,
                             f"attention(q, k, v {describe(v)} holding {garbage} in the padded keys and values, "
                             "padding mask (3, 1, 5) of lengths 5, 2, 0) (0 * NaN = NaN: select the values with "
                             "torch.where, do not multiply them by zero weights)", dtype)


@check("attention", "reordering key-value pairs changes nothing; reordering the queries reorders the outputs",
       weight=1.0)
def attention_permutations(student, ref):
    rng = rng_for("attention_permutations")
    q, k, v = qkv(rng, (2,), 5, 7, 4, 3, torch.float64)
    mask = random_mask(rng, (2, 5, 7))
    out, weights = expect_pair(student.call("attention", q, k, v, mask), "attention")
    keys = torch.from_numpy(rng.permutation(7))
    queries = torch.from_numpy(rng.permutation(5))
    out_k, weights_k = expect_pair(student.call("attention", q, k[:, keys], v[:, keys], mask[..., keys]), "attention")
    expect_close(out_k, out, "attention with the key-value pairs (and the mask's columns) reordered: the output "
                 "must not change", **tolerance(torch.float64))
    expect_close(weights_k, weights[..., keys], "attention with the key-value pairs reordered: the weights must be "
                 "reordered the same way", **tolerance(torch.float64))
    out_q, _ = expect_pair(student.call("attention", q[:, queries], k, v, mask[:, queries]), "attention")
    expect_close(out_q, out[:, queries], "attention with the queries (and the mask's rows) reordered: the outputs "
                 "must be reordered the same way", **tolerance(torch.float64))
    expect_close(out, plain(ref.attention(q, k, v, mask)[0]), "attention(q, k, v, mask) (float64)",
                 **tolerance(torch.float64))


@check("attention", "uses the score_fn it is given: your dot_product_scores, GeneralScore, AdditiveScore",
       weight=1.0)
def attention_score_fn(student, ref):
    rng = rng_for("attention_score_fn")
    d = 4
    q, k, v = qkv(rng, (2,), 3, 5, d, 2)
    mask = random_mask(rng, (2, 3, 5))
    candidates = [("your dot_product_scores", lambda: student_function(student, "dot_product_scores")),
                  ("your GeneralScore(4, 4)", lambda: student.call("GeneralScore", d, d, keep=True)),
                  ("your AdditiveScore(4, 4, 6)", lambda: student.call("AdditiveScore", d, d, 6, keep=True))]
    tested = 0
    for name, make in candidates:
        try:  # the score functions are graded in their own exercises: here, use those that work
            score_fn = make()
            scores = student.call(score_fn, q, k)
        except Exception:
            continue
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != (2, 3, 5) or scores.dtype != q.dtype:
            continue
        got = student.call("attention", q, k, v, mask, score_fn)
        expected_out, expected_weights = ref.attention(q, k, v, mask, score_fn=lambda *_: scores)
        expect_attention(got, expected_out, expected_weights,
                         f"attention(q {describe(q)}, k {describe(k)}, v, mask, score_fn={name}) must use the "
                         "scores of the score_fn it is given", torch.float32)
        tested += 1
    expect_true(tested > 0, "none of dot_product_scores, GeneralScore, AdditiveScore gives scores of shape "
                "(B, Nq, Nk), so attention's score_fn could not be tested")
