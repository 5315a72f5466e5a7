"""Checks of chapter 6, "Nadaraya–Watson attention pooling" (NumPy, then PyTorch).

The estimators take a kernel as an argument: the checks hand the student's function the
reference kernels, which the student's process holds by name (`kernel_handle`). The training
check runs the student's `fit` on a subclass of the student's class whose `forward` is the
reference's (only that method and `bandwidth` are sent: never the reference's `fit`), so that a
wrong `forward` costs points in the forward checks only.
"""
import contextlib
import math

import numpy as np
import torch

from .core import (Chapter, call, called, describe, expect_close, expect_parameters, expect_same, expect_true,
                   module_pair, plain, same)
from .known_good import KnownGood, use_with_probe
from ..sandbox.probes import FIT_PROBE, GRADER_KERNEL

ASSIGNMENT = "06-nadaraya-watson"
chapter = Chapter(ASSIGNMENT)
check, equals, stated_checks, device_checks = chapter.check, chapter.equals, chapter.stated_checks, chapter.device_checks
KERNELS = ("gaussian_kernel", "boxcar_kernel", "epanechnikov_kernel")


def grid_integral(values, grid):
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(grid)))


# ---- the kernels ------------------------------------------------------------------------------

def kernel_inputs(rng):
    return [call(rng.normal(0, 2, (7,))), call(rng.normal(0, 2, (3, 4))), call(rng.normal(0, 2, (2, 2, 3))),
            call(np.array([-3, -1, 0, 1, 2]))]


EDGES = np.array([-1.0, 1.0, -1.0 - 1e-9, 1.0 + 1e-9, -0.999999, 0.999999, 0.0, 5.0, -5.0])

equals("gaussian_kernel", "exp(-u^2/2) / sqrt(2 pi) on arrays of any shape, integers included", "gaussian_kernel",
       kernel_inputs)


@check("gaussian_kernel", "a density: symmetric, positive, integrates to one")
def gaussian_density(student, ref, rng):
    grid = np.linspace(-12, 12, 4801)
    values = student.call("gaussian_kernel", grid)
    expect_close(values, values[::-1], "gaussian_kernel(u) should equal gaussian_kernel(-u)")
    expect_true(np.all(values > 0), "gaussian_kernel(u) should be positive everywhere")
    area = grid_integral(values, grid)
    expect_true(abs(area - 1) < 1e-6, f"gaussian_kernel should integrate to 1 (the 1/sqrt(2 pi) in front), "
                f"its integral over [-12, 12] is {area:.6g}")


equals("boxcar_kernel", "1.0 where |u| <= 1 (the edge included), 0.0 elsewhere, as float64", "boxcar_kernel",
       lambda rng: kernel_inputs(rng) + [call(EDGES)], atol=0.0)

equals("epanechnikov_kernel", "3/4 (1 - u^2) on |u| <= 1 and 0 outside (never negative)", "epanechnikov_kernel",
       lambda rng: kernel_inputs(rng) + [call(EDGES)])


@check("epanechnikov_kernel", "integrates to one, with support [-1, 1]")
def epanechnikov_density(student, ref, rng):
    grid = np.linspace(-3, 3, 6001)
    values = student.call("epanechnikov_kernel", grid)
    expect_true(np.all(values >= 0) and np.all(values[np.abs(grid) > 1] == 0),
                "epanechnikov_kernel(u) should be 0 for |u| > 1, never negative")
    area = grid_integral(values, grid)
    expect_true(abs(area - 1) < 1e-5, f"epanechnikov_kernel should integrate to 1 (3/4 in front), its integral is {area:.6g}")


# ---- the estimator ----------------------------------------------------------------------------



def kernel_handle(student, exercise, name):
    """The reference `name` kernel as the student's process holds it, to pass as an argument."""
    use_with_probe(student, GRADER_KERNEL)
    return student.call(GRADER_KERNEL.name, name, keep=True)


def same_with_kernel(student, ref, target, kernel, *args, **kwargs):
    """`same` for a function called with `kernel=` one of the kernels, by name."""
    got = student.call(target, *args, kernel=kernel_handle(student, target, kernel), **kwargs)
    expected = getattr(ref, target)(*args, kernel=getattr(ref, kernel), **kwargs)
    what = called(target, None, args, kwargs).removesuffix(")") + f", kernel={kernel})"
    expect_same(got, plain(expected), what)
    return got


