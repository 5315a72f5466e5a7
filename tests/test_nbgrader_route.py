"""The instructors' page's nbgrader commands, run exactly as the page shows them (time-outs lowered),
on six students of chapter 1, twice, in a copy of the course (never the repository's
notebooks/ or gradebook); and the shipped time limits and late rule, the autograder's."""
import csv
import logging
import os
import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta, timezone

import nbformat
from conftest import REPO, users_shell_env
from traitlets.config.loader import PyFileConfigLoader

from nbgrader.preprocessors import Execute

from autograder.late import Late, Policy, parse_time
from autograder.nbgrader_route import LatePenalty, TimedExecute
from autograder.notebook import exercises
from autograder.pipeline import grade_notebook
from autograder.sandbox.limits import Limits

A = "01-weights"
SAMPLES = REPO / "samples" / "submitted"
PERFECT, PARTIAL = (SAMPLES / s / A / f"{A}.ipynb" for s in ("perfect-student", "partial-student"))
ROSTER = "folder,name,email\nalice,Alice Martin,alice@example.edu\nbob,Bob,\ncarol,Carol Li,\ndave,Dave Roster,\nerin,,\n"
# the test's time-outs: an honest chapter-1 graded cell takes about a second, even on a loaded machine
FAST = "--TimedExecute.cell_seconds=5 --TimedExecute.test_cell_seconds=20"
NOISE = ("display_data_priority", "Alternative text", "SAWarning", "Traceback", "checksum", "has changed")


def page_block(section):
    """The first ```bash block of `section` on book/instructors.md."""
    page = (REPO / "book" / "instructors.md").read_text()
    text = page.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```bash\n(.*?)```", text, re.S).group(1)


def exported(course):
    """nbgrader's grades.csv, {student: row}, of chapter 1 alone."""
    with open(course / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["assignment"] for r in rows} == {A}, "the export lists assignments nobody handed in"
    assert len({r["student_id"] for r in rows}) == len(rows)
    return {r["student_id"]: r for r in rows}


