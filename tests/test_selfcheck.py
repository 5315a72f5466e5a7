"""`python -m autograder check NOTEBOOK`, the student's pre-flight check, on chapter 1's notebook:
what it says of a solved notebook, of the untouched one and of each mistake that costs points at
grading, and that it never shows a line of the hidden checks."""
import ast
import shutil

import nbformat
import pytest
from conftest import BIN, REPO, run
from submissions import filled_notebook, reference_solutions, student_notebook, write

from autograder import assignments, selfcheck
from autograder.checks import exercise_checks
from autograder.notebook import exercises, nbgrader_meta
from autograder.sandbox.session import Limits

A = "01-weights"
NAMES = [e.name for e in exercises(A)]
LIMITS = Limits(cell_seconds=10, notebook_seconds=60)


def hidden():
    """The check names of 01-weights and the string literals (20 characters or more) of its checks."""
    tree = ast.parse((REPO / "autograder" / "checks" / "ch01_weights.py").read_text())
    literals = {node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 20}
    return literals | {check.name for name in NAMES for check, _ in exercise_checks(A, name)}


HIDDEN = hidden()
assert len(HIDDEN) > 20  # the check names and the checks' messages


def check(path, limits=LIMITS, assignment=None):
    text, status = selfcheck.main(path, assignment, limits)
    leaked = [s for s in HIDDEN if s in text]
    assert not leaked, f"the report shows the hidden checks: {leaked}\n{text}"
    return text, status


def block(text, exercise):
    """The report's block of one exercise, or of the notebook ("Notebook")."""
    return next(b for b in text.split("\n\n") if b.split("\n")[0].split(" (")[0] == exercise)


def cell_of(nb, grade_id):
    return next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == grade_id)


def code_number(nb, cell):
    """The cell's number among the code cells, as the student counts them."""
    return [c for c in nb.cells if c.cell_type == "code"].index(cell) + 1


def test_the_reference_solution_is_ready(tmp_path):
    text, status = check(write(filled_notebook(A), tmp_path / f"{A}.ipynb"))
    assert status == 0, text
    assert "FAIL" not in text and "All 5 exercises ready" in text.splitlines()[-1]
    assert "tagged `explore`, not run here nor by the autograder (nbgrader runs them)" in block(text, "Notebook")
    for name in NAMES:
        assert "ok    visible tests pass" in block(text, name) and f"ok    defines {name}" in block(text, name)


def test_the_untouched_notebook_says_not_implemented_for_each_exercise():
    result = run(BIN / "python", "-m", "autograder", "check", REPO / "notebooks" / A / f"{A}.ipynb", check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert not [s for s in HIDDEN if s in result.stdout]
    for name in NAMES:
        assert "FAIL  visible tests (code cell" in block(result.stdout, name)
        assert f"NotImplementedError (in {name}, code cell" in block(result.stdout, name)
    assert result.stdout.strip().splitlines()[-1] == "0 of 5 exercises ready; 5 problems to fix before you hand it in."


def test_usage_errors_exit_2(tmp_path):
    missing = run(BIN / "python", "-m", "autograder", "check", tmp_path / "nothing.ipynb", check=False)
    assert missing.returncode == 2 and "no such file" in missing.stderr
    path = write(student_notebook(A), tmp_path / f"{A}.ipynb")
    wrong = run(BIN / "python", "-m", "autograder", "check", path, "--assignment", "../solutions/01-weights", check=False)
    assert wrong.returncode == 2 and "no assignment" in wrong.stderr
    unknown = tmp_path / "notes.ipynb"
    unknown.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])))
    guess = run(BIN / "python", "-m", "autograder", "check", unknown, check=False)
    assert guess.returncode == 2 and "--assignment" in guess.stderr


def test_a_renamed_function_is_missing_at_grading(tmp_path):
    nb = filled_notebook(A)
    cell_of(nb, "hardmax").source = cell_of(nb, "hardmax").source.replace("def hardmax(", "def hard_max(")
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))
    assert status == 1
    assert "FAIL  hardmax: not defined once the notebook has run, and the grader calls it by this name" in block(text, "hardmax")
    assert "NameError: name 'hardmax' is not defined" in block(text, "hardmax")
    assert text.splitlines()[-1] == "4 of 5 exercises ready; 2 problems to fix before you hand it in."


