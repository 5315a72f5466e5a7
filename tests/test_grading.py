"""Both graders on every assignment: the reference scores full marks, the untouched notebook 0,
a differently written correct solution full marks, every wrong implementation loses points in
its own exercise and nowhere else, and nbgrader's points equal the autograder's, exercise by
exercise.

The autograder grades every wrong implementation, packed: a notebook holds one wrong
implementation of every other exercise (the k-th of each), so that the exercises on both sides
of each bug are right and show any points it costs outside its own exercise (the grader puts
known-good code in place of the exercises already graded: a bug does not travel forward). With
MUTANTS_ALONE=1 each wrong implementation gets a notebook of its own (about twice the notebooks).

Two of those notebooks are *mixed*: they hold the first wrong implementation of every other
exercise and the alternative solution of the rest (between them, one of each), so they show
that every differently written answer keeps full marks next to bugs, with no notebook of
alternatives alone. Both graders grade them, with the reference and untouched notebooks:
nbgrader's route (without the `explore` cells) shows that both give the same points to the same
bugs and full marks to the same differently written answers. Every chapter's are graded as
nbgrader's kernel runs them (`nbgrader_kernel.py`: the course's checks in the notebook's own
process, scored by nbgrader's own rule, in about half nbgrader's time); nbgrader itself grades
one chapter's, and gives the same points (test_nbgrader_route runs its commands on chapter 1 as
the instructors' page shows them). The students' `check` runs on the mixed notebooks too, and
blames only what `grade` charges (test_selfcheck's agreement)."""
import csv
import os
import re
import shutil
from collections import defaultdict

import nbformat
import pytest
from conftest import BIN, REPO, run
from mutants import catalogue
from submissions import filled_notebook, student_id, student_notebook, write

from autograder import assignments
from autograder.notebook import exercises, is_explore_cell
from autograder.stated import fresh_seed

ASSIGNMENTS = assignments()
MUTANTS = [(a, exercise, name) for a in ASSIGNMENTS for exercise, variants in catalogue(a).WRONG.items()
           for name in variants]


def mixed_bugs(a, parity):
    """The first wrong implementation of every other exercise (in the notebook's order), starting at
    exercise `parity`."""
    return {e: next(iter(variants)) for k, (e, variants) in enumerate(catalogue(a).WRONG.items()) if k % 2 == parity}


def mixed(a, parity):
    """The alternative solution of every exercise, then mixed_bugs(a, parity) in place of some."""
    return {**catalogue(a).ALTERNATIVE, **{e: catalogue(a).WRONG[e][v] for e, v in mixed_bugs(a, parity).items()}}


def packed(a):
    """{student: {exercise: variant}}: the wrong implementations of `a`, one notebook each with
    MUTANTS_ALONE=1, else the k-th variant of every other exercise together: the mixed notebooks
    for k = 0, a notebook with the reference in the other exercises for each k > 0."""
    wrong = catalogue(a).WRONG
    if os.environ.get("MUTANTS_ALONE") == "1":
        return {student_id(e, v): {e: v} for e, variants in wrong.items() for v in variants}
    notebooks = {f"mixed-{parity}": mixed_bugs(a, parity) for parity in (0, 1)}
    for position, (e, variants) in enumerate(wrong.items()):
        for k, v in enumerate(variants):
            if k > 0:
                notebooks.setdefault(f"wrong-{position % 2}-{k}", {})[e] = v
    return notebooks


PACKED = {a: packed(a) for a in ASSIGNMENTS}
NOTEBOOK_OF = {(a, e, v): student for a in ASSIGNMENTS for student, bugs in PACKED[a].items() for e, v in bugs.items()}


NBGRADER_STUDENTS = ["reference", "untouched", "mixed-0", "mixed-1"]


def build_submissions(root):
    for a in ASSIGNMENTS:
        name = f"{a}.ipynb"
        write(filled_notebook(a), root / "reference" / a / name)
        write(student_notebook(a), root / "untouched" / a / name)
        for parity in (0, 1):
            write(filled_notebook(a, mixed(a, parity)), root / f"mixed-{parity}" / a / name)
        for student, bugs in PACKED[a].items():
            if not student.startswith("mixed-"):
                write(filled_notebook(a, {e: catalogue(a).WRONG[e][v] for e, v in bugs.items()}), root / student / a / name)


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    root = tmp_path_factory.mktemp("course") / "submitted"
    build_submissions(root)
    return root


# One seed for both graders (nbgrader's kernels read it from $AUTOGRADER_SEED): the stated rules draw
# the same inputs in both, so a wrong answer right on some inputs (a softmax that forgets to rescale,
# right where each row's maximum is in its first block) is charged alike. A new one each run.
SEED = str(fresh_seed())


@pytest.fixture(scope="module")
def autograder_out(submissions, tmp_path_factory):
    """The output folder of `python -m autograder grade` over every submission."""
    out = tmp_path_factory.mktemp("grades")
    run(BIN / "python", "-m", "autograder", "grade", submissions, "--out", out, "-j", "2", "--quiet", "--seed", SEED)
    return out


