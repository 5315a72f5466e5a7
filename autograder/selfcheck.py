"""`python -m autograder check NOTEBOOK`: a student's pre-flight check of one notebook.

load → run sandboxed → check → report, as `grade` does, with one difference: each exercise's
original check cell (its visible asserts, from the source notebook) runs where the student's
notebook has it. Then the rules each exercise's text states (`autograder.stated`, which `grade`
charges as checks of that exercise; the device rule among them, `stated/device.py`) run on the
notebook's own functions. The report says, per
exercise, what can cost points at grading. It never runs the hidden checks: of an exercise it
knows only its name, points and the names its reference cell defines (`notebook.exercises`), and
it imports nothing of `autograder.checks` (a student's copy of the course does not have it).

`grade` checks each exercise with correct versions of the exercises before it; `check` has no
correct versions to use (they are the solutions), so when an earlier exercise has a problem, a
later one that uses it (its cell, its check cell or its rules reach the earlier one's names,
through the notebook's own code) may fail because of it: that exercise is then neither ready nor
blamed (WAIT) until the earlier one is fixed.
"""
import ast
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import GUIDE, REPO_ROOT, assignments, notebook, released_notebook, stated
from .notebook import NotebookError, load_submission
from .sandbox.calls import StudentError
from .sandbox.isolation import bubblewrap_works
from .stated.failure import failure_of
from .sandbox.session import Limits, SandboxedStudent
from .sandbox.worker import python_source

OK, FAIL, NOTE, WAIT = "ok", "FAIL", "note", "wait"
PROBE_INDEX = "names"  # the last cell run: it answers which of the exercises' names are missing
PROBE = "__autograder_missing__ = lambda names: [n for n in names if not callable(globals().get(n))]"


class UsageError(Exception):
    """The command was called wrongly (exit status 2)."""


@dataclass
class Block:
    title: str
    lines: list = field(default_factory=list)  # [(OK | FAIL | NOTE, text)]

    def add(self, status, text):
        self.lines.append((status, text))

    @property
    def problems(self):
        return sum(status == FAIL for status, _ in self.lines)

    @property
    def waiting(self):
        return not self.problems and any(status == WAIT for status, _ in self.lines)


# -- load ----------------------------------------------------------------------------------

def cell_ids(assignment):
    return {f"{kind}{e.name}" for e in notebook.exercises(assignment) for kind in ("", "check_", "test_")}


def find_assignment(path, override=None):
    """From --assignment, else the file name `<a>.ipynb`, else the nbgrader grade_ids of its cells."""
    known = assignments()
    if override is not None:
        if override not in known:
            raise UsageError(f"no assignment {override!r}; the assignments are {', '.join(known)}")
        return override
    named = notebook.assignment_of_filename(path.name, known)  # the rule `grade` and Gradescope use
    if named is not None:
        return named
    present = set(load_submission(path, known[0]).by_grade_id)  # the ids do not depend on the assignment
    matches = {a: len(present & cell_ids(a)) for a in known}
    best = max(known, key=matches.get)
    if not matches[best]:
        raise UsageError(f"cannot tell which assignment {path.name} is: name it <assignment>.ipynb "
                         f"or pass --assignment (one of {', '.join(known)})")
    return best


def released_cells(assignment):
    """{grade_id: source} of the test and check cells as the student received them."""
    nb = nbformat.read(released_notebook(assignment), as_version=4)
    return {notebook.nbgrader_meta(c)["grade_id"]: c.source for c in nb.cells
            if notebook.is_test_cell(c) or notebook.is_check_cell(c)}


def check_cell_sources(assignment):
    return {notebook.nbgrader_meta(c)["grade_id"]: c.source for c in notebook.read_source(assignment).cells
            if notebook.is_check_cell(c)}


def exercise_cells(submission, assignment):
    """{exercise: number of the student's cell that holds it}: its solution cell, or failing that
    the last cell run that defines one of its names; absent when there is none."""
    run = dict(submission.code_cells)
    found = {}
    for e in notebook.exercises(assignment):
        number = submission.by_grade_id.get(e.name, (None,))[0]
        if number not in run:
            number = next((n for n, source in reversed(submission.code_cells) if set(_defines(source)) & set(e.defines)),
                          None)
        if number is not None:
            found[e.name] = number
    return found


def _defines(source):
    try:
        return notebook.defined_names(python_source(source))
    except SyntaxError:
        return ()


# -- run sandboxed -------------------------------------------------------------------------

