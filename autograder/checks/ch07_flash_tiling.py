"""Checks of chapter 7, "Flash attention: tiling on the GPU" (NumPy, PyTorch, Triton).

`tiled_attention`'s memory is measured outside the student's processes (the autograder's
sandbox samples the resident memory of all of them; see `SandboxedStudent.measured_call`), as
the largest rise during the call over its lowest point: freeing memory first and taking it
again still counts. The Triton
kernel runs in Triton's interpreter (TRITON_INTERPRET=1) at small sizes.
"""

import numpy as np
import torch

from .core import Chapter, call, describe, expect_same, expect_true, known_answers, plain, tensor
from ..sandbox.calls import StudentError
from ..stated.ch07_flash_tiling import memory_inputs

ASSIGNMENT = "07-flash-tiling"
chapter = Chapter(ASSIGNMENT)
check, equals, stated_checks, device_checks = chapter.check, chapter.equals, chapter.stated_checks, chapter.device_checks
EXACT64 = {"rtol": 1e-10, "atol": 1e-12}


# ---- online_softmax ---------------------------------------------------------------------------

def rows(rng, shape, scale=3.0):
    return rng.normal(0, scale, shape)


equals("online_softmax", "equals softmax for block sizes 1, 4, 7 (not dividing N), N and more than N", "online_softmax",
       lambda rng: [call(rows(rng, (4, 29)), b) for b in (1, 4, 7, 29, 64)], rtol=1e-12, atol=1e-15)

equals("online_softmax", "the max grows from block to block: the running sum is rescaled each time", "online_softmax",
       lambda rng: [call(np.sort(rows(rng, (3, 40), 50.0), axis=-1), b) for b in (3, 8)]
       + [call(np.linspace(-500, 900, 60)[None], 6)], rtol=1e-12, atol=1e-15)

equals("online_softmax", "-inf entries get weight 0; a row of -inf gives zeros; -inf in a whole first block",
       "online_softmax",
       lambda rng: [call(np.array([[-np.inf, -np.inf, 1.0, 2.0, -np.inf, 0.5], [-np.inf] * 6, [3.0, -np.inf, -np.inf,
                                                                                               -np.inf, -np.inf, 1.0]]),
                         b) for b in (1, 2, 4)], rtol=1e-12, atol=0.0)

equals("online_softmax", "leading axes are rows too; float32 stays float32, integers give float64", "online_softmax",
       lambda rng: [call(rows(rng, (2, 3, 10)), 4), call(rows(rng, (3, 9)).astype(np.float32), 4),
                    call(np.array([[1, 5, 2, 8]]), 3)])

equals("online_softmax", "a row whose every score is far below 0 (about -1000): the running max starts at -inf, not 0",
       "online_softmax", lambda rng: [call(rows(rng, (3, 20)) - 1000.0, b) for b in (1, 6)], rtol=1e-12, atol=1e-15)

equals("online_softmax", "x with one axis is one row: (N,) gives (N,)", "online_softmax",
       lambda rng: [call(rows(rng, (13,)), 4), call(np.array([2.0, -np.inf, 0.5]), 2)], rtol=1e-12, atol=1e-15)

stated_checks("online_softmax")  # the caller's x left as it was: autograder/stated/ch07_flash_tiling.py


# ---- tiled_attention --------------------------------------------------------------------------

def qkv(rng, n_q, n_k, d=8, d_v=6, batch=(2,), dtype=torch.float64):
    return (tensor(rng, batch + (n_q, d), dtype), tensor(rng, batch + (n_k, d), dtype),
            tensor(rng, batch + (n_k, d_v), dtype))


PAIR = {"names": ("out", "lse")}


def memory_attention_rows(ref, seed, rows):
    """(out, lse) of the memory rule's inputs at the queries `rows`, in float64 (not causal: a
    query's row needs only itself, k and v)."""
    q, k, v = (t.double() for t in memory_inputs(seed))
    return ref.tiled_attention(q[:, rows], k, v, block_q=512, block_k=512)


known_answers(ASSIGNMENT, memory_attention_rows=memory_attention_rows)

equals("tiled_attention", "equals exact attention and its logsumexp, N a multiple of the blocks or not", "tiled_attention",
       lambda rng: [call(*qkv(rng, 64, 64), block_q=16, block_k=32), call(*qkv(rng, 50, 50), block_q=16, block_k=24),
                    call(*qkv(rng, 37, 37, batch=(2, 3)), block_q=7, block_k=5), call(*qkv(rng, 20, 20)),
                    call(*qkv(rng, 100, 100, batch=()), block_q=128, block_k=128)], **PAIR, **EXACT64)

