"""Checks of chapter 2, "Global attention: a document is a collection of words" (PyTorch)."""
import weakref

import numpy as np
import torch

from .core import (Chapter, CheckFailure, StudentError, call, describe, expect_close, expect_same, expect_true,
                   expect_tuple, match_by_shape, module_pair, padding_mask, plain, random_mask, same, tensor)

ASSIGNMENT = "02-global-attention"
chapter = Chapter(ASSIGNMENT)
check, equals, device_checks = chapter.check, chapter.equals, chapter.device_checks
# Weights make every check's share of its exercise's points a round number (0.25, 0.5, 1.0, 1.5).

# What the grader trains: the notebook's sizes, its own documents (see grader_documents).
TRAIN_DOCS, TEST_DOCS, TRAIN_SEED, TEST_SEED, RENAME_SEED = 800, 400, 2024, 2025, 1
DIM, EPOCHS, LR = 32, 10, 0.02
MIN_ACCURACY, MIN_MASS = 0.95, 0.80

POOL, LOGITS = dict(names=("z", "p")), ("logits", "p")
NAN_ON_EMPTY = "torch.softmax of a row of -inf is NaN: a fully masked document gets zero weights"


def documents(rng, shapes, mask=None, dtype=torch.float32):
    """call(x, scores[, mask]) for each (..., N, D) in `shapes`; `mask(rng, shape)` draws the mask."""
    cases = []
    for shape in shapes:
        x, scores = tensor(rng, shape, dtype), tensor(rng, shape[:-1], dtype, scale=2.0)
        cases.append(call(x, scores, mask(rng, shape[:-1])) if mask else call(x, scores))
    return cases


def with_padding(rng, x, p_items, fill):
    """`x` (B, N, ...) with P padded items inserted at random places: (x', mask', where the
    real items went). `fill(shape)` draws the padded items."""
    b, n = x.shape[:2]
    order = torch.from_numpy(rng.permutation(n + p_items))
    padded = torch.cat([x, fill((b, p_items) + tuple(x.shape[2:]))], dim=1)[:, order]
    mask = torch.cat([torch.ones(b, n, dtype=torch.bool), torch.zeros(b, p_items, dtype=torch.bool)], dim=1)[:, order]
    return padded, mask, torch.argsort(order)[:n]


def own_module(student, class_name, *init, rng):
    """The student's `class_name(*init)` with random values in its own parameters, whatever their
    names and shapes: for properties that hold for any parameters."""
    handle = student.call(class_name, *init, keep=True)
    state = {name: tensor(rng, tuple(v.shape), v.dtype, scale=0.7) if v.is_floating_point() else v
             for name, v in student.call(handle, method="state_dict").items()}
    student.call(handle, plain(state), method="load_state_dict")
    return handle


def expect_zero_on_padding(p, mask, what, hint=""):
    expect_true(isinstance(p, torch.Tensor) and p.shape == mask.shape, f"{what}: the weights should have shape "
                f"{tuple(mask.shape)}, got {describe(p)}")
    expect_true(bool((p[~mask] == 0).all()), f"{what}: the masked items must get weight exactly 0, got up to "
                f"{p[~mask].abs().max().item():.3g}{hint}")


def result_pair(got, what, names=("z", "p")):
    return expect_tuple(got, what, names)


# ---- attention_pool -----------------------------------------------------------------------------

SIZES = ((3, 5, 4), (2, 7, 3), (1, 1, 2), (4, 6, 1), (5, 9, 8))

equals("attention_pool", "equals the reference on random documents without a mask (mask=None)", "attention_pool",
       lambda rng: documents(rng, SIZES[:3]) + [call(*c.args, None) for c in documents(rng, SIZES[3:])], **POOL)

equals("attention_pool", "equals the reference with masks: padding at the end, or masked items anywhere",
       "attention_pool", lambda rng: documents(rng, SIZES, padding_mask) + documents(rng, SIZES, random_mask), **POOL)


