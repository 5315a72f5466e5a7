"""`make student-copy DEST=folder`: the course as students get it, a git repository to publish.

The course's own repository stays private (it holds solutions/, tests/mutants/ and
autograder/checks/); what students see is the book and this copy, pushed as the students'
repository, which the book's launch buttons open (`repository.url` in _config.yml).

The copy holds the released notebooks, the `autograder` package without its hidden checks (the
pre-flight check never imports them), and its own README, Makefile and requirements.txt, made
from this folder's templates; never solutions/ nor tests/ (whose wrong implementations are near
misses of the solutions). Its requirements.txt is the part of the course's that the notebooks
and `check` need (`autograder.requirements.for_students`), a Jupyter to open the notebooks with,
and the package itself. It is a git repository: one commit on the branch the launch buttons open
(`repository.branch`), with a .gitignore, the course's licence files (LICENSE, MIT, for the code;
LICENSE-CONTENT, CC BY 4.0, for the text and figures: every LICENSE* at the root), and
binder/requirements.txt (Binder's set-up: PyTorch's CPU build and the same pins, the Jupyter
being Binder's own). The notebooks keep their paths, notebooks/<a>/<a>.ipynb, which the launch
buttons of the book's pages open in the repository.

`make student-copy DEST=folder CHAPTERS="01-weights 02-global-attention"` (or comma-separated)
makes the copy of a term released chapter by chapter: only those chapters' notebooks, and a README
that lists only them. A chapter's notebook gives the answers of earlier chapters' exercises by
design (chapter 9's builds on chapter 8's modules), so a later chapter is released only after the
earlier one's deadline; tests/test_no_answers.py checks that nothing else gives one away.
"""
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the course's package, whatever the working directory

from autograder import REPO_ROOT, assignments, notebook, released_notebook, requirements  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402

import yaml  # noqa: E402  (jupyter-book's, in the course's environment)

FRONT_END = ["notebook"]  # `make notebook` (Jupyter Notebook 7, which brings JupyterLab)
TEMPLATES = {"Makefile": "Makefile", "venv.mk": "venv.mk", "gitignore": ".gitignore"}  # copied as they
# are (gitignore is named so here, where a .gitignore would be the course's own); README.md is filled in
LICENCES = ("LICENSE", "LICENCE", "COPYING")  # the course's licence files, any suffix: copied as they are
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
COMMIT_MESSAGE = "The students' copy of the course"

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


def repository_settings():
    """_config.yml's `repository`: url (the students' repository, which the book's launch buttons
    open; empty where none is set yet) and branch."""
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    repository = config.get("repository") or {}
    url = (repository.get("url") or "").rstrip("/").removesuffix(".git")
    return {"url": url, "branch": repository.get("branch") or "main"}


def student_requirements():
    """The copy's requirements.txt, as lines: pinned as in the course's own requirements.txt."""
    return requirements.for_students() + requirements.lines(FRONT_END) + ["-e ."]


BINDER_START = """#!/bin/bash
# transformers' progress bars warn "IProgress not found" in a kernel without ipywidgets: harmless,
# and it looks like a problem
export PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:IProgress not found"
exec "$@"
"""


def binder_requirements():
    """binder/requirements.txt, as lines: Binder reads it instead of requirements.txt. PyTorch's
    CPU build (PyPI's torch is the CUDA build, several GB) and the course's pins; no Jupyter (Binder
    brings its own) and not the package (the notebooks import nothing of it)."""
    return [f"--extra-index-url {TORCH_CPU_INDEX}"] + requirements.for_students()


def licences():
    return sorted(p for p in REPO_ROOT.iterdir() if p.is_file() and p.name.upper().startswith(LICENCES))


def get_it(url):
    """The README's paragraph on how to get this copy (a line per clause: a command stays whole)."""
    if url:
        where = [f"Get it with `git clone {url}.git`", f"(or, on {url}, *Code → Download ZIP*, and unpack it),"]
    else:
        where = ["Get it with `git clone` and the address your instructor gives you",
                 "(or download it as a ZIP file and unpack it),"]
    return "\n".join(["This is the course's students' repository.", *where, "then set it up as below. "
                       "The book's launch buttons (the rocket, on each *Exercises* page) open the",
                       "same notebooks on Binder or Colab, in your browser."])


def _amount(field, value):
    if field.endswith("_seconds"):
        return f"{value:g} s"
    if field.endswith("_bytes"):
        return f"{value / 2**30:g} GiB" if value >= 2**30 else f"{value / 2**20:g} MiB"
    return f"{value}"


def limits_table(limits=Limits()):
    rows = [f"| {what} | {_amount(field, getattr(limits, field))} |" for field, what in LIMITS.items()]
    return "\n".join(["| what | at most |", "|---|---|"] + rows)


