"""An exercise is checked with known-good versions of the exercises before it, as stand-ins whose
calls the grader computes (`sandbox/standins.py`, `checks/known_good.py`): the names, and default
arguments bound to the student's versions, point to them until restored; a module's stand-in
builds, trains, differentiates, caches and moves like the reference; what a student sends is
bounded before the grader works on it."""
import re
import types

import pytest
import torch

from autograder.checks.known_good import (MAX_ELEMENTS, MAX_ITEMS, MAX_KEPT, MAX_MODULES, MAX_PARAMETERS, MAX_WORK,
                                          KnownGood)
from autograder.sandbox.calls import CallError, StudentNamespace
from autograder.wire import roundtrip

GIVEN = '''
import torch
import torch.nn as nn


class Cache:
    def __init__(self):
        self.k = None

    def append(self, k):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        return self.k
'''

REFERENCE = GIVEN + '''

def scores(x):
    return x + 1


def outer(x):
    return x[..., :, None] * x[..., None, :]


class Tied(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.inner = nn.Linear(dim, dim)
        self.layers = nn.ModuleList([nn.Linear(dim, dim, bias=False)])
        self.layers[0].weight = self.inner.weight     # one Parameter under two names
        self.register_buffer("offset", torch.full((dim,), 0.5))

    def forward(self, x, cache=None):
        h = self.inner(x)
        if cache is not None:
            h = cache.append(h)
        return self.layers[0](h) + self.offset, h.sum()


class Many(nn.Module):
    def __init__(self, count):
        super().__init__()
        self.layers = nn.ModuleList(nn.Identity() for _ in range(count))
'''

STUDENT = '''
def scores(x):
    return x + 100          # the student's bug


def attention(x, score_fn=scores):
    return score_fn(x) + scores(x)


class Tied(nn.Module):      # the student's own, wrong: the stand-in replaces it
    def __init__(self, dim):
        super().__init__()
'''


def connected(names=("scores", "outer", "Tied", "Many"), install=True):
    """(the student's calls, namespace, the grader's reference module, the grader's stand-ins):
    the student's names replaced by stand-ins for `names` if `install`."""
    ref = types.ModuleType("reference")
    exec(REFERENCE, ref.__dict__)
    grader = KnownGood(ref, names)
    namespace = {}
    exec(GIVEN + STUDENT, namespace)
    calls = StudentNamespace(namespace, lambda name, *args: roundtrip(grader(*roundtrip(list(args)))))
    if install:
        calls.use_known_good(roundtrip(grader.spec()))
    return calls, namespace, ref, grader


def test_known_good_versions_replace_names_and_bound_defaults_until_restored():
    calls, namespace, _, grader = connected(install=False)
    own_scores, own_defaults = namespace["scores"], namespace["attention"].__defaults__
    assert calls.call("attention", [torch.zeros(1)]).array.tolist() == [200]
    calls.use_known_good(roundtrip(grader.spec()))
    assert calls.call("attention", [torch.zeros(1)]).array.tolist() == [2] and namespace["scores"] is not own_scores
    calls.use_known_good(roundtrip(grader.spec()))  # twice: still one layer to undo
    calls.restore()
    assert namespace["scores"] is own_scores and namespace["attention"].__defaults__ == own_defaults
    assert calls.call("attention", [torch.zeros(1)]).array.tolist() == [200]


def test_no_line_of_the_reference_is_in_the_students_process():
    _, namespace, _, _ = connected()
    import inspect
    for name in ("scores", "outer", "Tied"):
        source = inspect.getsource(namespace[name]) if name != "Tied" else inspect.getsource(namespace[name].forward)
        assert "x + 1" not in source and "self.inner(x)" not in source