def course_copy(dest):
    """The course's files as a fresh clone has them (new files not yet committed included), sharing the
    repository's .venv."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
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


def endless(notebook, dest):
    """The notebook with an endless loop at the top of softmax (its check, graded and explore cells call it)."""
    nb = nbformat.read(notebook, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    assert cell.source.startswith("def softmax(")
    head, body = cell.source.split("\n", 1)
    cell.source = f"{head}\n    while True:\n        pass\n{body}"
    nbformat.write(nb, dest)


def hand_in(course, due):
    """alice perfect, bob an endless loop, carol's notebook misplaced, dave on the roster only, erin
    2 days late, frank (not on the roster) a truncated notebook; times as collected with `cp -p`."""
    sub = course / "submitted"
    places = {"alice": sub / "alice" / A / f"{A}.ipynb", "bob": sub / "bob" / A / f"{A}.ipynb",
              "carol": sub / "carol" / f"{A}.ipynb", "erin": sub / "erin" / A / f"{A}.ipynb",
              "frank": sub / "frank" / A / f"{A}.ipynb"}
    for path in places.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PERFECT, places["alice"])
    endless(PERFECT, places["bob"])
    shutil.copyfile(PARTIAL, places["carol"])
    shutil.copyfile(PERFECT, places["erin"])
    places["frank"].write_bytes(PERFECT.read_bytes()[:5000])
    for student, path in places.items():
        late = timedelta(days=1.5) if student == "erin" else -timedelta(hours=3)
        os.utime(path, ((due + late).timestamp(),) * 2)
    (course / "roster.csv").write_text(ROSTER)
    return places


def run_block(course, block):
    started = time.monotonic()
    done = subprocess.run(["bash", "-e", "-c", block], cwd=course, capture_output=True, text=True, timeout=1500,
                          env=users_shell_env())  # a shell as a new instructor has it: no venv active
    said = done.stdout + done.stderr
    assert done.returncode == 0, f"the page's commands failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    noise = [line for line in said.splitlines() if any(word.lower() in line.lower() for word in NOISE)]
    assert not noise, "\n".join(noise[:10])
    return said, time.monotonic() - started


def test_the_shipped_time_limits_are_the_autograders_and_the_page_says_them():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    execute = TimedExecute(config=config)
    assert (execute.cell_seconds, execute.test_cell_seconds) == (Limits().cell_seconds, Limits().exercise_seconds)
    assert execute.execute_retries == 0 and execute.interrupt_on_timeout
    assert TimedExecute in config.Autograde.autograde_preprocessors
    assert not any(step is Execute for step in config.Autograde.autograde_preprocessors)
    assert config.AssignLatePenalties.plugin_class is LatePenalty
    section = (REPO / "book" / "instructors.md").read_text().split("\n## Grade with nbgrader\n", 1)[1].split("\n## ", 1)[0]
    assert f"**{Limits().cell_seconds:g} s**" in section and f"**{Limits().exercise_seconds:g} s**" in section
    # the late rule is the autograder's, day by day
    plugin = LatePenalty(config=config)
    for days, seconds in [(0, 0), (1, 1), (1, 86400), (2, 86401), (5, 5 * 86400), (6, 5 * 86400 + 1)]:
        expected = 8 - Late(None, None, days, Policy().percent(days)).apply(8)
        assert abs((plugin.late_submission_penalty("x", 8.0, seconds) or 0) - expected) < 1e-9, (days, seconds)


def test_the_nbgrader_commands_on_the_page_grade_a_class_as_written(tmp_path):
    course = tmp_path / "course"
    course_copy(course)
    block = page_block("Grade with nbgrader")
    for command in ("make release", "nbgrader-prepare submitted --roster roster.csv", "db student import students.csv",
                    f"nbgrader autograde {A} --create", "nbgrader export"):
        assert command in block, command
    due = parse_time(re.search(rf'assignment add {A} --duedate="([^"]+)"', block).group(1))
    places = hand_in(course, due)
    fast = block.replace(f"nbgrader autograde {A} --create", f"nbgrader autograde {A} --create {FAST}")
    assert fast.count(FAST) == 1

    said, seconds = run_block(course, fast)
    print(f"first run: {seconds:.0f} s")
    # bob's cells that call softmax time out once each (its check cell, explore cells, its graded cell), no retry
    nb = nbformat.read(places["bob"], as_version=4)
    calling = [c for c in nb.cells if c.cell_type == "code" and "softmax(" in c.source
               and c.metadata.get("nbgrader", {}).get("grade_id") != "softmax"]
    assert said.count("Timeout waiting for execute reply") == len(calling) + 1, said[-3000:]
    assert re.search(rf"frank/{A} scores 0: {A}.ipynb is not a valid notebook file", said), said[-3000:]
    assert (course / "submitted" / "carol" / A / f"{A}.ipynb").exists() and not places["carol"].exists()

    for notebook in (REPO / "notebooks").glob("*/*.ipynb"):  # make release regenerated them byte for byte
        assert (course / notebook.relative_to(REPO)).read_bytes() == notebook.read_bytes(), notebook.name

    total = sum(e.points for e in exercises(A))
    softmax = next(e.points for e in exercises(A) if e.name == "softmax")
    ours = {s: grade_notebook(s, A, str(course / "submitted" / s / A / f"{A}.ipynb")) for s in ("alice", "carol", "erin")}
    rows = exported(course)
    assert set(rows) == {"alice", "bob", "carol", "dave", "erin", "frank"}  # the autograder's students
    assert rows["alice"]["last_name"] == "Martin" and rows["alice"]["email"] == "alice@example.edu"
    for student in ("alice", "carol"):
        assert abs(float(rows[student]["score"]) - ours[student].score) < 1e-6, (student, rows[student], ours[student].score)
    assert float(rows["alice"]["score"]) == total and float(rows["carol"]["score"]) < total
    assert float(rows["bob"]["score"]) == total - softmax  # the loop costs softmax's points, and nothing else
    assert float(rows["dave"]["score"]) == 0 and rows["dave"]["timestamp"] == ""
    assert float(rows["frank"]["score"]) == 0
    late = Late.of(due, datetime.fromtimestamp(places["erin"].stat().st_mtime, timezone.utc), Policy())
    assert late.days == 2
    assert float(rows["erin"]["raw_score"]) == total
    assert abs(float(rows["erin"]["score"]) - late.apply(ours["erin"].score)) < 1e-6, rows["erin"]
    for student in ("alice", "bob", "carol", "erin"):
        assert float(rows[student]["max_score"]) == total
        feedback = (course / "feedback" / student / A / f"{A}.html").read_text()
        assert "BEGIN HIDDEN TESTS" not in feedback and "autograder.checks" not in feedback

    # the same commands again: bob fixed his notebook (its time older than the first run), alice's
    # grading was interrupted (nbgrader left her folder without its notebook); the rest is kept
    before = rows
    endless_free = course / "submitted" / "bob" / A / f"{A}.ipynb"
    shutil.copyfile(PERFECT, endless_free)
    os.utime(endless_free, ((due - timedelta(hours=1)).timestamp(),) * 2)
    (course / "autograded" / "alice" / A / f"{A}.ipynb").unlink()
    said, seconds = run_block(course, fast)
    print(f"second run: {seconds:.0f} s")
    assert "Timeout waiting for execute reply" not in said
    for student in ("carol", "erin", "frank"):
        assert f"Skipping existing assignment: {os.path.join('autograded', student, A)}" in said.replace(str(course) + "/", "")
    rows = exported(course)
    assert float(rows["bob"]["score"]) == total and float(rows["alice"]["score"]) == total
    for student in ("carol", "dave", "erin", "frank"):
        assert rows[student] == before[student], student
    cleared = sorted(re.findall(r"cleared autograded/(\w+)/", said))
    assert cleared == ["alice", "bob"], said[-3000:]  # frank's unreadable notebook is not graded again either

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
