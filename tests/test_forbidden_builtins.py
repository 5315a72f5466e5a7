"""Issue 37 §9, §11 and §12, chapter 9.

§9: the functions an exercise's text forbids (`cross_entropy` without F.cross_entropy, F.nll_loss,
F.log_softmax, torch.log_softmax or Tensor.log_softmax; `clip_grad_norm_` without PyTorch's clipping)
fail a stated rule of that exercise, in `check` (the sandbox) and in `grade` (here the in-process
route, nbgrader's), and in no other rule; the reference and the alternative keep full marks, and
PyTorch is as it was after the call, whatever the call did.
§11: weight decay on every parameter fails `train`'s stated rule in `check`, and only that rule in
`grade`.
§12: a device share withheld for a wrong value says so.
"""
import pytest
import torch
import torch.nn.functional as F
from mutants import catalogue
from submissions import filled_notebook, write

from autograder import reference, selfcheck, stated
from autograder.checks import run_exercise
from autograder.checks.core import WITHHELD, CheckFailure, _WithReference
from autograder.checks.inprocess import InProcessStudent
from autograder.stated.calling import Student

A = "09-language-model"
WRONG, ALTERNATIVE = catalogue(A).WRONG, catalogue(A).ALTERNATIVE
LOSS_RULE = "equals F.cross_entropy("
CLIP_RULE = "clip_grad_norm_ equals torch.nn.utils.clip_grad_norm_"
DECAY_RULE = "weight decay on the matrices only"

LOSS = {  # {name: (source, how the message names the function called)}
    "F.cross_entropy": (WRONG["cross_entropy"]["pytorchs_cross_entropy"], "F.cross_entropy"),
    "Tensor.log_softmax": (WRONG["cross_entropy"]["log_softmax_method"], "Tensor.log_softmax"),
    "nn.CrossEntropyLoss": ('''
def cross_entropy(logits, targets, ignore_index=-100):
    return nn.CrossEntropyLoss(ignore_index=ignore_index)(logits.flatten(0, -2), targets.flatten())
''', "F.cross_entropy (itself, or through nn.CrossEntropyLoss)"),
    "F.nll_loss": ('''
def cross_entropy(logits, targets, ignore_index=-100):
    log_probs = logits.flatten(0, -2) - torch.logsumexp(logits.flatten(0, -2), dim=-1, keepdim=True)
    return F.nll_loss(log_probs, targets.flatten(), ignore_index=ignore_index)
''', "F.nll_loss"),
    "torch.log_softmax, caught": ('''
def cross_entropy(logits, targets, ignore_index=-100):
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    kept = targets != ignore_index
    try:
        log_probs = torch.log_softmax(logits, dim=-1)
    except Exception:  # the student's code catching the error does not hide the call
        log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    picked = log_probs.gather(-1, torch.where(kept, targets, 0)[:, None])[:, 0]
    return -torch.where(kept, picked, 0.0).sum() / kept.sum()
''', "torch.log_softmax"),
    "an alias bound in the notebook": ('''
from torch.nn.functional import cross_entropy as torchs_loss


def cross_entropy(logits, targets, ignore_index=-100):
    return torchs_loss(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
''', "F.cross_entropy"),
}
_COSINE = WRONG["cosine_lr"]["pytorchs_clipping"].split("def clip_grad_norm_")[0]
CLIP = {
    "torch.nn.utils.clip_grad_norm_": (WRONG["cosine_lr"]["pytorchs_clipping"], "torch.nn.utils.clip_grad_norm_"),
    "its two halves": (_COSINE + '''
def clip_grad_norm_(parameters, max_norm):
    parameters = list(parameters)
    total = torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total)
    return total
''', "torch.nn.utils.get_total_norm"),
    "the deprecated name, imported": (_COSINE + '''
from torch.nn.utils import clip_grad_norm


def clip_grad_norm_(parameters, max_norm):
    return clip_grad_norm(parameters, max_norm)
''', "torch.nn.utils.clip_grad_norm_"),
}


@pytest.fixture(scope="module")
def ref():
    return reference.load(A)


def graded(ref, exercise, source=None):
    """grade's result for `exercise` through nbgrader's route: the reference's namespace, `source` run in it."""
    namespace = {k: v for k, v in vars(ref).items() if not k.startswith("__")}
    if source:
        exec(compile(source, "<cell 40>", "exec"), namespace)
    student = InProcessStudent(namespace)
    try:
        return run_exercise(A, exercise, student, ref, seed=stated.fresh_seed())
    finally:
        student.restore()


def failed(result):
    return {r.name: r.message for r in result.checks if not r.passed}


def untouched():
    """PyTorch's own functions are where they were."""
    import torch.nn.utils.clip_grad as clip_grad
    return (torch.nn.functional.cross_entropy.__module__ == "torch.nn.functional"
            and not hasattr(torch.nn.functional.cross_entropy, "__forbidden_original__")
            and "log_softmax" not in vars(torch.Tensor) and torch.log_softmax is torch._C._VariableFunctions.log_softmax
            and torch.nn.utils.clip_grad_norm_ is clip_grad.clip_grad_norm_
            and not hasattr(clip_grad.clip_grad_norm_, "__forbidden_original__"))


@pytest.mark.filterwarnings("ignore:`torch.nn.utils.clip_grad_norm` is now deprecated")
@pytest.mark.parametrize("exercise, rule, source, named", [
    *(("cross_entropy", LOSS_RULE, source, named) for source, named in LOSS.values()),
    *(("cosine_lr", CLIP_RULE, source, named) for source, named in CLIP.values())], ids=[*LOSS, *CLIP])
