"""Checks of chapter 1, "Attention as weights" (NumPy)."""
import numpy as np

from .core import Chapter, call, expect_close, expect_true, plain, same

ASSIGNMENT = "01-weights"
chapter = Chapter(ASSIGNMENT)
check, equals = chapter.check, chapter.equals


def random_shapes(rng, count=4):
    """A vector, a matrix and batched arrays of random sizes."""
    shapes = [(int(rng.integers(2, 9)),), (int(rng.integers(2, 6)), int(rng.integers(2, 9)))]
    while len(shapes) < count:
        shapes.append(tuple(int(n) for n in rng.integers(2, 6, size=len(shapes) + 1)))
    return shapes


def random_weights(rng, shape, zeros=False, axis=-1):
    """Weights summing to one along `axis`; with `zeros`, about 30 % of them exactly 0."""
    w = rng.random(shape) + 0.05
    if zeros:
        w = np.where(rng.random(shape) < 0.3, 0.0, w)
        w = np.moveaxis(w, axis, -1)
        w[..., 0] = np.where(w.sum(-1) == 0, 1.0, w[..., 0])
        w = np.moveaxis(w, -1, axis)
    return w / w.sum(axis, keepdims=True)


# ---- softmax ---------------------------------------------------------------------------------

equals("softmax", "equals the reference on random scores (last axis)", "softmax",
       lambda rng: [call(rng.normal(0, 3, shape)) for shape in random_shapes(rng)])

equals("softmax", "temperature divides the scores", "softmax",
       lambda rng: [call(rng.normal(0, 1, (2, 6)), temperature=t) for t in (0.05, 0.5, 2.0, 10.0)])

equals("softmax", "stable for scores of size 1e4 and more (subtract the max)", "softmax",
       lambda rng: [call(np.array([1e4, 0.0, -1e4])), call(np.array([1e4, 1e4 - 1.0, 1e4 - 2.0])),
                    call(np.array([[-1e5, -1e5 + 3.0], [2e4, 2e4 + 0.5]])), call(np.array([800.0, 799.0, 10.0]))])

equals("softmax", "a slice whose every score is -inf gets all-zero weights, not NaN", "softmax",
       lambda rng: [call(np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])), call(np.full(4, -np.inf)),
                    call(np.array([[0.5, -np.inf], [-np.inf, -np.inf], [1.0, -np.inf]]), axis=0)], atol=0.0)

equals("softmax", "keeps the input's float dtype (float32 in, float32 out)", "softmax",
       lambda rng: [call(rng.normal(0, 1, (3, 5)).astype(dtype)) for dtype in (np.float32, np.float64)])

equals("softmax", "integer scores give float64 weights", "softmax", lambda rng: [call(np.array([[3, 1, 2], [0, 0, 5]]))])


@check("softmax", "weights are non-negative and sum to one along any axis")
def softmax_axis(student, ref, rng):
    scores = rng.normal(0, 2, (3, 4, 5))
    for axis in (0, 1, -1, -2):
        got = same(student, ref, "softmax", scores, axis=axis)
        expect_true(np.all(got >= 0) and np.allclose(got.sum(axis=axis), 1.0),
                    f"softmax(scores of shape (3, 4, 5), axis={axis}): the weights must sum to one along axis {axis}")


@check("softmax", "-inf scores get weight exactly 0; a very high temperature gives uniform weights")
def softmax_limits(student, ref, rng):
    scores = rng.normal(0, 1, (4, 7))
    scores[rng.random((4, 7)) < 0.4] = -np.inf
    scores[:, 0] = rng.normal(0, 1, 4)  # one allowed item per row
    got = same(student, ref, "softmax", scores, atol=0.0)
    expect_true(np.all(got[np.isneginf(scores)] == 0), "softmax: an item with score -inf must get weight exactly 0")
    hot = student.call("softmax", scores[:, :1].repeat(6, 1) + rng.normal(0, 1, (4, 6)), temperature=1e6)
    expect_close(hot, np.full((4, 6), 1 / 6), "softmax(scores of shape (4, 6), temperature=1e6) should be almost uniform",
                 atol=1e-4)


# ---- hardmax ---------------------------------------------------------------------------------

equals("hardmax", "one-hot on the arg-max of random scores", "hardmax",
       lambda rng: [call(rng.normal(0, 1, shape)) for shape in random_shapes(rng)], atol=0.0)

equals("hardmax", "tied maxima share the weight equally", "hardmax",
       lambda rng: [call(np.array([3.0, 1.0, 3.0])), call(np.array([[2.0, 2.0, 2.0, 2.0], [0.0, 5.0, 5.0, 1.0]])),
                    call(np.array([-np.inf, 4.0, 4.0, -np.inf, 4.0]))])