def test_deleted_and_edited_test_and_check_cells(tmp_path):
    nb = filled_notebook(A)
    cell_of(nb, "test_hardmax").source = "print('I get full marks')"
    nb.cells.remove(cell_of(nb, "test_softmax"))
    nb.cells.remove(cell_of(nb, "check_entropy"))
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))
    assert status == 1, text  # nbgrader does not restore a deleted test cell
    assert "FAIL  graded test cell deleted: `python -m autograder grade` restores it, nbgrader does not" in block(text, "softmax")
    assert "note  graded test cell edited (code cell 6): your edit is ignored; the original is used" in block(text, "hardmax")
    assert "note  check cell deleted: the grader does not need it (its original ran here)" in block(text, "entropy")
    assert "ok    visible tests pass" in block(text, "entropy")  # the original ran, after the exercise's cell
    assert text.splitlines()[-1] == "4 of 5 exercises ready; 1 problem to fix before you hand it in."


def test_the_original_check_cell_runs_not_the_edited_one(tmp_path):
    nb = filled_notebook(A, {"weighted_average": "def weighted_average(items, weights):\n    return items.sum(axis=-2)"})
    check_cell = cell_of(nb, "check_weighted_average")
    check_cell.source = "print('all good')"
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))
    assert status == 1
    mine = block(text, "weighted_average")
    assert f"FAIL  visible tests (code cell {code_number(nb, check_cell)}): AssertionError: one-hot weights select one item" in mine
    assert f"note  check cell edited (code cell {code_number(nb, check_cell)}): your edit is ignored" in mine


def test_input_fails_at_grading(tmp_path):
    nb = filled_notebook(A, {"entropy": "def ask():\n    return input('base? ')\n\n" + reference_solutions(A)["entropy"]})
    nb.cells.append(nbformat.v4.new_code_cell("name = input('Your name? ')"))
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))
    assert status == 1
    last = len([c for c in nb.cells if c.cell_type == "code"])
    assert (f"FAIL  code cell {last}: RuntimeError: input() cannot be answered while the notebook is graded: "
            "remove it") in block(text, "Notebook")
    assert "FAIL  code cell 11 calls input(): a cell that waits for input fails at grading" in block(text, "entropy")


def test_a_cell_over_its_time_limit(tmp_path):
    nb = filled_notebook(A)
    nb.cells.append(nbformat.v4.new_code_cell("while True:\n    pass"))
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"), Limits(cell_seconds=1, notebook_seconds=60))
    assert status == 1
    assert "time limit: the cell ran for more than 1 s and was stopped" in block(text, "Notebook")
    assert text.splitlines()[-1] == "5 of 5 exercises ready; 1 problem to fix before you hand it in."


def test_a_syntax_error_costs_its_exercise_and_what_calls_it(tmp_path):
    nb = filled_notebook(A, {"entropy": "def entropy(weights, axis=-1):\n    return (("})
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))
    assert status == 1
    mine = block(text, "entropy")
    assert "note  code cell 11: SyntaxError" in mine and "nothing in it ran" in mine
    assert "FAIL  entropy: not defined once the notebook has run" in mine
    # effective_count calls entropy: its visible tests fail here (at grading it gets a correct entropy),
    # so it is neither ready nor blamed
    theirs = block(text, "effective_count")
    assert "wait  visible tests" in theirs and "NameError: name 'entropy' is not defined" in theirs
    assert "this may come from entropy (see above): `grade` checks effective_count with correct versions" in theirs
    assert "FAIL" not in theirs
    assert text.splitlines()[-1] == ("3 of 5 exercises ready; 2 problems to fix before you hand it in; "
                                     "1 exercise to check again once they are fixed.")