@pytest.fixture(scope="module")
def autograder_points(autograder_out):
    """{(student, assignment): {exercise: score}} from `python -m autograder grade`."""
    out = autograder_out
    points = defaultdict(dict)
    with open(out / "grades.csv") as f:
        for row in csv.DictReader(f):
            points[row["student"], row["assignment"]][row["exercise"]] = float(row["score"])
    return points


def without_explore(source, dest):
    """The notebook without its `explore` cells (plots, training runs: most of nbgrader's time). They
    are unlocked cells a student may delete; the autograder skips them, and test_release proves no
    other cell reads a name only they define, so the points are the same with or without them."""
    notebook = nbformat.read(source, as_version=4)
    notebook.cells = [c for c in notebook.cells if not is_explore_cell(c)]
    dest.parent.mkdir(parents=True)
    nbformat.write(notebook, dest)


# nbgrader itself grades one chapter's notebooks: chapter 4's, whose checks load a transformers model
# (a library's warning on stderr would cost a cell its points in nbgrader's kernel), in under half
# the time of chapter 10's
NBGRADER_ITSELF = "04-multi-head"


@pytest.fixture(scope="module")
def nbgrader_submissions(submissions, tmp_path_factory):
    """nbgrader's share of the submissions, in a course directory of its own."""
    course = tmp_path_factory.mktemp("nbgrader-course")
    for student in NBGRADER_STUDENTS:
        for a in ASSIGNMENTS:
            without_explore(submissions / student / a / f"{a}.ipynb", course / "submitted" / student / a / f"{a}.ipynb")
    return course


@pytest.fixture(scope="module")
def nbgrader_points(nbgrader_submissions):
    """{(student, assignment): {exercise: score}} as nbgrader's autograde gives them, every chapter's
    notebooks graded as its kernel runs them (nbgrader_kernel.py)."""
    import json
    out = nbgrader_submissions / "points.json"
    run(BIN / "python", REPO / "tests" / "nbgrader_kernel.py", out,
        *sorted((nbgrader_submissions / "submitted").glob("*/*/*.ipynb")), AUTOGRADER_SEED=SEED)
    return {tuple(key.split("/")): scores for key, scores in json.loads(out.read_text()).items()}


