"""Checks of chapter 3, "Queries, keys and values" (PyTorch).

Each exercise runs with the reference versions of the exercises before it (`run_exercise`), so
attention's checks use the reference scores and masked_softmax. Checks of one rule compare the
student's code with itself (batch slices, permutations, garbage in padding) where that keeps
another bug of the same exercise from failing them too.
"""
import math

import numpy as np
import torch

from .core import (Chapter, called, call, describe, expect_close, expect_parameters, expect_same, expect_true,
                   expect_tuple, module_pair, padding_mask, plain, random_mask, same, tensor)

ASSIGNMENT = "03-qkv"
chapter = Chapter(ASSIGNMENT)
check, equals, device_checks = chapter.check, chapter.equals, chapter.device_checks

DTYPES = (torch.float32, torch.float64)
NAN_IN_MASKED_VALUES = "0 * NaN = NaN: select the values with torch.where, do not multiply them by zero weights"
UNIFORM = "filling with a large negative number instead of -inf gives uniform weights"


def sizes(rng, count):
    """`count` different sizes (Nq, Nk, d_k, ...): a wrong axis or scale cannot pass by accident."""
    return [int(n) for n in rng.choice(np.arange(2, 12), size=count, replace=False)]


def is_uniform(row):
    return bool(torch.allclose(row, torch.full_like(row, 1 / row.shape[-1]), atol=1e-4))


# ---- soft_lookup -----------------------------------------------------------------------------

def lookup_table(rng, n, d, dv, dtype=torch.float64):
    """Keys of very different lengths, key 1 = 2 * key 0: the nearest key is not the one with the
    largest dot product."""
    while True:  # drawn again until well separated (each key at least 0.3 from the others)
        keys = tensor(rng, (n, d), dtype) * torch.from_numpy(rng.uniform(0.3, 3.0, (n, 1))).to(dtype)
        keys[1] = 2 * keys[0]
        if torch.cdist(keys, keys).add(torch.eye(n, dtype=dtype) * 10).min() > 0.3:
            return keys, tensor(rng, (n, dv), dtype)


def one_query(rng):
    cases = []
    for dtype in DTYPES:
        keys, values = lookup_table(rng, 6, 3, 2, dtype)
        cases += [call(tensor(rng, (3,), dtype), keys, values, t) for t in (0.5, 2.0, 10.0)]
    return cases


equals("soft_lookup", "one query (d,): softmax(-||q - k_i||^2 / T)-weighted values, float32 and float64",
       "soft_lookup", one_query)

equals("soft_lookup", "leading dimensions broadcast: a batch of tables; many queries (M, d) against one table",
       "soft_lookup",
       lambda rng: [call(*(tensor(rng, s, torch.float64) for s in shapes), 1.0) for shapes in
                    (((4, 3), (4, 5, 3), (4, 5, 2)),            # a batch: each query has its own table
                     ((7, 3), (5, 3), (5, 4)),                  # many queries, one table
                     ((2, 3, 4), (2, 3, 6, 4), (2, 3, 6, 1)))])


@check("soft_lookup", "the temperature's limits: the nearest key's value as T -> 0, the values' mean as T -> inf",
       weight=2.0)
def soft_lookup_limits(student, ref, rng):
    keys, values = lookup_table(rng, 6, 3, 2)
    for i in range(6):
        query = keys[i] + tensor(rng, (3,), keys.dtype, scale=1e-3)
        nearest = int(torch.argmin(((query - keys) ** 2).sum(-1)))
        largest_dot = int(torch.argmax(keys @ query))
        for temperature in (1e-4, 1e-6):
            got = student.call("soft_lookup", query, keys, values, temperature)
            hint = ""
            if isinstance(got, torch.Tensor) and got.shape == values[0].shape:
                if largest_dot != nearest and torch.allclose(got, values[largest_dot], atol=1e-4):
                    hint = (f": you returned the value of key {largest_dot}, whose dot product with the query is the "
                            "largest; the similarity is -||q - k||^2, not the dot product")
                elif torch.allclose(got, values.mean(0), atol=1e-2):
                    hint = ": you returned about the mean of the values; the temperature divides the similarities"
            expect_close(got, values[nearest], f"soft_lookup(query = key {i} + noise of size 1e-3, keys "
                         f"{describe(keys)}, values, temperature={temperature}) should be the value of the nearest "
                         f"key, key {nearest}" + hint, rtol=1e-6, atol=1e-6)
    query = tensor(rng, (3,), keys.dtype)
    got = student.call("soft_lookup", query, keys, values, 1e7)
    expect_close(got, values.mean(0), f"soft_lookup(query, keys {describe(keys)}, values, temperature=1e7) should be "
                 "the mean of the values (the temperature divides the similarities)", rtol=1e-5, atol=1e-5)


