"""What nbgrader needs to grade a class as the autograder does (`nbgrader_config.py` uses it).

- `TimedExecute`: nbgrader's Execute with the autograder's limits (`sandbox/limits.py`): a
  student's cell is stopped after `cell_seconds` (60 s), a graded cell, which runs all of an
  exercise's checks, after `test_cell_seconds` (120 s, the autograder's time for one exercise's
  checks); no second try, and one line in the cell's output.
- `LatePenalty`: nbgrader's late-submission plugin with the autograder's rule (`late.Policy`).
- `prepare(...)` (`python -m autograder nbgrader-prepare`): the collected submissions put into
  nbgrader's layout (a misplaced notebook moved where nbgrader looks), each notebook's time
  written where nbgrader reads it, the results of an interrupted run cleared so that the next
  run grades them again, and every student (roster and folders) written in nbgrader's columns
  for `nbgrader db student import`.
- `skip_unreadable(Autograde)`: a notebook that is not a notebook (truncated, not JSON) is left
  out of nbgrader's run with one line saying why (it scores 0), instead of a traceback and a
  failed run."""
import csv
import hashlib
import json
import math
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import Execute
from traitlets import Float, Integer

from .late import DAY, Policy
from .sandbox.limits import Limits

LIMITS = Limits()
STUDENT_COLUMNS = ["id", "first_name", "last_name", "email", "lms_user_id"]


class TimedExecute(Execute):
    """nbgrader's Execute, its time-out per cell the autograder's: `cell_seconds` for a student's
    cell, `test_cell_seconds` for a graded (hidden-test) cell. A cell past its time is interrupted
    (its output says so, in one line) and the next cell runs."""

    cell_seconds = Float(LIMITS.cell_seconds, help="time-out of a student's cell, in seconds").tag(config=True)
    test_cell_seconds = Float(LIMITS.exercise_seconds,
                              help="time-out of a graded cell (all of one exercise's checks), in seconds").tag(config=True)

    def _get_timeout(self, cell):
        if cell is None:
            return super()._get_timeout(cell)
        graded = bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))
        return int(math.ceil(self.test_cell_seconds if graded else self.cell_seconds))


class LatePenalty(LateSubmissionPlugin):
    """The autograder's late rule (`autograder/late.py`, `grade --late-penalty/--late-max-days`):
    `percent_per_day` % of the points earned per day or part of a day late, for up to `max_days`
    days; later, 0. nbgrader subtracts the penalty returned from the notebook's score."""

    percent_per_day = Float(Policy.percent_per_day, help="% of the points earned lost per day late").tag(config=True)
    max_days = Integer(Policy.max_days, help="days after which a late notebook scores 0").tag(config=True)

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        if not total_seconds_late or total_seconds_late <= 0:
            return None
        days = math.ceil(total_seconds_late / DAY.total_seconds())
        percent = Policy(self.percent_per_day, self.max_days).percent(days)
        kept = round(score * (1 - percent / 100), 6)
        self.log.info("%s is %d day(s) late: %g%% of %g points", student_id, days, percent, score)
        return score - kept


def skip_unreadable(autograde_class):
    """Wraps nbgrader's Autograde.init_assignment: a submitted notebook the autograder would
    refuse as unreadable is taken out of the run with one warning (the submission stays, with 0)."""
    from .notebook import NotebookError, load_submission
    original = autograde_class.init_assignment
    if getattr(original, "_skips_unreadable", False):
        return

    def init_assignment(self, assignment_id, student_id):
        original(self, assignment_id, student_id)
        kept = []
        for path in self.notebooks:
            try:
                load_submission(Path(path), assignment_id)
            except NotebookError as error:
                self.log.warning("%s/%s scores 0: %s", student_id, assignment_id, " ".join(str(error).split()))
                continue
            except Exception:  # anything else is nbgrader's to run and report
                pass
            kept.append(path)
        self.notebooks = kept

    init_assignment._skips_unreadable = True
    autograde_class.init_assignment = init_assignment


