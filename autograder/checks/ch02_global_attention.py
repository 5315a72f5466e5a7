"""Checks of chapter 2, "Global attention: a document is a collection of words" (PyTorch)."""
import weakref

import numpy as np
import torch

from .core import CheckFailure, StudentError, check, expect_close, expect_true, plain, rng_for, student_object

ASSIGNMENT = "02-global-attention"
# Check weights are chosen so that every share of an exercise's points is a round number
# (0.5, 0.6, ...): grades.csv writes scores to 4 decimals, nbgrader keeps more.

# What the grader trains: the notebook's sizes, the grader's own documents.
TRAIN_DOCS, TEST_DOCS, TRAIN_SEED, TEST_SEED = 800, 400, 2024, 2025
DIM, EPOCHS, LR = 32, 10, 0.02
MIN_ACCURACY, MIN_MASS = 0.95, 0.80


# ---- inputs and descriptions --------------------------------------------------------------------

def shown(value):
    """A short description of a tensor input for messages."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        if value.numel() <= 6:
            return f"tensor {value.tolist()} ({dtype})"
        return f"tensor of shape {tuple(value.shape)} ({dtype})"
    return repr(value)


def normal(rng, shape, dtype=torch.float32, scale=1.0):
    return torch.from_numpy(rng.normal(0.0, scale, shape)).to(dtype)


def padding_mask(rng, shape, full_rows=0):
    """Random right-padding (True = real item), at least one real item per row; the first
    `full_rows` rows (along the flattened batch) are fully masked instead."""
    *batch, n = shape
    lengths = rng.integers(1, n + 1, size=batch)
    mask = np.arange(n) < lengths[..., None]
    flat = mask.reshape(-1, n)
    flat[:full_rows] = False
    return torch.from_numpy(flat.reshape(shape))


def scattered_mask(rng, shape):
    """Random masked items anywhere (not only at the end), at least one real item per row."""
    mask = rng.random(shape) < 0.6
    mask[..., 0] |= ~mask.any(-1)
    return torch.from_numpy(mask)


def pair(got, what):
    """The student's result must be a pair (z, p)."""
    expect_true(isinstance(got, (tuple, list)) and len(got) == 2,
                f"{what} should return a pair (z, p), got {type(got).__name__}"
                + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
    return got


def same_pair(got, expected, what, names=("z", "p"), rtol=1e-5, atol=1e-6):
    got = pair(got, what)
    for name, g, e in zip(names, got, expected):
        expect_close(g, plain(e), f"{what}: {name}", rtol=rtol, atol=atol)


def same_pool(student, ref, x, scores, mask, what=None, **tol):
    what = what or f"attention_pool(x={shown(x)}, scores={shown(scores)}, mask={shown(mask)})"
    got = student.call("attention_pool", x, scores, mask)
    same_pair(got, ref.attention_pool(x, scores, mask), what, **tol)
    return got


# ---- attention_pool ---------------------------------------------------------------------------------

@check("attention_pool", "equals the reference on random padded documents (B, N, D)", weight=2.0)
def pool_random(student, ref):
    rng = rng_for("pool_random")
    for b, n, d in ((3, 5, 4), (2, 7, 3), (1, 1, 2), (4, 6, 1), (5, 9, 8)):
        x, scores = normal(rng, (b, n, d)), normal(rng, (b, n), scale=2.0)
        same_pool(student, ref, x, scores, padding_mask(rng, (b, n)))
        same_pool(student, ref, x, scores, scattered_mask(rng, (b, n)))


@check("attention_pool", "without a mask (mask=None) every item counts", weight=1.0)
def pool_no_mask(student, ref):
    rng = rng_for("pool_no_mask")
    for b, n, d in ((2, 4, 3), (3, 8, 5)):
        same_pool(student, ref, normal(rng, (b, n, d)), normal(rng, (b, n), scale=2.0), None)


@check("attention_pool", "masked items weigh exactly 0; the real items' weights sum to one", weight=1.0)
def pool_masked_zero(student, ref):
    rng = rng_for("pool_masked_zero")
    x, scores = normal(rng, (6, 10, 3)), normal(rng, (6, 10), scale=3.0)
    scores[:, -2:] = 50.0  # padding with the highest scores: it must still get nothing
    mask = scattered_mask(rng, (6, 10))
    mask[:, -2:] = False
    what = f"attention_pool(x={shown(x)}, scores={shown(scores)}, mask={shown(mask)})"
    _, p = pair(student.call("attention_pool", x, scores, mask), what)
    expect_true(isinstance(p, torch.Tensor) and tuple(p.shape) == (6, 10),
                f"{what}: p should be a tensor of shape (6, 10), got {shown(p)}")
    expect_true(bool((p[~mask] == 0).all()), f"{what}: masked items must get weight exactly 0, "
                f"got up to {p[~mask].abs().max().item():.3g} (mask with -inf before the softmax)")
    sums = p.double().sum(-1)
    expect_true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                f"{what}: the weights of each document should sum to one over its real items, got sums "
                f"{[round(s, 4) for s in sums.tolist()]}")
    same_pool(student, ref, x, scores, mask, what=what)


