"""The device rule (autograder/stated/device.py): a call run on the emulated GPU
(autograder/sandbox/emulated.py) comes back as its layout, in both graders; the rule fails a
tensor made on the CPU, a tensor of the device converted to NumPy, a result that is not the same
call's on the CPU, and a result with no tensor; it passes only a call it saw run, and passes what
runs on a GPU: `.item()`, boolean masks, `nonzero`, a module moved or made on the device, a
training step. `grade` runs the same rule, on the same cases, and adds the reference's values on
the CPU."""
import types

import numpy as np
import pytest
import torch

from autograder import assignments
from autograder.checks import exercise_checks
from autograder.checks.core import _WithReference
from autograder.checks.inprocess import InProcessStudent
from autograder.notebook import exercises
from autograder.sandbox.session import Limits, SandboxedStudent
from autograder.stated import CheckFailure, Student
from autograder.stated.device import DEVICE, DEVICE_CHECK, DEVICE_RULE, DeviceRule, Fresh, device_rules, on

CODE = '''
import torch
def good(x):
    return x * 2, {"n": x.shape[0], "mask": torch.ones(x.shape, dtype=torch.bool, device=x.device)}
def mixes(x):
    return x + torch.ones(x.shape)
def made_on_cpu(x):
    return torch.zeros(x.shape)
def reads_data(x):
    return x * (x.sum() > 0).item()
def gpu_idioms(x):
    keep = x > 0
    picked = torch.zeros_like(x)
    picked[keep] = x[keep]
    first = torch.nonzero(keep).shape[0]
    return picked * float(bool(keep.any())) + first + x.sum().item()
def trains(x):
    layer = torch.nn.Linear(x.shape[-1], 2).to(x.device)
    also = torch.nn.Linear(x.shape[-1], 2, device=x.device)
    optimizer = torch.optim.AdamW([*layer.parameters(), *also.parameters()], lr=0.1)
    loss = torch.nn.functional.cross_entropy(layer(x) + also(x), torch.zeros(x.shape[0], dtype=torch.long, device=x.device))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
    optimizer.step()
    return layer(x), loss.detach()
def to_numpy(x):
    return torch.from_numpy(x.numpy() * 2)
def build(n):
    return torch.nn.Linear(n, n)
def double(x):
    return x * 2
def returns_none(x):
    return None
def breaks_on_device(x):
    if x.device.type != "cpu":
        raise RuntimeError("Attempting to broadcast a dimension of length 2")
    return x
def returns_input(x):
    return x
def says_device(x):
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices")
def shorter_on_device(x):
    return x if x.device.type == "cpu" else x[:1]
class Cache:
    def __init__(self):
        self.k = None
    def add(self, x):
        self.k = x if self.k is None else torch.cat([self.k, x], dim=0)
        return self.k
def cached(x, cache):
    return cache.add(x) * 1
'''
REF = types.SimpleNamespace(double=lambda x: x * 2, returns_input=lambda x: x * 2, Cache=None)


@pytest.fixture(params=["sandbox", "in process"])
def process(request):
    if request.param == "in process":
        namespace = {}
        exec(compile(CODE, "<cell 1>", "exec"), namespace)
        yield InProcessStudent(namespace)
    else:
        with SandboxedStudent([(1, CODE)], Limits(), ["numpy", "torch"]) as student:
            yield student


RNG = np.random.default_rng(0)  # the rules here draw nothing from it


def rule(cases):
    return DeviceRule("test", "f", DEVICE_CHECK, 0.5, cases)


def calls(name, *args):
    return rule(lambda make, rng: [[on(name, *args)]])


def test_a_call_on_the_device_comes_back_as_its_layout(process):
    out = process.call("good", torch.zeros(3, 2), _device=DEVICE)
    assert out == ({"shape": [3, 2], "dtype": "float32", "device": DEVICE},
                   {"n": {"type": "int"}, "mask": {"shape": [3, 2], "dtype": "bool", "device": DEVICE}})


def test_a_kept_module_is_moved_as_a_copy(process):
    module = process.call("build", 2, keep=True)
    assert process.call(module, torch.zeros(1, 2), _device=DEVICE)["device"] == DEVICE
    assert process.call(module, method="state_dict")["weight"].device.type == "cpu"  # the kept one stays
    assert process.call(module, method="state_dict", _device=DEVICE)["bias"]["device"] == DEVICE


def test_the_rule_charges_a_tensor_made_on_the_cpu(process):
    student = Student(process)
    with pytest.raises(CheckFailure) as mixed:
        calls("mixes", torch.zeros(3)).run(student, RNG)
    assert "line 6" in str(mixed.value) and DEVICE_RULE in str(mixed.value)
    with pytest.raises(CheckFailure) as returned:
        calls("made_on_cpu", torch.zeros(3)).run(student, RNG)
    assert "returned the result (a tensor) on the cpu" in str(returned.value)


