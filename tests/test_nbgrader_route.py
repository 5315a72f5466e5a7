"""The instructors' page's nbgrader commands, run exactly as the page shows them, on two students
of chapter 1, in a copy of the course (never the repository's notebooks/ or gradebook)."""
import csv
import logging
import os
import re
import shutil
import subprocess

import nbformat
from conftest import REPO, users_shell_env
from traitlets.config.loader import PyFileConfigLoader

from autograder.notebook import exercises
from autograder.pipeline import grade_notebook

A = "01-weights"
SAMPLES = REPO / "samples" / "submitted"
STUDENTS = {"alice": "perfect-student", "bob": "partial-student"}


def page_block(section):
    """The first ```bash block of `section` on book/instructors.md."""
    page = (REPO / "book" / "instructors.md").read_text()
    text = page.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```bash\n(.*?)```", text, re.S).group(1)


def course_copy(dest):
    """The course's files as a fresh clone has them, sharing the repository's .venv."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted in the working tree is not in a clone either
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    (dest / ".venv").symlink_to(REPO / ".venv")
    stamp = REPO / ".venv" / ".installed"  # the Makefile's set-up is done: `make` must not install again
    if stamp.exists():
        for name in ("requirements.txt", "pyproject.toml"):
            os.utime(dest / name, (stamp.stat().st_mtime - 60,) * 2)


def test_the_nbgrader_commands_on_the_page_grade_a_class_as_written(tmp_path):
    course = tmp_path / "course"
    course_copy(course)
    for student, sample in STUDENTS.items():  # collected, as "Collect submissions" says
        target = course / "submitted" / student / A / f"{A}.ipynb"
        target.parent.mkdir(parents=True)
        shutil.copyfile(SAMPLES / sample / A / f"{A}.ipynb", target)

    block = page_block("Grade with nbgrader")
    assert "make release" in block and f"nbgrader autograde {A}" in block
    # a shell as a new instructor has it: no venv active
    done = subprocess.run(["bash", "-e", "-c", block], cwd=course, capture_output=True, text=True, timeout=1500,
                          env=users_shell_env())
    assert done.returncode == 0, f"the page's commands failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    # nbgrader's tampering warning ("Attribute 'checksum' for cell test_... has changed!") on untouched notebooks
    said = [line for line in (done.stdout + done.stderr).splitlines() if re.search(r"checksum|has changed", line, re.I)]
    assert not said, "\n".join(said[:5])

    for notebook in (REPO / "notebooks").glob("*/*.ipynb"):  # make release regenerated them byte for byte
        assert (course / notebook.relative_to(REPO)).read_bytes() == notebook.read_bytes(), notebook.name

    exported = list(csv.DictReader(open(course / "grades.csv")))
    assert {r["assignment"] for r in exported} == {A}, "the export lists assignments nobody handed in"
    rows = {r["student_id"]: r for r in exported}
    assert set(rows) == set(STUDENTS) and len(exported) == len(STUDENTS)
    total = sum(e.points for e in exercises(A))
    for student, sample in STUDENTS.items():
        ours = grade_notebook(student, A, str(SAMPLES / sample / A / f"{A}.ipynb"))
        assert abs(float(rows[student]["score"]) - ours.score) < 1e-6, (student, rows[student]["score"], ours.score)
        assert float(rows[student]["max_score"]) == total
        feedback = (course / "feedback" / student / A / f"{A}.html").read_text()
        assert "BEGIN HIDDEN TESTS" not in feedback and "autograder.checks" not in feedback
    assert float(rows["alice"]["score"]) == total and float(rows["bob"]["score"]) < total

    # a graded cell that was changed is still reported, and its hidden tests put back, by the same sanitizing steps
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    nb = nbformat.read(course / "submitted" / "bob" / A / f"{A}.ipynb", as_version=4)
    graded = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith("test_")]
    graded[0].source = "pass"
    resources = {"nbgrader": {"notebook": A, "assignment": A, "db_url": config.CourseDirectory.db_url}}
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    for step in config.Autograde.sanitize_preprocessors:
        step = step(config=config)
        step.log.addHandler(handler)
        try:
            nb, resources = step.preprocess(nb, resources)
        finally:
            step.log.removeHandler(handler)
    warned = [r.getMessage() for r in records if "checksum" in r.getMessage()]
    assert len(warned) == 1 and graded[0].metadata.nbgrader.grade_id in warned[0], warned
    assert all("BEGIN HIDDEN TESTS" in cell.source for cell in graded)