@check("attention_pool", "a fully masked document gets zero weights and a zero vector, not NaN", weight=1.0)
def pool_fully_masked(student, ref):
    rng = rng_for("pool_fully_masked")
    x, scores = normal(rng, (4, 5, 3)), normal(rng, (4, 5))
    mask = padding_mask(rng, (4, 5), full_rows=2)
    same_pool(student, ref, x, scores, mask, atol=0.0, rtol=1e-5)
    none = torch.zeros(2, 3, dtype=torch.bool)
    same_pool(student, ref, normal(rng, (2, 3, 2)), normal(rng, (2, 3)), none,
              what="attention_pool(x of shape (2, 3, 2), scores of shape (2, 3), mask all False)", atol=0.0)


@check("attention_pool", "z ignores the order of the items and any padding added", weight=1.0)
def pool_invariance(student, ref):
    rng = rng_for("pool_invariance")
    x, scores = normal(rng, (3, 6, 4)), normal(rng, (3, 6), scale=2.0)
    mask = padding_mask(rng, (3, 6))
    base = f"attention_pool(x={shown(x)}, scores={shown(scores)}, mask={shown(mask)})"
    z, p = pair(student.call("attention_pool", x, scores, mask), base)
    order = torch.from_numpy(rng.permutation(6))
    z2, p2 = pair(student.call("attention_pool", x[:, order], scores[:, order], mask[:, order]),
                  base + " with the items permuted")
    expect_close(z2, z, f"{base}: permuting the items (with their scores and mask) must not change z",
                 rtol=1e-5, atol=1e-6)
    expect_close(p2, p[:, order], f"{base}: permuting the items must permute their weights", rtol=1e-5, atol=1e-6)
    extra = 4
    x3 = torch.cat([x, normal(rng, (3, extra, 4), scale=100.0)], dim=1)
    s3 = torch.cat([scores, torch.full((3, extra), 30.0)], dim=1)
    m3 = torch.cat([mask, torch.zeros(3, extra, dtype=torch.bool)], dim=1)
    z3, p3 = pair(student.call("attention_pool", x3, s3, m3), base + " with padding added")
    expect_close(z3, z, f"{base}: adding {extra} padded items (mask False, any scores and values) must not change z",
                 rtol=1e-5, atol=1e-6)
    expect_close(p3, torch.cat([p, torch.zeros(3, extra)], dim=1),
                 f"{base}: added padded items must get weight 0 and leave the others unchanged", rtol=1e-5, atol=1e-6)