def cells_to_run(submission, assignment, at):
    """[(index, source)]: the cells the grader runs, each exercise's original check cell where the
    student's notebook has it (after the exercise's cell `at[exercise]` if the student deleted it,
    else at the end), and the probe. {exercise: index of its check cell}."""
    sources = check_cell_sources(assignment)
    placed = [((n, 0), n, source) for n, source in submission.code_cells]
    check_index = {}
    for i, e in enumerate(notebook.exercises(assignment)):
        grade_id = f"check_{e.name}"
        if grade_id in submission.by_grade_id:
            number = submission.by_grade_id[grade_id][0]
            key, index = (number, 0), number
        elif e.name in at:
            key, index = (at[e.name], 1), grade_id
        else:
            key, index = (math.inf, i), grade_id
        placed.append((key, index, sources[grade_id]))
        check_index[e.name] = index
    ordered = [(index, source) for _, index, source in sorted(placed, key=lambda p: p[0])]
    return ordered + [(PROBE_INDEX, PROBE)], check_index


def run_sandboxed(cells, names, assignment, limits, seed):
    """({cell index: error}, missing names or None, `stated_rules`'s {exercise: [(rule, failure, used)]}): the
    notebook run as the grader runs it, then the rules the texts state, on the exercises it defines,
    their inputs drawn from `seed`."""
    with SandboxedStudent(cells, limits, notebook.modules_to_preload(assignment)) as student:
        errors = dict(student.cell_errors)
        if None in errors:
            return errors, None, {}
        try:
            missing = set(student.call("__autograder_missing__", list(names)))
        except StudentError as error:
            errors[None] = f"the check could not see which functions your notebook defines ({error})"
            return errors, None, {}
        return errors, missing, stated_rules(student, assignment, missing, seed)


def stated_rules(process, assignment, missing, seed):
    """{exercise: [(rule, failure or "", the names of the student's code it called)]}, for the
    exercises whose names are all defined."""
    found = {}
    for e in notebook.exercises(assignment):
        rules = stated.properties(assignment, e.name) + stated.device_rules(assignment, e.name)
        if not rules or set(e.defines) & missing:
            continue
        process.start_exercise()  # the grader's time budget of one exercise
        found[e.name] = []
        for rule in rules:
            student, rng = stated.Student(process), stated.rng_for(rule.key, seed)
            found[e.name].append((rule.name, failure_of(rule.run, student, rng), student.used))
    return found


# -- which earlier exercises an exercise may use -------------------------------------------

def _reads(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class Reach:
    """Which exercises a piece of code may use: the names it reads, followed through the functions
    and classes the notebook defines (the student's own code, which `check` runs). Code that does
    not parse may use anything."""

    def __init__(self, submission, exercises):
        self.owner = {name: e.name for e in exercises for name in e.defines}
        self.reads = {}  # name: the names its definitions read (every definition of it in the notebook)
        self.unparsed = False
        for _, source in submission.code_cells:
            try:
                tree = ast.parse(python_source(source))
            except SyntaxError:
                self.unparsed = True
                continue
            for node in tree.body:  # a def or class, or a statement that binds names (`model = LlamaLM(...)`)
                bound = ([node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                         [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)])
                for name in bound:
                    self.reads.setdefault(name, set()).update(_reads(node))

    def exercises(self, names=(), sources=()):
        if self.unparsed:
            return set(self.owner.values())
        todo, seen = list(names), set()
        for source in sources:
            try:
                todo += _reads(ast.parse(python_source(source)))
            except SyntaxError:
                return set(self.owner.values())
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += self.reads.get(name, ())
        return {self.owner[n] for n in seen if n in self.owner}


# -- check ---------------------------------------------------------------------------------

def _normal(source):
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def calls_input(source):
    try:
        tree = ast.parse(python_source(source))
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "input"
               for node in ast.walk(tree))


def input_problems(submission, errors):
    """{cell number: text} for the cells that call input(), unless running them already said so."""
    return {n: f"code cell {n} calls input(): a cell that waits for input fails at grading; remove it"
            for n, source in submission.code_cells if calls_input(source) and "input()" not in errors.get(n, "")}


