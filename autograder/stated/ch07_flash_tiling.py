"""Chapter 7's stated rules: tiled_attention's skips, dtypes and memory; the caller's arrays."""
import math

import numpy as np

from .register import CheckFailure, stated
from .calling import describe, tensor, close_enough, expect_unchanged


# ---- chapter 7: tiled_attention ---------------------------------------------------------------

def expect_attention(got, expected, q, v, what, rows=None, rtol=1e-10, atol=1e-12, dtype=None):
    """`got` is the pair (out, lse) of attention on q and v's shapes, `expected` (float64), in
    `dtype` (q's by default); `expected` holds only the queries `rows` (a slice or an index) when given."""
    import torch
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise CheckFailure(f"{what} should return a pair (out, lse), got {describe(got)}")
    dtype = dtype or q.dtype
    row = torch.arange(q.shape[-2])[rows] if rows is not None else None  # the checked queries' positions
    for name, g, e in zip(("out", "lse"), got, expected):
        g = torch.as_tensor(np.asarray(g))
        if g.dtype != dtype:
            raise CheckFailure(f"{what}: {name} should keep the inputs' dtype {str(dtype)[6:]}, got {str(g.dtype)[6:]}")
        shape = (*q.shape[:-1], v.shape[-1]) if name == "out" else tuple(q.shape[:-1])
        if tuple(g.shape) != shape:
            raise CheckFailure(f"{what}: {name} should have shape {shape}, got {tuple(g.shape)}")
        if row is not None:
            g = g[..., row, :] if name == "out" else g[..., row]
        g64, e = g.double(), e.double()
        bad = ~(torch.isclose(g64, e, rtol=rtol, atol=atol) | (torch.isneginf(g64) & torch.isneginf(e)))
        if bad.any():
            index = [int(i) for i in torch.nonzero(bad)[0]]
            got_value, expected_value = g64[tuple(index)].item(), e[tuple(index)].item()
            if row is not None:  # named by the query's own position
                axis = -2 if name == "out" else -1
                index[axis] = int(row[index[axis]])
            nan = int(torch.isnan(g64).sum())
            raise CheckFailure(f"{what}: {name}{index} is {got_value:.10g}, expected {expected_value:.10g}"
                               f" ({int(bad.sum())} of {bad.numel()} entries differ"
                               + (f" among the {len(row)} queries checked" if row is not None else "")
                               + (f", {nan} of them NaN" if nan else "") + f"; tolerance rtol={rtol:g}, atol={atol:g})")


@stated("07-flash-tiling", "tiled_attention", "causal: the key blocks after a query block's last visible key are "
        "skipped, not masked (NaN in keys and values a query block never sees leaves its output clean)", known=True)
def tiled_skips(student, rng, known):
    import torch
    q, k, v = known.given("q, k, v", lambda: tuple(tensor(rng, (1, 48, 8), torch.float64) for _ in range(3)))
    expected = known.answer("tiled_attention", q, k, v, causal=True)
    k_nan, v_nan = k.clone(), v.clone()
    k_nan[..., 16:, :], v_nan[..., 16:, :] = math.nan, math.nan  # never seen by queries 0 ... 15
    got = student.call("tiled_attention", q, k_nan, v_nan, block_q=16, block_k=16, causal=True)
    out, lse = expected
    expect_attention(got, (out[:, :16], lse[:, :16]), q, v,
                     "tiled_attention(q, k, v of shape (1, 48, 8), block_q=16, block_k=16, causal=True), "
                     "with NaN in keys and values 16 to 47, which queries 0 to 15 never see: rows 0 to 15 (a NaN "
                     "there means the blocks after the query block's last visible key were computed and masked, not "
                     "skipped)", rows=slice(0, 16))


@stated("07-flash-tiling", "tiled_attention", "out and lse keep the input dtype: float32 and float16, causal or not",
        known=True)
def tiled_dtypes(student, rng, known):
    import torch
    for dtype, tolerance in ((torch.float32, (1e-4, 1e-5)), (torch.float16, (1e-2, 1e-2))):
        for causal in (False, True):
            q, k, v = known.given(f"q, k, v {str(dtype)[6:]} causal={causal}",
                                  lambda: tuple(tensor(rng, (2, n, 8), dtype) for n in (40, 33, 33)))
            expected = known.answer("tiled_attention", q.double(), k.double(), v.double(), causal=causal)
            got = student.call("tiled_attention", q, k, v, block_q=16, block_k=16, causal=causal)
            expect_attention(got, expected, q, v, f"tiled_attention(q, k, v of shapes (2, 40, 8), (2, 33, 8), (2, 33, 8), "
                             f"{str(dtype)[6:]}, block_q=16, block_k=16, causal={causal})",
                             rtol=tolerance[0], atol=tolerance[1])


MEMORY_N, MEMORY_D, MEMORY_BLOCK = 8192, 16, 256
MEMORY_TRIES = 3


def memory_inputs(seed):
    """q, k, v of the memory rule, float32 (1, N, D), from one seed (a known answer stores the seed,
    not 1.5 MB of inputs)."""
    generator = np.random.default_rng(seed)
    return tuple(tensor(generator, (1, MEMORY_N, MEMORY_D)) for _ in range(3))