def test_a_forbidden_function_fails_its_stated_rule_in_grade(ref, exercise, rule, source, named):
    result = graded(ref, exercise, source)
    lost = failed(result)
    assert list(lost) and all(name.startswith(rule) for name in lost), lost
    message = next(iter(lost.values()))
    assert f"raised ForbiddenFunction: your code called {named}" in message, message
    assert "which this exercise's text forbids: write " in message and "code cell 40, line" in message, message
    assert 0 < result.score < result.max_score
    assert untouched()
    assert F.cross_entropy(torch.tensor([[1.0, 2.0]]), torch.tensor([1])).item() == pytest.approx(0.31326, abs=1e-5)


def test_the_reference_and_the_alternative_keep_full_marks(ref):
    for exercise in ("cross_entropy", "cosine_lr"):
        for source in (None, ALTERNATIVE[exercise]):
            result = graded(ref, exercise, source)
            assert result.score == result.max_score, failed(result)
    assert untouched()


def test_evasion_is_not_caught_and_harms_nothing(ref):
    """Code that hides the function (a default argument bound at definition) passes; code that puts its
    own function in PyTorch's place during the call, or removes the guard, leaves PyTorch as it was."""
    hides = '''
def cross_entropy(logits, targets, ignore_index=-100, _loss=F.cross_entropy):
    return _loss(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
'''
    assert not failed(graded(ref, "cross_entropy", hides))
    meddles = '''
def cross_entropy(logits, targets, ignore_index=-100):
    import torch.nn.functional
    if hasattr(torch.nn.functional.cross_entropy, "__forbidden_original__"):  # only in the rule's call
        torch.nn.functional.cross_entropy = lambda *a, **k: None
        del torch.log_softmax
        torch.Tensor.log_softmax = lambda self, dim: self
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    kept = targets != ignore_index
    picked = logits.gather(-1, torch.where(kept, targets, 0)[:, None])[:, 0]
    return torch.where(kept, torch.logsumexp(logits, dim=-1) - picked, 0.0).sum() / kept.sum()
'''
    graded(ref, "cross_entropy", meddles)
    assert untouched()


def block(text, exercise):
    return next(b for b in text.split("\n\n") if b.split("\n")[0].split(" (")[0] == exercise)


def test_check_fails_the_forbidden_functions_and_nothing_else(tmp_path):
    path = write(filled_notebook(A, {"cross_entropy": LOSS["F.cross_entropy"][0],
                                     "cosine_lr": CLIP["torch.nn.utils.clip_grad_norm_"][0]}), tmp_path / f"{A}.ipynb")
    text, status = selfcheck.main(path, A)
    assert status == 1 and "7 of 9 exercises ready; 2 problems to fix" in text.splitlines()[-1], text
    loss, clip = block(text, "cross_entropy"), block(text, "cosine_lr")
    assert f"FAIL  a rule its text states, {LOSS_RULE}" in loss and "written without F.cross_entropy" in loss, loss
    assert "raised ForbiddenFunction: your code called F.cross_entropy (itself, or through nn.CrossEntropyLoss)" in loss
    assert f"FAIL  a rule its text states, {CLIP_RULE}" in clip, clip
    assert "raised ForbiddenFunction: your code called torch.nn.utils.clip_grad_norm_" in clip, clip
    assert loss.count("FAIL") == 1 and clip.count("FAIL") == 1


def test_check_passes_the_reference(tmp_path):
    text, status = selfcheck.main(write(filled_notebook(A), tmp_path / f"{A}.ipynb"), A)
    assert status == 0 and "All 9 exercises ready" in text.splitlines()[-1], text
    assert "holds: weight decay on the matrices only" in block(text, "train")


# ---- §11: weight decay on the matrices only, a stated rule of train ----------------------------------

def test_weight_decay_on_every_parameter_fails_in_check(tmp_path):
    notebook = filled_notebook(A, {"train": WRONG["train"]["weight_decay_on_the_norms_too"]})
    path = write(notebook, tmp_path / f"{A}.ipynb")
    text, status = selfcheck.main(path, A)
    train = block(text, "train")
    assert status == 1 and f"FAIL  a rule its text states, {DECAY_RULE}" in train, text
    assert "norm.weight[" in train and "the norms' weights) take weight decay 0" in train, train
    assert "8 of 9 exercises ready" in text.splitlines()[-1], text


def test_weight_decay_on_every_parameter_is_charged_once_in_grade(ref):
    lost = failed(graded(ref, "train", WRONG["train"]["weight_decay_on_the_norms_too"]))
    assert list(lost) == [next(n for n in lost if n.startswith(DECAY_RULE))], lost
    for source in (None, ALTERNATIVE["train"]):
        assert not failed(graded(ref, "train", source))


# ---- §12: the device's share withheld for a wrong value ------------------------------------------------

def test_a_wrong_value_withholds_the_device_share_and_says_so(ref):
    source = WRONG["cross_entropy"]["sum_not_mean"]
    namespace = {k: v for k, v in vars(ref).items() if not k.startswith("__")}
    exec(compile(source, "<cell 40>", "exec"), namespace)
    device = stated.device_rules(A, "cross_entropy")[0]
    # `check`: the rule holds, it has no values to compare with
    device.run(Student(InProcessStudent(namespace)), stated.rng_for(device.key, 1))
    message = failed(graded(ref, "cross_entropy", source))[device.name]
    assert message.startswith(f"{WITHHELD}cross_entropy(") and ", on the CPU: " in message, message
    assert "expected" in message, message
    assert WITHHELD == "device share not given: the values on the CPU are wrong — "


def test_a_custom_comparison_says_so_too():
    def custom(student, ref, rng, sequence):
        raise CheckFailure("the module made on the CPU holds other values")
    with pytest.raises(CheckFailure) as raised:
        _WithReference({}, custom).values(None, None, [])
    assert str(raised.value) == WITHHELD + "the module made on the CPU holds other values"