@check("attention_pool", "masked items weigh exactly 0 even with the highest scores; the others sum to one")
def pool_masked_zero(student, ref, rng):
    x, scores = tensor(rng, (6, 10, 3)), tensor(rng, (6, 10), scale=3.0)
    mask = random_mask(rng, (6, 10))
    mask[:, -2:] = False
    scores[:, -2:] = 50.0  # masked items with the highest scores: they must still get nothing
    what = f"attention_pool(x={describe(x)}, scores={describe(scores)}, mask={describe(mask)})"
    _, p = result_pair(student.call("attention_pool", x, scores, mask), what)
    expect_zero_on_padding(p, mask, what, " (set their scores to -inf before the softmax)")
    sums = p.double().sum(-1)
    expect_true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                f"{what}: the real items' weights should sum to one, got sums {[round(s, 4) for s in sums.tolist()]}"
                " (the softmax of the real items' scores alone: mask before the softmax, not after)")
    same(student, ref, "attention_pool", x, scores, mask, what=what, **POOL)


equals("attention_pool", "a fully masked document gets zero weights and a zero vector, not NaN", "attention_pool",
       lambda rng: [call(tensor(rng, (4, 5, 3)), tensor(rng, (4, 5)), padding_mask(rng, (4, 5), empty_rows=2)),
                    call(tensor(rng, (2, 3, 2)), tensor(rng, (2, 3)), torch.zeros(2, 3, dtype=torch.bool))],
       nan_hint=NAN_ON_EMPTY, **POOL)

equals("attention_pool", "stable for scores as large as 1e4 (no mask)", "attention_pool",
       lambda rng: [call(tensor(rng, (2, 5, 3)), torch.tensor([[1e4, 1e4 - 1.0, 0.0, -1e4, 1e4 - 2.0],
                                                               [-1e4, -1e4 + 0.5, -1e4 + 3.0, -1e4, -1e4]]))],
       nan_hint="exp(1e4) overflows: subtract each document's largest score first, or use torch.softmax", **POOL)

equals("attention_pool", "leading batch dimensions (..., N, D), and one document (N, D)", "attention_pool",
       lambda rng: documents(rng, [(2, 3, 5, 4), (2, 1, 2, 6, 3), (4, 2)]), **POOL)

equals("attention_pool", "float64 in, float64 out", "attention_pool",
       lambda rng: documents(rng, [(3, 6, 4), (2, 5, 1)], dtype=torch.float64), **POOL)


@check("attention_pool", "permuting the items permutes their weights and leaves z unchanged")
def pool_order(student, ref, rng):
    x, scores = tensor(rng, (3, 6, 4)), tensor(rng, (3, 6), scale=2.0)
    what = f"attention_pool(x={describe(x)}, scores={describe(scores)})"
    z, p = result_pair(student.call("attention_pool", x, scores), what)
    order = torch.from_numpy(rng.permutation(6))
    z2, p2 = result_pair(student.call("attention_pool", x[:, order], scores[:, order]), what)
    expect_close(z2, z, f"{what}: permuting the items (with their scores) must not change z")
    expect_close(p2, p[:, order], f"{what}: permuting the items must permute their weights")


# ---- GlobalAttentionPooling ---------------------------------------------------------------------

@check("GlobalAttentionPooling", "self.context is an nn.Parameter of shape (dim,), the module's only parameter")
def gap_parameter(student, ref, rng):
    for dim in (5, 12):
        handle = student.call("GlobalAttentionPooling", dim, keep=True)
        context = student.call(handle, "context", method="get_parameter")
        expect_true(isinstance(context, torch.Tensor) and tuple(context.shape) == (dim,),
                    f"GlobalAttentionPooling({dim}).context should have shape ({dim},), got {describe(context)}")
        names = sorted(student.call(handle, method="state_dict"))
        expect_true(names == ["context"], f"GlobalAttentionPooling({dim}) should hold one parameter, `context`; "
                    f"its state_dict has {names}")


@check("GlobalAttentionPooling", "equals the reference with the same context vector (scores x_i · context), no mask",
       weight=2.0)
def gap_reference(student, ref, rng):
    for b, n, d in ((3, 6, 4), (2, 9, 7), (1, 3, 16)):
        pair = module_pair(student, ref, "GlobalAttentionPooling", d, rng=rng, scale=1.0)
        same(student, ref, pair, tensor(rng, (b, n, d)), **POOL)


@check("GlobalAttentionPooling", "passes the mask on: padded items weigh 0 and change nothing; "
       "a fully masked document gives zeros")
