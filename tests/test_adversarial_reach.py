"""The attacks of tests/adversarial/reach.py, graded in one run with one worker beside honest
students who come after them: each attacker gets exactly what it earned, and each honest
student what it gets in a run without attackers."""
import csv
import shutil

import nbformat
import pytest
from adversarial.reach import CASES
from conftest import BIN, run
from submissions import filled_notebook, student_notebook, write

from autograder.checks import exercise_checks
from autograder.notebook import exercises
from autograder.sandbox.isolation import bubblewrap_works

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed: the attacks "
                                "need isolation (`apt-get install bubblewrap`; make's set-up does it)")
CHAPTERS = sorted({case.assignment for case in CASES.values()})
HONEST = {"z-honest": lambda a: filled_notebook(a),
          "z-honest-partial": lambda a: filled_notebook(a, untouched=[exercises(a)[0].name])}


def notebook_of(case):
    nb = filled_notebook(case.assignment, case.solutions) if case.base == "reference" else student_notebook(case.assignment)
    if case.cell:
        first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(first_code + 1 if case.position == "start" else len(nb.cells),
                        nbformat.v4.new_code_cell(case.cell))
    return nb


def earned(case):
    """What the case must get: 0, or a reference notebook's points less the checks it must fail."""
    if case.nothing:
        return 0.0
    total = 0.0
    for exercise in exercises(case.assignment):
        for check, points in exercise_checks(case.assignment, exercise.name):
            if not any(check.name.startswith(prefix) for prefix in case.loses):
                total += points
    return round(total, 6)


def totals(out):
    result = {}
    with open(out / "grades.csv") as f:
        for row in csv.DictReader(f):
            key = (row["student"], row["assignment"])
            result[key] = round(result.get(key, 0.0) + float(row["score"]), 6)
    return result


def grade(submissions, out):
    run(BIN / "python", "-m", "autograder", "grade", submissions, "--out", out, "-j", "1", "--quiet", timeout=1200)
    return totals(out)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("reach")
    for name, case in CASES.items():
        write(notebook_of(case), base / "class" / name / case.assignment / f"{case.assignment}.ipynb")
    for name, make in HONEST.items():
        for a in CHAPTERS:
            write(make(a), base / "class" / name / a / f"{a}.ipynb")
            if a == "01-weights":  # the cheap chapter, graded once more without any attacker
                write(make(a), base / "honest" / name / a / f"{a}.ipynb")
    return grade(base / "class", base / "class-grades"), grade(base / "honest", base / "honest-grades")


def test_the_sandbox_runs():
    assert bubblewrap_works()


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_attack_gets_exactly_what_it_earned(name, graded):
    case = CASES[name]
    assert graded[0][(name, case.assignment)] == earned(case), case.guarantee


def test_honest_students_after_the_attackers_lose_nothing(graded):
    with_attackers, alone = graded
    for (student, assignment), total in alone.items():
        assert with_attackers[(student, assignment)] == total, (student, assignment)
    full = {a: sum(e.points for e in exercises(a)) for a in CHAPTERS}
    for a in CHAPTERS:
        assert with_attackers[("z-honest", a)] == full[a], a
