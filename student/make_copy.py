"""`make student-copy DEST=folder`: the course as students get it.

The copy holds the released notebooks, the `autograder` package without its hidden checks (the
pre-flight check never imports them), and its own README, Makefile and requirements.txt, made
from this folder's templates; never solutions/ nor tests/ (whose wrong implementations are near
misses of the solutions). Its requirements.txt is the part of the course's that the notebooks
and `check` need (`autograder.requirements.for_students`), a Jupyter to open the notebooks with,
and the package itself.
"""
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the course's package, whatever the working directory

from autograder import REPO_ROOT, assignments, notebook, released_notebook, requirements  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402

FRONT_END = ["notebook"]  # `make notebook` (Jupyter Notebook 7, which brings JupyterLab)
TEMPLATES = ["Makefile", "venv.mk"]  # copied as they are; README.md is filled in

# The limits a student's notebook meets, in the students' words (the values come from Limits)
LIMITS = {
    "cell_seconds": "one cell",
    "notebook_seconds": "all the notebook's cells together",
    "call_seconds": "one call of one of your functions by a hidden check",
    "exercise_seconds": "all the hidden checks of one exercise",
    "memory_bytes": "memory of your notebook's process",
    "file_bytes": "the largest file your code may write",
    "processes": "processes and threads at once",
}


def student_requirements():
    """The copy's requirements.txt, as lines: pinned as in the course's own requirements.txt."""
    return requirements.for_students() + requirements.lines(FRONT_END) + ["-e ."]


def _amount(field, value):
    if field.endswith("_seconds"):
        return f"{value:g} s"
    if field.endswith("_bytes"):
        return f"{value / 2**30:g} GiB" if value >= 2**30 else f"{value / 2**20:g} MiB"
    return f"{value}"


def limits_table(limits=Limits()):
    rows = [f"| {what} | {_amount(field, getattr(limits, field))} |" for field, what in LIMITS.items()]
    return "\n".join(["| what | at most |", "|---|---|"] + rows)


def notebooks_list():
    lines = ["| chapter | notebook |", "|---|---|"]
    for a in assignments():
        title = next((c.source.splitlines()[0].lstrip("# ") for c in notebook.read_source(a).cells
                      if c.cell_type == "markdown" and c.source.startswith("# ")), a)
        lines.append(f"| {title} | `{released_notebook(a).relative_to(REPO_ROOT)}` |")
    return "\n".join(lines)


def make_copy(dest):
    dest = Path(dest)
    if dest.exists():
        raise SystemExit(f"{dest} exists: give a new folder")
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
    shutil.copytree(REPO_ROOT / "notebooks", dest / "notebooks", ignore=ignore)
    shutil.copytree(REPO_ROOT / "autograder", dest / "autograder", ignore=shutil.ignore_patterns("__pycache__", "checks"))
    shutil.copy(REPO_ROOT / "pyproject.toml", dest)
    for name in TEMPLATES:
        shutil.copy(HERE / name, dest / name)
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    readme = readme.replace("{{notebooks}}", notebooks_list()).replace("{{limits}}", limits_table())
    (dest / "README.md").write_text(readme, encoding="utf-8")
    (dest / "requirements.txt").write_text(
        "# What the notebooks and the pre-flight check need, pinned as the course is tested\n"
        + "\n".join(student_requirements()) + "\n", encoding="utf-8")
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python student/make_copy.py DEST")
    print(f"{make_copy(sys.argv[1])}: the students' copy (see its README.md)")
