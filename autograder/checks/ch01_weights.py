"""Checks of chapter 1, "Attention as weights" (NumPy)."""
import numpy as np

from .core import check, describe, expect_close, expect_true, plain, rng_for

ASSIGNMENT = "01-weights"


def random_shapes(rng, count=4):
    """A vector, a matrix and batched arrays of random sizes."""
    shapes = [(int(rng.integers(2, 9)),), (int(rng.integers(2, 6)), int(rng.integers(2, 9)))]
    while len(shapes) < count:
        shapes.append(tuple(int(n) for n in rng.integers(2, 6, size=len(shapes) + 1)))
    return shapes


def random_weights(rng, shape, zeros=False):
    w = rng.random(shape) + 0.05
    if zeros:
        w = np.where(rng.random(shape) < 0.3, 0.0, w)
        w[..., 0] = np.where(w.sum(-1) == 0, 1.0, w[..., 0])
    return w / w.sum(-1, keepdims=True)


def same(student, ref, name, *args, rtol=1e-6, atol=1e-9, **kwargs):
    """The student's `name(*args, **kwargs)` equals the reference's."""
    shown = ", ".join([describe(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    got = student.call(name, *args, **kwargs)
    expect_close(got, plain(getattr(ref, name)(*args, **kwargs)), f"{name}({shown})", rtol=rtol, atol=atol)
    return got


# ---- softmax ---------------------------------------------------------------------------------

@check("softmax", "equals the reference on random scores (last axis)", weight=1.0)
def softmax_random(student, ref):
    rng = rng_for("softmax_random")
    for shape in random_shapes(rng):
        same(student, ref, "softmax", rng.normal(0, 3, shape))


@check("softmax", "weights are non-negative and sum to one along any axis", weight=1.0)
def softmax_axis(student, ref):
    rng = rng_for("softmax_axis")
    scores = rng.normal(0, 2, (3, 4, 5))
    for axis in (0, 1, -1, -2):
        got = same(student, ref, "softmax", scores, axis=axis)
        expect_true(np.all(got >= 0) and np.allclose(got.sum(axis=axis), 1.0),
                    f"softmax(scores of shape (3, 4, 5), axis={axis}): the weights must sum to one along axis {axis}")


@check("softmax", "temperature divides the scores: uniform when hot, arg-max when cold", weight=1.0)
def softmax_temperature(student, ref):
    rng = rng_for("softmax_temperature")
    scores = rng.normal(0, 1, (2, 6))
    for temperature in (0.05, 0.5, 2.0, 10.0):
        same(student, ref, "softmax", scores, temperature=temperature)
    hot = student.call("softmax", scores, temperature=1e6)
    expect_close(hot, np.full((2, 6), 1 / 6), "softmax(scores, temperature=1e6) should be almost uniform", atol=1e-4)


@check("softmax", "stable for scores of size 1e4 and more (the max shift)", weight=1.0)
def softmax_large(student, ref):
    for scores in (np.array([1e4, 0.0, -1e4]), np.array([1e4, 1e4 - 1.0, 1e4 - 2.0]),
                   np.array([[-1e5, -1e5 + 3.0], [2e4, 2e4 + 0.5]]), np.array([800.0, 799.0, 10.0])):
        same(student, ref, "softmax", scores)


@check("softmax", "-inf scores get weight exactly 0", weight=1.0)
def softmax_minus_inf(student, ref):
    rng = rng_for("softmax_minus_inf")
    scores = rng.normal(0, 1, (4, 7))
    scores[rng.random((4, 7)) < 0.4] = -np.inf
    scores[:, 0] = rng.normal(0, 1, 4)  # keep one allowed item per row
    got = same(student, ref, "softmax", scores, atol=0.0)
    expect_true(np.all(got[np.isneginf(scores)] == 0), "softmax: an item with score -inf must get weight exactly 0")


@check("softmax", "a slice whose every score is -inf gets all-zero weights, not NaN", weight=1.0)
def softmax_all_masked(student, ref):
    scores = np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    same(student, ref, "softmax", scores, atol=0.0)
    same(student, ref, "softmax", np.full(4, -np.inf), atol=0.0)
    same(student, ref, "softmax", scores.T.copy(), axis=0, atol=0.0)


@check("softmax", "keeps the input's float dtype (float32 in, float32 out)", weight=1.0)
def softmax_dtype(student, ref):
    rng = rng_for("softmax_dtype")
    for dtype in (np.float32, np.float64):
        same(student, ref, "softmax", rng.normal(0, 1, (3, 5)).astype(dtype), rtol=1e-5, atol=1e-6)


@check("softmax", "integer scores give float64 weights", weight=1.0)
def softmax_integers(student, ref):
    same(student, ref, "softmax", np.array([[3, 1, 2], [0, 0, 5]]))


# ---- hardmax ---------------------------------------------------------------------------------

@check("hardmax", "one-hot on the arg-max of random scores", weight=1.0)
def hardmax_random(student, ref):
    rng = rng_for("hardmax_random")
    for shape in random_shapes(rng):
        same(student, ref, "hardmax", rng.normal(0, 1, shape), atol=0.0)


@check("hardmax", "tied maxima share the weight equally", weight=1.0)
def hardmax_ties(student, ref):
    same(student, ref, "hardmax", np.array([3.0, 1.0, 3.0]))
    same(student, ref, "hardmax", np.array([[2.0, 2.0, 2.0, 2.0], [0.0, 5.0, 5.0, 1.0]]))
    same(student, ref, "hardmax", np.array([-np.inf, 4.0, 4.0, -np.inf, 4.0]))


@check("hardmax", "works along any axis", weight=1.0)
def hardmax_axis(student, ref):
    rng = rng_for("hardmax_axis")
    scores = rng.integers(0, 3, (3, 4, 5)).astype(np.float64)  # many ties
    for axis in (0, 1, -1):
        same(student, ref, "hardmax", scores, axis=axis)


@check("hardmax", "float weights; all -inf gives zeros; the limit of softmax as T -> 0", weight=1.0)
def hardmax_limit(student, ref):
    same(student, ref, "hardmax", np.array([[1.0, -np.inf], [-np.inf, -np.inf]]), atol=0.0)
    same(student, ref, "hardmax", np.array([2, 7, 7, 1]))
    scores = np.array([0.3, 1.7, -0.2, 1.6])
    expect_close(student.call("hardmax", scores), plain(ref.softmax(scores, temperature=1e-4)),
                 "hardmax([0.3, 1.7, -0.2, 1.6]) should equal softmax at temperature 1e-4", atol=1e-6)
    same(student, ref, "hardmax", np.array([0.5, 2.5, 2.5], dtype=np.float32))


# ---- weighted_average ------------------------------------------------------------------------

@check("weighted_average", "equals the reference on random items (N, D)", weight=1.0)
def weighted_average_random(student, ref):
    rng = rng_for("weighted_average_random")
    for n, d in ((3, 2), (7, 5), (1, 4), (10, 1)):
        same(student, ref, "weighted_average", rng.normal(0, 1, (n, d)), random_weights(rng, (n,)))


@check("weighted_average", "batch dimensions (..., N, D) with (..., N)", weight=1.0)
def weighted_average_batch(student, ref):
    rng = rng_for("weighted_average_batch")
    for batch in ((4,), (2, 3)):
        items = rng.normal(0, 1, batch + (6, 3))
        same(student, ref, "weighted_average", items, random_weights(rng, batch + (6,)))


@check("weighted_average", "one-hot weights select an item; uniform weights give the mean", weight=1.0)
def weighted_average_properties(student, ref):
    rng = rng_for("weighted_average_properties")
    items = rng.normal(0, 1, (5, 4))
    for i in range(5):
        expect_close(student.call("weighted_average", items, np.eye(5)[i]), items[i],
                     f"weighted_average(items of shape (5, 4), one-hot weights on item {i}) should be item {i}")
    expect_close(student.call("weighted_average", items, np.full(5, 0.2)), items.mean(axis=0),
                 "weighted_average(items of shape (5, 4), uniform weights) should be the mean item")


@check("weighted_average", "keeps float32", weight=1.0)
def weighted_average_dtype(student, ref):
    rng = rng_for("weighted_average_dtype")
    items = rng.normal(0, 1, (2, 4, 3)).astype(np.float32)
    same(student, ref, "weighted_average", items, random_weights(rng, (2, 4)).astype(np.float32), rtol=1e-5, atol=1e-6)


# ---- entropy ---------------------------------------------------------------------------------

@check("entropy", "equals the reference on random weights", weight=1.0)
def entropy_random(student, ref):
    rng = rng_for("entropy_random")
    for shape in random_shapes(rng):
        same(student, ref, "entropy", random_weights(rng, shape))


@check("entropy", "in nats: uniform weights over N items give log N", weight=1.0)
def entropy_uniform(student, ref):
    for n in (2, 3, 10):
        expect_close(student.call("entropy", np.full(n, 1 / n)), np.asarray(np.log(n)),
                     f"entropy(uniform weights over {n} items) should be log {n} = {np.log(n):.6f} nats")


@check("entropy", "0 log 0 = 0: zero weights give no NaN", weight=1.0)
def entropy_zeros(student, ref):
    rng = rng_for("entropy_zeros")
    same(student, ref, "entropy", np.array([0.0, 1.0, 0.0]), atol=0.0)
    same(student, ref, "entropy", random_weights(rng, (5, 6), zeros=True))


@check("entropy", "works along any axis", weight=1.0)
def entropy_axis(student, ref):
    rng = rng_for("entropy_axis")
    weights = rng.random((3, 4, 5)) + 0.01
    for axis in (0, 1):
        same(student, ref, "entropy", weights / weights.sum(axis=axis, keepdims=True), axis=axis)


# ---- effective_count -------------------------------------------------------------------------

@check("effective_count", "uniform over k items gives k; one-hot gives 1", weight=1.0)
def effective_count_uniform(student, ref):
    for n, k in ((4, 1), (5, 2), (6, 3), (8, 8)):
        weights = np.zeros(n)
        weights[:k] = 1 / k
        expect_close(student.call("effective_count", weights), np.asarray(float(k)),
                     f"effective_count(uniform weights over {k} of {n} items) should be {k}")


@check("effective_count", "equals exp(entropy) on random weights", weight=1.0)
def effective_count_random(student, ref):
    rng = rng_for("effective_count_random")
    for shape in random_shapes(rng):
        same(student, ref, "effective_count", random_weights(rng, shape, zeros=True))


@check("effective_count", "works along any axis", weight=1.0)
def effective_count_axis(student, ref):
    rng = rng_for("effective_count_axis")
    weights = rng.random((4, 3, 5)) + 0.01
    for axis in (0, -2):
        same(student, ref, "effective_count", weights / weights.sum(axis=axis, keepdims=True), axis=axis)


@check("effective_count", "between 1 and N, with batch dimensions", weight=1.0)
def effective_count_bounds(student, ref):
    rng = rng_for("effective_count_bounds")
    weights = random_weights(rng, (3, 2, 7), zeros=True)
    got = same(student, ref, "effective_count", weights)
    expect_true(np.all(got >= 1 - 1e-9) and np.all(got <= 7 + 1e-9),
                "effective_count(weights over 7 items) must lie between 1 and 7")
