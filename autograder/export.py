"""Grades for an LMS: one row per student, one column per assignment (its total), from grades.csv.

A pipeline: `read_grades` (grades.csv: each student's total per assignment, after the late
penalty where grades.csv has one) → `with_roster` (who each student is; roster students with no
rows get 0) → one writer per format (`FORMATS`):

- `plain`: `student[,name],<assignment>...,total`, then a "Points Possible" row.
- `canvas`: Canvas's gradebook import: `Student,ID,SIS User ID,SIS Login ID,Section`, one column
  per assignment named after it (Canvas makes a new assignment of a column it does not know; a
  column named `Name (id)` updates its assignment `id`), and a "Points Possible" row second, as
  in Canvas's own export. No total column: Canvas computes its own.
- `moodle`: Moodle's "Import grades from CSV": one identifier column (`Email address`, or
  `ID number` with the roster's lms_id), then one column per grade item (each assignment); no
  "Points Possible" row and no total, since every row must be a student Moodle knows (one it does
  not find stops the whole import). A student with no identifier is left out, with a warning.

Its text cells are written through for_csv_cell again: a grades.csv written by hand or by an
older version is made as inert as the grader's own (whose cells come back unchanged)."""
import csv
import io
import os
from collections import defaultdict
from dataclasses import dataclass, field

from .files import atomic_write
from .report import _number
from .roster import Student
from .text import for_csv_cell

FORMATS = ("plain", "canvas", "moodle")
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTIFIERS = {"email": "Email address", "lms_id": "ID number"}
# Missing work (no notebook handed in): canvas and moodle write a blank cell by default, which an
# import leaves alone (a 0 would overwrite a grade given by hand, an extension's); "zero" writes 0.
MISSING = ("blank", "zero")
NOTHING_HANDED_IN = "not graded: nothing to grade"   # the message of discover's and the roster's refusal rows


@dataclass
class Grades:
    """What grades.csv holds, per student and assignment: the total (after the late penalty)."""
    assignments: list
    possible: dict                                  # assignment -> its points
    scores: dict                                    # student folder -> {assignment: total}
    names: dict = field(default_factory=dict)       # student folder -> display name (grades.csv's `name`)


def read_grades(grades_csv):
    scores, maxima, names = defaultdict(dict), defaultdict(dict), {}
    with open(grades_csv, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            score = row.get("score_after_penalty") or row["score"]
            scores[row["student"]][row["assignment"]] = scores[row["student"]].get(row["assignment"], 0.0) + float(score)
            maxima[row["assignment"]][row["exercise"]] = float(row["max_score"])
            if row.get("name"):
                names[row["student"]] = row["name"]
    assignments = sorted(maxima)
    return Grades(assignments, {a: sum(maxima[a].values()) for a in assignments}, dict(scores), names)


@dataclass
class Row:
    student: Student        # from the roster, or a Student of the folder alone
    scores: list            # one per assignment, in Grades.assignments' order; a missing notebook counts 0
                            # (None in canvas and moodle: a blank cell, unless `export(missing="zero")`)


def with_roster(grades, roster=None):
    """([Row] in the roster's order then the other folders sorted, [warnings])."""
    roster = roster or {}
    warnings = []
    for folder in roster:
        if folder not in grades.scores:
            warnings.append(f"{folder} (roster) has no rows in the grades: 0 for every assignment")
    others = sorted(set(grades.scores) - set(roster))
    if roster:
        warnings += [f"{folder} has grades but is not in the roster: exported with no LMS id" for folder in others]
    people = list(roster.values()) + [Student(folder, grades.names.get(folder, "")) for folder in others]
    return [Row(s, [grades.scores.get(s.folder, {}).get(a, 0.0) for a in grades.assignments]) for s in people], warnings


def _csv(rows):
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def plain(grades, rows, roster=None, **_):
    named = bool(roster)
    header = ["student"] + ["name"] * named + [for_csv_cell(a) for a in grades.assignments] + ["total"]
    possible = [grades.possible[a] for a in grades.assignments]
    lines = [header, ["Points Possible"] + [""] * named + [_number(x) for x in possible] + [_number(sum(possible))]]
    for row in sorted(rows, key=lambda r: r.student.folder):
        lines.append([for_csv_cell(row.student.folder)] + [for_csv_cell(row.student.display)] * named
                     + [_number(x) for x in row.scores] + [_number(sum(row.scores))])
    return _csv(lines), []


def _cell(x):
    return "" if x is None else _number(x)


def _handed_in(grades_csv):
    """{(student, assignment)} with a notebook: a row in grades.csv that is not a refusal for
    nothing handed in (a notebook that scored 0, or could not be read, was handed in)."""
    with open(grades_csv, newline="", encoding="utf-8") as f:
        return {(r["student"], r["assignment"]) for r in csv.DictReader(f)
                if not (r.get("message") or "").startswith(NOTHING_HANDED_IN)}


def canvas(grades, rows, **_):
    lines = [CANVAS_COLUMNS + [for_csv_cell(a) for a in grades.assignments],
             ["Points Possible", "", "", "", ""] + [_number(grades.possible[a]) for a in grades.assignments]]
    for row in rows:
        s = row.student
        lines.append([for_csv_cell(x) for x in (s.display, s.lms_id, s.sis_user_id, s.sis_login_id, s.section)]
                     + [_cell(x) for x in row.scores])
    return _csv(lines), []


def moodle(grades, rows, identify="email", **_):
    if identify not in MOODLE_IDENTIFIERS:
        raise ValueError(f"Moodle identifies a student by {' or '.join(MOODLE_IDENTIFIERS)}, not {identify}")
    lines = [[MOODLE_IDENTIFIERS[identify]] + [for_csv_cell(a) for a in grades.assignments]]
    warnings = []
    for row in rows:
        key = getattr(row.student, identify)
        if not key:
            warnings.append(f"{row.student.folder}: no {identify} in the roster: left out of the Moodle file "
                            f"(Moodle stops an import at a student it cannot find)")
            continue
        lines.append([for_csv_cell(key)] + [_cell(x) for x in row.scores])
    return _csv(lines), warnings


WRITERS = {"plain": plain, "canvas": canvas, "moodle": moodle}


def export(grades_csv, format="plain", roster=None, identify="email", missing="blank"):
    """(the file's text, [warnings for the instructor]). `missing`: what canvas and moodle write for
    an assignment a student handed in no notebook of, "blank" (an empty cell) or "zero"."""
    if missing not in MISSING:
        raise ValueError(f"missing work is exported as {' or '.join(MISSING)}, not {missing}")
    grades = read_grades(grades_csv)
    rows, warnings = with_roster(grades, roster)
    if missing == "blank" and format in ("canvas", "moodle"):
        handed_in = _handed_in(grades_csv)
        for row in rows:
            row.scores = [None if (row.student.folder, a) not in handed_in else x
                          for a, x in zip(grades.assignments, row.scores)]
    text, more = WRITERS[format](grades, rows, roster=roster, identify=identify)
    return text, warnings + more


def lms_table(grades_csv):
    """The plain table (today's export)."""
    return export(grades_csv)[0]


def write_lms(grades_csv, path, format="plain", roster=None, identify="email", missing="blank"):
    """Writes the export; returns (path, [warnings])."""
    text, warnings = export(grades_csv, format, roster, identify, missing)
    atomic_write(os.path.abspath(path), text)
    return path, warnings
