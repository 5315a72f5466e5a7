"""No line of a reference solution reaches a process that runs student code (issue 28 §1).

Later exercises are checked with the reference versions of earlier ones; those run on the grader's
side as stand-ins (`autograder/checks/known_good.py`). Here an attacker in every chapter hooks
what a process can watch — `compile` and `exec`, the audit hook (imports, code objects), the
channel's frames as they are read — and, each time the grader calls one of its exercises, scans
all of that and every string and code object the garbage collector can reach, for the lines of
the chapter's solutions (as hashes: the attacker's notebook holds none of them). Its functions
raise what they found, so the verdict comes back in the grader's own feedback, as a leak would.
Judged by outcome: a control student beside the attacker keeps full marks, every exercise's
verdict is present (the scan ran, after the stand-ins were in place) and none found a line.
"""
import csv
import hashlib
import json
import re
import subprocess
import sys

import nbformat
import pytest

from autograder import REPO_ROOT, assignments, notebook
from submissions import filled_notebook, write

SOLUTION_LINE = 16  # characters: shorter lines ("return out") are not anybody's answer

HOOKS = r'''
import builtins as _b, gc as _gc, hashlib as _h, sys as _s
_SEEN = []
_compile, _exec = _b.compile, _b.exec
def _hooked_compile(source, *args, **kwargs):
    _SEEN.append(source if isinstance(source, str) else repr(source)[:10000])
    return _compile(source, *args, **kwargs)
def _hooked_exec(source, *args, **kwargs):
    _SEEN.append(source if isinstance(source, str) else repr(source)[:10000])
    return _exec(source, *args, **kwargs)
_b.compile, _b.exec = _hooked_compile, _hooked_exec
_s.addaudithook(lambda event, args: _SEEN.append(repr(args)[:10000]) if event in ("exec", "compile", "import") else None)
for _module in list(_s.modules.values()):
    if getattr(_module, "__name__", "").endswith("worker") and hasattr(_module, "read_frame"):
        _read = _module.read_frame
        def _hooked_read(f, _read=_read):
            value = _read(f)
            _SEEN.append(repr(value)[:200000])
            return value
        _module.read_frame = _hooked_read
_VERDICTS = {}
_MARKERS = ("".join(["<known", " good>"]), "".join(["<", "reference "]))  # reference code's file names, made at run time
def _strings():
    yield from _SEEN
    for obj in _gc.get_objects():
        try:
            code = getattr(obj, "__code__", None)
        except Exception:
            code = None
        for each in ([obj] + ([code] if code is not None else [])):
            if type(each).__name__ == "code":
                yield each.co_filename
                yield from (c for c in each.co_consts if isinstance(c, str))
        for ref in _gc.get_referents(obj):
            if isinstance(ref, str):
                yield ref
def _scan(name):
    if name not in _VERDICTS:
        found, strings, code = set(), 0, 0
        for text in _strings():
            strings += 1
            for line in text.splitlines():
                line = line.strip()
                if len(line) >= LINE and _h.sha256(line.encode()).hexdigest() in SECRET:
                    found.add(_h.sha256(line.encode()).hexdigest()[:12])
            if any(marker in text for marker in _MARKERS) and not any(text is marker for marker in _MARKERS):
                code += 1
        _VERDICTS[name] = f"SCAN {name}: {strings} strings, {len(found)} solution lines, {code} reference code"
    raise RuntimeError(_VERDICTS[name])
'''


def solution_lines(assignment):
    """The lines of the reference solutions that the student's notebook does not hold."""
    released = notebook.NOTEBOOKS_DIR / assignment / f"{assignment}.ipynb"
    student_text = {line.strip() for cell in nbformat.read(released, as_version=4).cells
                    for line in cell.source.splitlines()}
    lines = set()
    for cell in notebook.read_source(assignment).cells:
        if notebook.nbgrader_meta(cell).get("solution"):
            inside = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
            lines |= {line.strip() for part in inside for line in part.splitlines()}
    return {line for line in lines if len(line) >= SOLUTION_LINE and line not in student_text}


def attacker(assignment):
    """The chapter's student notebook, hooked at the start, every exercise a scanner at the end."""
    nb = nbformat.read(notebook.NOTEBOOKS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    secret = sorted(hashlib.sha256(line.encode()).hexdigest() for line in solution_lines(assignment))
    hooks = HOOKS.replace("LINE", str(SOLUTION_LINE)).replace("SECRET", repr(set(secret)))
    names = [n for e in notebook.exercises(assignment) for n in e.defines]
    probes = []
    for name in names:
        if name[:1].isupper():
            probes.append(f"class {name}(__import__('torch').nn.Module):\n"
                          f"    def __init__(self, *args, **kwargs):\n        super().__init__()\n"
                          f"        _scan({name!r})\n"
                          f"    def forward(self, *args, **kwargs):\n        _scan({name!r})\n")
        else:
            probes.append(f"def {name}(*args, **kwargs):\n    _scan({name!r})\n")
    nb.cells.insert(0, nbformat.v4.new_code_cell(hooks))
    nb.cells.append(nbformat.v4.new_code_cell("\n\n".join(probes)))
    return nb, len(secret)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("known_good")
    submissions, out = root / "submissions", root / "out"
    counted = {}
    for assignment in assignments():
        nb, counted[assignment] = attacker(assignment)
        folder = submissions / "attacker" / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
        write(filled_notebook(assignment), submissions / "control" / assignment / f"{assignment}.ipynb")
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out), "-j", "2"],
                   cwd=REPO_ROOT, check=True, capture_output=True, timeout=900)
    with open(out / "grades.csv", newline="") as f:
        control = [r for r in csv.DictReader(f) if r["student"] == "control"]
    assert control and all(float(r["score"]) == float(r["max_score"]) for r in control), control
    messages = {}
    for assignment in assignments():
        data = json.loads((out / ".journal" / "attacker" / f"{assignment}.json").read_text())
        graded = data.get("graded", data)
        messages[assignment] = [c["message"] for e in graded["exercises"] for c in e["checks"]]
    return messages, counted


@pytest.mark.parametrize("assignment", assignments())
def test_no_solution_line_reaches_the_students_process(graded, assignment):
    """A generic line ("optimizer.step()") is in the libraries' own text from the start: what the
    first exercise's scan finds, before any check ran, is the process's own; a leak is a line more,
    or a reference's code object, once the grader has worked."""
    messages, counted = graded
    assert counted[assignment] >= 3, "the chapter's solutions should have lines to look for"
    verdicts = {}
    for text in messages[assignment]:
        for name, lines, code in re.findall(r"SCAN (\w+): \d+ strings, (\d+) solution lines, (\d+) reference code", text):
            verdicts[name] = (int(lines), int(code))
    first, *later = [n for e in notebook.exercises(assignment) for n in e.defines if not n.startswith("_")]
    assert first in verdicts and set(later) <= set(verdicts), (sorted(verdicts), later)  # every scan ran
    leaks = {name: found for name, found in verdicts.items() if found[0] > verdicts[first][0] or found[1]}
    assert not leaks, (verdicts[first], leaks)