def sample(rng, n, low=0.0, high=5.0):
    """A 1-D regression sample: sorted inputs, a noisy curve."""
    x = np.sort(rng.uniform(low, high, n))
    return x, 2 * np.sin(x) + x ** 0.8 + rng.normal(0, 0.5, n)


def queries(rng, m=9):
    return np.sort(rng.uniform(-0.5, 5.5, m))


equals("nadaraya_watson", "equals the reference with the Gaussian kernel at bandwidths 0.3, 1 and 4", "nadaraya_watson",
       lambda rng: [call(queries(rng), *sample(rng, 20), bandwidth=h) for h in (0.3, 1.0, 4.0)]
       + [call(queries(rng), *sample(rng, 12))])


@check("nadaraya_watson", "vector targets: y_train (N, D) gives (M, D)")
def nw_vectors(student, ref, rng):
    x, _ = sample(rng, 15)
    same(student, ref, "nadaraya_watson", queries(rng), x, rng.normal(0, 1, (15, 3)), bandwidth=0.7)
    same_with_kernel(student, ref, "nadaraya_watson", "epanechnikov_kernel", queries(rng), x, rng.normal(0, 1, (15, 2)),
                     bandwidth=1.5)


@check("nadaraya_watson", "uses the kernel it is given (boxcar, Epanechnikov)")
def nw_kernels(student, ref, rng):
    x, y = sample(rng, 25)
    for kernel in ("boxcar_kernel", "epanechnikov_kernel"):
        same_with_kernel(student, ref, "nadaraya_watson", kernel, np.linspace(0.2, 4.8, 8), x, y, bandwidth=1.2)


@check("nadaraya_watson", "NaN where no training point has a positive weight (not 0, not inf)")
def nw_no_data(student, ref, rng):
    x, y = sample(rng, 10, 0.0, 2.0)
    far = np.array([0.5, 9.0, 1.5, -7.0])
    for kernel in ("boxcar_kernel", "epanechnikov_kernel"):
        same_with_kernel(student, ref, "nadaraya_watson", kernel, far, x, y, bandwidth=1.0)
    same_with_kernel(student, ref, "nadaraya_watson", "boxcar_kernel", far, x, np.stack([y, -y], axis=1), bandwidth=1.0)


@check("nadaraya_watson", "the limits: a tiny h gives the nearest point's y, a huge h the mean of all y")
def nw_limits(student, ref, rng):
    x = np.arange(10.0)
    y = rng.normal(0, 1, 10)
    near = student.call("nadaraya_watson", x + 0.1, x, y, bandwidth=0.05)
    expect_close(near, y, "nadaraya_watson(x_train + 0.1, x_train = 0, 1, ..., 9, y_train, bandwidth=0.05) should "
                 "give each query its nearest point's y", rtol=1e-9, atol=1e-9)
    flat = student.call("nadaraya_watson", x * 0.7, x, y, bandwidth=1e6)
    expect_close(flat, np.full(10, y.mean()), "nadaraya_watson(..., bandwidth=1e6) should give the mean of y_train "
                 "at every query", rtol=1e-6, atol=1e-9)


# ---- the softmax form -------------------------------------------------------------------------

equals("nw_attention_weights", "equals the reference at bandwidths 0.5, 1 and 3", "nw_attention_weights",
       lambda rng: [call(queries(rng, 7), sample(rng, 11)[0], h) for h in (0.5, 1.0, 3.0)])


@check("nw_attention_weights", "the weights of Gaussian Nadaraya-Watson: weights @ y equals the estimator")
def nw_identity(student, ref, rng):
    x, y = sample(rng, 14)
    xq = queries(rng, 7)
    weights = student.call("nw_attention_weights", xq, x, 0.6)
    expect_true(isinstance(weights, np.ndarray) and weights.shape == (7, 14),
                f"nw_attention_weights(queries (7,), keys (14,), 0.6) should be a (7, 14) array, got {describe(weights)}")
    expect_close(weights @ y, ref.nadaraya_watson(xq, x, y, bandwidth=0.6),
                 "nw_attention_weights(queries, keys, 0.6) @ y should equal Gaussian Nadaraya-Watson at h = 0.6")


@check("nw_attention_weights", "stable: h = 1e-3 gives the nearest key's one-hot weights (no NaN) in every row, each "
       "shifted by its own max, a tie shared; h = 1e6 uniform ones")