def test_a_right_call_passes(process):
    calls("double", torch.ones(3)).run(Student(process), RNG)
    calls("good", torch.ones(3, 2)).run(Student(process), RNG)


@pytest.mark.parametrize("name", ["reads_data", "gpu_idioms", "trains"])
def test_what_runs_on_a_gpu_passes(process, name):
    """.item(), bool(), boolean masks read and written, nonzero, a module moved or built on the
    device, backward, clipping and an optimizer's step: all run on a GPU, and here."""
    calls(name, torch.randn(4, 3)).run(Student(process), RNG)


def test_numpy_of_a_device_tensor_fails_as_on_a_gpu(process):
    with pytest.raises(CheckFailure, match="converted a tensor of the device to NumPy"):
        calls("to_numpy", torch.ones(3)).run(Student(process), RNG)


def test_an_error_is_never_a_pass(process):
    """An error that only claims to be the device's raises on the CPU too, which is run first, and
    is told so."""
    with pytest.raises(CheckFailure) as failed:
        calls("says_device", torch.ones(3)).run(Student(process), RNG)
    assert "on the CPU: the device rule compares" in str(failed.value)


def test_an_error_without_a_sign_of_a_device_is_not_blamed_on_a_cpu_tensor(process):
    """A hint needs its evidence: "met a tensor made on the CPU" only where the error says so."""
    with pytest.raises(CheckFailure) as failed:
        calls("breaks_on_device", torch.ones(3)).run(Student(process), RNG)
    assert "made on the CPU" not in str(failed.value) and "where the same call on the CPU ran" in str(failed.value)
    with pytest.raises(CheckFailure, match="met a tensor made on the CPU"):
        calls("mixes", torch.ones(3)).run(Student(process), RNG)


def test_no_tensor_and_another_layout_than_on_the_cpu_fail(process):
    with pytest.raises(CheckFailure, match="returned no tensor"):
        calls("returns_none", torch.ones(3)).run(Student(process), RNG)
    with pytest.raises(CheckFailure) as shorter:
        calls("shorter_on_device", torch.ones(3)).run(Student(process), RNG)
    assert ("a float32 tensor of shape (1,); the same call on the CPU returns a float32 tensor of shape (3,)"
            in str(shorter.value))


def test_each_run_of_a_sequence_gets_fresh_objects(process):
    """A cache shared by the device's run and the CPU's would hold 4 rows on the CPU, 2 on the device."""
    cache = Fresh("Cache")
    rule(lambda make, rng: [[on("cached", torch.ones(1, 2), cache), on("cached", torch.ones(1, 2), cache)]]).run(
        Student(process), RNG)


def test_grade_adds_the_references_values_on_the_cpu(process):
    """`returns_input` keeps the device and the layout; its values are not the reference's."""
    env = _WithReference({}, None, REF)
    calls("double", torch.ones(3)).run(Student(process), RNG, env=env)
    with pytest.raises(CheckFailure, match="on the CPU"):
        calls("returns_input", torch.ones(3)).run(Student(process), RNG, env=env)


@pytest.mark.parametrize("assignment", assignments())
def test_grade_charges_the_rules_that_check_runs(assignment):
    """Every device check of `grade` is a rule of `autograder/stated/device.py`, and every such rule
    is a check of its exercise, with its weight: one definition, run by both."""
    rules = {(r.exercise, r.name, r.weight) for r in device_rules(assignment)}
    graded = {(e.name, c.name, c.weight) for e in exercises(assignment) for c, _ in exercise_checks(assignment, e.name)
              if c.name.startswith(DEVICE_CHECK)}
    assert graded == rules


MASKED_LOSS = '''
def cross_entropy(logits, targets, ignore_index=-100):
    keep = targets != ignore_index                      # a boolean mask: it runs on a GPU
    logits, targets = logits.reshape(-1, logits.shape[-1])[keep.reshape(-1)], targets.reshape(-1)[keep.reshape(-1)]
    shifted = logits - logits.max(dim=-1, keepdim=True).values
    log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    return -log_probs.gather(-1, targets[:, None]).mean()
'''


def test_correct_code_with_a_boolean_mask_keeps_the_device_rule():
    """Issue 37: a right `cross_entropy` written with boolean-mask indexing (`logits[keep]`, which
    CUDA runs) lost the device share on the meta stand-in; on the emulated GPU it passes."""
    from autograder import reference
    namespace = dict(vars(reference.load("09-language-model")))
    exec(compile(MASKED_LOSS, "<cell 1>", "exec"), namespace)
    (rule,) = [r for r in device_rules("09-language-model") if r.exercise == "cross_entropy"]
    rule.run(Student(InProcessStudent(namespace)), RNG)
