"""The grader computes nothing a student asks for in its own process (issue 35).

Later exercises call stand-ins of the earlier ones, and the grader answers them with the
reference: in a reference worker of the student's (`autograder/sandbox/answers.py`), bounded and
killed at the student's call's deadline. An attacker sends what once made the grader itself work:
two ints that asked for a 1-billion-entry mask (chapter 5), a raw request to build a model of
128 M parameters, a generator's state for the grader to load, the reference `fit` asked for by a
`fit` that trains nothing (chapter 6), and a tiled attention of 1x1 tiles that ran 72 s of the
grader's CPU (chapter 7). Judged by outcome in one `grade -j 1` run (the grading happens in the
grader's own process): the grader's peak memory and its own CPU time stay small, every attack
is refused or stopped in the attacker's own exercise with the reason, the oracle `fit` scores what
a stub `fit` scores, and a control student beside it keeps full marks.
"""
import csv
import re
import subprocess
import sys
import threading
import time

import pytest

from autograder import REPO_ROOT
from submissions import filled_notebook, reference_solutions, write

A5, A6, A7 = "05-self-masked", "06-nadaraya-watson", "07-flash-tiling"

STANDINS = '''
def _standins(stand_in):
    """The stand-ins' own object, from a stand-in's closure (what an attacker can reach)."""
    for function in (stand_in, getattr(stand_in, "__init__", None), getattr(stand_in, "forward", None)):
        for cell in getattr(function, "__closure__", None) or ():
            if hasattr(cell.cell_contents, "ask"):
                return cell.cell_contents
    raise RuntimeError("no stand-ins found")
'''

FLOOD_MASK = STANDINS + '''
def padding_mask(lengths, n):
    """Asks the causal_mask stand-in for 32768 x 32768 (a billion entries), then says what happened."""
    try:
        causal_mask(32768, 32768)
        outcome = "built"
    except Exception as error:
        outcome = f"refused ({error})"
    raise RuntimeError(f"flood: {outcome}")
'''

RAW_REQUESTS = STANDINS + '''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    """Raw requests to the grader, past what the stand-ins send, then says what happened to each."""
    import torch
    standins = _standins(TinyLM)
    outcomes = []
    for label, request in (
            ("call", ("call", "TinyLM", [50000, 4096, 8, 8, 4096], {}, {}, [], False)),
            ("new", ("new", "TinyLM", [50000, 4096, 8, 8, 4096], {}, 0)),
            ("rng", ("new", "CausalSelfAttention", [16, 4], {}, torch.zeros(5056, dtype=torch.uint8)))):
        try:
            standins.ask(*request)
            outcomes.append(f"{label} answered")
        except Exception as error:
            outcomes.append(f"{label} refused ({error})")
    raise RuntimeError("raw: " + "; ".join(outcomes))
'''

ORACLE_FIT = '''
    def fit(self, x, y, steps=100, lr=0.05):
        """Trains nothing: asks the grader for the reference fit's losses."""
        forward = type(self).forward
        standins = next(c.cell_contents for c in forward.__closure__ if hasattr(c.cell_contents, "method_of"))
        return standins.method_of("LearnedKernelRegression", "fit")(self, x, y, steps=steps, lr=lr)
'''

STUB_FIT = '''
    def fit(self, x, y, steps=100, lr=0.05):
        raise NotImplementedError()
'''

SLOW_TILES = STANDINS + '''
_ASKED = []


def hbm_traffic(n, d, sram_elems, method):
    """Once, asks the tiled_attention stand-in for 1x1 tiles over 1200 positions; then correct."""
    if not _ASKED:
        import torch
        _ASKED.append(True)
        q = torch.randn(1, 1200, 1)
        tiled_attention(q, q, q, block_q=1, block_k=1)
        raise RuntimeError("slow tiles: answered")
    if method == "standard":
        return 4 * n * d + 4 * n * n
    block_k = math.ceil(sram_elems / (4 * d))
    passes = math.ceil(n / block_k)
    return (n * d + 2 * n) + 2 * n * d + passes * (3 * n * d + 4 * n)
'''


def with_fit(body):
    source = reference_solutions(A6)["LearnedKernelRegression"]
    return re.sub(r"\n    def fit\(.*", body.rstrip("\n"), source, flags=re.S)