def nw_weights_limits(student, ref, rng):
    x = np.arange(8.0)
    same(student, ref, "nw_attention_weights", x + 0.3, x, 1e-3, atol=1e-12,
         nan_hint="subtract each row's largest score before np.exp")
    same(student, ref, "nw_attention_weights", x * 0.5, x, 1e6)
    # rows far apart: one query 0.001 from a key (largest score -0.5), one 0.3 (-45000), one midway (a tie)
    same(student, ref, "nw_attention_weights", np.array([2.001, 0.3, 4.5]), x, 1e-3, atol=1e-12,
         nan_hint="subtract each row's own largest score, not the largest of all")


# ---- leave-one-out ----------------------------------------------------------------------------

equals("loo_cv_score", "equals the reference with the Gaussian kernel", "loo_cv_score",
       lambda rng: [call(*sample(rng, 30), h) for h in (0.2, 0.8, 3.0)])


@check("loo_cv_score", "each point is left out: at a small h the in-sample error would be about 0, LOO's is not")
def loo_leaves_out(student, ref, rng):
    x, y = sample(rng, 25)
    same(student, ref, "loo_cv_score", x, y, 0.02)


@check("loo_cv_score", "point i only is left out: a duplicate x stays in")
def loo_duplicates(student, ref, rng):
    x, y = sample(rng, 12)
    x, y = np.concatenate([x, x[:6]]), np.concatenate([y, y[:6] + rng.normal(0, 0.5, 6)])
    same(student, ref, "loo_cv_score", x, y, 0.05)
    same(student, ref, "loo_cv_score", x, y, 0.7)


@check("loo_cv_score", "uses the kernel it is given; inf when a point has no other point with positive weight")
def loo_kernels(student, ref, rng):
    x, y = sample(rng, 30)
    for kernel in ("boxcar_kernel", "epanechnikov_kernel"):
        same_with_kernel(student, ref, "loo_cv_score", kernel, x, y, 1.5)
    isolated = np.concatenate([x, [12.0]]), np.concatenate([y, [1.0]])
    same_with_kernel(student, ref, "loo_cv_score", "boxcar_kernel", *isolated, 1.5)


# ---- choosing the bandwidth -------------------------------------------------------------------

@check("select_bandwidth", "the smallest LOO score's bandwidth, and the scores in the order given")
def selects(student, ref, rng):
    x, y = sample(rng, 30)
    bandwidths = rng.permutation(np.geomspace(0.05, 3.0, 12))
    same(student, ref, "select_bandwidth", x, y, bandwidths, names=("bandwidth", "scores"))
    same_with_kernel(student, ref, "select_bandwidth", "epanechnikov_kernel", x, y, np.array([0.1, 0.5, 1.0, 2.0]))


@check("select_bandwidth", "ties: the first of the tied bandwidths in the order given (a list), not the smallest")
def selects_first_of_ties(student, ref, rng):
    x = np.arange(10.0)
    y = np.sin(x / 2) + rng.normal(0, 0.1, 10)
    # boxcar windows: every h in [1, 2) holds the same neighbours, so 1.5, 1.1 and 1.3 score the same
    same_with_kernel(student, ref, "select_bandwidth", "boxcar_kernel", x, y, [2.5, 1.5, 1.1, 1.3, 0.5])
    same_with_kernel(student, ref, "select_bandwidth", "boxcar_kernel", x, y, [0.4, 0.2, 0.3])  # all inf


# ---- the learned bandwidth --------------------------------------------------------------------

@check("LearnedKernelRegression", "one parameter, log_bandwidth: a float64 scalar holding log h", weight=0.5)
def learned_parameters(student, ref, rng):
    handle = expect_parameters(student, ref, "LearnedKernelRegression", 0.5)
    log_h = student.call(handle, "log_bandwidth", method="get_parameter")
    expect_close(log_h, plain(ref.LearnedKernelRegression(0.5).log_bandwidth.detach()),
                 "LearnedKernelRegression(0.5).log_bandwidth should be log 0.5, a float64 scalar")


def torch_sample(rng, n, d=None):
    x, y = sample(rng, n)
    if d:
        y = np.stack([y] + [rng.normal(0, 1, n) for _ in range(d - 1)], axis=1)
    return torch.from_numpy(x), torch.from_numpy(y)