equals("tiled_attention", "large scores (several hundred): the running max keeps exp from overflowing", "tiled_attention",
       lambda rng: [call(*(t * s for t, s in zip(qkv(rng, 40, 40), (40.0, 40.0, 1.0))), block_q=16, block_k=16),
                    call(*(t * s for t, s in zip(qkv(rng, 30, 30), (40.0, 40.0, 1.0))), block_q=8, block_k=8,
                         causal=True)], **PAIR, **EXACT64)


def far_below_zero(rng, n_q, n_k, scale=32.0):
    """q, k, v whose every score is below -745, where exp gives 0 in float64: q >= 0, k <= 0 entry by entry."""
    q, k, v = qkv(rng, n_q, n_k)
    return q.abs() * scale, -(k.abs() + 0.5) * scale, v


equals("tiled_attention", "rows whose every score is far below 0 (below -745, where exp gives 0): the running max "
       "starts at -inf, not 0", "tiled_attention",
       lambda rng: [call(*far_below_zero(rng, 12, 20), block_q=8, block_k=8),
                    call(*far_below_zero(rng, 12, 12), block_q=8, block_k=8, causal=True)], **PAIR, **EXACT64)

equals("tiled_attention", "Nq different from Nk, and one query", "tiled_attention",
       lambda rng: [call(*qkv(rng, 30, 70), block_q=16, block_k=16), call(*qkv(rng, 70, 30), block_q=16, block_k=8),
                    call(*qkv(rng, 1, 45), block_q=4, block_k=8)], **PAIR, **EXACT64)

equals("tiled_attention", "causal, aligned bottom-right: query i sees key j <= i + Nk - Nq", "tiled_attention",
       lambda rng: [call(*qkv(rng, 50, 50), block_q=16, block_k=16, causal=True),
                    call(*qkv(rng, 40, 40), block_q=8, block_k=24, causal=True),
                    call(*qkv(rng, 20, 53), block_q=8, block_k=16, causal=True),
                    call(*qkv(rng, 5, 64), block_q=64, block_k=64, causal=True)], **PAIR, **EXACT64)

equals("tiled_attention", "causal with Nq > Nk: a query that sees no key gets zeros and lse = -inf, never NaN",
       "tiled_attention",
       lambda rng: [call(*qkv(rng, 30, 12), block_q=8, block_k=8, causal=True),
                    call(*qkv(rng, 9, 4), block_q=4, block_k=2, causal=True)], **PAIR, **EXACT64)

stated_checks("tiled_attention")  # causal blocks skipped, dtypes kept, the memory rule: autograder/stated/ch07_flash_tiling.py


# ---- hbm_traffic ------------------------------------------------------------------------------

equals("hbm_traffic", "standard attention (Algorithm 0): 4Nd + 4N^2", "hbm_traffic",
       lambda rng: [call(n, d, m, "standard") for n, d, m in ((1024, 64, 98304), (4096, 128, 20000), (300, 16, 5000))],
       atol=0.0, rtol=0.0)

equals("hbm_traffic", "FlashAttention (Algorithm 1): T_c passes over Q, O, l and m, with B_c = ceil(M / 4d)", "hbm_traffic",
       lambda rng: [call(n, d, m, "flash") for n, d, m in ((1024, 64, 98304), (1024, 64, 32768), (4096, 128, 20000),
                                                              (1000, 64, 100000), (300, 16, 5000), (64, 64, 10 ** 6))],
       atol=0.0, rtol=0.0)