# ---- dot_product_scores ----------------------------------------------------------------------

def qk(rng, batch, nq, nk, dk, dtype=torch.float32, k_batch=None):
    return tensor(rng, batch + (nq, dk), dtype), tensor(rng, (batch if k_batch is None else k_batch) + (nk, dk), dtype)


equals("dot_product_scores", "s[i, j] = q_i . k_j with Nq, Nk and d_k all different", "dot_product_scores",
       lambda rng: [call(*qk(rng, (), *sizes(rng, 3))) for _ in range(3)])

equals("dot_product_scores", "square shapes (Nq = Nk = d_k): s[i, j] = q_i . k_j, not k_i . q_j",
       "dot_product_scores", lambda rng: [call(*qk(rng, (), 4, 4, 4)) for _ in range(2)])

equals("dot_product_scores", "any number of leading batch dimensions (0 to 3), broadcast between q and k",
       "dot_product_scores",
       lambda rng: [call(*qk(rng, batch, 3, 5, 6, k_batch=k_batch)) for batch, k_batch in
                    (((), None), ((5,), None), ((2, 3), None), ((2, 1, 3), None), ((2, 1, 3), (1, 4, 3)))])

equals("dot_product_scores", "float64 in, float64 out", "dot_product_scores",
       lambda rng: [call(*qk(rng, (2,), 3, 4, 5, torch.float64))])


# ---- scaled_dot_product_scores ---------------------------------------------------------------

equals("scaled_dot_product_scores", "q @ k^T / sqrt(d_k) with Nq, Nk and d_k all different, float32 and float64",
       "scaled_dot_product_scores", lambda rng: [call(*qk(rng, (), *sizes(rng, 3), dtype)) for dtype in DTYPES * 2])


@check("scaled_dot_product_scores", "the scale is sqrt(d_k), the key dimension: not sqrt(Nk), sqrt(Nq) or d_k")
def scaled_factor(student, ref, rng):
    nq, nk, dk = 6, 9, 16
    q, k = qk(rng, (2,), nq, nk, dk, torch.float64)
    what = called("scaled_dot_product_scores", None, (q, k), {})
    got = student.call("scaled_dot_product_scores", q, k)
    expect_true(isinstance(got, torch.Tensor) and tuple(got.shape) == (2, nq, nk),
                f"{what} should return a tensor of shape (2, {nq}, {nk}), got {describe(got)}")
    raw = (q @ k.transpose(-2, -1)).numpy()
    factor = float(np.median(got.numpy() / raw))
    known = {1 / nk: f"divided by {nk} = Nk, the number of keys", 1 / nq: f"divided by {nq} = Nq, the number of queries",
             1 / dk: f"divided by d_k = {dk}", 1 / math.sqrt(nk): f"divided by sqrt(Nk) = sqrt({nk}), Nk the number "
             "of keys", 1 / math.sqrt(nq): f"divided by sqrt(Nq) = sqrt({nq}), Nq the number of queries",
             1.0: "not scaled", math.sqrt(dk): "multiplied by sqrt(d_k) instead of divided",
             1 / (2 * dk): f"divided by {2 * dk}: d_k ** 1/2 is (d_k ** 1) / 2, write d_k ** 0.5 or math.sqrt(d_k)"}
    if np.allclose(got.numpy(), factor * raw, rtol=1e-9, atol=1e-12):  # a constant scale: which one?
        wrong = next((name for f, name in known.items() if np.isclose(factor, f, rtol=1e-6)), f"divided by {1 / factor:.6g}")
        expect_true(np.isclose(factor, 1 / math.sqrt(dk), rtol=1e-9), f"{what}: the dot products were {wrong}; divide "
                    f"them by sqrt(d_k) = sqrt({dk}) = {math.sqrt(dk):g}, d_k the last dimension of q and k")
    expect_close(got, plain(ref.scaled_dot_product_scores(q, k)), what)