@check("LearnedKernelRegression", "forward: the Gaussian estimate, for 1-D and vector targets")
def learned_forward(student, ref, rng):
    for d in (None, 3):
        pair = module_pair(student, ref, "LearnedKernelRegression", 1.0, rng=rng)
        x, y = torch_sample(rng, 16, d)
        same(student, ref, pair, torch.from_numpy(queries(rng)), x, y)


@check("LearnedKernelRegression", "forward with leave_one_out=True: query i does not use key i")
def learned_loo(student, ref, rng):
    for d in (None, 2):
        pair = module_pair(student, ref, "LearnedKernelRegression", 1.0, rng=rng)
        x, y = torch_sample(rng, 12, d)
        same(student, ref, pair, x, x, y, leave_one_out=True)


@contextlib.contextmanager
def fit_probe(student, bandwidth):
    """A model with the student's `__init__` and `fit` and the reference's `forward`, which the
    grader computes for it while the block runs: a wrong forward costs points in the forward
    checks only."""
    known = student.process.callbacks["known_good"]
    use_with_probe(student, FIT_PROBE)
    # the probe's `forward` answered, never the class's other methods: `fit` is the student's to write
    student.process.callbacks["known_good"] = KnownGood(known.ref, known.names, forward_only={"LearnedKernelRegression"})
    try:
        yield student.call(FIT_PROBE.name, bandwidth, keep=True)
    finally:
        student.process.callbacks["known_good"] = known


@check("LearnedKernelRegression", "fit follows the recipe: Adam, the leave-one-out loss, each loss before its step")
def learned_recipe(student, ref, rng):
    x, y = torch_sample(rng, 20)
    with fit_probe(student, 1.0) as model:
        losses = student.call(model, x, y, steps=6, lr=0.1, method="fit")
    expected = ref.LearnedKernelRegression(1.0).fit(x, y, steps=6, lr=0.1)
    expect_true(isinstance(losses, list) and len(losses) == 6 and all(isinstance(v, float) for v in losses),
                f"fit(x, y, steps=6, lr=0.1) should return a list of 6 Python floats, got {describe(losses)}")
    expect_close(np.array(losses), np.array(expected), "fit(x (20,), y (20,), steps=6, lr=0.1): the losses, "
                 "from LearnedKernelRegression(1.0)", rtol=1e-8, atol=1e-10)
    # larger steps: the gradient shrinks within a few, and only then does AMSGrad (a running max of the
    # squared gradients where Adam has their average) part from Adam
    with fit_probe(student, 1.0) as model:
        losses = student.call(model, x, y, steps=12, lr=0.5, method="fit")
    expected = ref.LearnedKernelRegression(1.0).fit(x, y, steps=12, lr=0.5)
    expect_close(np.array(losses), np.array(expected), "fit(x (20,), y (20,), steps=12, lr=0.5): the losses, "
                 "from LearnedKernelRegression(1.0)", rtol=1e-8, atol=1e-10)


@check("LearnedKernelRegression", "fit from h = 2 reaches the leave-one-out optimum: held-out MSE within 5 % of it")
def learned_reaches(student, ref, rng):
    x, y = torch_sample(rng, 40)
    x_test, y_test = torch_sample(rng, 200)
    with fit_probe(student, 2.0) as model:
        student.call(model, x, y, steps=80, lr=0.05, method="fit")
    log_h = student.call(model, "log_bandwidth", method="get_parameter")
    learned = ref.LearnedKernelRegression(1.0)
    with torch.no_grad():
        learned.log_bandwidth.copy_(torch.as_tensor(log_h, dtype=torch.float64))
        achieved = ((learned(x_test, x, y) - y_test) ** 2).mean().item()
    best_h, _ = ref.select_bandwidth(x.numpy(), y.numpy(), np.geomspace(0.05, 3.0, 80))
    target = ((ref.LearnedKernelRegression(float(best_h))(x_test, x, y) - y_test) ** 2).mean().item()
    expect_true(math.isfinite(achieved) and achieved <= 1.05 * target,
                f"fit(x (40,), y (40,), steps=80, lr=0.05) from bandwidth 2.0 ended at h = {math.exp(log_h):.4g} "
                f"with held-out MSE {achieved:.4g}; the LOO-selected h = {best_h:.4g} gives {target:.4g}")


stated_checks("LearnedKernelRegression")  # trainable: a gradient reaches log_bandwidth (autograder/stated/ch06_nadaraya_watson.py)


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/device.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.

device_checks()