def gap_mask(student, ref, rng):
    handle = own_module(student, "GlobalAttentionPooling", 6, rng=rng)
    x = tensor(rng, (4, 5, 6))
    label = "GlobalAttentionPooling(6) (random parameters)"
    z, p = result_pair(student.call(handle, x), f"{label} on x of shape (4, 5, 6)")
    padded, mask, where = with_padding(rng, x, 3, lambda shape: tensor(rng, shape, scale=30.0))
    what = f"{label} on x of shape (4, 8, 6) with 3 padded items, mask {describe(mask)}"
    z2, p2 = result_pair(student.call(handle, padded, mask), what)
    expect_zero_on_padding(p2, mask, what)
    expect_close(z2, z, f"{what}: z must be as without the 3 padded items")
    expect_close(p2[:, where], p, f"{what}: p of the real items must be as without the padded items")
    none = torch.zeros(2, 5, dtype=torch.bool)
    got = student.call(handle, x[:2], none)
    expect_same(got, (torch.zeros(2, 6), torch.zeros(2, 5)), f"{label} on x of shape (2, 5, 6), mask all False",
                names=("z", "p"), nan_hint=NAN_ON_EMPTY)


@check("GlobalAttentionPooling", "after .double(): float64 in, float64 out, the same values as in float32")
def gap_double(student, ref, rng):
    handle = own_module(student, "GlobalAttentionPooling", 5, rng=rng)
    x = tensor(rng, (3, 4, 5))
    z, p = result_pair(student.call(handle, x), "GlobalAttentionPooling(5) (random parameters) on x of shape (3, 4, 5)")
    handle = student.call(handle, method="double", keep=True)
    got = student.call(handle, x.double())
    expect_same(got, (z.double(), p.double()), "GlobalAttentionPooling(5).double() on x of shape (3, 4, 5) float64",
                names=("z", "p"), rtol=1e-4, atol=1e-5)


@check("GlobalAttentionPooling", "leading batch dimensions (..., N, D), and one document (N, D)")
def gap_batch(student, ref, rng):
    handle = own_module(student, "GlobalAttentionPooling", 5, rng=rng)
    x = tensor(rng, (2, 3, 4, 5))
    label = "GlobalAttentionPooling(5) (random parameters)"
    z, p = result_pair(student.call(handle, x.reshape(6, 4, 5)), f"{label} on x of shape (6, 4, 5)")
    expect_same(student.call(handle, x), (z.reshape(2, 3, 5), p.reshape(2, 3, 4)),
                f"{label} on x of shape (2, 3, 4, 5) should pool each (4, 5) slice as x of shape (6, 4, 5) does",
                names=("z", "p"))
    expect_same(student.call(handle, x[0, 0]), (z[0], p[0]),
                f"{label} on x of shape (4, 5) should pool the document as x of shape (1, 4, 5) does", names=("z", "p"))


# ---- AttentionDocClassifier ---------------------------------------------------------------------

CLASSIFIER = (30, 8, 4)  # vocab_size, dim, num_classes


def words(rng, batch, n, vocab=CLASSIFIER[0]):
    return torch.from_numpy(rng.integers(0, vocab, (batch, n)))


@check("AttentionDocClassifier", "forward returns logits (B, num_classes) and weights (B, N) summing to one")
def clf_outputs(student, ref, rng):
    handle = own_module(student, "AttentionDocClassifier", *CLASSIFIER, rng=rng)
    tokens, mask = words(rng, 6, 9), torch.ones(6, 9, dtype=torch.bool)
    what = f"AttentionDocClassifier{CLASSIFIER} (random parameters) on tokens of shape (6, 9), mask all True"
    logits, p = result_pair(student.call(handle, tokens, mask), what, names=LOGITS)
    for name, value, shape in (("logits", logits, (6, CLASSIFIER[2])), ("p", p, (6, 9))):
        expect_true(isinstance(value, torch.Tensor) and tuple(value.shape) == shape,
                    f"{what}: {name} should be a tensor of shape {shape}, got {describe(value)}")
    expect_close(p.sum(-1), torch.ones(6), f"{what}: each document's weights should sum to one", atol=1e-5)


