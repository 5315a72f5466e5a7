"""The device rule (autograder/stated/device.py): a call run on the meta device comes back as its
layout, in both graders; the rule fails a tensor made on the CPU, data read on meta, a result that
is not the same call's on the CPU, and a result with no tensor; it passes only a call it saw run.
`grade` runs the same rule, on the same cases, and adds the reference's values on the CPU."""
import types

import pytest
import torch

from autograder import assignments
from autograder.checks import exercise_checks
from autograder.checks.core import _WithReference
from autograder.checks.inprocess import InProcessStudent
from autograder.notebook import exercises
from autograder.sandbox.session import Limits, SandboxedStudent
from autograder.stated import CheckFailure, Student
from autograder.stated.device import DEVICE_CHECK, DEVICE_RULE, NO_DATA_HINT, DeviceRule, Fresh, device_rules, on

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
def build(n):
    return torch.nn.Linear(n, n)
def double(x):
    return x * 2
def returns_none(x):
    return None
def breaks_on_meta(x):
    if x.device.type == "meta":
        raise RuntimeError("Attempting to broadcast a dimension of length 2")
    return x
def returns_input(x):
    return x
def says_meta(x):
    raise RuntimeError("nonzero is not supported for meta tensors: .item() cannot be called on meta tensors")
def shorter_on_meta(x):
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


def rule(cases):
    return DeviceRule("test", "f", DEVICE_CHECK, 0.5, cases)


def calls(name, *args):
    return rule(lambda make, rng: [[on(name, *args)]])


def test_a_call_on_meta_comes_back_as_its_layout(process):
    out = process.call("good", torch.zeros(3, 2), _device="meta")
    assert out == ({"shape": [3, 2], "dtype": "float32", "device": "meta"},
                   {"n": {"type": "int"}, "mask": {"shape": [3, 2], "dtype": "bool", "device": "meta"}})


def test_a_kept_module_is_moved_as_a_copy(process):
    module = process.call("build", 2, keep=True)
    assert process.call(module, torch.zeros(1, 2), _device="meta")["device"] == "meta"
    assert process.call(module, method="state_dict")["weight"].device.type == "cpu"  # the kept one stays
    moved = process.call(module, "meta", method="to", keep=True)
    assert process.call(moved, method="state_dict", _device="meta")["bias"]["device"] == "meta"


def test_the_rule_charges_a_tensor_made_on_the_cpu(process):
    student = Student(process)
    with pytest.raises(CheckFailure) as mixed:
        calls("mixes", torch.zeros(3)).run(student)
    assert "line 6" in str(mixed.value) and DEVICE_RULE in str(mixed.value)
    with pytest.raises(CheckFailure) as returned:
        calls("made_on_cpu", torch.zeros(3)).run(student)
    assert "returned the result (a tensor) on the cpu" in str(returned.value)


def test_a_right_call_passes(process):
    calls("double", torch.ones(3)).run(Student(process))
    calls("good", torch.ones(3, 2)).run(Student(process))


@pytest.mark.parametrize("name,told", [("reads_data", NO_DATA_HINT), ("says_meta", "on the CPU: the device rule compares")])
def test_an_error_is_never_a_pass(process, name, told):
    """Whatever it says: reading data on meta fails, as does an error that only claims to (it raises
    on the CPU too, which is run first, and is told so)."""
    with pytest.raises(CheckFailure) as failed:
        calls(name, torch.ones(3)).run(Student(process))
    assert told in str(failed.value)


def test_an_error_without_a_sign_of_a_device_is_not_blamed_on_a_cpu_tensor(process):
    """A hint needs its evidence: "met a tensor made on the CPU" only where the error says so."""
    with pytest.raises(CheckFailure) as failed:
        calls("breaks_on_meta", torch.ones(3)).run(Student(process))
    assert "made on the CPU" not in str(failed.value) and "where the same call on the CPU ran" in str(failed.value)
    with pytest.raises(CheckFailure, match="met a tensor made on the CPU"):
        calls("mixes", torch.ones(3)).run(Student(process))


def test_no_tensor_and_another_layout_than_on_the_cpu_fail(process):
    with pytest.raises(CheckFailure, match="returned no tensor"):
        calls("returns_none", torch.ones(3)).run(Student(process))
    with pytest.raises(CheckFailure) as shorter:
        calls("shorter_on_meta", torch.ones(3)).run(Student(process))
    assert ("a float32 tensor of shape (1,); the same call on the CPU returns a float32 tensor of shape (3,)"
            in str(shorter.value))


def test_each_run_of_a_sequence_gets_fresh_objects(process):
    """A cache shared by the meta run and the CPU run would hold 4 rows on the CPU, 2 on meta."""
    cache = Fresh("Cache")
    rule(lambda make, rng: [[on("cached", torch.ones(1, 2), cache), on("cached", torch.ones(1, 2), cache)]]).run(
        Student(process))


def test_grade_adds_the_references_values_on_the_cpu(process):
    """`returns_input` keeps the device and the layout; its values are not the reference's."""
    env = _WithReference({}, None, REF)
    calls("double", torch.ones(3)).run(Student(process), env=env)
    with pytest.raises(CheckFailure, match="on the CPU"):
        calls("returns_input", torch.ones(3)).run(Student(process), env=env)


@pytest.mark.parametrize("assignment", assignments())
def test_grade_charges_the_rules_that_check_runs(assignment):
    """Every device check of `grade` is a rule of `autograder/stated/device.py`, and every such rule
    is a check of its exercise, with its weight: one definition, run by both."""
    rules = {(r.exercise, r.name, r.weight) for r in device_rules(assignment)}
    graded = {(e.name, c.name, c.weight) for e in exercises(assignment) for c, _ in exercise_checks(assignment, e.name)
              if "meta device" in c.name}
    assert graded == rules