def cell_error(n, error):
    """(status, text) of a cell that raised. input() and a time limit cost points as such; any other
    exception costs only through what the cell then left undefined, which its exercise's block
    says: the grader notes it and charges nothing for it, and so does nbgrader (it runs on)."""
    if "input()" in error or "time limit" in error:
        return FAIL, f"code cell {n}: {error}"
    rest = "nothing in it ran" if error.startswith("SyntaxError") else "the lines after the error did not run"
    return NOTE, (f"code cell {n}: {error}. This costs no points by itself (the grader notes it), but {rest}: "
                  "whatever they define is missing at grading. Remove the line that raises")


def notebook_block(path, assignment, submission, errors, at, inputs):
    block = Block("Notebook")
    if path.name != f"{assignment}.ipynb":
        if notebook.assignment_of_filename(path.name, assignments()) == assignment:
            block.add(NOTE, notebook.renamed_note(path.name, assignment))
        else:
            block.add(FAIL, f"the grader looks for {assignment}.ipynb: rename the file before you hand it in")
    if not bubblewrap_works():
        block.add(NOTE, "bubblewrap is not installed here, so your notebook ran without the grader's sandbox: "
                        "reading files or the network may work here and fail at grading")
    if submission.explore:
        numbers = ", ".join(map(str, submission.explore))
        block.add(NOTE, f"code cell{'s' if len(submission.explore) > 1 else ''} {numbers}: tagged `explore`, not run "
                        "here nor by the autograder (nbgrader runs them); your exercises must not need what they define")
    for warning in submission.warnings:
        if not warning.startswith("test cells "):  # deleted test cells: said in their exercises' blocks
            block.add(NOTE, warning)
    if None in errors:
        block.add(FAIL, f"your notebook cannot be graded: {errors[None]}")
    others = [n for n, _ in submission.code_cells if n not in set(at.values())]
    for n in others:
        if n in errors:
            block.add(*cell_error(n, errors[n]))
        if n in inputs:
            block.add(FAIL, inputs[n])
    if any(n in errors for n in others):
        block.add(NOTE, "the notebook must run top to bottom: at grading, what a failing cell defines is missing "
                        "for the cells after it")
    return block


def short_name(rule):
    """A rule's name up to its first colon: what it is (`keeps the input's device`, `trainable`),
    without the inputs it is checked on, which its failure message names."""
    return rule.split(": ", 1)[0]


def exercise_block(e, submission, errors, missing, number, check_index, released, inputs, rules, behind):
    """`rules`: [(rule, failure or "", used)] of the rules its text states; `behind`: {None (its visible
    tests), or a rule: the exercises before it that have a problem and that the code the tests or
    the rule run may use, which their failure may come from}."""
    block = Block(f"{e.name} ({e.points:g} point{'s' if e.points != 1 else ''})")
    if None in errors:
        block.add(FAIL, "not graded: the notebook did not run (see above)")
        return block
    if number is None:
        block.add(FAIL, "no cell of the notebook defines it (was its cell deleted?)")
    elif number in errors:
        block.add(*cell_error(number, errors[number]))
    else:
        block.add(OK, f"code cell {number} runs")
    if number in inputs:
        block.add(FAIL, inputs[number])

    def failed(text, rule=None):
        own = "NotImplementedError" in text and f"code cell {number}," in text  # its own stub: never the others'
        if behind.get(rule) and not own:
            block.add(WAIT, f"{text} — this may come from {', '.join(behind[rule])} (see above): `grade` checks {e.name} "
                            f"with correct versions of the exercises before it, so fix those, then check again")
        else:
            block.add(FAIL, text)
    if check_index in errors:
        where = f" (code cell {check_index})" if isinstance(check_index, int) else ""
        failed(f"visible tests{where}: {errors[check_index]}")
    else:
        block.add(OK, "visible tests pass")
    for rule, failure, _used in rules:
        if failure:
            failed(f"a rule its text states, {rule}: {failure}", rule)
    if rules and not any(failure for _, failure, _used in rules):
        block.add(OK, f"the rule{'s' if len(rules) > 1 else ''} its text states, which the grader checks too, "
                      f"hold{'' if len(rules) > 1 else 's'}: {'; '.join(short_name(rule) for rule, _, _used in rules)}")
    lost = [name for name in e.defines if name in missing]
    if lost:
        block.add(FAIL, f"{', '.join(lost)}: not defined once the notebook has run, and the grader calls it by this "
                        "name (renamed? did its cell fail?)")
    else:
        block.add(OK, f"defines {', '.join(e.defines)}")
    test_id, check_id, cells = f"test_{e.name}", f"check_{e.name}", submission.by_grade_id
    if test_id not in cells:
        block.add(FAIL, "graded test cell deleted: `python -m autograder grade` restores it, nbgrader does not "
                        "(its points are lost there): copy it back from a fresh copy of the notebook")
    if check_id not in cells:
        block.add(NOTE, "check cell deleted: the grader does not need it (its original ran here)")
    for grade_id, what in ((check_id, "check cell"), (test_id, "graded test cell")):
        if grade_id in cells and _normal(cells[grade_id][1]) != _normal(released[grade_id]):
            block.add(NOTE, f"{what} edited (code cell {cells[grade_id][0]}): your edit is ignored; the original is used")
    return block