@check("AttentionDocClassifier", "holds exactly an embedding, a context vector, a linear layer's weight and bias")
def clf_parameters(student, ref, rng):
    for init in (CLASSIFIER, (50, 6, 2)):
        handle = student.call("AttentionDocClassifier", *init, keep=True)
        match_by_shape(student.call(handle, method="state_dict"), reference_model(ref, *init).state_dict(),
                       f"AttentionDocClassifier{init}")


@check("AttentionDocClassifier", "equals the reference model holding the same parameters (no padding)", weight=2.0)
def clf_reference(student, ref, rng):
    for init, batch, n in ((CLASSIFIER, 6, 9), ((50, 6, 2), 3, 15)):
        pair = module_pair(student, ref, "AttentionDocClassifier", *init, rng=rng, by_shape=True)
        tokens, mask = words(rng, batch, n, init[0]), torch.ones(batch, n, dtype=torch.bool)
        got = student.call(pair.handle, tokens, mask)
        with torch.no_grad():
            expected = pair.module(tokens, mask)
        what = f"{pair.label}tokens of shape {(batch, n)}, mask all True"
        logits = result_pair(got, what, names=LOGITS)[0]
        if isinstance(logits, torch.Tensor) and logits.shape == expected[0].shape and bool((logits >= 0).all()) \
                and bool(torch.allclose(logits.double().sum(-1), torch.ones(batch, dtype=torch.float64))):
            raise CheckFailure(f"{what}: logits should be the unnormalised class scores, got probabilities "
                               "(no softmax: F.cross_entropy takes logits)")
        expect_same(got, plain(expected), what, names=LOGITS)


@check("AttentionDocClassifier", "padded words (any word id) weigh 0 and do not change the logits")
def clf_padding(student, ref, rng):
    handle = own_module(student, "AttentionDocClassifier", *CLASSIFIER, rng=rng)
    label = f"AttentionDocClassifier{CLASSIFIER} (random parameters)"
    tokens = words(rng, 4, 8)
    logits, p = result_pair(student.call(handle, tokens, torch.ones(4, 8, dtype=torch.bool)),
                            f"{label} on tokens of shape (4, 8), mask all True", names=LOGITS)
    padded, mask, where = with_padding(rng, tokens, 5, lambda shape: words(rng, *shape))
    what = f"{label} on tokens of shape (4, 13) with 5 padded positions holding random words, mask {describe(mask)}"
    logits2, p2 = result_pair(student.call(handle, padded, mask), what, names=LOGITS)
    expect_zero_on_padding(p2, mask, what)
    expect_close(logits2, logits, f"{what}: the logits must be as without the padded words", atol=1e-5)
    expect_close(p2[:, where], p, f"{what}: the real words' weights must be as without the padded words")


@check("AttentionDocClassifier", "the order of the words does not change the logits; their weights move with them")
def clf_order(student, ref, rng):
    handle = own_module(student, "AttentionDocClassifier", *CLASSIFIER, rng=rng)
    tokens, mask = words(rng, 4, 8), padding_mask(rng, (4, 8))
    what = f"AttentionDocClassifier{CLASSIFIER} (random parameters) on tokens of shape (4, 8), mask {describe(mask)}"
    logits, p = result_pair(student.call(handle, tokens, mask), what, names=LOGITS)
    order = torch.from_numpy(rng.permutation(8))
    logits2, p2 = result_pair(student.call(handle, tokens[:, order], mask[:, order]), what, names=LOGITS)
    expect_close(logits2, logits, f"{what}: permuting the words (and the mask with them) must not change the logits",
                 atol=1e-5)
    expect_close(p2, p[:, order], f"{what}: permuting the words must permute their weights")


# ---- attention_mass -----------------------------------------------------------------------------

def weights(rng, shape, dtype=torch.float32):
    w = torch.from_numpy(rng.random(shape))
    return (w / w.sum(-1, keepdim=True)).to(dtype)


def selections(rng, shapes, dtype=torch.float32):
    return [call(weights(rng, shape, dtype), torch.from_numpy(rng.random(shape) < 0.4)) for shape in shapes]


equals("attention_mass", "equals the reference on random weights and selections (B, N)", "attention_mass",
       lambda rng: selections(rng, ((3, 5), (1, 8), (6, 2))), weight=2.0)