def test_a_stand_in_module_is_built_trained_and_differentiated_as_the_reference():
    _, namespace, ref, _ = connected()
    torch.manual_seed(3)
    model = namespace["Tied"](4)
    after_student = torch.rand(1)
    torch.manual_seed(3)
    again = namespace["Tied"](4)
    assert torch.rand(1) == after_student  # the student's seed decides the parameters (the grader draws
    assert all(torch.equal(model.state_dict()[k], v) for k, v in again.state_dict().items())  # from its seed)
    torch.manual_seed(3)
    assert torch.rand(1) != after_student  # and the student's generator advanced
    expected = ref.Tied(4)
    assert model.state_dict().keys() == expected.state_dict().keys()
    expected.load_state_dict(model.state_dict())
    assert model.layers[0].weight is model.inner.weight and len(list(model.parameters())) == 2
    assert model.dim == 4 and model.layers[0].in_features == 4
    x = torch.randn(2, 3, 4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    out, total = model(x)
    out_ref, total_ref = expected(x_ref)
    assert torch.allclose(out, out_ref) and torch.allclose(total, total_ref)
    (out.square().sum() + total).backward()
    (out_ref.square().sum() + total_ref).backward()
    assert torch.allclose(x.grad, x_ref.grad)
    assert torch.allclose(model.inner.weight.grad, expected.inner.weight.grad)
    for step in range(3):  # the student's optimizer on the stand-in's parameters
        for m, inputs in ((model, x), (expected, x_ref)):
            optimizer = torch.optim.SGD(m.parameters(), lr=0.1)
            optimizer.zero_grad()
            m(inputs.detach())[0].sum().backward()
            optimizer.step()
    assert torch.allclose(model.inner.weight, expected.inner.weight)
    model.double()
    assert model(torch.randn(1, 2, 4, dtype=torch.float64))[0].dtype == torch.float64


def test_objects_of_the_given_classes_are_changed_in_place_and_meta_stays_meta():
    _, namespace, _, _ = connected()
    model, cache = namespace["Tied"](4), namespace["Cache"]()
    model(torch.randn(1, 2, 4), cache)
    model(torch.randn(1, 3, 4), cache)
    assert cache.k.shape == (1, 5, 4) and type(cache) is namespace["Cache"]
    on_meta = model.to("meta")
    out, _ = on_meta(torch.empty(1, 2, 4, device="meta"))
    assert out.device.type == "meta" and out.shape == (1, 2, 4)
    mixed = namespace["Cache"]()
    mixed.k = torch.zeros(1, 1, 4)
    with pytest.raises(RuntimeError, match="device"):  # a CPU tensor meets meta ones: it raises, as on a GPU
        on_meta(torch.empty(1, 2, 4, device="meta"), mixed)


def test_what_a_student_sends_is_bounded_before_the_grader_works():
    calls, namespace, _, _ = connected()
    with pytest.raises(RuntimeError, match="numbers sent"):
        namespace["scores"](torch.zeros(MAX_ELEMENTS + 1))
    with pytest.raises(RuntimeError, match="parameters"):
        namespace["Tied"](int(MAX_PARAMETERS ** 0.5) + 1)
    side = int(MAX_WORK ** 0.5) + 1  # a small input whose reference makes a huge one
    with pytest.raises(RuntimeError, match="would make"):
        namespace["outer"](torch.zeros(side))
    assert namespace["outer"](torch.ones(3)).sum() == 9   # and a fair call still runs
    size = int(MAX_PARAMETERS ** 0.5) + 1
    with pytest.raises(RuntimeError) as refused:  # its count unsaid: it may be an exercise's answer
        namespace["Tied"](size)
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", str(refused.value))]
    assert numbers and max(numbers) == MAX_PARAMETERS, str(refused.value)
    with pytest.raises(RuntimeError, match="items of lists"):   # a plain list, which no tensor bound counts
        namespace["scores"]([0.0] * (MAX_ITEMS + 1))
    with pytest.raises(RuntimeError, match="modules"):          # few parameters, many modules
        namespace["Many"](MAX_MODULES + 1)
    module = namespace["Tied"](2)
    standins = next(c.cell_contents for c in type(module).__init__.__closure__
                    if type(c.cell_contents).__name__ == "StandIns")
    for method in ("__setattr__", "register_buffer", "__repr__"):  # only forward and the class's own methods
        with pytest.raises(RuntimeError, match="not a method its stand-in has"):
            standins._method(method)(module, "stash", torch.zeros(3))
    for dim in range(1, MAX_KEPT + 8):  # modules kept: bounded, the oldest built again on demand
        namespace["Tied"](dim)
    first = namespace["Tied"](1)
    assert first(torch.ones(1, 1))[0].shape == (1, 1)


def test_the_grader_answers_only_for_the_exercises_already_checked():
    ref = types.ModuleType("reference")
    exec(REFERENCE, ref.__dict__)
    grader = KnownGood(ref, ["scores"])
    with pytest.raises(RuntimeError, match="not an exercise already checked"):
        grader("call", "outer", [torch.ones(2)], {}, {}, [], False)
    with pytest.raises(RuntimeError, match="cannot be passed"):
        grader("call", "scores", [{"__known_good__": "object", "class": "Tied", "index": 0, "state": {}}], {}, {}, [],
               False)


def test_a_stand_in_that_fails_says_so_to_the_student():
    calls, _, _, _ = connected()
    with pytest.raises(CallError, match="TypeError: string indices"):  # the error, in the student's words
        calls.call("outer", ["not a tensor"])
