"""The device checks: a call run on the meta device comes back as its layout, in both graders, and
`same_device` charges a tensor made on the CPU; it passes only a call it saw run, with the
reference's layout on meta and the reference's values on the CPU: an error is never a pass."""
import types

import pytest
import torch

from autograder.checks.core import CheckFailure, Student, same_device
from autograder.checks.inprocess import InProcessStudent
from autograder.sandbox.session import Limits, SandboxedStudent

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
def returns_input(x):
    return x
def says_meta(x):
    raise RuntimeError("nonzero is not supported for meta tensors: .item() cannot be called on meta tensors")
'''
NAMES = ("mixes", "made_on_cpu", "reads_data", "double", "returns_none", "returns_input", "says_meta")
REF = types.SimpleNamespace(**{name: (lambda x: x * 2) for name in NAMES}, reads_on_meta=lambda x: x * (x.sum() > 0).item())


@pytest.fixture(params=["sandbox", "in process"])
def process(request):
    if request.param == "in process":
        namespace = {}
        exec(compile(CODE, "<cell 1>", "exec"), namespace)
        yield InProcessStudent(namespace)
    else:
        with SandboxedStudent([(1, CODE)], Limits(), ["numpy", "torch"]) as student:
            yield student


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


def test_same_device_charges_a_tensor_made_on_the_cpu(process):
    student = Student(process)
    with pytest.raises(CheckFailure) as mixed:
        same_device(student, REF, "mixes", torch.zeros(3))
    assert "line 6" in str(mixed.value) and "outputs keep the input's device" in str(mixed.value)
    with pytest.raises(CheckFailure) as returned:
        same_device(student, REF, "made_on_cpu", torch.zeros(3))
    assert "returned the result (a tensor) on the cpu" in str(returned.value)


def test_a_right_call_passes(process):
    assert same_device(Student(process), REF, "double", torch.ones(3)) == {"shape": [3], "dtype": "float32",
                                                                           "device": "meta"}


@pytest.mark.parametrize("name", ["reads_data", "says_meta"])
def test_an_error_is_never_a_pass(process, name):
    """Whatever it says: reading data on meta fails, as does an error that only claims to."""
    with pytest.raises(CheckFailure) as failed:
        same_device(Student(process), REF, name, torch.ones(3))
    assert "has no data" in str(failed.value) and "meta" in str(failed.value)


def test_a_result_unlike_the_references_fails(process):
    student = Student(process)
    with pytest.raises(CheckFailure) as nothing:
        same_device(student, REF, "returns_none", torch.ones(3))
    assert "returned, as the result, a NoneType; expected a float32 tensor of shape (3,)" in str(nothing.value)
    with pytest.raises(CheckFailure) as wrong:  # the layout is right on meta: the values, on the CPU, are not
        same_device(student, REF, "returns_input", torch.ones(3))
    assert "on the CPU" in str(wrong.value)


def test_a_reference_that_cannot_run_on_meta_is_the_courses_mistake(process):
    with pytest.raises(RuntimeError, match="change the check's input"):
        same_device(Student(process), types.SimpleNamespace(double=REF.reads_on_meta), "double", torch.ones(3))