def released(chapters=None):
    """The assignments the copy holds: all of them, or `chapters` (names, or a string of names
    separated by commas or spaces), checked against the course's and kept in the course's order."""
    if chapters is None or chapters == "":
        return assignments()
    names = chapters.replace(",", " ").split() if isinstance(chapters, str) else list(chapters)
    unknown = [n for n in names if n not in assignments()]
    if unknown or not names:
        raise SystemExit(f"CHAPTERS: no chapter {', '.join(unknown) or '(none given)'}; the chapters are "
                         + ", ".join(assignments()))
    return [a for a in assignments() if a in names]


def notebooks_list(chapters=None):
    lines = ["| chapter | notebook |", "|---|---|"]
    for a in released(chapters):
        title = next((c.source.splitlines()[0].lstrip("# ") for c in notebook.read_source(a).cells
                      if c.cell_type == "markdown" and c.source.startswith("# ")), a)
        lines.append(f"| {title} | `{released_notebook(a).relative_to(REPO_ROOT)}` |")
    return "\n".join(lines)


def git(dest, *args):
    subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True, text=True)


def make_repository(dest, branch, url):
    """dest as a git repository: everything in one commit on `branch`, and `origin` = url if set.
    The author is the user's git identity where there is one, else the course's."""
    git(dest, "init", "-q")
    git(dest, "symbolic-ref", "HEAD", f"refs/heads/{branch}")  # whatever init.defaultBranch says
    git(dest, "add", "--all", "--force")  # every file made above, whatever the user's global excludes say
    identity = []
    for key, default in (("user.name", "Attention, gradually"), ("user.email", "course@example.invalid")):
        if subprocess.run(["git", "config", key], cwd=dest, capture_output=True).returncode != 0:
            identity += ["-c", f"{key}={default}"]
    git(dest, *identity, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", COMMIT_MESSAGE)
    if url:
        git(dest, "remote", "add", "origin", f"{url}.git")


def make_copy(dest, chapters=None):
    """The copy in dest (a new folder), with every chapter's notebook or only `chapters`' (`released`)."""
    dest = Path(dest)
    chosen = released(chapters)
    if dest.exists():
        raise SystemExit(f"{dest} exists: give a new folder")
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
    for a in chosen:
        shutil.copytree(REPO_ROOT / "notebooks" / a, dest / "notebooks" / a, ignore=ignore)
    shutil.copytree(REPO_ROOT / "autograder", dest / "autograder", ignore=shutil.ignore_patterns("__pycache__", "checks"))
    keep_released_rules(dest / "autograder" / "stated", chosen)
    shutil.copy(REPO_ROOT / "pyproject.toml", dest)
    for name, copied in TEMPLATES.items():
        shutil.copy(HERE / name, dest / copied)
    for licence in licences():
        shutil.copy(licence, dest / licence.name)
    repository = repository_settings()
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    readme = (readme.replace("{{notebooks}}", notebooks_list(chosen)).replace("{{limits}}", limits_table())
              .replace("{{get}}", get_it(repository["url"])))
    (dest / "README.md").write_text(readme, encoding="utf-8")
    (dest / "requirements.txt").write_text(
        "# What the notebooks and the pre-flight check need, pinned as the course is tested\n"
        + "\n".join(student_requirements()) + "\n", encoding="utf-8")
    (dest / "binder").mkdir()
    (dest / "binder" / "requirements.txt").write_text(
        "# Binder's set-up (read instead of ../requirements.txt): PyTorch's CPU build, the course's pins\n"
        + "\n".join(binder_requirements()) + "\n", encoding="utf-8")
    start = dest / "binder" / "start"  # Binder runs it before Jupyter, as `make notebook` sets the same
    start.write_text(BINDER_START, encoding="utf-8")
    start.chmod(0o755)
    make_repository(dest, repository["branch"], repository["url"])
    return dest


def keep_released_rules(stated, chosen):
    """The stated rules and known answers of the chapters released only: a later chapter's rules
    would tell its exercises before their time (the package finds the chapter modules it holds)."""
    from autograder.stated.known import module_text, stored
    numbers = {a[:2] for a in chosen}
    for module in stated.glob("ch[0-9][0-9]_*.py"):
        if module.name[2:4] not in numbers:
            module.unlink()
    kept = {key: record for key, record in stored().items() if key.split("/")[0] in chosen}
    if kept != stored():
        (stated / "known_answers.py").write_text(module_text(kept), encoding="utf-8")


def next_steps(dest):
    """What make student-copy prints: what the copy is, what is missing, how to publish it."""
    repository = repository_settings()
    lines = [f"{dest}: the students' repository, one commit on {repository['branch']} (see its README.md)"]
    if not licences():
        lines.append("warning: the course has no LICENSE file, so the students' repository has none: "
                     "add one to the course's root and make the copy again")
    if repository["url"]:
        lines.append(f"publish it (a new, empty, public repository {repository['url']}): "
                     f"cd {dest} && git push -u origin {repository['branch']}")
    else:
        lines.append("repository.url in _config.yml is empty: set it to the students' public repository "
                     "(the book's launch buttons open it) and make the copy again, or push this one yourself: "
                     f"cd {dest} && git remote add origin <its address> && git push -u origin {repository['branch']}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: python student/make_copy.py DEST [CHAPTERS]")
    print(next_steps(make_copy(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)))