def watch(process):
    """The grader's peak resident memory (bytes) and its own CPU time (seconds), read until it ends."""
    seen = {"peak": 0, "cpu": 0.0}

    def read():
        ticks = __import__("os").sysconf("SC_CLK_TCK")
        while process.poll() is None:
            try:
                with open(f"/proc/{process.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            seen["peak"] = max(seen["peak"], int(line.split()[1]) * 1024)
                with open(f"/proc/{process.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                seen["cpu"] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime: its own, not its children's
            except (OSError, IndexError, ValueError):
                return
            time.sleep(0.05)
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return seen, thread


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference-attacks")
    submissions = root / "submissions"
    for a in (A5, A6, A7):
        write(filled_notebook(a), submissions / "control" / a / f"{a}.ipynb")
    write(filled_notebook(A5, {"padding_mask": FLOOD_MASK, "generate": RAW_REQUESTS}),
          submissions / "attacker" / A5 / f"{A5}.ipynb")
    write(filled_notebook(A6, {"LearnedKernelRegression": with_fit(ORACLE_FIT)}), submissions / "attacker" / A6 / f"{A6}.ipynb")
    write(filled_notebook(A7, {"hbm_traffic": SLOW_TILES}), submissions / "attacker" / A7 / f"{A7}.ipynb")
    write(filled_notebook(A6, {"LearnedKernelRegression": with_fit(STUB_FIT)}), submissions / "stubfit" / A6 / f"{A6}.ipynb")
    process = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(root / "out"),
                                "-j", "1", "--call-seconds", "8"], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen, thread = watch(process)
    output, _ = process.communicate(timeout=900)
    thread.join()
    assert process.returncode == 0, output
    with open(root / "out" / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, seen


def score(rows, student, assignment, exercise=None):
    return sum(float(r["score"]) for r in rows if r["student"] == student and r["assignment"] == assignment
               and exercise in (None, r["exercise"]))


def message(rows, student, assignment, exercise):
    return " ".join(r["message"] for r in rows if (r["student"], r["assignment"], r["exercise"]) == (student, assignment, exercise))


def test_the_grader_neither_grows_nor_works_for_the_attacker(attacked):
    rows, seen = attacked
    print(f"the grader's peak resident memory: {seen['peak'] / 2**20:.0f} MB, its own CPU time: {seen['cpu']:.1f} s")
    assert 0 < seen["peak"] < 2**30
    assert 0 < seen["cpu"] < 40  # the 1x1 tiles alone once took 72 s of it


def test_each_attack_is_refused_or_stopped_in_its_own_exercise(attacked):
    rows, _ = attacked
    flood = message(rows, "attacker", A5, "padding_mask")
    assert "flood: refused" in flood and "numbers" in flood, flood
    raw = message(rows, "attacker", A5, "generate")
    assert "call refused" in raw and "new refused" in raw and "rng refused" in raw, raw
    tiles = message(rows, "attacker", A7, "hbm_traffic")
    assert "time limit" in tiles and "slow tiles: answered" not in tiles, tiles
    for assignment, wrong in ((A5, {"padding_mask", "generate"}), (A7, {"hbm_traffic"}), (A6, {"LearnedKernelRegression"})):
        for row in rows:
            if row["student"] == "attacker" and row["assignment"] == assignment and row["exercise"] not in wrong:
                assert float(row["score"]) == float(row["max_score"]), row


def test_an_oracle_fit_scores_what_a_stub_fit_scores(attacked):
    rows, _ = attacked
    oracle = score(rows, "attacker", A6, "LearnedKernelRegression")
    stub = score(rows, "stubfit", A6, "LearnedKernelRegression")
    print(f"LearnedKernelRegression: oracle fit {oracle:.3g}, stub fit {stub:.3g}")
    assert oracle == stub < score(rows, "control", A6, "LearnedKernelRegression")


def test_the_control_keeps_full_marks(attacked):
    rows, _ = attacked
    control = [r for r in rows if r["student"] == "control"]
    assert len(control) == 8 + 8 + 4  # every exercise of the three chapters
    for row in control:
        assert float(row["score"]) == float(row["max_score"]), row