def test_an_exercise_waits_only_for_the_earlier_ones_its_code_uses(tmp_path):
    """Chapter 8 with three bugs: float32 angles in sinusoidal_positions, which nothing else uses;
    `repeat` for `repeat_interleave` in GroupedQueryAttention; RMSNorm's eps at 1e-5. A student read
    every later failure as "may come from sinusoidal_positions". Now GroupedQueryAttention's failures
    are its own (FAIL), so is DecoderBlock's RMSNorm rule, its cache rule (whose known answer needs
    a right attention) and block_from_llama wait for the ones they build on. With GroupedQueryAttention's positions not offset by the cache instead, DecoderBlock's
    cache rule, which runs that attention, waits for it."""
    from mutants import catalogue
    a, wrong = "08-transformer", catalogue("08-transformer").WRONG

    def checked(attention):
        nb = filled_notebook(a, {"sinusoidal_positions": wrong["sinusoidal_positions"]["angles_in_float32"],
                                 "GroupedQueryAttention": wrong["GroupedQueryAttention"][attention],
                                 "DecoderBlock": wrong["DecoderBlock"]["default_eps_1e_5"]})
        text, status = selfcheck.main(write(nb, tmp_path / attention / f"{a}.ipynb"), a)
        assert status == 1 and "sinusoidal_positions (see above)" not in text, text
        return text, block(text, "DecoderBlock").splitlines()

    text, block_lines = checked("repeat_not_repeat_interleave")
    attention = block(text, "GroupedQueryAttention")
    assert "  FAIL  visible tests" in attention and "  wait  " not in attention, text
    problems = [line for line in block_lines if line.startswith(("  FAIL", "  wait"))]
    # its cache rule runs its own attention, whose head mapping is wrong: `check` knows the block's
    # answer only for a right attention, so it waits (`grade` gives the block a correct attention)
    assert len(problems) == 2 and problems[0].startswith("  FAIL  a rule its text states, RMSNorm(dim)"), text
    assert problems[1].startswith("  wait  a rule its text states, with a KVCache") and \
        "this may come from GroupedQueryAttention (see above)" in problems[1], text
    assert "this may come from GroupedQueryAttention, DecoderBlock (see above)" in block(text, "block_from_llama")
    assert "FAIL" not in block(text, "block_from_llama") and block(text, "kv_cache_bytes").count("  ok  ") == 3
    assert text.splitlines()[-1] == ("3 of 7 exercises ready; 4 problems to fix before you hand it in; "
                                     "1 exercise to check again once they are fixed."), text

    text, block_lines = checked("positions_not_offset_by_the_cache")
    assert any(line.startswith("  FAIL  a rule its text states, RMSNorm(dim) as built") for line in block_lines), text
    assert any(line.startswith("  wait  a rule its text states, with a KVCache") and
               "this may come from GroupedQueryAttention (see above)" in line for line in block_lines), text


def test_a_line_that_raises_after_the_def_costs_nothing_and_check_says_so(tmp_path):
    """A leftover call after the solution's `def`: the function is defined and right, `grade` notes the
    error and charges nothing (nbgrader runs on too): `check` says so instead of FAIL."""
    nb = filled_notebook(A, {"entropy": reference_solutions(A)["entropy"] + "\nentropy(undefined_name)\n"})
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))
    assert status == 0, text
    mine = block(text, "entropy")
    assert "note  code cell 11: NameError: name 'undefined_name' is not defined" in mine
    assert "This costs no points by itself (the grader notes it), but the lines after the error did not run" in mine
    assert "FAIL" not in text and "All 5 exercises ready" in text.splitlines()[-1]


def test_an_unreadable_file(tmp_path):
    path = write(filled_notebook(A), tmp_path / f"{A}.ipynb")
    path.write_bytes(path.read_bytes()[:500])
    text, status = check(path)
    assert status == 1
    assert "cannot be read, so it cannot be graded" in text and "is not a valid notebook file (invalid JSON" in text


def test_a_notebook_with_another_name_is_found_by_its_cells_and_told_to_be_renamed(tmp_path):
    text, status = check(write(filled_notebook(A), tmp_path / "my work.ipynb"))
    assert status == 1 and text.startswith(f"my work.ipynb: {A} (12 points)")
    assert f"FAIL  the grader looks for {A}.ipynb: rename the file before you hand it in" in block(text, "Notebook")
    assert text.splitlines()[-1] == "5 of 5 exercises ready; 1 problem to fix before you hand it in."