@check("scaled_dot_product_scores", "unit-variance q and k give scores of variance about 1 whatever d_k")
def scaled_variance(student, ref, rng):
    for dk in (8, 256):
        q, k = qk(rng, (4,), 16, 24, dk)
        got = student.call("scaled_dot_product_scores", q, k)
        expect_true(isinstance(got, torch.Tensor) and tuple(got.shape) == (4, 16, 24),
                    f"scaled_dot_product_scores(q (4, 16, {dk}), k (4, 24, {dk})) should return a tensor of shape "
                    f"(4, 16, 24), got {describe(got)}")
        variance = float(got.double().var())
        expect_true(0.7 < variance < 1.4,
                    f"scaled_dot_product_scores of unit-variance q (4, 16, {dk}) and k (4, 24, {dk}): the scores "
                    f"have variance {variance:.3g}, expected about 1 (q . k has variance d_k = {dk})")


@check("scaled_dot_product_scores",
       "any leading batch dimensions (each slice as if alone), broadcast; float64 stays float64")
def scaled_batch(student, ref, rng):
    q, k = qk(rng, (2, 1), 3, 6, 7, torch.float64, k_batch=(1, 3))
    what = called("scaled_dot_product_scores", None, (q, k), {})
    got = student.call("scaled_dot_product_scores", q, k)
    expect_true(isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 3, 3, 6) and got.dtype == torch.float64,
                f"{what} should return a float64 tensor of shape (2, 3, 3, 6), got {describe(got)}")
    for i, j in ((0, 0), (1, 2), (0, 1)):
        expect_close(got[i, j], student.call("scaled_dot_product_scores", q[i, 0], k[0, j]),
                     f"{what}[{i}, {j}] should equal scaled_dot_product_scores(q[{i}, 0], k[0, {j}]), the same "
                     "scores computed without the batch dimensions")


# ---- GeneralScore and AdditiveScore ----------------------------------------------------------

NO_BIAS = "keep the attribute names and the dimensions, no bias"


def expect_scores(student, ref, pair, cases):
    """The student's module gives the reference's scores on every (q, k)."""
    for q, k in cases:
        same(student, ref, pair, q, k)


def queries_keys(rng, batches, nq, nk, dq, dk, dtype=torch.float32, scale=1.0):
    return [(tensor(rng, b + (nq, dq), dtype, scale), tensor(rng, b + (nk, dk), dtype, scale)) for b in batches]


@check("GeneralScore", "W = nn.Linear(key_dim, query_dim, bias=False): one parameter W.weight (query_dim, key_dim)")
def general_parameters(student, ref, rng):
    for dims in ((3, 5), (6, 2)):
        expect_parameters(student, ref, "GeneralScore", *dims, hint=NO_BIAS)


@check("GeneralScore", "s_ij = q_i . (W k_j) with query_dim != key_dim and Nq != Nk, 0 to 2 batch dimensions")
def general_random(student, ref, rng):
    for batch in ((), (3,), (2, 3)):
        nq, nk, dq, dk = sizes(rng, 4)
        pair = module_pair(student, ref, "GeneralScore", dq, dk, rng=rng, by_shape=True)
        expect_scores(student, ref, pair, queries_keys(rng, [batch], nq, nk, dq, dk))


@check("GeneralScore", "square (query_dim = key_dim): W applies to the keys, q_i . (W k_j), not (W q_i) . k_j")
def general_square(student, ref, rng):
    pair = module_pair(student, ref, "GeneralScore", 4, 4, rng=rng, by_shape=True)
    expect_scores(student, ref, pair, queries_keys(rng, [(2,)], 3, 5, 4, 4))


@check("GeneralScore", "float64 (module.double()) with any leading batch dimensions")
def general_float64(student, ref, rng):
    pair = module_pair(student, ref, "GeneralScore", 3, 5, rng=rng, double=True, by_shape=True)
    expect_scores(student, ref, pair, queries_keys(rng, [(), (2, 2)], 4, 6, 3, 5, torch.float64))


@check("AdditiveScore", "W_q (hidden, query_dim), W_k (hidden, key_dim), v (1, hidden): nn.Linear, no biases")
def additive_parameters(student, ref, rng):
    for dims in ((3, 5, 7), (4, 2, 6)):
        expect_parameters(student, ref, "AdditiveScore", *dims, hint=NO_BIAS)


@check("AdditiveScore", "s_ij = v . tanh(W_q q_i + W_k k_j), shape (..., Nq, Nk), query_dim != key_dim, Nq = 1 too")
def additive_random(student, ref, rng):
    for batch, one_query in (((), False), ((3,), False), ((2, 3), False), ((2,), True)):
        nq, nk, dq, dk = sizes(rng, 4)
        nq = 1 if one_query else nq  # one decoder state against the encoder's states, as in Bahdanau et al.
        pair = module_pair(student, ref, "AdditiveScore", dq, dk, int(rng.integers(3, 9)), rng=rng, by_shape=True)
        expect_scores(student, ref, pair, queries_keys(rng, [batch], nq, nk, dq, dk, scale=2.0))