@stated("07-flash-tiling", "tiled_attention", "holds one block_q x block_k tile of scores at a time (N = 8192: under "
        "6 MB)", weight=2, known=True)
def tiled_memory(student, rng, known):
    import torch
    label = (f"tiled_attention(q, k, v of shape (1, {MEMORY_N}, {MEMORY_D}), float32, block_q={MEMORY_BLOCK}, "
             f"block_k={MEMORY_BLOCK})")
    output = MEMORY_N * MEMORY_D * 4 + MEMORY_N * 4
    tile = MEMORY_BLOCK * MEMORY_BLOCK * 4
    allowed = 4 * output + 16 * tile  # the result, its copies on the way back, and a few tiles' work
    # A first call, not measured, pays for torch's one-time set-up (the same whatever N: two blocks
    # of queries and keys are enough, and cost a thousandth of N = 8192). Its inputs come from a
    # generator of their own, unrelated to the run's seed, and each measured call's from a seed
    # drawn from the run's seed (`rng`): no call's inputs tell anything of a measured call's, so no
    # call can compute a measured call's answer in advance and serve it from a cache.
    warm_up = [tensor(np.random.default_rng(i), (1, 2 * MEMORY_BLOCK, MEMORY_D)) for i in range(3)]
    student.call("tiled_attention", *warm_up, block_q=MEMORY_BLOCK, block_k=MEMORY_BLOCK, _time_limit=60, _label=label)
    # Up to three measurements, the lowest kept: a collection of earlier garbage during a call, seen
    # by the watcher on a busy machine, reads as a rise of a few MB; a whole matrix is there every time.
    # (`check` knows the answer for one seed and one set of rows: each of its tries uses them)
    rises = []
    while len(rises) < MEMORY_TRIES and (not rises or min(rises) > allowed):
        seed = known.given("seed", lambda: int(rng.integers(2**63)))
        q, k, v = memory_inputs(seed)
        got, raised = student.measured_call("tiled_attention", q, k, v, block_q=MEMORY_BLOCK, block_k=MEMORY_BLOCK,
                                            _time_limit=60, _label=label)
        # its values on queries drawn after the call: a result served from a cache fails, and the
        # grader computes a sixteenth of the answer (all of it takes seconds in float64)
        rows = known.given("rows", lambda: torch.from_numpy(np.sort(rng.choice(MEMORY_N, MEMORY_N // 16, replace=False))))
        expect_attention(got, known.answer("memory_attention_rows", seed, rows), q, v, label, rows=rows, rtol=1e-4,
                         atol=1e-5)
        rises.append(raised)
    if min(rises) > allowed:
        raise CheckFailure(
            f"{label} raised the memory your notebook's processes hold by {min(rises) / 2**20:.1f} MB (the lowest of "
            f"{len(rises)} calls); allowed {allowed / 2**20:.1f} MB (the output and its copies, and 16 tiles of "
            f"{tile / 2**20:.2f} MB). The full matrix of scores is {MEMORY_N ** 2 * 4 / 2**20:.0f} MB and one query "
            f"block against all keys {MEMORY_BLOCK * MEMORY_N * 4 / 2**20:.0f} MB: loop over key blocks inside each "
            "query block")


# ---- chapter 7: the caller's arrays -----------------------------------------------------------

@stated("07-flash-tiling", "online_softmax", "the caller's x is left as it was (float64 and float32)", known=True)
def online_leaves_x(student, rng, known):
    for dtype in (np.float64, np.float32):
        x = known.given(f"x {np.dtype(dtype).name}", lambda: rng.normal(0, 3, (3, 10)).astype(dtype))
        what = f"online_softmax(x {describe(x)}, 4)"
        expected = known.answer("online_softmax", x.astype(np.float64), 4)  # the softmax along x's last axis
        got = expect_unchanged(student, "online_softmax", (x,), ("x",), what, block_size=4)
        if not (isinstance(got, np.ndarray) and got.shape == x.shape and got.dtype.kind == "f"
                and close_enough(got, expected, 1e-5, 1e-7)):
            raise CheckFailure(f"{what} returned {describe(got)}, not the softmax of x along its last axis (tolerance "
                               "rtol=1e-5, atol=1e-7): whether it leaves x as it was is judged on a right result")


@stated("07-flash-tiling", "tiled_attention", "the caller's q, k and v are left as they were (causal)", known=True)
def tiled_leaves_inputs(student, rng, known):
    import torch
    q, k, v = known.given("q, k, v", lambda: tuple(tensor(rng, (2, n, 8), torch.float64) for n in (12, 20, 20)))
    what = ("tiled_attention(q, k, v of shapes (2, 12, 8), (2, 20, 8), (2, 20, 8), float64, block_q=8, block_k=8, "
            "causal=True)")
    got = expect_unchanged(student, "tiled_attention", (q, k, v), ("q", "k", "v"), what,
                            block_q=8, block_k=8, causal=True)
    expect_attention(got, known.answer("tiled_attention", q, k, v, causal=True), q, v,
                     what + " (whether it leaves q, k and v as they were is judged on a right result)")