def test_a_browser_renamed_notebook_is_graded_as_its_assignment_with_a_note(tmp_path):
    """Issue 36 §4: `grade` and Gradescope grade `Copy of <a>.ipynb` as <a> (notebook.assignment_of_filename)."""
    text, status = check(write(filled_notebook(A), tmp_path / f"Copy of {A}.ipynb"))
    assert status == 0 and text.startswith(f"Copy of {A}.ipynb: {A} (12 points)")
    assert f"note  Copy of {A}.ipynb is graded as {A}.ipynb" in block(text, "Notebook")
    assert "FAIL" not in text


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap's isolation")
def test_a_notebook_cannot_read_the_solutions_or_checks_through_the_report(tmp_path):
    """The check prints the student's own error messages back: a cell that reads the reference
    solutions or the hidden checks and raises with their text must find nothing to raise."""
    nb = filled_notebook(A)
    steal = (f"import glob\nfiles = glob.glob('{REPO}/solutions/*/*.ipynb') + glob.glob('{REPO}/autograder/checks/*.py')\n"
             f"raise RuntimeError(' '.join(open(f).read()[-250:] for f in files) or "
             f"open('{REPO}/autograder/checks/ch01_weights.py').read())")
    nb.cells.append(nbformat.v4.new_code_cell(steal))
    nb.cells.append(nbformat.v4.new_code_cell("import autograder.checks.ch01_weights as c\nraise RuntimeError(str(vars(c)))"))
    text, status = check(write(nb, tmp_path / f"{A}.ipynb"))  # `check` asserts no hidden line is shown
    assert status == 0, text  # cells that raise cost nothing by themselves: notes
    assert "FileNotFoundError" in block(text, "Notebook") and "ModuleNotFoundError" in block(text, "Notebook")
    assert block(text, "Notebook").count("This costs no points by itself") == 2


def test_a_students_copy_without_solutions_checks_but_does_not_grade(tmp_path):
    """A student's copy of the course has the package and notebooks/, not solutions/: `check`
    works from the released notebooks; `grade` refuses (it would grade against stubs)."""
    copy = tmp_path / "course"
    run("make", "--no-print-directory", "-C", REPO, "student-copy", f"DEST={copy}")
    assert not (copy / "solutions").exists() and not (copy / "autograder" / "checks").exists()
    solved = write(filled_notebook(A), tmp_path / f"{A}.ipynb")
    # the hidden checks' code may be left out of the copy: `check` never imports it
    script = ("import sys; from autograder import cli; status = cli.main(['check', sys.argv[1]]); "
              "print('checks imported:', 'autograder.checks' in sys.modules); sys.exit(status)")
    result = run(BIN / "python", "-c", script, solved, cwd=copy, check=False)
    assert result.returncode == 0 and "All 5 exercises ready" in result.stdout, result.stdout + result.stderr
    assert "checks imported: False" in result.stdout
    untouched = write(student_notebook(A), tmp_path / "untouched" / f"{A}.ipynb")
    result = run(BIN / "python", "-m", "autograder", "check", untouched, cwd=copy, check=False)
    assert result.returncode == 1 and "NotImplementedError" in block(result.stdout, "softmax")
    (tmp_path / "class" / "ada" / A).mkdir(parents=True)
    shutil.copy(solved, tmp_path / "class" / "ada" / A)
    result = run(BIN / "python", "-m", "autograder", "grade", tmp_path / "class", "--out", tmp_path / "grades",
                 cwd=copy, check=False)
    assert result.returncode == 2 and "grading needs the course's solutions/ folder" in result.stderr


