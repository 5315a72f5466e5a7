"""Reading notebooks: a student's submission, and the source notebook's exercises.

A source notebook (solutions/<a>/<a>.ipynb) defines each exercise by an nbgrader solution cell
(grade_id `<exercise>`), a read-only cell of visible asserts the student runs (`check_<exercise>`,
never graded) and a test cell `test_<exercise>` holding its points and the hidden `grade(...)` call.
"""
import ast
import functools
import json
import re
from dataclasses import dataclass, field

import nbformat

from . import NOTEBOOKS_DIR, SOLUTIONS_DIR, has_solutions

SOLUTION_BEGIN = "### BEGIN SOLUTION"
SOLUTION_END = "### END SOLUTION"


class NotebookError(Exception):
    """A submission that cannot be read; the message is for the student."""


@dataclass(frozen=True)
class Exercise:
    name: str
    points: float
    solution: str      # the reference solution cell, markers removed
    defines: tuple     # the names that cell defines (functions, classes)


@dataclass
class Submission:
    code_cells: list  # [(number among the notebook's code cells, from 1, source)] to run, in order
    warnings: list = field(default_factory=list)
    by_grade_id: dict = field(default_factory=dict)  # {nbgrader grade_id: (number, source)}, run or set aside
    explore: list = field(default_factory=list)      # numbers of the `explore` cells, set aside


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_test_cell(cell):
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def source_path(assignment):
    """solutions/<a>/<a>.ipynb; in a student's copy of the course, the released notebook, which has
    the same cells, ids and points with stubs for solutions: enough for `check`, never for grading
    (`reference.load` refuses it)."""
    return (SOLUTIONS_DIR if has_solutions() else NOTEBOOKS_DIR) / assignment / f"{assignment}.ipynb"


def read_source(assignment):
    return nbformat.read(source_path(assignment), as_version=4)


def strip_solution_markers(source):
    return "\n".join(line for line in source.splitlines() if line.strip() not in (SOLUTION_BEGIN, SOLUTION_END))