@check("attention_pool", "stable for scores as large as 1e4", weight=1.0)
def pool_large_scores(student, ref):
    rng = rng_for("pool_large_scores")
    x = normal(rng, (2, 5, 3))
    scores = torch.tensor([[1e4, 1e4 - 1.0, 0.0, -1e4, 1e4 - 2.0], [-1e4, -1e4 + 0.5, -1e4 + 3.0, -1e4, -1e4]])
    same_pool(student, ref, x, scores, None)
    same_pool(student, ref, x, scores, torch.tensor([[False, True, True, True, True], [True, True, False, True, True]]))


@check("attention_pool", "leading batch dimensions (..., N, D) and float64 in, float64 out", weight=1.0)
def pool_batch_dtype(student, ref):
    rng = rng_for("pool_batch_dtype")
    x, scores = normal(rng, (2, 3, 5, 4), torch.float64), normal(rng, (2, 3, 5), torch.float64)
    same_pool(student, ref, x, scores, padding_mask(rng, (2, 3, 5)), rtol=1e-10, atol=1e-12)
    same_pool(student, ref, normal(rng, (4, 2), torch.float64), normal(rng, (4,), torch.float64), None,
              rtol=1e-10, atol=1e-12)


# ---- GlobalAttentionPooling -----------------------------------------------------------------------

def pooling_pair(student, ref, dim, rng, scale=1.0, double=False):
    """The student's and the reference's GlobalAttentionPooling(dim) with the same random context."""
    state = {"context": normal(rng, (dim,), scale=scale)}
    handle = student_object(student, "GlobalAttentionPooling", dim, state=state)
    module = ref.GlobalAttentionPooling(dim)
    module.load_state_dict(state)
    if double:
        handle = student.call(handle, method="double", keep=True)
        module = module.double()
    return handle, module


def same_module(student, handle, module, what, *args, **tol):
    got = student.call(handle, *args)
    with torch.no_grad():
        expected = module(*args)
    same_pair(got, expected, what, **tol)


@check("GlobalAttentionPooling", "self.context is an nn.Parameter of shape (dim,), the only parameter", weight=1.0)
def gap_parameter(student, ref):
    for dim in (5, 12):
        handle = student.call("GlobalAttentionPooling", dim, keep=True)
        what = f"GlobalAttentionPooling({dim})"
        context = student.call(handle, "context", method="get_parameter")
        expect_true(isinstance(context, torch.Tensor) and tuple(context.shape) == (dim,),
                    f"{what}.context should have shape ({dim},), got {shown(context)}")
        names = sorted(student.call(handle, method="state_dict"))
        expect_true(names == ["context"], f"{what} should hold one parameter, `context`; its state_dict has {names}")


@check("GlobalAttentionPooling", "equals the reference with the same context vector (scores x_i · context)", weight=2.0)
def gap_reference(student, ref):
    rng = rng_for("gap_reference")
    for b, n, d in ((3, 6, 4), (2, 9, 7), (1, 3, 16)):
        handle, module = pooling_pair(student, ref, d, rng, scale=1.0)
        x = normal(rng, (b, n, d))
        what = f"GlobalAttentionPooling({d}) with a random context, on x of shape {(b, n, d)}"
        same_module(student, handle, module, what + " and no mask", x)
        mask = padding_mask(rng, (b, n))
        same_module(student, handle, module, what + f" and mask {shown(mask)}", x, mask)


@check("GlobalAttentionPooling", "uses the mask: padding weighs 0, a fully masked document gives zeros", weight=1.0)
def gap_mask(student, ref):
    rng = rng_for("gap_mask")
    handle, module = pooling_pair(student, ref, 6, rng, scale=2.0)
    x = normal(rng, (5, 7, 6))
    mask = padding_mask(rng, (5, 7), full_rows=1)
    same_module(student, handle, module, f"GlobalAttentionPooling(6) on x of shape (5, 7, 6), mask {shown(mask)} "
                "(document 0 fully masked)", x, mask, atol=1e-6)