def test_an_exercise_the_course_does_not_know_says_which_files_to_add(tmp_path):
    """A chapter being added (solutions/08-mine, a copy of chapter 1): `check` and `grade` name the
    file that is missing and point to the contributors' guide, with no traceback."""
    course, mine = tmp_path / "course", "08-mine"
    shutil.copytree(REPO / "autograder", course / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "solutions" / A, course / "solutions" / A)
    shutil.copytree(REPO / "notebooks" / A, course / "notebooks" / A)
    (course / "solutions" / mine).mkdir()
    shutil.copy(REPO / "solutions" / A / f"{A}.ipynb", course / "solutions" / mine / f"{mine}.ipynb")
    solved = write(filled_notebook(A), tmp_path / "class" / "ada" / mine / f"{mine}.ipynb")
    guide = 'see CONTRIBUTING.md ("Adding a chapter")'
    assert "## Adding a chapter" in (REPO / "CONTRIBUTING.md").read_text()

    def autograder(*args):
        result = run(BIN / "python", "-m", "autograder", *args, cwd=course, check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
        return result.stderr.strip().splitlines()[-1]

    assert autograder("check", solved) == (
        f"python -m autograder: error: {mine} has no student notebook notebooks/{mine}/{mine}.ipynb to check against: "
        f"generate it from solutions/{mine} with `make release`; {guide}")
    grade = ("grade", tmp_path / "class", "--out", tmp_path / "grades", "-j", "1", "--quiet")
    assert autograder(*grade) == (
        f"python -m autograder: error: {mine} has no checks, so it cannot be graded: add autograder/checks/ch08_mine.py, "
        f"with ASSIGNMENT = '{mine}' and checks for each of its exercises ({', '.join(NAMES)}); {guide}")
    copied = (REPO / "autograder" / "checks" / "ch01_weights.py").read_text()
    (course / "autograder" / "checks" / "ch08_mine.py").write_text(copied)  # still registering for 01-weights
    assert autograder(*grade) == (f"python -m autograder: error: autograder/checks/ch08_mine.py must set "
                                  f"ASSIGNMENT = '{mine}' (it sets '{A}'); {guide}")
    # ASSIGNMENT set, but the checks of one exercise left out: its points could never be earned
    mine_checks = copied.replace(f'ASSIGNMENT = "{A}"', f'ASSIGNMENT = "{mine}"')
    mine_checks = mine_checks.replace('equals("entropy", ', 'equals("entropy_", ').replace('check("entropy", ', 'check("entropy_", ')
    assert 'equals("entropy", ' not in mine_checks and 'check("entropy", ' not in mine_checks
    (course / "autograder" / "checks" / "ch08_mine.py").write_text(mine_checks)
    assert autograder(*grade) == (f"python -m autograder: error: exercise entropy of {mine} has no checks, so it cannot "
                                  f"be graded: register them in autograder/checks/ch08_mine.py; {guide}")


# -- check agrees with grade, over the course's own wrong implementations ------------------

MUTATED = [a for a in assignments() if (REPO / "tests" / "mutants" / f"ch{a.replace('-', '_')}.py").is_file()]


def agreement_notebooks(rounds):
    """{(assignment, name): {exercise: wrong source, or None for the untouched stub}}: per chapter
    and round r, two notebooks holding the r-th wrong implementation of every other exercise, and
    the single bugs of issue 24 §3 (chapter 7's with the Triton exercise left a stub: its
    interpreter is the slow part of grading, and it has no bug to check). Round 0 is test_grading's
    mixed notebooks, checked there against the points it grades them (`misblamed`);
    AGREEMENT_ROUNDS=all adds every other round (two notebooks a chapter each)."""
    from mutants import catalogue
    books = {}
    for a in MUTATED:
        wrong = list(catalogue(a).WRONG.items())
        for r in rounds:
            for parity in (0, 1):
                bugs = {e: list(v.values())[r % len(v)] for e, v in wrong[parity::2]}
                books[a, f"round-{r}-{parity}"] = bugs
    single = {"04-multi-head": [("MultiHeadAttention", "no_out_proj")],
              "07-flash-tiling": [("tiled_attention", "masks_instead_of_skipping"), ("tiled_attention", "whole_matrix"),
                                  ("tiled_attention", "float16_lost")]}
    for a, pairs in single.items():
        for exercise, name in pairs:
            books[a, name] = {exercise: catalogue(a).WRONG[exercise][name]}
            if a == "07-flash-tiling":
                books[a, name]["flash_attention_triton"] = None
    books["01-weights", "line-raising-after-the-def"] = {  # costs nothing in either: not a bug
        "entropy": reference_solutions("01-weights")["entropy"] + "\nentropy(undefined_name)\n"}
    return books


def agreement_rounds():
    import os
    from mutants import catalogue
    if os.environ.get("AGREEMENT_ROUNDS") == "all":
        return range(1, max(len(v) for a in MUTATED for v in catalogue(a).WRONG.values()))
    return ()


def verdicts_of(path, a):
    """({exercise: "FAIL", "wait" or "ready"}, the blocks) of `check` on the notebook."""
    blocks = selfcheck.check(path, a)
    return {b.title.split(" (")[0]: "FAIL" if b.problems else "wait" if b.waiting else "ready" for b in blocks[1:]}, blocks


@pytest.fixture(scope="module")
def agreement(tmp_path_factory):
    """{(assignment, name): (bugs, {exercise: check's verdict}, {exercise: grade's points}, blocks)}."""
    import csv
    root = tmp_path_factory.mktemp("agreement")
    books = agreement_notebooks(agreement_rounds())
    for (a, name), bugs in books.items():
        stubs = [e for e, source in bugs.items() if source is None]
        write(filled_notebook(a, {e: source for e, source in bugs.items() if source is not None}, untouched=stubs),
              root / "submitted" / name / a / f"{a}.ipynb")
    run(BIN / "python", "-m", "autograder", "grade", root / "submitted", "--out", root / "out", "-j", "2", "--quiet")
    points = {}
    with open(root / "out" / "grades.csv") as f:
        for row in csv.DictReader(f):
            points.setdefault((row["assignment"], row["student"]), {})[row["exercise"]] = float(row["score"])
    found = {}
    for (a, name), bugs in books.items():
        verdicts, blocks = verdicts_of(root / "submitted" / name / a / f"{a}.ipynb", a)
        found[a, name] = (bugs, verdicts, points[a, name], blocks)
    print({key: (sorted(bugs), verdicts, points) for key, (bugs, verdicts, points, _) in found.items()})  # -s shows it
    return found


def misblamed(a, name, bugs, verdicts, points, blocks):
    """Where `check` and `grade` disagree on one notebook: an exercise without a bug that `check`
    blames or `grade` charges, an exercise `check` blames that `grade` does not charge. (A bug
    `check` calls ready is one only a hidden input catches: it costs points at grading, and `check`
    says the hidden checks run only there.)"""
    full, wrong = {e.name: e.points for e in exercises(a)}, []
    for e, verdict in verdicts.items():
        text = "\n".join(f"  {s} {t}" for b in blocks for s, t in b.lines if b.title.startswith(e + " "))
        if e not in bugs and (verdict == "FAIL" or points[e] < full[e]):
            wrong.append(f"{a} {name}: {e} has no bug; check says {verdict}, grade gives {points[e]}/{full[e]}\n{text}")
        if e in bugs and verdict == "FAIL" and points[e] == full[e]:
            wrong.append(f"{a} {name}: check blames {e}, grade charges nothing\n{text}")
    return wrong


def test_check_blames_only_what_grade_charges(agreement):
    """An exercise without a bug: `check` never blames it (a failure that may come from an earlier
    exercise waits) and `grade` gives it full marks. An exercise `check` blames: `grade` charges it."""
    wrong = []
    for (a, name), (bugs, verdicts, points, blocks) in agreement.items():
        buggy = set(bugs) if name != "line-raising-after-the-def" else set()
        wrong += misblamed(a, name, buggy, verdicts, points, blocks)
    assert not wrong, "\n".join(wrong)


def test_the_issues_cases_fail_in_check_where_grade_charges_them(agreement):
    """§3 of issue 24: each was 'ready' in check and charged in grade."""
    for a, name, exercise in (("04-multi-head", "no_out_proj", "MultiHeadAttention"),
                              ("07-flash-tiling", "masks_instead_of_skipping", "tiled_attention"),
                              ("07-flash-tiling", "whole_matrix", "tiled_attention"),
                              ("07-flash-tiling", "float16_lost", "tiled_attention")):
        bugs, verdicts, points, _ = agreement[a, name]
        assert verdicts[exercise] == "FAIL" and points[exercise] < {e.name: e.points for e in exercises(a)}[exercise]
        assert all(v != "FAIL" for e, v in verdicts.items() if e not in bugs), (name, verdicts)  # bugs: the Triton stub too
    _, verdicts, points, _ = agreement["01-weights", "line-raising-after-the-def"]
    assert set(verdicts.values()) == {"ready"} and points == {e.name: e.points for e in exercises("01-weights")}
    blocks = agreement["04-multi-head", "no_out_proj"][3]
    said = {b.title.split(" (")[0]: b.lines for b in blocks}
    assert any(status == "FAIL" and "the merged heads (out_proj set to the identity) match, the final outputs differ"
               in text for status, text in said["MultiHeadAttention"])
    assert any(status == "wait" and "this may come from MultiHeadAttention (see above)" in text
               for status, text in said["mha_from_torch"])