@check("hbm_traffic", "Theorem 2's shapes: flash moves less and falls as 1/M; another method raises a ValueError")
def traffic_scaling(student, ref, rng):
    for n in (2048, 8192):
        standard = student.call("hbm_traffic", n, 64, 98304, "standard")
        flash = student.call("hbm_traffic", n, 64, 98304, "flash")
        expect_true(isinstance(standard, int) and isinstance(flash, int),
                    f"hbm_traffic should return Python ints, got {describe(standard)} and {describe(flash)}")
        expect_true(flash < standard, f"hbm_traffic({n}, 64, 98304): flash ({flash}) should move fewer elements "
                    f"than standard ({standard})")
    try:
        other = student.call("hbm_traffic", 1024, 64, 98304, "sparse")
    except StudentError as error:
        other = error
    expect_true(isinstance(other, StudentError) and " raised ValueError" in str(other),
                "hbm_traffic(1024, 64, 98304, 'sparse') should raise a ValueError, but " + (
                    str(other).removeprefix("hbm_traffic(1024, 64, 98304, 'sparse') ") if isinstance(other, StudentError)
                    else f"returned {describe(other)}"))
    small, big = (student.call("hbm_traffic", 8192, 64, m, "flash") for m in (98304 // 4, 98304))
    expect_true(small > 3 * big, f"hbm_traffic(8192, 64, M, 'flash') should fall about as 1/M: {small} at "
                f"M = 24576, {big} at M = 98304")


# ---- flash_attention_triton -------------------------------------------------------------------

TRITON32 = {"rtol": 1e-4, "atol": 1e-5}
TRITON16 = {"rtol": 3e-3, "atol": 3e-3}


def same_as_exact(student, ref, rng, n_q, n_k, d, causal, dtype=torch.float32, heads=2, tolerance=TRITON32):
    """flash_attention_triton on (1, heads, n, d) inputs equals attention computed in float64."""
    q, k, v = (tensor(rng, (1, heads, n, d)).to(dtype) for n in (n_q, n_k, n_k))
    got = student.call("flash_attention_triton", q, k, v, causal=causal, _time_limit=60)
    out, lse = ref.tiled_attention(q.double(), k.double(), v.double(), causal=causal)
    what = f"flash_attention_triton(q {tuple(q.shape)}, k and v {tuple(k.shape)}, {str(dtype)[6:]}, causal={causal})"
    expect_same(got, (plain(out.to(dtype)), plain(lse.float())), what, names=("out", "lse"), **tolerance)


@check("flash_attention_triton", "float32, N not a multiple of the blocks, d = 16, 32 and 64")
def triton_sizes(student, ref, rng):
    for n, d in ((17, 16), (50, 32), (40, 64)):
        same_as_exact(student, ref, rng, n, n, d, causal=False)


@check("flash_attention_triton", "Nq different from Nk")
def triton_rectangular(student, ref, rng):
    same_as_exact(student, ref, rng, 20, 45, 16, causal=False)
    same_as_exact(student, ref, rng, 45, 20, 32, causal=False)


@check("flash_attention_triton", "causal, bottom-right; a query that sees no key gets zeros and lse = -inf, never NaN")
def triton_causal(student, ref, rng):
    for n_q, n_k in ((40, 40), (20, 53), (30, 12)):
        same_as_exact(student, ref, rng, n_q, n_k, 16, causal=True)


@check("flash_attention_triton", "scores above 100 in one head and all below -100 in the other (float32): the running "
       "max keeps exp from overflowing and from underflowing to 0/0")
def triton_large_scores(student, ref, rng):
    q, k, v = (tensor(rng, (1, 2, n, 16)) for n in (16, 32, 32))
    q, k = 6.0 * q.abs(), 6.0 * k
    k[:, 1] = -(k[:, 1].abs() + 6.0)  # head 1: every score far below 0
    scores = q @ k.transpose(-2, -1) / 4.0
    got = student.call("flash_attention_triton", q, k, v, _time_limit=60)
    out, lse = ref.tiled_attention(q.double(), k.double(), v.double())
    expect_same(got, (plain(out.float()), plain(lse.float())), f"flash_attention_triton(q (1, 2, 16, 16), k and v "
                f"(1, 2, 32, 16), float32, scores from {scores.min():.0f} to {scores.max():.0f}, every one below "
                f"{scores[:, 1].max():.0f} in head 1)", names=("out", "lse"), **TRITON32)


@check("flash_attention_triton", "scores whose row maximum keeps growing after the first key tile (from -50 to "
       "+150 along the keys): each new maximum rescales the running sum and output")
def triton_growing_max(student, ref, rng):
    q, k, v = (tensor(rng, (1, 1, n, 16), scale=0.3) for n in (16, 64, 64))
    q[..., 0] = 4.0
    k[..., 0] = torch.linspace(-50.0, 150.0, 64)              # score = q . k / 4: a ramp along the keys
    got = student.call("flash_attention_triton", q, k, v, _time_limit=60)
    out, lse = ref.tiled_attention(q.double(), k.double(), v.double())
    expect_same(got, (plain(out.float()), plain(lse.float())), "flash_attention_triton(q (1, 1, 16, 16), k and v "
                "(1, 1, 64, 16), float32, each query's scores rising from about -50 at key 0 to +150 at key 63: a new "
                "row maximum in every key tile)", names=("out", "lse"), nan_hint="exp overflowed to inf: the running "
                "maximum follows every new maximum, and the running sum and output are rescaled by exp(m_old - m_new)",
                **TRITON32)


@check("flash_attention_triton", "float16 inputs: a float16 output, within 3e-3")
def triton_half(student, ref, rng):
    same_as_exact(student, ref, rng, 33, 33, 16, causal=True, dtype=torch.float16, tolerance=TRITON16)
    same_as_exact(student, ref, rng, 40, 50, 32, causal=False, dtype=torch.float16, tolerance=TRITON16)


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/device.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.

device_checks(options={"tiled_attention": PAIR})