@check("GlobalAttentionPooling", "float64 (after .double()) and leading batch dimensions", weight=1.0)
def gap_batch_dtype(student, ref):
    rng = rng_for("gap_batch_dtype")
    handle, module = pooling_pair(student, ref, 5, rng, double=True)
    x = normal(rng, (2, 3, 4, 5), torch.float64)
    mask = padding_mask(rng, (2, 3, 4))
    same_module(student, handle, module, "GlobalAttentionPooling(5).double() on x of shape (2, 3, 4, 5) float64",
                x, mask, rtol=1e-10, atol=1e-12)


# ---- AttentionDocClassifier -----------------------------------------------------------------------

def classifier_shapes(vocab, dim, classes):
    return {(vocab, dim): "the embedding", (dim,): "the context vector",
            (classes, dim): "the linear layer's weight", (classes,): "the linear layer's bias"}


def by_shape(state, values, what, vocab, dim, classes):
    """{name in `state`: the value in `values` (shape -> tensor) of the same shape}."""
    expected = classifier_shapes(vocab, dim, classes)
    shapes = {name: tuple(t.shape) for name, t in state.items()}
    if sorted(shapes.values()) != sorted(expected):
        want = ", ".join(f"{label} {shape}" for shape, label in expected.items())
        have = ", ".join(f"{name} {shape}" for name, shape in shapes.items()) or "nothing"
        raise CheckFailure(f"{what} should hold exactly four tensors: {want}; its state_dict has {have}")
    return {name: values[shape] for name, shape in shapes.items()}


def random_classifier_values(rng, vocab, dim, classes):
    return {(vocab, dim): normal(rng, (vocab, dim)), (dim,): normal(rng, (dim,), scale=2.0 / np.sqrt(dim)),
            (classes, dim): normal(rng, (classes, dim), scale=1.0 / np.sqrt(dim)),
            (classes,): normal(rng, (classes,), scale=0.3)}


def classifier_pair(student, ref, vocab, dim, classes, values):
    """The student's and the reference's classifier holding the same `values`, matched by shape."""
    what = f"AttentionDocClassifier({vocab}, {dim}, {classes})"
    handle = student.call("AttentionDocClassifier", vocab, dim, classes, keep=True)
    student.call(handle, plain(by_shape(student.call(handle, method="state_dict"), values, what, vocab, dim, classes)),
                 method="load_state_dict")
    model = ref.AttentionDocClassifier(vocab, dim, classes)
    model.load_state_dict(by_shape(model.state_dict(), values, what, vocab, dim, classes))
    return handle, model.eval()


def documents(rng, batch, n, vocab, full_rows=0):
    tokens = torch.from_numpy(rng.integers(0, vocab, (batch, n)))
    return tokens, padding_mask(rng, (batch, n), full_rows=full_rows)


@check("AttentionDocClassifier", "logits (B, C) and weights (B, N): summing to one over real words, 0 on padding",
       weight=1.0)
def clf_shapes(student, ref):
    rng = rng_for("clf_shapes")
    vocab, dim, classes = 30, 8, 4
    handle = student.call("AttentionDocClassifier", vocab, dim, classes, keep=True)
    tokens, mask = documents(rng, 6, 9, vocab, full_rows=1)
    what = f"AttentionDocClassifier({vocab}, {dim}, {classes}) on tokens of shape (6, 9), mask {shown(mask)}"
    logits, p = pair(student.call(handle, tokens, mask), what)
    for name, value, shape in (("logits", logits, (6, classes)), ("p", p, (6, 9))):
        expect_true(isinstance(value, torch.Tensor) and tuple(value.shape) == shape,
                    f"{what}: {name} should be a tensor of shape {shape}, got {shown(value)}")
    expect_true(bool(torch.isfinite(logits).all()) and bool(torch.isfinite(p).all()),
                f"{what}: logits and weights must be finite (document 0 is fully masked)")
    expect_true(bool((p[~mask] == 0).all()), f"{what}: padded words must get weight exactly 0")
    expect_true(bool(torch.allclose(p[1:].sum(-1), torch.ones(5), atol=1e-5)),
                f"{what}: each document's weights should sum to one, got {[round(s, 4) for s in p.sum(-1).tolist()]}")


