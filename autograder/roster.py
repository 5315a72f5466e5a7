"""The class roster: who the submission folders are, for the feedback, the tables and the LMS.

A roster is a CSV file with a header row (UTF-8; a spreadsheet's byte-order mark is fine). Only
`folder` is required; a column left out or a cell left empty is simply not known:

    folder        the student's folder under SUBMISSIONS (`alice` for alice/01-weights/01-weights.ipynb)
    name          the display name ("Alice Martin"): the feedback page, the table, grades.csv, the exports
    lms_id        the student's id in the LMS: Canvas's "ID" (its user id), Moodle's "ID number"
    sis_user_id   Canvas's "SIS User ID"
    sis_login_id  Canvas's "SIS Login ID"
    section       Canvas's "Section"
    email         the student's email: Moodle's "Email address" (how its import finds the student)

Any other column, a missing `folder` column, an empty folder and a folder listed twice are
errors (RosterError, with the line): a typo in a header must not empty a column of the export."""
import csv
from dataclasses import dataclass, fields

from .text import bounded


class RosterError(ValueError):
    pass


@dataclass(frozen=True)
class Student:
    folder: str
    name: str = ""
    lms_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""

    @property
    def display(self):
        return self.name or self.folder


COLUMNS = [f.name for f in fields(Student)]


def read(path):
    """{folder: Student}, in the file's order."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as error:
        raise RosterError(f"roster {path}: cannot be read ({error})") from None
    if not rows:
        raise RosterError(f"roster {path} is empty: its first line names the columns ({','.join(COLUMNS)})")
    header = [h.strip().lower() for h in rows[0]]
    unknown = [h for h in header if h not in COLUMNS]
    if unknown or "folder" not in header or len(set(header)) != len(header):
        problem = (f"unknown column {', '.join(map(repr, unknown))}" if unknown else
                   "no 'folder' column" if "folder" not in header else "a column named twice")
        raise RosterError(f"roster {path}: {problem}; its columns are {', '.join(COLUMNS)} (only folder is required)")
    roster = {}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if len(row) > len(header):
            raise RosterError(f"roster {path}, line {number}: {len(row)} cells for {len(header)} columns")
        values = {h: bounded(cell.strip(), 500) for h, cell in zip(header, row)}
        folder = values.get("folder", "")
        if not folder:
            raise RosterError(f"roster {path}, line {number}: no folder")
        if folder in roster:
            raise RosterError(f"roster {path}, line {number}: folder {folder} is listed twice")
        roster[folder] = Student(**values)
    return roster


def display(roster, folder):
    """The student's display name; the folder itself when there is no roster or no name."""
    student = (roster or {}).get(folder)
    return student.display if student else folder