def check(path, assignment, limits=Limits(), seed=None):
    """[Block]: the notebook's, then one per exercise. Raises NotebookError if it cannot be read.
    `seed`: the stated rules' inputs (None: `stated.seed_from_environment()`)."""
    submission, exercises = load_submission(path, assignment), notebook.exercises(assignment)
    at = exercise_cells(submission, assignment)
    cells, check_index = cells_to_run(submission, assignment, at)
    seed = stated.seed_from_environment() if seed is None else seed
    errors, missing, rules = run_sandboxed(cells, [n for e in exercises for n in e.defines], assignment, limits, seed)
    inputs, released = input_problems(submission, errors), released_cells(assignment)
    reach, run, check_sources = Reach(submission, exercises), dict(submission.code_cells), check_cell_sources(assignment)
    blocks, failing = [notebook_block(path, assignment, submission, errors, at, inputs)], []
    for e in exercises:
        own = [run[at[e.name]]] if e.name in at else []
        behind = {None: reach.exercises(e.defines, own + [check_sources.get(f"check_{e.name}", "")])}
        for rule, _failure, used in rules.get(e.name, []):  # a failure comes from what the rule called, up to it
            behind[rule] = reach.exercises((used & set(reach.owner)) or e.defines)
        behind = {what: [name for name in failing if name in used] for what, used in behind.items()}
        block = exercise_block(e, submission, errors, missing or set(), at.get(e.name), check_index[e.name],
                               released, inputs, rules.get(e.name, []), behind)
        failing += [e.name] if block.problems else []
        blocks.append(block)
    return blocks


# -- report --------------------------------------------------------------------------------

def report(path, assignment, limits, blocks):
    """The text: a head line, the blocks with something to say, the summary."""
    points = sum(e.points for e in notebook.exercises(assignment))
    lines = [f"{path.name}: {assignment} ({points:g} points), run as the grader runs it: sandboxed, at most "
             f"{limits.cell_seconds:g} s a cell and {limits.notebook_seconds:g} s in all.", ""]
    for block in blocks:
        if block.lines:
            lines += [block.title] + [f"  {status:<5} {text}" for status, text in block.lines] + [""]
    exercises, problems = blocks[1:], sum(b.problems for b in blocks)
    waiting = sum(b.waiting for b in exercises)
    if not problems and not waiting:
        return "\n".join(lines + [f"All {len(exercises)} exercises ready: they run, pass their visible tests and the "
                                   "rules their text states, and define their names. (The hidden checks run only at "
                                   "grading.)"])
    ready = sum(not b.problems and not b.waiting for b in exercises)
    later = (f"; {waiting} exercise{'s' if waiting > 1 else ''} to check again once {'it is' if problems == 1 else 'they are'} "
             "fixed" if waiting else "")
    return "\n".join(lines + [f"{ready} of {len(exercises)} exercises ready; "
                               f"{problems} problem{'s' if problems > 1 else ''} to fix before you hand it in{later}."])


def main(path, assignment=None, limits=Limits()):
    """(text, exit status): 0 when everything is ready, 1 when something is to fix;
    UsageError for a path that is not there or an assignment that cannot be told."""
    path = Path(path)
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such file")
    try:
        assignment = find_assignment(path, assignment)
        if not released_notebook(assignment).is_file():  # a chapter being added, not released yet
            raise UsageError(f"{assignment} has no student notebook {released_notebook(assignment).relative_to(REPO_ROOT)}"
                             f" to check against: generate it from solutions/{assignment} with `make release`; "
                             f"see {GUIDE}")
        blocks = check(path, assignment, limits)
    except NotebookError as error:
        return "\n".join([f"{path.name} cannot be read, so it cannot be graded:", f"  {FAIL:<5} {error}", "",
                          "Every exercise would score 0; fix the file and run the check again."]), 1
    return report(path, assignment, limits, blocks), 1 if any(b.problems or b.waiting for b in blocks) else 0