@check("AdditiveScore", "tanh of the sum W_q q_i + W_k k_j: large inputs saturate it")
def additive_saturation(student, ref, rng):
    pair = module_pair(student, ref, "AdditiveScore", 3, 4, 5, rng=rng, by_shape=True)
    expect_scores(student, ref, pair, queries_keys(rng, [(2,)], 4, 6, 3, 4, scale=100.0))


@check("AdditiveScore", "float64 (module.double()) with any leading batch dimensions")
def additive_float64(student, ref, rng):
    pair = module_pair(student, ref, "AdditiveScore", 3, 5, 4, rng=rng, double=True, by_shape=True)
    expect_scores(student, ref, pair, queries_keys(rng, [(), (2, 2)], 4, 6, 3, 5, torch.float64))


# ---- masked_softmax --------------------------------------------------------------------------

def expect_weights_tensor(got, like, what):
    expect_true(isinstance(got, torch.Tensor) and got.shape == like.shape and got.dtype == like.dtype,
                f"{what} should return a {str(like.dtype)[6:]} tensor of shape {tuple(like.shape)}, "
                f"got {describe(got)}")


equals("masked_softmax", "mask=None: a softmax over the last axis (the keys), any shape, float32 and float64",
       "masked_softmax", lambda rng: [call(tensor(rng, shape, dtype, scale=3.0)) for shape, dtype in
                                      (((4, 6), torch.float32), ((2, 3, 5), torch.float64),
                                       ((2, 2, 4, 3), torch.float32))])


@check("masked_softmax", "mask True = may attend: masked pairs get weight exactly 0, the allowed ones sum to one")
def masked_softmax_mask(student, ref, rng):
    for shape, dtype in (((2, 4, 7), torch.float32), ((3, 5, 4), torch.float64)):
        scores, mask = tensor(rng, shape, dtype, scale=2.0), random_mask(rng, shape, p=0.5)
        what = called("masked_softmax", None, (scores, mask), {})
        got = student.call("masked_softmax", scores, mask)
        expect_weights_tensor(got, scores, what)
        expect_true(not bool((got[mask] == 0).all() and (got[~mask] > 0).any()),
                    f"{what}: the weights are 0 where the mask is True; True means the query MAY attend to the key")
        expect_true(bool((got[~mask] == 0).all()), f"{what}: pairs where the mask is False must get weight exactly 0")
        sums = "" if torch.allclose(got.sum(-1), torch.ones((), dtype=dtype)) else " (each query's weights sum to one)"
        expect_close(got, plain(ref.masked_softmax(scores, mask)), what + sums)


equals("masked_softmax", "masks broadcast: padding (B, 1, Nk), shared (Nq, Nk), per key (Nk,)", "masked_softmax",
       lambda rng: [call(tensor(rng, (3, 4, 6), scale=2.0), random_mask(rng, shape, p=0.5))
                    for shape in ((3, 1, 6), (4, 6), (6,))])


@check("masked_softmax", "a row with every key masked gets all-zero weights: not NaN, not uniform")
def masked_softmax_empty_rows(student, ref, rng):
    scores, mask = tensor(rng, (2, 4, 5), scale=2.0), random_mask(rng, (2, 4, 5))
    mask[0, 1] = mask[1, 3] = False
    for scores, mask in ((scores, mask), (tensor(rng, (3,)), torch.zeros(3, dtype=torch.bool))):
        what = called("masked_softmax", None, (scores, mask), {}) + ", a mask with rows all False"
        got = student.call("masked_softmax", scores, mask)
        expect_weights_tensor(got, scores, what)
        empty = ~mask.any(-1)
        expect_true(not any(is_uniform(row) for row in got[empty].reshape(-1, scores.shape[-1])),
                    f"{what}: a row whose every key is masked got uniform weights, it should get zeros ({UNIFORM})")
        expect_close(got[empty], torch.zeros_like(got[empty]), f"{what}: the rows whose every key is masked",
                     atol=0.0, nan_hint="softmax of a row of -inf is NaN: give such rows all-zero weights")
        expect_close(got, plain(ref.masked_softmax(scores, mask)), what)