@check("AttentionDocClassifier", "holds an embedding, a context vector and a linear layer (found by shape)", weight=1.0)
def clf_parameters(student, ref):
    for vocab, dim, classes in ((30, 8, 4), (50, 6, 2)):
        handle = student.call("AttentionDocClassifier", vocab, dim, classes, keep=True)
        by_shape(student.call(handle, method="state_dict"), classifier_shapes(vocab, dim, classes),
                 f"AttentionDocClassifier({vocab}, {dim}, {classes})", vocab, dim, classes)


@check("AttentionDocClassifier", "equals the reference model holding the same parameters", weight=2.0)
def clf_reference(student, ref):
    rng = rng_for("clf_reference")
    for vocab, dim, classes, batch, n in ((30, 8, 4, 6, 9), (50, 6, 2, 3, 15)):
        handle, model = classifier_pair(student, ref, vocab, dim, classes,
                                        random_classifier_values(rng, vocab, dim, classes))
        tokens, mask = documents(rng, batch, n, vocab)
        got = student.call(handle, tokens, mask)
        with torch.no_grad():
            expected = model(tokens, mask)
        same_pair(got, expected, f"AttentionDocClassifier({vocab}, {dim}, {classes}) with random parameters, on "
                  f"tokens of shape {(batch, n)}, mask {shown(mask)}", names=("logits", "p"))


@check("AttentionDocClassifier", "padding and the order of the words do not change the logits", weight=1.0)
def clf_invariance(student, ref):
    rng = rng_for("clf_invariance")
    vocab, dim, classes = 30, 8, 3
    handle, _ = classifier_pair(student, ref, vocab, dim, classes, random_classifier_values(rng, vocab, dim, classes))
    tokens, mask = documents(rng, 4, 8, vocab)
    what = f"AttentionDocClassifier({vocab}, {dim}, {classes}) with random parameters, tokens of shape (4, 8)"
    logits, p = pair(student.call(handle, tokens, mask), what)
    padded = torch.cat([tokens, torch.from_numpy(rng.integers(0, vocab, (4, 5)))], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(4, 5, dtype=torch.bool)], dim=1)
    logits2, p2 = pair(student.call(handle, padded, padded_mask), what)
    expect_close(logits2, logits, f"{what}: 5 padded positions (mask False, random words) added at the end must not "
                 "change the logits", rtol=1e-5, atol=1e-5)
    order = torch.from_numpy(rng.permutation(8))
    logits3, p3 = pair(student.call(handle, tokens[:, order], mask[:, order]), what)
    expect_close(logits3, logits, f"{what}: permuting the words (and the mask with them) must not change the logits",
                 rtol=1e-5, atol=1e-5)
    expect_close(p3, p[:, order], f"{what}: permuting the words must permute their weights", rtol=1e-5, atol=1e-6)


# ---- attention_mass -------------------------------------------------------------------------------

@check("attention_mass", "equals the reference on random weights and selections", weight=2.0)
def mass_random(student, ref):
    rng = rng_for("mass_random")
    for b, n in ((3, 5), (1, 8), (6, 2)):
        w = torch.from_numpy(rng.random((b, n))).float()
        p = w / w.sum(-1, keepdim=True)
        selected = torch.from_numpy(rng.random((b, n)) < 0.4)
        expect_close(student.call("attention_mass", p, selected), plain(ref.attention_mass(p, selected)),
                     f"attention_mass(p={shown(p)}, selected={shown(selected)})", rtol=1e-5, atol=1e-6)