@check("attention_mass", "everything selected gives each document's total weight; nothing selected gives 0")
def mass_limits(student, ref, rng):
    p = weights(rng, (4, 6))
    p[3] = 0.0  # a fully masked document: no attention at all
    expect_close(student.call("attention_mass", p, torch.ones(4, 6, dtype=torch.bool)), p.sum(-1),
                 f"attention_mass(p={describe(p)}, everything selected) should be each document's total weight")
    expect_close(student.call("attention_mass", p, torch.zeros(4, 6, dtype=torch.bool)), torch.zeros(4),
                 f"attention_mass(p={describe(p)}, nothing selected) should be 0 for every document", atol=0.0)


equals("attention_mass", "leading batch dimensions (..., N): one number per document", "attention_mass",
       lambda rng: selections(rng, ((2, 3, 7), (2, 2, 2, 4), (5,))), weight=0.5)

equals("attention_mass", "float64 in, float64 out", "attention_mass",
       lambda rng: selections(rng, ((3, 6),), torch.float64), weight=0.5)


# ---- train_classifier ---------------------------------------------------------------------------

def grader_documents(ref, n_docs, seed):
    """make_planted_corpus's documents with every word renamed by a fixed random permutation of the
    vocabulary (<pad> stays 0), so that the signal words' ids are not the notebook's; the padded
    positions then get random words."""
    data = ref.make_planted_corpus(n_docs, seed=seed)
    vocab, signal = len(ref.VOCAB), [ref.WORD_ID[w] for ws in ref.SIGNAL_WORDS.values() for w in ws]
    rng = np.random.default_rng(RENAME_SEED)
    rename = np.arange(vocab)
    while (rename[signal] == signal).any():  # no signal word keeps its id
        rename = np.concatenate([[0], 1 + rng.permutation(vocab - 1)])
    noise = torch.from_numpy(np.random.default_rng(seed + 1).integers(1, vocab, data["tokens"].shape))
    data["tokens"] = torch.where(data["mask"], torch.from_numpy(rename)[data["tokens"]], noise)
    return data


def reference_model(ref, *init, seed=0):
    """The reference classifier, initialised without touching the global RNG (in nbgrader's kernel
    the student's code draws from it too)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ref.AttentionDocClassifier(*init)


def train_student(student, ref, values, data, epochs=EPOCHS):
    """The student's train_classifier on the classifier (the reference's, as known-good) holding
    `values`; returns (history, trained state_dict). One torch thread, as in the sandbox: tiny
    models train fastest that way, and nbgrader's kernel then computes what the sandbox computes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        init = (len(ref.VOCAB), DIM, len(ref.CLASS_NAMES))
        handle = student.call("AttentionDocClassifier", *init, keep=True)
        state = match_by_shape(student.call(handle, method="state_dict"), values, f"AttentionDocClassifier{init}")
        student.call(handle, plain(state), method="load_state_dict")
        history = student.call("train_classifier", handle, data, epochs=epochs, lr=LR, seed=0, _time_limit=90)
        return history, student.call(handle, method="state_dict")
    finally:
        torch.set_num_threads(threads)


_TRAINED = weakref.WeakKeyDictionary()


def trained(student, ref):
    """One training run per student process, shared by the checks: (history, trained state, initial
    values, training data, test accuracy, attention mass on the signal words), measured here by the
    reference model holding the trained parameters."""
    if student.process not in _TRAINED:
        try:
            init = (len(ref.VOCAB), DIM, len(ref.CLASS_NAMES))
            train, test = grader_documents(ref, TRAIN_DOCS, TRAIN_SEED), grader_documents(ref, TEST_DOCS, TEST_SEED)
            values = reference_model(ref, *init).state_dict()
            data = {key: train[key] for key in ("tokens", "mask", "labels")}
            history, state = train_student(student, ref, values, data)
            model = reference_model(ref, *init)
            model.load_state_dict(match_by_shape(model.state_dict(), state, "your trained model"))
            with torch.no_grad():
                logits, p = model.eval()(test["tokens"], test["mask"])
            accuracy = (logits.argmax(-1) == test["labels"]).double().mean().item()
            mass = (p.double() * test["is_signal"]).sum(-1).mean().item()
            _TRAINED[student.process] = ("ok", (history, state, values, data, accuracy, mass))
        except (CheckFailure, StudentError) as failure:
            _TRAINED[student.process] = ("failed", failure)
    status, result = _TRAINED[student.process]
    if status == "failed":
        raise result
    return result