def defined_names(source):
    return tuple(node.name for node in ast.parse(source).body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


@functools.cache  # read for every notebook and every exercise graded; the source does not change
def exercises(assignment):
    """The assignment's exercises in notebook order, from its source notebook."""
    cells = read_source(assignment).cells
    solutions = {nbgrader_meta(c).get("grade_id"): strip_solution_markers(c.source)
                 for c in cells if nbgrader_meta(c).get("solution")}
    found = []
    for cell in cells:
        meta = nbgrader_meta(cell)
        if is_test_cell(cell) and str(meta.get("grade_id", "")).startswith("test_"):
            name = meta["grade_id"][len("test_"):]
            found.append(Exercise(name=name, points=float(meta["points"]), solution=solutions[name],
                                  defines=defined_names(solutions[name])))
    return tuple(found)


def known_good(assignment, exercise):
    """The names the exercises before `exercise` define, whose checks are done by the time its
    checks run. Its checks run with the reference versions of these in place of the student's
    own (as stand-ins: `checks/known_good.py`), so that a bug costs points only where it is."""
    before = []
    for e in exercises(assignment):
        if e.name == exercise:
            break
        before.append(e)
    return [n for e in before for n in e.defines]


def is_check_cell(cell):
    """The visible asserts of an exercise: read-only, run by the student, never graded."""
    return str(nbgrader_meta(cell).get("grade_id", "")).startswith("check_")


def is_explore_cell(cell):
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and "explore" in tags


def reference_code(assignment):
    """The source notebook's code that defines the reference solutions: every code cell but the
    graded cells, the check cells and the ungraded `explore` cells."""
    cells = read_source(assignment).cells
    return [c.source for c in cells
            if c.cell_type == "code" and not (is_test_cell(c) or is_check_cell(c) or is_explore_cell(c))]


# The names browsers, Colab and file managers give a copy or a second download of `<a>.ipynb`:
# `<a> (1)`, `<a>(2)`, `<a>-1`, `<a>_1`, `<a> 1`, `Copy of <a>`, `<a> - Copy`, `<a> copy`, and these combined
_COPY_PREFIX = re.compile(r"^copy\s+of\s+", re.IGNORECASE)
_COPY_SUFFIX = re.compile(r"(?:\s*\(\d{1,3}\)|[-_ ]\d{1,3}|\s*-\s*copy|\s+copy)$", re.IGNORECASE)


def _normal_name(name):
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def assignment_of_name(name, known):
    """The assignment a file's stem or a folder's name stands for, or None: the name itself; the
    name with what browsers, Colab and file managers add to a copy removed (`05-self-masked (1)`,
    `05-self-masked-1`, `Copy of 05-self-masked`, `05-self-masked - Copy`); any case, `_` or a
    space for `-` (`05_Self_Masked`); else a near spelling (difflib, 0.8 alike). The one rule every
    route uses (`grade`'s discovery, `check`, the Gradescope runner)."""
    import difflib
    known = list(known)
    by_normal = {_normal_name(a): a for a in known}
    stem = name.strip()
    while True:
        if stem in known:
            return stem
        if _normal_name(stem) in by_normal:
            return by_normal[_normal_name(stem)]
        shorter = _COPY_SUFFIX.sub("", _COPY_PREFIX.sub("", stem, count=1), count=1).strip()
        if not shorter or shorter == stem:
            break
        stem = shorter
    for candidate in dict.fromkeys((_normal_name(name), _normal_name(stem))):
        match = difflib.get_close_matches(candidate, list(by_normal), n=1, cutoff=0.8)
        if match:
            return by_normal[match[0]]
    return None


def assignment_of_filename(name, known):
    """The assignment a notebook's file name (`05-self-masked (1).ipynb`) stands for
    (`assignment_of_name`), or None: not a notebook's name, or no assignment's."""
    if not name.lower().endswith(".ipynb"):
        return None
    return assignment_of_name(name[:-len(".ipynb")], known)


def renamed_note(name, assignment):
    """The one note said wherever a notebook named otherwise is graded as `assignment`."""
    return (f"{name} is graded as {assignment}.ipynb, the name it stands for (browsers and Colab rename a copy "
            f"so): name it {assignment}.ipynb next time")


def pick_notebook(names, assignment, known):
    """Of the notebook file names in one place, the one to grade as `assignment`: `<a>.ipynb`, else
    the one named for it (`assignment_of_filename`), the last in natural order when there are
    several (`<a> (2).ipynb` after `<a> (1).ipynb`, a browser's later download); None when none is."""
    names = [n for n in names if n.lower().endswith(".ipynb")]
    if f"{assignment}.ipynb" in names:
        return f"{assignment}.ipynb"
    ours = [n for n in names if assignment_of_filename(n, known) == assignment]
    def natural(n):
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n.lower())]
    return max(ours, key=natural) if ours else None


MAX_NOTEBOOK_BYTES = 64 * 2**20   # a notebook with its outputs and figures is a few MB at most
MAX_CELLS = 10_000


def read_notebook_bytes(path):
    """The bytes of a submitted notebook: a regular file, never followed through a symlink (to the
    solutions, or to another student's notebook), not the course's own source notebook, and not
    too large. A hard link is read: it may be another student's notebook, and refusing it would
    cost that student too (`pipeline.discover` flags such pairs to the instructor)."""
    import os
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if os.path.islink(path):
            raise NotebookError(f"{path.name} is a symbolic link: hand in the notebook file itself") from None
        raise NotebookError(f"cannot read {path.name}: {error.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError(f"{path.name} is not a regular file: hand in the notebook file itself")
        if info.st_nlink > 1 and (info.st_dev, info.st_ino) in _source_files():
            raise NotebookError(f"{path.name} is a hard link to the course's reference notebook: hand in your own")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{path.name} is {info.st_size / 2**20:.0f} MB, more than the "
                                f"{MAX_NOTEBOOK_BYTES // 2**20} MB accepted: clear its outputs and save it again")
        return f.read(MAX_NOTEBOOK_BYTES + 1)