@check("attention_mass", "everything selected gives the total weight; nothing selected gives 0", weight=1.0)
def mass_limits(student, ref):
    rng = rng_for("mass_limits")
    w = torch.from_numpy(rng.random((4, 6))).float()
    p = w / w.sum(-1, keepdim=True)
    p[3] = 0.0  # a fully masked document: no attention at all
    expect_close(student.call("attention_mass", p, torch.ones(4, 6, dtype=torch.bool)), p.sum(-1),
                 f"attention_mass(p={shown(p)}, everything selected) should be each document's total weight",
                 rtol=1e-5, atol=1e-6)
    expect_close(student.call("attention_mass", p, torch.zeros(4, 6, dtype=torch.bool)), torch.zeros(4),
                 f"attention_mass(p={shown(p)}, nothing selected) should be 0 for every document", atol=0.0)


@check("attention_mass", "one number per document with batch dimensions; float64 kept", weight=1.0)
def mass_batch_dtype(student, ref):
    rng = rng_for("mass_batch_dtype")
    w = torch.from_numpy(rng.random((2, 3, 7)))
    p = w / w.sum(-1, keepdim=True)
    selected = torch.from_numpy(rng.random((2, 3, 7)) < 0.5)
    expect_close(student.call("attention_mass", p, selected), plain(ref.attention_mass(p, selected)),
                 f"attention_mass(p={shown(p)}, selected={shown(selected)})", rtol=1e-10, atol=1e-12)


# ---- train_classifier -----------------------------------------------------------------------------

def planted_data(ref, n_docs, seed):
    """The reference generator's documents, with random words written at the padded positions."""
    data = ref.make_planted_corpus(n_docs, seed=seed)
    noise = torch.from_numpy(np.random.default_rng(seed + 1).integers(1, len(ref.VOCAB), data["tokens"].shape))
    data["tokens"] = torch.where(data["mask"], data["tokens"], noise)
    return data


def initial_values(ref, vocab, classes):
    """The reference model's initial parameters (seeded, without touching the global RNG)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = ref.AttentionDocClassifier(vocab, DIM, classes)
    return {tuple(t.shape): t.detach().clone() for t in model.state_dict().values()}


def train_student(student, ref, values, data, seed):
    """Train the student's classifier (starting from `values`) with the student's train_classifier;
    returns (history, trained state_dict). One torch thread, as in the sandbox: tiny models train
    fastest that way, and nbgrader's kernel then computes exactly what the sandbox computes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_student(student, ref, values, data, seed)
    finally:
        torch.set_num_threads(threads)


def _train_student(student, ref, values, data, seed):
    vocab, classes = len(ref.VOCAB), len(ref.CLASS_NAMES)
    what = f"AttentionDocClassifier({vocab}, {DIM}, {classes})"
    handle = student.call("AttentionDocClassifier", vocab, DIM, classes, keep=True)
    state = by_shape(student.call(handle, method="state_dict"), values, what, vocab, DIM, classes)
    student.call(handle, plain(state), method="load_state_dict")
    history = student.call("train_classifier", handle, data, epochs=EPOCHS, lr=LR, seed=seed, _time_limit=90)
    return history, student.call(handle, method="state_dict")


_TRAINED = weakref.WeakKeyDictionary()