def _timestamp(path):
    return datetime.fromtimestamp(os.stat(path).st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _readable(path, assignment):
    """Whether nbgrader runs the notebook (`skip_unreadable` leaves out one the autograder refuses)."""
    from .notebook import NotebookError, load_submission
    try:
        load_submission(Path(path), assignment)
    except NotebookError:
        return False
    return True


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def prepare(submissions, roster_path=None, students_out="students.csv", autograded="autograded"):
    """The lines to print. Every rule makes a second run with nothing changed do nothing:

    - a notebook found elsewhere than `<student>/<a>/<a>.ipynb` by `pipeline.discover` (the
      autograder's rules: `carol/01-weights.ipynb`, `carol/01_weights/`) is moved there, its time kept;
    - `timestamp.txt` beside it (nbgrader's time handed in: the late penalty, and a newer one is
      regraded) is written from the notebook's modification time, when there is none or when it
      is one this command wrote for another version of the notebook (one from nbgrader's exchange
      is kept);
    - `autograded/<student>/<a>/` is removed when it has no notebook (a run interrupted while
      grading it: nbgrader would skip it, keeping its 0) or when the notebook changed since the
      last run of this command (nbgrader compares only the times); nbgrader then grades it again;
    - every student (the roster's, then every folder) is written in nbgrader's columns to
      `students_out`, for `nbgrader db student import`."""
    from . import roster as rosters
    from .pipeline import discover
    jobs, problems = discover(submissions)
    said = [f"note: {student + ': ' if student else ''}{text}" for student, text in problems]
    record_path = os.path.join(autograded, ".nbgrader-prepare.json")
    try:
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {}
    moved = stamped = cleared = 0
    for job in jobs:
        if not job.path:
            continue
        home = os.path.join(submissions, job.student, job.assignment)
        where = os.path.join(home, f"{job.assignment}.ipynb")
        if os.path.abspath(job.path) != os.path.abspath(where):
            if os.path.lexists(where):
                said.append(f"note: {job.student}/{job.assignment}: {where} exists; {job.path} left where it is")
                continue
            os.makedirs(home, exist_ok=True)
            os.rename(job.path, where)  # keeps its time, which is when it was handed in
            said.append(f"moved {job.path} -> {where}")
            moved += 1
        key = f"{job.student}/{job.assignment}"
        before, now = record.get(key, {}), {"sha256": _sha256(where)}
        stamp, time = os.path.join(home, "timestamp.txt"), _timestamp(where)
        try:
            with open(stamp, encoding="utf-8") as f:
                written = f.read().strip()
        except OSError:
            written = None
        if written is None or (written == before.get("timestamp") and written != time):
            with open(stamp, "w", encoding="utf-8") as f:
                f.write(time + "\n")
            stamped += 1
            now["timestamp"] = time
        elif written == before.get("timestamp"):
            now["timestamp"] = written
        done = os.path.join(autograded, job.student, job.assignment)
        changed = before.get("sha256") not in (None, now["sha256"])
        unfinished = not os.path.exists(os.path.join(done, f"{job.assignment}.ipynb")) and _readable(where, job.assignment)
        if os.path.isdir(done) and (changed or unfinished):
            shutil.rmtree(done)
            said.append(f"cleared {done} ({'the notebook changed' if changed else 'an interrupted run'}): "
                        f"nbgrader grades it again")
            cleared += 1
        record[key] = now
    os.makedirs(autograded, exist_ok=True)
    with open(record_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    os.replace(record_path + ".tmp", record_path)
    roster = rosters.read(roster_path) if roster_path else {}
    students = list(roster) + sorted({j.student for j in jobs} - set(roster))
    with open(students_out, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(STUDENT_COLUMNS)
        for folder in students:
            student = roster.get(folder)
            first, _, last = (student.name if student else "").rpartition(" ")
            out.writerow([folder, first, last, student.email if student else "", student.lms_id if student else ""])
    said.append(f"{students_out}: {len(students)} students; {moved} notebooks moved, {stamped} times written, "
                f"{cleared} results cleared")
    return said