def _source_files():
    """(device, inode) of the course's source notebooks, which hold the reference solutions."""
    import os
    return {(info.st_dev, info.st_ino) for info in map(os.stat, SOLUTIONS_DIR.glob("*/*.ipynb"))}


def load_submission(path, assignment):
    """Read a student's notebook and pick the code to run; raises NotebookError with a reason."""
    raw = read_notebook_bytes(path)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise NotebookError(f"{path.name} is not a valid notebook file (invalid JSON: {error}). "
                            "Was it saved completely? Download it again from Jupyter.") from None
    if not isinstance(data, dict):
        raise NotebookError(f"{path.name} is not a Jupyter notebook")
    code_cells, warnings = [], []
    if data.get("nbformat") == 3:
        try:
            data = json.loads(nbformat.writes(nbformat.reads(raw.decode("utf-8"), as_version=4)))
            warnings.append(f"{path.name} was saved in the old notebook format 3; it was converted to format 4")
        except Exception as error:
            raise NotebookError(f"{path.name} is in notebook format 3 and could not be converted: {error}") from None
    elif data.get("nbformat") != 4:
        raise NotebookError(f"{path.name} has notebook format {data.get('nbformat')!r}; "
                            "open and save it with Jupyter (format 4)")
    if not isinstance(data.get("cells"), list):
        raise NotebookError(f"{path.name} is not a Jupyter notebook (it has no list of cells)")
    if len(data["cells"]) > MAX_CELLS:
        raise NotebookError(f"{path.name} has {len(data['cells'])} cells, more than the {MAX_CELLS} accepted")
    test_ids = {"test_" + e.name for e in exercises(assignment)}
    check_ids = {"check_" + e.name for e in exercises(assignment)}
    present = {nbgrader_meta(c).get("grade_id") for c in data["cells"] if isinstance(c, dict)}
    missing = sorted(test_ids - present)
    if missing:
        warnings.append(f"test cells {', '.join(missing)} were deleted from the notebook; "
                        "the original tests were used")
    by_grade_id, explore = {}, []
    code_cells_seen = 0  # code cells are named by their number among the code cells, as a student counts
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code_cells_seen += 1
        if not isinstance(nbgrader_meta(cell), dict):
            cell = dict(cell, metadata={})
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if not isinstance(source, str):
            warnings.append(f"code cell {code_cells_seen} has no readable source and was skipped")
            continue
        grade_id = nbgrader_meta(cell).get("grade_id")
        if isinstance(grade_id, str):
            by_grade_id[grade_id] = (code_cells_seen, source)
        if is_test_cell(cell) or grade_id in test_ids:
            continue  # tests are the grader's business, whatever the submission's copy says
        if grade_id in check_ids:
            continue  # the visible asserts are the student's own feedback, not graded
        if is_explore_cell(cell):
            explore.append(code_cells_seen)
            continue  # plots and experiments: nothing graded may depend on them (the guides say so)
        code_cells.append((code_cells_seen, source))
    return Submission(code_cells=code_cells, warnings=warnings, by_grade_id=by_grade_id, explore=explore)


PRELOADABLE = ("numpy", "matplotlib.pyplot", "torch", "torch.nn", "torch.nn.functional", "triton", "triton.language")


def imported_modules(sources):
    """The dotted names of the absolute imports in `sources` (code that does not parse is skipped:
    a notebook may hold cell magics)."""
    import ast
    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return names


@functools.cache
def modules_to_preload(assignment):
    """The heavy modules the assignment's notebook imports: a warm worker imports them once."""
    sources = [c.source for c in read_source(assignment).cells if c.cell_type == "code"]
    names = imported_modules(sources)
    modules = [m for m in PRELOADABLE if m in names or any(n.startswith(m + ".") for n in names)]
    if "torch" in modules and any("optim." in source for source in sources):
        modules.append("torch._dynamo")  # an optimizer's first step imports it: 1.5 s per notebook otherwise
    return tuple(modules)
