"""Issue 30 §8: `check` runs the device rule wherever `grade` does. A causal mask left on the CPU
(chapters 5 and 8) and an apply_rope that makes its frequencies on the CPU were "ready" in `check`
and lost points in `grade`: now `check` fails the same exercise with the device rule, and `grade`
takes that rule's points, nothing else. The reference stays ready, with full marks; `check`'s
report names the rules that hold (§10)."""
import csv

import pytest
from conftest import BIN, run
from mutants import catalogue
from mutants.ch08_transformer import _rope
from submissions import filled_notebook, write

from autograder import selfcheck, stated
from autograder.checks import exercise_checks
from autograder.notebook import exercises
from autograder.stated.device import DEVICE_CHECK

CPU_FREQUENCIES = _rope(exponent="-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1]")  # no device=
BOOKS = {
    ("05-self-masked", "cpu-causal-mask"): {"CausalSelfAttention": catalogue("05-self-masked").WRONG[
        "CausalSelfAttention"]["cpu_causal_mask"]},
    ("08-transformer", "causal-mask-left-on-the-cpu"): {"GroupedQueryAttention": catalogue("08-transformer").WRONG[
        "GroupedQueryAttention"]["causal_mask_left_on_the_cpu"]},
    ("08-transformer", "rope-frequencies-on-the-cpu"): {"apply_rope": CPU_FREQUENCIES},
    ("08-transformer", "reference"): {},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{(assignment, name): (check's report, its blocks, {exercise: grade's points})}."""
    root = tmp_path_factory.mktemp("device")
    for (a, name), bugs in BOOKS.items():
        write(filled_notebook(a, bugs), root / "submitted" / name / a / f"{a}.ipynb")
    run(BIN / "python", "-m", "autograder", "grade", root / "submitted", "--out", root / "out", "-j", "2", "--quiet")
    points = {}
    with open(root / "out" / "grades.csv") as f:
        for row in csv.DictReader(f):
            points.setdefault((row["assignment"], row["student"]), {})[row["exercise"]] = float(row["score"])
    found = {}
    for (a, name) in BOOKS:
        path = root / "submitted" / name / a / f"{a}.ipynb"
        text, _ = selfcheck.main(path, a)
        found[a, name] = (text, selfcheck.check(path, a), points[a, name])
    return found


def device_share(a, exercise):
    return next(points for check, points in exercise_checks(a, exercise) if check.name.startswith(DEVICE_CHECK))


@pytest.mark.parametrize("a, name", [key for key in BOOKS if key[1] != "reference"])
def test_a_device_bug_fails_check_and_costs_the_device_points_in_grade(graded, a, name):
    (exercise,) = BOOKS[a, name]
    text, blocks, points = graded[a, name]
    said = {b.title.split(" (")[0]: b for b in blocks[1:]}
    failures = [t for s, t in said[exercise].lines if s == selfcheck.FAIL]
    assert failures and all(t.startswith(f"a rule its text states, {DEVICE_CHECK}") for t in failures), text
    assert "emulated GPU" in failures[0] and "made on the CPU" in failures[0]
    assert not [e for e, b in said.items() if e != exercise and b.problems], text  # the later ones wait at most
    assert not text.splitlines()[-1].startswith("All"), text
    full = {e.name: e.points for e in exercises(a)}
    assert points[exercise] == pytest.approx(full[exercise] - device_share(a, exercise), abs=1e-5)
    assert {e: p for e, p in points.items() if e != exercise} == {e: p for e, p in full.items() if e != exercise}


def test_the_reference_is_ready_with_full_marks_and_its_rules_named(graded):
    text, blocks, points = graded["08-transformer", "reference"]
    assert text.splitlines()[-1].startswith("All 7 exercises ready"), text
    assert points == {e.name: e.points for e in exercises("08-transformer")}
    said = {b.title.split(" (")[0]: b for b in blocks[1:]}
    for exercise in ("apply_rope", "GroupedQueryAttention", "DecoderBlock"):
        rules = stated.properties("08-transformer", exercise) + stated.device_rules("08-transformer", exercise)
        names = [selfcheck.short_name(r.name) for r in rules]
        assert "keeps the input's device" in names
        line = f"the rules its text states, which the grader checks too, hold: {'; '.join(names)}"
        assert (selfcheck.OK, line) in said[exercise].lines, said[exercise].lines
