"""Gradescope: build an autograder zip for one assignment, and (inside it) write results.json.

The zip holds this package, the assignment's source notebook (the reference: it never reaches
the student's process) and a `setup.sh` / `run_autograder` pair. On Gradescope the student's
notebook is graded by the same pipeline as here; each check becomes one of Gradescope's tests,
shown after publication; whether the notebook ran is shown at once.
"""
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from . import REPO_ROOT, SOLUTIONS_DIR
from .files import atomic_write
from .notebook import NotebookError, read_notebook_bytes
from .pipeline import grade_notebook, not_graded
from .sandbox.isolation import NOT_ISOLATED, bubblewrap_works

REQUIREMENTS = ["numpy==2.4.6", "torch==2.13.0", "matplotlib==3.11.2", "nbformat==5.11.1", "ipython==9.18.1"]

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when the autograder image is built.
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-pip python3-venv bubblewrap >/dev/null || apt-get install -y -qq python3 python3-pip python3-venv
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q -r /autograder/source/requirements.txt
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grade it, write results/results.json.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source"
"$PYTHON" -m autograder gradescope-results {assignment} "$ROOT/submission" "$ROOT/results/results.json"
"""


def build_zip(assignment, out_path):
    """The Gradescope autograder zip for `assignment`."""
    if not (SOLUTIONS_DIR / assignment).is_dir():
        raise SystemExit(f"no assignment {assignment!r} in {SOLUTIONS_DIR}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((REPO_ROOT / "autograder").rglob("*.py")):
            archive.write(path, path.relative_to(REPO_ROOT))
        for path in sorted((SOLUTIONS_DIR / assignment).iterdir()):
            archive.write(path, path.relative_to(REPO_ROOT))
        for name, text, mode in (("setup.sh", SETUP_SH, 0o755),
                                 ("run_autograder", RUN_AUTOGRADER.format(assignment=assignment), 0o755),
                                 ("requirements.txt", "\n".join(REQUIREMENTS) + "\n", 0o644)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, text)
    return out_path


def results_json(assignment, submission_dir, results_path):
    """Grade the notebook Gradescope put in `submission_dir` and write Gradescope's results.json."""
    isolated = bubblewrap_works()
    if not isolated and os.environ.get("AUTOGRADER_ALLOW_UNISOLATED") != "1":
        data = {"score": 0.0, "visibility": "visible", "tests": [],
                "output": f"Not graded: {NOT_ISOLATED} The instructor can set AUTOGRADER_ALLOW_UNISOLATED=1 "
                          "in run_autograder to grade anyway, with the student's code running as Gradescope's user."}
        atomic_write(results_path, json.dumps(data, indent=1))
        return data
    submission_dir = Path(submission_dir)
    notebooks = sorted(submission_dir.rglob("*.ipynb"))
    wanted = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
    work = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        target = work / assignment / f"{assignment}.ipynb"
        target.parent.mkdir(parents=True)
        try:
            if wanted:  # read as `grade` reads it: a symlink is refused, not followed
                target.write_bytes(read_notebook_bytes(wanted[0]))
            graded = grade_notebook("student", assignment, str(target))
        except NotebookError as error:
            graded = not_graded("student", assignment, error)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    output = "\n".join(([graded.problem] if graded.problem else []) + graded.notes)
    tests = [{"name": "your notebook runs", "score": 0.0, "max_score": 0.0, "output": output or "every cell ran",
              "visibility": "visible"}]
    for exercise in graded.exercises:
        for r in exercise.checks:
            tests.append({"name": f"{exercise.name}: {r.name}", "score": round(r.points, 4),
                          "max_score": round(r.max_points, 4),
                          "output": r.message or "passed" if r.ran else f"not run: {r.message}",
                          "visibility": "after_published"})
    if not isolated:
        output = f"WARNING: {NOT_ISOLATED}\n{output}"
    data = {"score": round(graded.score, 4), "output": output or f"{assignment}: graded",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
    atomic_write(results_path, json.dumps(data, indent=1))
    return data