equals("hardmax", "works along any axis", "hardmax",
       lambda rng: [call(rng.integers(0, 3, (3, 4, 5)).astype(np.float64), axis=axis) for axis in (0, 1, -1)])

equals("hardmax", "float weights (float32 kept, integers give float64); all -inf gives zeros", "hardmax",
       lambda rng: [call(np.array([[1.0, -np.inf], [-np.inf, -np.inf]])), call(np.array([2, 7, 7, 1])),
                    call(np.array([0.5, 2.5, 2.5], dtype=np.float32))], atol=0.0)


@check("hardmax", "the limit of softmax as the temperature goes to 0")
def hardmax_limit(student, ref, rng):
    scores = rng.normal(0, 1, 6)
    expect_close(student.call("hardmax", scores), plain(ref.softmax(scores, temperature=1e-4)),
                 f"hardmax({np.round(scores, 3).tolist()}) should equal softmax at temperature 1e-4", atol=1e-6)


# ---- weighted_average ------------------------------------------------------------------------

equals("weighted_average", "equals the reference on random items (N, D)", "weighted_average",
       lambda rng: [call(rng.normal(0, 1, (n, d)), random_weights(rng, (n,))) for n, d in ((3, 2), (7, 5), (1, 4), (10, 1))])

equals("weighted_average", "batch dimensions (..., N, D) with (..., N)", "weighted_average",
       lambda rng: [call(rng.normal(0, 1, batch + (6, 3)), random_weights(rng, batch + (6,))) for batch in ((4,), (2, 3))])

equals("weighted_average", "keeps float32", "weighted_average",
       lambda rng: [call(rng.normal(0, 1, (2, 4, 3)).astype(np.float32), random_weights(rng, (2, 4)).astype(np.float32))])


@check("weighted_average", "one-hot weights select an item; uniform weights give the mean")
def weighted_average_properties(student, ref, rng):
    items = rng.normal(0, 1, (5, 4))
    for i in range(5):
        expect_close(student.call("weighted_average", items, np.eye(5)[i]), items[i],
                     f"weighted_average(items of shape (5, 4), one-hot weights on item {i}) should be item {i}")
    expect_close(student.call("weighted_average", items, np.full(5, 0.2)), items.mean(axis=0),
                 "weighted_average(items of shape (5, 4), uniform weights) should be the mean item")


# ---- entropy ---------------------------------------------------------------------------------

equals("entropy", "equals the reference on random weights", "entropy",
       lambda rng: [call(random_weights(rng, shape)) for shape in random_shapes(rng)])

equals("entropy", "0 log 0 = 0: zero weights give no NaN", "entropy",
       lambda rng: [call(np.array([0.0, 1.0, 0.0])), call(random_weights(rng, (5, 6), zeros=True))])

equals("entropy", "works along any axis", "entropy",
       lambda rng: [call(random_weights(rng, (3, 4, 5), axis=axis), axis=axis) for axis in (0, 1)])


@check("entropy", "in nats: uniform weights over N items give log N")
def entropy_uniform(student, ref, rng):
    for n in (2, 3, 10):
        expect_close(student.call("entropy", np.full(n, 1 / n)), np.asarray(np.log(n)),
                     f"entropy(uniform weights over {n} items) should be log {n} = {np.log(n):.6f} nats")


# ---- effective_count -------------------------------------------------------------------------

equals("effective_count", "equals exp(entropy) on random weights, some of them 0", "effective_count",
       lambda rng: [call(random_weights(rng, shape, zeros=True)) for shape in random_shapes(rng)])

equals("effective_count", "works along any axis", "effective_count",
       lambda rng: [call(random_weights(rng, (4, 3, 5), axis=axis), axis=axis) for axis in (0, -2)])


@check("effective_count", "uniform over k items gives k; one-hot gives 1")
def effective_count_uniform(student, ref, rng):
    for n, k in ((4, 1), (5, 2), (6, 3), (8, 8)):
        weights = np.zeros(n)
        weights[:k] = 1 / k
        expect_close(student.call("effective_count", weights), np.asarray(float(k)),
                     f"effective_count(uniform weights over {k} of {n} items) should be {k}")


@check("effective_count", "between 1 and N, with batch dimensions")
def effective_count_bounds(student, ref, rng):
    got = same(student, ref, "effective_count", random_weights(rng, (3, 2, 7), zeros=True))
    expect_true(np.all(got >= 1 - 1e-9) and np.all(got <= 7 + 1e-9),
                "effective_count(weights over 7 items) must lie between 1 and 7")
