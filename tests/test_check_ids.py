"""A check's inputs come from its id, never from its sentence (issue 38): rewording every check's
and every stated rule's sentence changes nothing graded.

Each chapter here is graded twice in this process, on the reference, with a student that records
every input it is given: once as declared, once with every sentence reworded where it is declared
(`Chapter.register` and the stated rules' register). The inputs must be the same, call for call.
"""
import dataclasses
import hashlib
import importlib

import numpy as np
import pytest

from autograder import notebook, reference, stated
from autograder.checks import checks_module, run_exercise
from autograder.checks import core
from autograder.checks.inprocess import InProcessStudent
from autograder.wire import Handle


class Recording(InProcessStudent):
    def __init__(self, namespace, seen):
        super().__init__(namespace)
        self.seen = seen

    def call(self, target, *args, **kwargs):
        self.seen.append(fingerprint((target if not isinstance(target, Handle) else "handle", args,
                                      {k: v for k, v in kwargs.items() if not k.startswith("_label")})))
        return super().call(target, *args, **kwargs)


def fingerprint(value):
    import torch
    if isinstance(value, torch.Tensor):
        value = value.detach().numpy()
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{value.shape}:" + hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(fingerprint(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{fingerprint(v)}" for k, v in value.items()) + "}"
    return "handle" if isinstance(value, Handle) else repr(value)[:200]


def graded_inputs(a, reword, monkeypatch):
    """Every input the reference is given while `a` is graded; with `reword`, every sentence changed."""
    module = checks_module(a)  # imported (and registered) once before: each run below registers it anew
    core._REGISTRY.pop(a, None)
    if reword:
        register = core.Chapter.register
        monkeypatch.setattr(core.Chapter, "register", lambda self, exercise, name, *rest, **options: register(
            self, exercise, f"in other words: {name}", *rest, **options))
        monkeypatch.setattr(stated.register, "_PROPERTIES", [
            dataclasses.replace(p, name=f"in other words: {p.name}") for p in stated.register._PROPERTIES])
    importlib.reload(module)
    ref, seen = reference.load(a), []
    for e in notebook.exercises(a):
        student = Recording(dict(vars(ref)), seen)
        try:
            run_exercise(a, e.name, student, ref, seed=12345)  # the run's seed, the same in both runs
        finally:
            student.restore()
    monkeypatch.undo()
    core._REGISTRY.pop(a, None)
    importlib.reload(module)
    return seen


@pytest.mark.parametrize("a", ["01-weights", "04-multi-head"])
def test_rewording_every_sentence_changes_no_input(a, monkeypatch):
    declared = graded_inputs(a, False, monkeypatch)
    reworded = graded_inputs(a, True, monkeypatch)
    assert len(declared) > 20 and declared == reworded


def test_ids_are_unique_in_a_chapter():
    from autograder import assignments
    for a in assignments():
        checks_module(a)
        ids = [c.id for c in core._REGISTRY[a]]
        assert all(ids) and len(ids) == len(set(ids)), a