TRAINED = f"after train_classifier(model, the grader's {TRAIN_DOCS} documents, epochs={EPOCHS}, lr={LR}, seed=0)"


@check("train_classifier", f"the trained model classifies >= {MIN_ACCURACY:.0%} of the grader's test documents",
       weight=1.5)
def train_accuracy(student, ref, rng):
    *_, accuracy, mass = trained(student, ref)
    expect_true(accuracy >= MIN_ACCURACY, f"{TRAINED}, the model classifies {accuracy:.1%} of {TEST_DOCS} test "
                f"documents correctly, below {MIN_ACCURACY:.0%} (the notebook asks for Adam on the cross-entropy of "
                f"the logits, {EPOCHS} epochs over all the documents in shuffled mini-batches of 32)")


@check("train_classifier", f"the trained model puts >= {MIN_MASS:.0%} of its attention on the signal words",
       weight=1.5)
def train_mass(student, ref, rng):
    *_, accuracy, mass = trained(student, ref)
    hint = (" (it classifies well: the grader's padded positions hold random words; does your training pass the "
            "mask?)" if accuracy >= MIN_ACCURACY else "")
    expect_true(mass >= MIN_MASS, f"{TRAINED}, only {mass:.1%} of the attention on the test documents is on the "
                f"signal words, below {MIN_MASS:.0%}{hint}")


@check("train_classifier", "returns the history: one loss and one accuracy per epoch, the loss going down",
       weight=0.5)
def train_history(student, ref, rng):
    history, *_ = trained(student, ref)
    expect_true(isinstance(history, dict), f"train_classifier should return a dict, got {describe(history)}")
    for key in ("loss", "accuracy"):
        values = history.get(key)
        expect_true(isinstance(values, (list, tuple, np.ndarray, torch.Tensor)) and len(values) == EPOCHS,
                    f"train_classifier(..., epochs={EPOCHS}) should return history[{key!r}] with one number per epoch, "
                    f"got {describe(values)}")
        numbers = np.asarray([float(v) for v in values])
        expect_true(bool(np.isfinite(numbers).all()), f"history[{key!r}] holds non-finite numbers: {numbers}")
    loss, accuracy = np.asarray(history["loss"], dtype=float), np.asarray(history["accuracy"], dtype=float)
    expect_true(loss[-1] < loss[0], f"the training loss should go down: history['loss'] = {np.round(loss, 4).tolist()}")
    expect_true(bool(((accuracy >= 0) & (accuracy <= 1)).all()),
                f"history['accuracy'] should hold shares between 0 and 1, got {np.round(accuracy, 4).tolist()}")


@check("train_classifier", "deterministic: the same seed trains the same model", weight=0.5)
def train_deterministic(student, ref, rng):
    _, _, values, data, accuracy, _ = trained(student, ref)
    # judged on a training that works: a loop that leaves the model as it was repeats itself too
    expect_true(accuracy >= MIN_ACCURACY, f"{TRAINED}, the model classifies {accuracy:.1%} of {TEST_DOCS} test "
                f"documents correctly, below {MIN_ACCURACY:.0%}: the same seed is checked to train the same model only "
                "once the training works")
    # twice on a short run (a quarter of the documents, 2 epochs): the shuffles and any dropout
    # draw from the seed from the first batch on, and two full trainings would cost a second each
    short = {key: value[:TRAIN_DOCS // 4] for key, value in data.items()}
    _, first = train_student(student, ref, values, short, epochs=2)
    _, again = train_student(student, ref, values, short, epochs=2)
    for name, value in first.items():
        expect_close(again.get(name), value, f"training twice from the same start with seed=0 (on {TRAIN_DOCS // 4} of "
                     f"the documents, epochs=2): parameter {name}", rtol=1e-4, atol=1e-5)


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/device.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.

device_checks(options={"attention_pool": POOL, "GlobalAttentionPooling": POOL,
                       "AttentionDocClassifier": dict(names=LOGITS)})