@check("masked_softmax", "masked scores that are NaN, inf or 1e10 never reach the weights")
def masked_softmax_garbage(student, ref, rng):
    for garbage in (float("nan"), float("inf"), 1e10):
        for dtype in DTYPES:
            scores, mask = tensor(rng, (2, 3, 6), dtype), random_mask(rng, (2, 3, 6), p=0.5)
            scores[~mask] = garbage
            what = called("masked_softmax", None, (scores, mask), {}) + f", the scores {garbage} where the mask is False"
            got = student.call("masked_softmax", scores, mask)
            expect_weights_tensor(got, scores, what)
            expect_true(not bool((got[~mask] > 0).any()), f"{what}: a masked pair got a positive weight (adding a large "
                        "negative number lets a huge masked score through: select with torch.where(mask, scores, -inf))")
            expect_close(got, plain(ref.masked_softmax(scores, mask)), what, nan_hint="a NaN masked score reached the "
                         "weights: select with torch.where(mask, scores, -inf), do not add to it or multiply it")


# ---- attention -------------------------------------------------------------------------------

def qkv(rng, batch, nq, nk, dk, dv, dtype=torch.float32):
    return qk(rng, batch, nq, nk, dk, dtype) + (tensor(rng, batch + (nk, dv), dtype),)


def out_and_weights(got, q, k, v, what):
    """attention's result, checked for form: (out (..., Nq, d_v), weights (..., Nq, Nk)) in q's dtype."""
    expect_tuple(got, what, ("out", "weights"))
    shapes = (q.shape[:-1] + v.shape[-1:], q.shape[:-1] + k.shape[-2:-1])
    for name, value, shape in zip(("out", "weights"), got, shapes):
        expect_true(isinstance(value, torch.Tensor) and value.shape == shape and value.dtype == q.dtype,
                    f"{what}: {name} should be a {str(q.dtype)[6:]} tensor of shape {tuple(shape)}, "
                    f"got {describe(value)}")
    return got


def attention_cases(rng, masks):
    cases = []
    for batch, dtype in zip(((), (3,), (2, 3)), DTYPES * 2):
        nq, nk, dk, dv = sizes(rng, 4)
        q, k, v = qkv(rng, batch, nq, nk, dk, dv, dtype)
        cases += [call(q, k, v, *([random_mask(rng, shape, p=0.5)] if shape else []))
                  for shape in (masks(batch, nq, nk) if masks else [None])]
    return cases


equals("attention", "no mask: softmax(q k^T / sqrt(d_k)) v, as scaled_dot_product_attention (batch dims, float64)",
       "attention", lambda rng: attention_cases(rng, None), names=("out", "weights"))

equals("attention", "boolean masks (True = may attend) of shapes (B, Nq, Nk), (B, 1, Nk) and (Nq, Nk)", "attention",
       lambda rng: attention_cases(rng, lambda batch, nq, nk: (batch + (nq, nk), batch + (1, nk), (nq, nk))),
       weight=2.0, names=("out", "weights"))


@check("attention", "mask polarity: a query allowed a single key returns that key's value")
def attention_polarity(student, ref, rng):
    q, k, v = qkv(rng, (2,), 4, 6, 3, 5, torch.float64)
    chosen = torch.from_numpy(rng.integers(0, 6, (2, 4)))
    mask = torch.nn.functional.one_hot(chosen, 6).bool()
    what = called("attention", None, (q, k, v, mask), {}) + ", a mask with one True per row"
    out, weights = out_and_weights(student.call("attention", q, k, v, mask), q, k, v, what)
    inverted = bool((weights.gather(-1, chosen[..., None]) == 0).all())
    expect_close(out, torch.stack([v[b, chosen[b]] for b in range(2)]), f"{what}: the output of query i should be the "
                 "value of the one key it may attend to" + ("; your weights are 0 there: True means MAY attend"
                                                            if inverted else ""))


@check("attention", "a query with every key masked gets zero output and zero weights, never NaN")
def attention_empty_rows(student, ref, rng):
    for dtype in DTYPES:
        q, k, v = qkv(rng, (2,), 5, 4, 3, 2, dtype)
        mask = random_mask(rng, (2, 5, 4))
        mask[0, 2] = mask[1, 0] = mask[1, 4] = False
        what = called("attention", None, (q, k, v, mask), {}) + ", rows [0, 2], [1, 0] and [1, 4] of the mask all False"
        out, weights = out_and_weights(student.call("attention", q, k, v, mask), q, k, v, what)
        empty = ~mask.any(-1)
        uniform = any(is_uniform(row) for row in weights[empty])
        for name, got in (("weights", weights), ("out", out)):
            expect_close(got[empty], torch.zeros_like(got[empty]), f"{what}: {name} of the queries whose every key is "
                         "masked" + (f" ({UNIFORM}: use masked_softmax)" if uniform else ""), atol=0.0,
                         nan_hint="a query with every key masked gets all-zero weights and a zero output")


