"""Where a stated rule's expected values come from: the reference at grading, known answers in `check`.

A stated rule ships to students, so it holds no implementation of an exercise. Where it compares
a value with the answer, it asks its `known` source by name: `known.answer("apply_rope", x, positions)`.
- `grade` gives it `Reference`: the hidden reference solution (or a grader-side helper of the
  chapter's checks, `checks.core.known_answers`) computes the answer, on inputs the rule draws
  from the run's secret seed.
- `check` gives it `Replay`: the rule's inputs (`known.given`) and answers are the ones recorded
  from the reference (`tests/make_known_answers.py`, with a seed nobody keeps) and stored as data
  in `known_answers.py`. They are worthless at grading, whose inputs are drawn anew.
An answer whose arguments include a student's value (the block judged with the student's own
attention) is known in `check` only where that value is the reference's: `Unknown` says so.
"""
import base64
import functools
import io
import json
import zipfile

import numpy as np

from .failure import CheckFailure


class Unknown(CheckFailure):
    """`check` holds no known answer for these arguments (a value from the student's code that
    differs from the reference's); `grade` computes it."""


def _detached(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(v) for v in value)
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value.copy() if isinstance(value, np.ndarray) else value


class Reference:
    """Answers computed by the reference (trusted code, in the grader's own process) on the rule's
    inputs, drawn afresh. `helpers`: {name: function(ref, *args, **kwargs)}, the chapter's
    grader-side answers that are not one reference function."""

    def __init__(self, ref, helpers):
        self.ref, self.helpers = ref, helpers

    def given(self, key, draw):
        return draw()

    def answer(self, name, *args, **kwargs):
        import torch
        helper = self.helpers.get(name)
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            value = helper(self.ref, *args, **kwargs) if helper else getattr(self.ref, name)(*args, **kwargs)
        return _detached(value)


class Recording(Reference):
    """`Reference`, keeping every input and answer: what `Replay` gives back in `check`."""

    def __init__(self, ref, helpers):
        super().__init__(ref, helpers)
        self.inputs, self.answers = {}, []

    def given(self, key, draw):
        self.inputs[key] = value = draw()
        return _detached(value)

    def answer(self, name, *args, **kwargs):
        value = super().answer(name, *args, **kwargs)
        self.answers.append({"name": name, "args": _detached(list(args)), "kwargs": _detached(kwargs),
                             "value": value})
        return _detached(value)


class Replay:
    """The recorded inputs and answers of one rule. An answer is found by its name and arguments
    (floats equal to rtol 1e-5, atol 1e-6: a student's float32 value that is right is found)."""

    def __init__(self, rule):
        self.rule = rule
        self.record = stored().get(rule, {"inputs": {}, "answers": []})

    def given(self, key, draw):
        if key not in self.record["inputs"]:
            raise KeyError(f"known_answers.py has no input {key!r} for {self.rule}: run tests/make_known_answers.py")
        return _detached(self.record["inputs"][key])

    def answer(self, name, *args, **kwargs):
        for entry in self.record["answers"]:
            if entry["name"] == name and _same(entry["args"], list(args)) and _same(entry["kwargs"], kwargs):
                return _detached(entry["value"])
        raise Unknown(f"`check` knows this rule's answer ({name}) only on the inputs it was recorded with, and here "
                      "an input comes from your code and differs from the reference's: fix what this exercise's other "
                      "rules say first (`grade` judges this rule with your own values)")


def _same(a, b):
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and bool(torch.isclose(a.double(), b.double(), rtol=1e-5, atol=1e-6,
                                                              equal_nan=True).all()))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and bool(np.isclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True).all()))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ---- the stored form: JSON for the structure, .npy for arrays, in a zip, as base64 in a .py file ----

def encode(records):
    """{rule: {"inputs": {...}, "answers": [...]}} as base64 text (a Gradescope zip carries .py files
    only, so the data lives in one)."""
    import torch
    arrays = {}

    def plain(value):
        if isinstance(value, torch.Tensor):
            arrays[f"{len(arrays)}.npy"] = value.detach().cpu().numpy()
            return {"tensor": f"{len(arrays) - 1}.npy"}
        if isinstance(value, np.ndarray):
            arrays[f"{len(arrays)}.npy"] = value
            return {"array": f"{len(arrays) - 1}.npy"}
        if isinstance(value, tuple):
            return {"tuple": [plain(v) for v in value]}
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {"dict": {k: plain(v) for k, v in value.items()}}
        if isinstance(value, np.generic):
            return value.item()
        assert value is None or isinstance(value, (bool, int, float, str)), f"cannot store {type(value)}"
        return value
    index = plain(records)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        # fixed times and order: the same records give the same bytes
        archive.writestr(zipfile.ZipInfo("index.json", (1980, 1, 1, 0, 0, 0)), json.dumps(index, sort_keys=True))
        for name, array in arrays.items():
            data = io.BytesIO()
            np.save(data, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data.getvalue())
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode(text):
    import torch
    archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(text)))

    def array(name):
        return np.load(io.BytesIO(archive.read(name)), allow_pickle=False)

    def value(node):
        if isinstance(node, list):
            return [value(v) for v in node]
        if isinstance(node, dict):
            if "tensor" in node:
                return torch.from_numpy(array(node["tensor"]))
            if "array" in node:
                return array(node["array"])
            if "tuple" in node:
                return tuple(value(v) for v in node["tuple"])
            return {k: value(v) for k, v in node["dict"].items()}
        return node
    return value(json.loads(archive.read("index.json")))


def module_text(records):
    """The text of `known_answers.py` holding `records`."""
    text = encode(records)
    return ('"""Known answers of the stated rules, for `check` (autograder/stated/known.py): the reference\n'
            'solutions\' outputs on inputs recorded with them. Written by tests/make_known_answers.py; never\n'
            'edit by hand."""\n\nDATA = (\n' + "".join(f'    "{text[i:i + 100]}"\n' for i in range(0, len(text), 100))
            + ")\n")


@functools.cache
def stored():
    from . import known_answers
    return decode(known_answers.DATA) if known_answers.DATA else {}