@pytest.fixture(scope="module")
def nbgrader_course(nbgrader_submissions):
    """The course directory, NBGRADER_ITSELF's notebooks graded by nbgrader's own autograde."""
    course = nbgrader_submissions
    shutil.copytree(REPO / "solutions" / NBGRADER_ITSELF, course / "solutions" / NBGRADER_ITSELF)
    flags = [f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{course}/gradebook.db"]
    run(BIN / "nbgrader", "generate_assignment", NBGRADER_ITSELF, "--force", *flags)
    run(BIN / "nbgrader", "autograde", NBGRADER_ITSELF, "--create", "--force", *flags, AUTOGRADER_SEED=SEED)
    return course, flags


@pytest.fixture(scope="module")
def nbgraders_own_points(nbgrader_course):
    from nbgrader.api import Gradebook
    course, _ = nbgrader_course
    points = defaultdict(dict)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gradebook:
        for submission in gradebook.assignment_submissions(NBGRADER_ITSELF):
            notebook = gradebook.find_submission_notebook(NBGRADER_ITSELF, NBGRADER_ITSELF, submission.student.id)
            for grade in notebook.grades:
                if grade.name.startswith("test_"):
                    points[submission.student.id, NBGRADER_ITSELF][grade.name[len("test_"):]] = grade.score
    return points


def full_marks(a):
    return {e.name: e.points for e in exercises(a)}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_and_alternative_score_full_marks(assignment, autograder_points, nbgrader_points):
    full = full_marks(assignment)
    assert autograder_points["reference", assignment] == full
    assert nbgrader_points["reference", assignment] == pytest.approx(full)
    for parity in (0, 1):  # the alternative solutions are in the mixed notebooks, beside the bugs
        right = {e: p for e, p in full.items() if e not in mixed_bugs(assignment, parity)}
        for grader, points in (("autograder", autograder_points), ("nbgrader", nbgrader_points)):
            got = points[f"mixed-{parity}", assignment]
            assert {e: got[e] for e in right} == pytest.approx(right), f"{grader}, mixed-{parity}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_notebook_scores_zero(assignment, autograder_points, nbgrader_points):
    zero = {e: 0.0 for e in full_marks(assignment)}
    assert autograder_points["untouched", assignment] == zero
    assert nbgrader_points["untouched", assignment] == zero


@pytest.mark.parametrize("assignment,exercise,variant", MUTANTS)
def test_wrong_implementation_loses_points_in_its_exercise_only(assignment, exercise, variant, autograder_points):
    student = NOTEBOOK_OF[assignment, exercise, variant]
    got = autograder_points[student, assignment]
    full = full_marks(assignment)
    assert got[exercise] < full[exercise], f"{variant} keeps all the points of {exercise}"
    right = {e: score for e, score in got.items() if e not in PACKED[assignment][student]}
    assert right == {e: full[e] for e in right}, \
        f"{variant} of {exercise} costs points elsewhere (notebook {student}: {PACKED[assignment][student]})"


def test_check_blames_only_what_grade_charges_in_the_mixed_notebooks(submissions, autograder_points):
    """test_selfcheck's agreement of `check` with `grade` (`misblamed`), on the mixed notebooks: the
    first wrong implementation of every exercise, beside alternative solutions `check` must not blame."""
    from test_selfcheck import misblamed, verdicts_of
    wrong = []
    for a in ASSIGNMENTS:
        for parity in (0, 1):
            student = f"mixed-{parity}"
            verdicts, blocks = verdicts_of(submissions / student / a / f"{a}.ipynb", a)
            wrong += misblamed(a, student, set(mixed_bugs(a, parity)), verdicts, autograder_points[student, a], blocks)
    assert not wrong, "\n".join(wrong)


def test_nbgrader_and_autograder_agree_on_every_exercise(autograder_points, nbgrader_points):
    assert set(nbgrader_points) == {(s, a) for s in NBGRADER_STUDENTS for a in ASSIGNMENTS}
    for key, scores in nbgrader_points.items():
        assert scores == pytest.approx(autograder_points[key], abs=1e-6), key


def test_nbgrader_itself_gives_the_points_its_kernel_gives(nbgrader_points, nbgraders_own_points):
    assert set(nbgraders_own_points) == {(s, NBGRADER_ITSELF) for s in NBGRADER_STUDENTS}
    for key, scores in nbgraders_own_points.items():
        assert scores == pytest.approx(nbgrader_points[key], abs=1e-6), key


def test_nbgrader_feedback_and_export(nbgrader_course):
    course, flags = nbgrader_course
    a = NBGRADER_ITSELF
    run(BIN / "nbgrader", "generate_feedback", a, "--force", *flags)
    page = (course / "feedback" / "reference" / a / f"{a}.html").read_text()
    total = sum(full_marks(a).values())
    assert re.search(rf"\(Score: {total:g}(\.0+)? / {total:g}(\.0+)?\)", page), f"{a}: no full score on the page"
    for e, points in full_marks(a).items():  # each exercise's graded cell, at full marks, with its report
        assert re.search(rf'href="#test_{e}">Test cell</a> \(Score: {points:g}(\.0+)? / {points:g}', page), e
        assert f"{e}: {points:g} / {points:g} points" in page, e
    pages = list((course / "feedback").glob(f"*/{a}/{a}.html"))
    assert len(pages) == len(NBGRADER_STUDENTS)
    for page in pages:
        text = page.read_text()
        assert "HIDDEN TESTS" not in text and "import grade" not in text, page
    run(BIN / "nbgrader", "export", f"--to={course}/grades.csv", *flags)
    with open(course / "grades.csv") as f:
        rows = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    assert rows["reference", a] == total and rows["untouched", a] == 0


def said_twice(message):
    """The description a message gives on both sides of ", expected " ("float32 tensor of shape
    (3, 4), expected float32 tensor of shape (3, 4)"), or None: such a message hides what differs."""
    for found in re.finditer(r", expected ", message):
        before, after = message[:found.start()], message[found.end():]
        for n in range(min(len(before), len(after), 100), 0, -1):  # whole words or numbers on both sides
            if (before.endswith(after[:n]) and after[n:n + 1] in ("", " ", ",", ";", ":", ")")
                    and before[-n - 1:-n] in ("", " ", "(")):
                return after[:n]
    return None


def test_said_twice_finds_the_same_description_on_both_sides():
    assert said_twice("f(x): got float32 tensor of shape (3, 4), expected float32 tensor of shape (3, 4)")
    assert said_twice("f(x): value at index [2] is 0.5, expected 0.5 (1 of 3 entries differ)") == "0.5"
    assert not said_twice("f(x): value at index [2] is 0.5, expected 0.25 (1 of 3 entries differ)")
    assert not said_twice("f(x): expected dtype float64, got float32")
    assert not said_twice("f(x): the loss is 2, expected 2.5") and not said_twice("shape (3, 4), expected 4 rows")


def test_no_feedback_says_the_same_thing_on_both_sides_of_expected(autograder_out):
    """Issue 37: every message of every wrong implementation graded here says what differs (values,
    dtype, storage, gradient), never the same description twice."""
    import json
    found = []
    for entry in (autograder_out / ".journal").glob("*/*.json"):
        graded = json.loads(entry.read_text())["graded"]
        for exercise in graded["exercises"]:
            for check in exercise["checks"]:
                same = said_twice(check.get("message") or "")
                if same:
                    found.append(f"{entry.parent.name} {exercise['name']}: ...{same}, expected {same}...")
    assert not found, "\n".join(found[:20])