def trained(student, ref):
    """One training run per student, shared by the checks: history, test accuracy and attention mass
    measured here, with the reference model holding the student's trained parameters."""
    if student not in _TRAINED:
        try:
            vocab, classes = len(ref.VOCAB), len(ref.CLASS_NAMES)
            train = planted_data(ref, TRAIN_DOCS, TRAIN_SEED)
            test = planted_data(ref, TEST_DOCS, TEST_SEED)
            values = initial_values(ref, vocab, classes)
            data = {key: train[key] for key in ("tokens", "mask", "labels")}
            history, state = train_student(student, ref, values, data, seed=0)
            model = ref.AttentionDocClassifier(vocab, DIM, classes)
            what = f"your trained AttentionDocClassifier({vocab}, {DIM}, {classes})"
            by_shape(state, values, what, vocab, DIM, classes)  # still the four tensors after training
            trained_values = {tuple(t.shape): t for t in state.values()}
            model.load_state_dict(by_shape(model.state_dict(), trained_values, what, vocab, DIM, classes))
            with torch.no_grad():
                logits, p = model.eval()(test["tokens"], test["mask"])
            accuracy = (logits.argmax(-1) == test["labels"]).double().mean().item()
            mass = (p.double() * test["is_signal"]).sum(-1).mean().item()
            _TRAINED[student] = ("ok", (history, state, values, data, accuracy, mass))
        except (CheckFailure, StudentError) as failure:
            _TRAINED[student] = ("failed", failure)
    status, result = _TRAINED[student]
    if status == "failed":
        raise result
    return result


@check("train_classifier", f"the trained model classifies >= {MIN_ACCURACY:.0%} of the grader's test documents",
       weight=1.5)
def train_accuracy(student, ref):
    *_, accuracy, mass = trained(student, ref)
    expect_true(accuracy >= MIN_ACCURACY,
                f"after train_classifier(model, the grader's {TRAIN_DOCS} documents, epochs={EPOCHS}, lr={LR}, seed=0), "
                f"the model classifies {accuracy:.1%} of {TEST_DOCS} test documents correctly, below "
                f"{MIN_ACCURACY:.0%} (Adam on the cross-entropy of the logits, shuffled mini-batches of 32, "
                f"{EPOCHS} epochs over all the documents, with the mask?)")


@check("train_classifier", f"the trained model puts >= {MIN_MASS:.0%} of its attention on the signal words",
       weight=1.5)
def train_mass(student, ref):
    *_, accuracy, mass = trained(student, ref)
    expect_true(mass >= MIN_MASS,
                f"after train_classifier(model, the grader's documents, epochs={EPOCHS}, lr={LR}, seed=0), only "
                f"{mass:.1%} of the attention on the test documents is on the signal words, below {MIN_MASS:.0%} "
                "(the grader's padded positions hold random words: does your training pass the mask?)")


@check("train_classifier", "returns the history: one loss and one accuracy per epoch, the loss going down",
       weight=0.5)
def train_history(student, ref):
    history, *_ = trained(student, ref)
    expect_true(isinstance(history, dict), f"train_classifier should return a dict, got {type(history).__name__}")
    for key in ("loss", "accuracy"):
        values = history.get(key)
        expect_true(isinstance(values, (list, tuple, np.ndarray, torch.Tensor)) and len(values) == EPOCHS,
                    f"train_classifier(..., epochs={EPOCHS}) should return history[{key!r}] with one number per epoch, "
                    f"got {values!r:.100}")
        numbers = np.asarray([float(v) for v in values])
        expect_true(bool(np.isfinite(numbers).all()), f"history[{key!r}] holds non-finite numbers: {numbers}")
    loss, accuracy = np.asarray(history["loss"], dtype=float), np.asarray(history["accuracy"], dtype=float)
    expect_true(loss[-1] < loss[0], f"the training loss should go down: history['loss'] = {np.round(loss, 4).tolist()}")
    expect_true(bool(((accuracy >= 0) & (accuracy <= 1)).all()),
                f"history['accuracy'] should hold shares between 0 and 1, got {np.round(accuracy, 4).tolist()}")


@check("train_classifier", "deterministic: the same seed trains the same model", weight=0.5)
def train_deterministic(student, ref):
    _, state, values, data, *_ = trained(student, ref)
    _, again = train_student(student, ref, values, data, seed=0)
    for name, value in state.items():
        expect_close(again.get(name), value, f"training twice from the same start with seed=0: parameter {name}",
                     rtol=1e-4, atol=1e-5)