@check("attention", "NaN, inf or 1e10 in padded keys and values (masked for every query) never reach the output")
def attention_garbage(student, ref, rng):
    for garbage in (float("nan"), float("inf"), -float("inf"), 1e10):
        for dtype in DTYPES:
            q, k, v = qkv(rng, (3,), 4, 5, 3, 2, dtype)
            padding = padding_mask(rng, (3, 1, 5), empty_rows=1)  # (B, 1, Nk), True = a real token
            clean = out_and_weights(student.call("attention", q, k, v, padding), q, k, v,
                                    called("attention", None, (q, k, v, padding), {}))
            k_bad, v_bad = k.clone(), v.clone()
            k_bad[~padding[:, 0]] = v_bad[~padding[:, 0]] = garbage
            what = (called("attention", None, (q, k_bad, v_bad, padding), {}) + f", the keys and values {garbage} "
                    f"where the padding mask is False, lengths {padding.sum(-1).flatten().tolist()}")
            out, weights = out_and_weights(student.call("attention", q, k_bad, v_bad, padding), q, k, v, what)
            expect_close(weights, clean[1], f"{what}: weights, compared with the same call without the garbage")
            ignored = bool((weights[~padding.expand_as(weights)] == 0).all())  # then NaN in out is 0 * NaN
            expect_close(out, clean[0], f"{what}: out, compared with the same call without the garbage"
                         + ("" if ignored else " (your weights of the padded keys are not 0)"),
                         nan_hint=NAN_IN_MASKED_VALUES if ignored else "")


@check("attention", "reordering key-value pairs changes nothing; reordering the queries reorders the outputs")
def attention_permutations(student, ref, rng):
    q, k, v = qkv(rng, (2,), 5, 7, 4, 3, torch.float64)
    mask = random_mask(rng, (2, 5, 7))
    what = called("attention", None, (q, k, v, mask), {})
    out, weights = out_and_weights(student.call("attention", q, k, v, mask), q, k, v, what)
    keys, queries = torch.from_numpy(rng.permutation(7)), torch.from_numpy(rng.permutation(5))
    out_k, weights_k = out_and_weights(student.call("attention", q, k[:, keys], v[:, keys], mask[..., keys]),
                                       q, k, v, what)
    expect_close(out_k, out, f"{what} with the key-value pairs (and the mask's columns) reordered: out must not change")
    expect_close(weights_k, weights[..., keys], f"{what} with the key-value pairs reordered: the weights must be "
                 "reordered the same way")
    out_q, _ = out_and_weights(student.call("attention", q[:, queries], k, v, mask[:, queries]), q, k, v, what)
    expect_close(out_q, out[:, queries], f"{what} with the queries (and the mask's rows) reordered: the outputs "
                 "must be reordered the same way")


@check("attention", "uses the score_fn it is given: dot_product_scores, GeneralScore, AdditiveScore")
def attention_score_fn(student, ref, rng):
    """The score functions are the reference's here (known-good versions of the earlier exercises)."""
    dq, dk = 4, 6
    function = student.call("dot_product_scores", "__call__", method="__getattribute__", keep=True)
    candidates = [("dot_product_scores", function, ref.dot_product_scores, dq),
                  *((pair.label, pair.handle, pair.module, dk) for pair in
                    (module_pair(student, ref, "GeneralScore", dq, dk, rng=rng),
                     module_pair(student, ref, "AdditiveScore", dq, dk, 5, rng=rng)))]
    for label, handle, score_fn, key_dim in candidates:
        q, k, v = tensor(rng, (2, 3, dq)), tensor(rng, (2, 5, key_dim)), tensor(rng, (2, 5, 2))
        got = student.call("attention", q, k, v, score_fn=handle)
        with torch.no_grad():
            expected = ref.attention(q, k, v, score_fn=score_fn)
        expect_same(got, plain(expected), f"attention(q {describe(q)}, k {describe(k)}, v, score_fn={label}) "
                    "must use the scores of the score_fn it is given", names=("out", "weights"))


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/device.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.

device_checks(options={"attention": dict(names=("out", "weights"))})
