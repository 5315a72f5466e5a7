"""What a student's code asks the grader to compute is bounded (issue 28 §5), in chapters 5 and 9.

A later exercise's code calls stand-ins of the earlier ones, and chapter 5's cache probe asks the
grader for a TinyLM's forward: both run in the grader's own process. A flooder asks for the
largest modules, forward passes with the largest inputs kept for a backward that never comes, and
the cache probe with every batch size and cache list it can think of; in chapter 9 also shapes
that broadcast, a model of 30,000 layers, any method name on the grader's module, plain lists. Judged by outcome, in one
`grade -j 1` run (the grading happens in the grader's own process): the grader's peak memory stays
under 1 GB, the control student beside the flooder keeps full marks, and the flooder keeps the
points of its other exercises.
"""
import csv
import subprocess
import sys
import threading
import time

import pytest

from autograder import REPO_ROOT
from submissions import filled_notebook, write

A = "05-self-masked"
A9 = "09-language-model"

FLOOD = '''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    """Floods the grader, then fails."""
    held, refused = [], 0
    for vocab in (10**6, 10**5, 2 * 10**4):           # modules too large to build
        try:
            held.append(TinyLM(vocab, 256, 8, 8, 512))
        except Exception:
            refused += 1
    for i in range(40):                              # many modules, each kept by the grader
        try:
            held.append(TinyLM(200 + i, 128, 4, 4, 256))
        except Exception:
            refused += 1
    lm = TinyLM(96, 128, 4, 4, 256)
    for batch in (4096, 512, 64, 64, 64, 64, 64, 64, 64, 64):   # forward passes kept for a backward
        try:
            held.append(lm(torch.randint(0, 96, (batch, 256))))
        except Exception:
            refused += 1
    if type(model).__name__ == "_GraderModel":       # the cache probe: batches, calls and caches
        for i in range(200):
            try:
                model(torch.zeros(4096 if i % 2 else 8, 10, dtype=torch.long), [object(), object()])
            except Exception:
                refused += 1
    raise RuntimeError(f"flooded ({refused} refused)")
'''

FLOOD_09 = '''
def generate(model, prompts, n_new, temperature=0.0, top_k=None, top_p=None, seed=None):
    """Floods the grader through chapter 9's stand-ins and its cache probe, then fails."""
    held, refused = [], 0
    try:                                             # few parameters, 30,000 layers: gigabytes of modules
        held.append(LlamaLM(4, 4, 30_000, 1, 1, 1))
    except Exception:
        refused += 1
    standins = next(c.cell_contents for c in LlamaLM.__init__.__closure__
                    if type(c.cell_contents).__name__ == "StandIns")
    small, big = LlamaLM(10, 8, 1, 2, 1, 8), torch.zeros(4_000_000, dtype=torch.float64)
    for i in range(40):                              # tensors left on the grader's module: any method name
        try:
            standins._method("__setattr__")(small, f"stash{i}", big)
        except Exception:
            refused += 1
    for m in (32, 512):                              # positions and a mask that broadcast (numbers few)
        try:
            held.append(model(torch.zeros(8, 16, dtype=torch.long), torch.zeros((m, 1, 1, 1), dtype=torch.long),
                              torch.ones((m, 1, 1, 1, 1), dtype=torch.bool), None))
        except Exception:
            refused += 1
    for i in range(3):                               # plain lists, which no tensor bound counts
        try:
            held.append(filter_logits([float(i)] * 100_000, 1.0))
        except Exception:
            refused += 1
    for vocab in (10**6, 10**5, 3 * 10**4):          # modules too large to build
        try:
            held.append(LlamaLM(vocab, 512, 8, 8, 8, 1376))
        except Exception:
            refused += 1
    lm = LlamaLM(96, 128, 4, 4, 2, 344)               # (many kept modules: chapter 5's flooder)
    for batch in (4096, 512, 64, 64, 64):            # forward passes kept for a backward
        try:
            held.append(lm(torch.randint(0, 96, (batch, 256))))
        except Exception:
            refused += 1
    for i in range(40):                              # the model it is given: batches, calls, caches
        try:
            caches = [KVCache() for _ in model.layers]
            held.append(model(torch.zeros(4096 if i % 2 else 8, 16, dtype=torch.long), None, None, caches))
        except Exception:
            refused += 1
    raise RuntimeError(f"flooded ({refused} refused)")
'''


def peak_of(process):
    """The grader's peak resident memory (VmHWM, bytes), read until it ends."""
    peak = [0]

    def watch():
        while process.poll() is None:
            try:
                with open(f"/proc/{process.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[0] = max(peak[0], int(line.split()[1]) * 1024)
            except OSError:
                return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return peak, thread


@pytest.fixture(scope="module")
def flooded(tmp_path_factory):
    root = tmp_path_factory.mktemp("flood")
    write(filled_notebook(A), root / "submissions" / "control" / A / f"{A}.ipynb")
    write(filled_notebook(A, {"generate": FLOOD}), root / "submissions" / "flooder" / A / f"{A}.ipynb")
    write(filled_notebook(A9), root / "submissions" / "control" / A9 / f"{A9}.ipynb")
    write(filled_notebook(A9, {"generate": FLOOD_09}), root / "submissions" / "flooder" / A9 / f"{A9}.ipynb")
    process = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(root / "submissions"), "--out",
                                str(root / "out"), "-j", "1", "--call-seconds", "10"], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak, thread = peak_of(process)
    output, _ = process.communicate(timeout=900)
    thread.join()
    assert process.returncode == 0, output
    with open(root / "out" / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, peak[0]


def test_the_grader_stays_under_1_gb_while_flooded(flooded):
    rows, peak = flooded
    print(f"the grader's peak resident memory: {peak / 2**20:.0f} MB")
    assert 0 < peak < 2**30


def test_the_control_keeps_full_marks_and_the_flooder_its_other_exercises(flooded):
    rows, _ = flooded
    for row in rows:
        full = float(row["score"]) == float(row["max_score"])
        if row["student"] == "control" or row["exercise"] != "generate":
            assert full, row
        else:
            # refused (its own error, "flooded") or stopped at its call's time limit
            assert float(row["score"]) == 0 and ("flooded" in row["message"] or "time limit" in row["message"]), row
