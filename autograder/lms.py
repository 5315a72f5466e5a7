"""From Canvas or Moodle and back: their files converted to and from the course's layout (no grading).

In: `import_canvas` and `import_moodle` read an LMS's "Download all submissions" zip of one
assignment and write `SUBMISSIONS/<student>/<a>/<a>.ipynb`, a `submitted-at` CSV in the format
`grade --submitted-at` reads (`student,assignment,submitted_at`, plus `late` and `lms_file`), a
manifest of what was taken from the zip, and `roster.csv` (roster.py's columns) from the LMS's
own export. Back: `feedback_zip` writes Moodle's feedback-files zip from grade's feedback pages,
and `graded_worksheet` Moodle's grading worksheet with `Grade` and `Feedback comments` filled.

The student's folder is the key the grade exports match on (export.py): Canvas's user `ID` (the
roster's `lms_id`, which `export --format canvas` writes in Canvas's `ID` column), and Moodle's
`Email address` (the roster's `email`, which `export --format moodle` writes). Both stay the same
from one assignment to the next; Moodle's participant number does not (it is per assignment).

The formats, as the platforms' source writes and reads them:

- Canvas's download (instructure/canvas-lms lib/content_zipper.rb, `get_filename`,
  `add_upload_submission`, `sanitize_user_name`): one flat zip, each uploaded file named
  `<sortable name>[_LATE]_<user id>_<attachment id>_<file name>`, the sortable name lower-cased
  with every non-word character removed (`lovelaceada`); `LATE` (`late` in older downloads) when
  Canvas marked the submission late; `anon_<id>` for the user id when grading is anonymous (then
  no name). Text entries and URLs come as `<prefix>_text.html` / `_link.html`. The zip's entry
  times are when the zip was made (rubyzip's default), not hand-in times: Canvas's download has
  none, and neither has its gradebook export. Only the `late` flag (Canvas's own rule, with each
  student's due date and extensions) is kept, in the manifest's `late` column.
- Canvas's gradebook export (Grades → Export): `Student` ("Lovelace, Ada"), `ID`, `SIS User
  ID`, `SIS Login ID`, [`Integration ID`], `Section`, then one column per assignment; a
  `Points Possible` row (and, in newer exports, a "Manual Posting" row) before the students:
  a row whose `ID` is not a number is not a student.
- Moodle's download (moodle/moodle mod/assign/classes/downloader.php, `get_student_prefix`,
  `load_submissionplugin_filelist`): with "Download submissions in folders" (the default since
  3.1), `<Full Name>_<participant id>_assignsubmission_file/<file>` (`..._file_/` before 4.1);
  without, flat files `<Full Name>_<participant id>_assignsubmission_file_<file>`. The full
  name has its `_` made spaces. The participant id is the assignment's own number for the
  student (`get_uniqueid_for_user`), the one of the worksheet's `Identifier`. Moodle's zip
  writer (files/classes/local/archive_writer/zip_writer.php, `add_file_from_stored_file` without a
  `time` option, as downloader.php calls it) stamps entries with the current time.
- Moodle's grading worksheet (mod/assign/gradingtable.php, "Download grading worksheet"):
  `Identifier` ("Participant 12345"), `Full name`, the identity fields (`Email address`, `ID
  number` when the site shows them), `Status`, `Grade`, `Maximum Grade`, `Grade can be changed`,
  `Last modified (submission)`, `Last modified (grade)`, `Feedback comments`. The times are
  `userdate()`'s text ("Monday, 5 October 2026, 11:59 PM") in the downloader's time zone with
  no offset, hence `timezone`; `-` when nothing was submitted. Its import (mod/assign/feedback/
  offline/importgradeslib.php) needs `Identifier`, `Grade` and `Last modified (grade)`, takes the
  number after "Participant", and reads a feedback plugin's column by its name (`Feedback
  comments`, assignfeedback_comments' name).
- Moodle's "Upload multiple feedback files in a zip" (mod/assign/feedback/file/importziplib.php,
  `is_valid_filename_for_import`): a path part split on `_` must give `<name>_<participant
  id>_assignfeedback_file[_...]`, the participant id a number of the assignment's participants;
  the rest of the path is the file's name. `<Full Name>_<participant id>_assignfeedback_file_/
  <a>.html` is read by both the importer before 4.1 (one split of the whole path, five parts)
  and after.

Which file is the notebook: of a student's files, the `.ipynb` whose name is closest to
`<a>.ipynb` (a browser's ` (1)`, a `Copy of `, Canvas's `-1` for a second upload, case and `_`
for `-` do not count); on a tie, the newest (Canvas's highest attachment id, else the last in
the zip). Every other file (a PDF, another notebook) is listed in the notes for the instructor
and the manifest; a student with no notebook gets no folder (with a roster, 0 and the reason)."""
import csv
import io
import os
import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import assignments
from .files import atomic_write
from .notebook import assignment_of_filename
from .roster import COLUMNS as ROSTER_COLUMNS

MAX_NOTEBOOK_BYTES = 64 * 2**20   # the grader refuses bigger notebooks anyway
CANVAS_ID_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_PARTICIPANT = re.compile(r"(\d+)\s*$")
MOODLE_TIME = "%A, %d %B %Y, %I:%M %p"      # userdate()'s strftimedaydatetime, English
TIMES_COLUMNS = ["student", "assignment", "submitted_at", "late", "lms_file"]
MANIFEST_COLUMNS = ["student", "assignment", "name", "lms_key", "submitted_at", "late", "notebook", "other_files"]


class LmsError(ValueError):
    pass


@dataclass
class Handed:
    """One student's files of one assignment, from the download."""
    folder: str                  # the student's folder (Canvas user id, Moodle email)
    name: str = ""               # the display name the LMS gives
    key: str = ""                # the LMS's own key for it in the download (Canvas user id, Moodle participant id)
    late: str = ""               # "yes"/"no" where the LMS says (Canvas's LATE), else ""
    submitted_at: str = ""       # ISO 8601 with offset, where known
    files: list = field(default_factory=list)   # [(name in the zip, the file's own name, order)]
    notebook: str = ""           # the zip entry taken
    others: list = field(default_factory=list)  # the files not taken


# --- choosing the notebook -------------------------------------------------------------------

def closeness(name, assignment):
    """0 for `<a>.ipynb` itself, 1 for a name that stands for it (`notebook.assignment_of_filename`,
    the rule of every route: `(1)`, `Copy of`, `-1`, case, `_`), more the farther the name."""
    if name == f"{assignment}.ipynb":
        return 0.0
    if assignment_of_filename(name, assignments()) == assignment:
        return 1.0
    stem = name[:-len(".ipynb")] if name.lower().endswith(".ipynb") else name
    return 2.0 + (1.0 - SequenceMatcher(None, stem.lower(), assignment).ratio())


def choose(handed, assignment):
    """Sets handed.notebook and handed.others: the closest notebook, the newest on a tie."""
    notebooks = [f for f in handed.files if f[1].lower().endswith(".ipynb")]
    if notebooks:
        best = min(notebooks, key=lambda f: (closeness(f[1], assignment), -f[2]))
        handed.notebook = best[0]
    handed.others = [f[0] for f in handed.files if f[0] != handed.notebook]
    return handed


# --- reading the downloads ------------------------------------------------------------------

def _zip(path):
    try:
        return zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise LmsError(f"{path}: not a zip file the LMS gave ({error})") from None


def _entries(archive):
    return [info for info in archive.infolist() if not info.is_dir()
            and not os.path.basename(info.filename).startswith(".")
            and not info.filename.startswith("__MACOSX/")]


CANVAS_NAME = re.compile(r"^(?:(?P<name>.*?)_)??(?:(?P<late>late)_)?(?P<user>\d+|anon_[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<file>.+)$",
                         re.I)
CANVAS_TEXT = re.compile(r"^(?:(?P<name>.*?)_)??(?:(?P<late>late)_)?(?P<user>\d+|anon_[A-Za-z0-9]+)_(?P<file>text\.html|link\.html)$",
                         re.I)


def parse_canvas_name(name):
    """{name, late, user, attachment, file} of a file in Canvas's download, or None."""
    match = CANVAS_NAME.match(name) or CANVAS_TEXT.match(name)
    if not match:
        return None
    found = match.groupdict()
    found.setdefault("attachment", None)
    return found


def read_canvas(download, assignment):
    """({folder: Handed}, [notes]) from Canvas's "Download Submissions" zip."""
    handed, notes = {}, []
    with _zip(download) as archive:
        for order, info in enumerate(_entries(archive)):
            base = os.path.basename(info.filename)
            parsed = parse_canvas_name(base)
            if parsed is None:
                notes.append(f"{base}: not named as Canvas names a submission's file "
                             f"(<name>[_LATE]_<user id>_<file id>_<file>): left out")
                continue
            folder = parsed["user"]
            student = handed.setdefault(folder, Handed(folder, parsed["name"] or "", folder))
            if parsed["late"]:
                student.late = "yes"
            order_key = int(parsed["attachment"]) if parsed["attachment"] else -1
            student.files.append((info.filename, parsed["file"], order_key))
    for student in handed.values():
        student.late = student.late or "no"
        choose(student, assignment)
    return handed, notes


def read_canvas_gradebook(path):
    """[roster.Student fields as a dict] from Canvas's gradebook export, in its order."""
    rows = _csv_rows(path)
    if not rows or "ID" not in rows[0] or "Student" not in rows[0]:
        raise LmsError(f"{path}: not Canvas's gradebook export (its first columns are {', '.join(CANVAS_ID_COLUMNS)})")
    people = []
    for row in rows[1:]:
        user = row.get("ID", "").strip()
        if not user.isdigit():
            continue   # "Points Possible", "Manual Posting" and other rows that are not students
        people.append({"folder": user, "name": row.get("Student", "").strip(), "lms_id": user,
                       "sis_user_id": row.get("SIS User ID", "").strip(),
                       "sis_login_id": row.get("SIS Login ID", "").strip(),
                       "section": row.get("Section", "").strip()})
    return people


def parse_moodle_path(path):
    """(full name, participant id, plugin subtype, plugin type, the file's name) of a file in
    Moodle's download, folders or flat, or None; as importziplib.php splits a path part."""
    parts = path.split("/")
    for index, part in enumerate(parts):
        info = part.split("_", 4)
        if len(info) < 4 or not info[1].isdigit():
            continue
        rest = "/".join(([info[4]] if len(info) == 5 and info[4] else []) + parts[index + 1:])
        if rest:
            return info[0], info[1], info[2], info[3], rest
    return None


def read_moodle_worksheet(path, timezone=None):
    """{participant id: row dict} from Moodle's grading worksheet; each row gets `_submitted_at`
    (ISO 8601 with offset, "" when none or no `timezone`)."""
    rows = _csv_rows(path)
    if not rows or "Identifier" not in rows[0] or "Full name" not in rows[0]:
        raise LmsError(f"{path}: not Moodle's grading worksheet (no Identifier and Full name columns)")
    zone = _zone(timezone) if timezone else None
    found = {}
    for number, row in enumerate(rows[1:], start=2):
        match = MOODLE_PARTICIPANT.search(row.get("Identifier", ""))
        if not match:
            continue
        row["_submitted_at"] = ""
        text = (row.get("Last modified (submission)") or "").strip()
        if text and text != "-" and zone is not None:
            try:
                row["_submitted_at"] = datetime.strptime(text, MOODLE_TIME).replace(tzinfo=zone).isoformat()
            except ValueError:
                raise LmsError(f"{path}, line {number}: Last modified (submission) {text!r} is not Moodle's "
                               f"English date ({MOODLE_TIME}, e.g. Monday, 5 October 2026, 11:59 PM)") from None
        found[match.group(1)] = row
    return found


def moodle_folder(row):
    email = (row.get("Email address") or "").strip().lower()
    return _safe_folder(email)


def read_moodle(download, assignment, worksheet):
    """({folder: Handed}, [notes]) from Moodle's "Download all submissions" zip; the worksheet
    ({participant id: row}) gives each participant's email (the folder), name and time."""
    handed, notes = {}, []
    with _zip(download) as archive:
        for order, info in enumerate(_entries(archive)):
            parsed = parse_moodle_path(info.filename)
            if parsed is None:
                notes.append(f"{info.filename}: not named as Moodle names a submission's file "
                             f"(<Full Name>_<participant id>_assignsubmission_file/<file>): left out")
                continue
            fullname, participant, subtype, plugin, rest = parsed
            if subtype != "assignsubmission" or plugin != "file":
                notes.append(f"{info.filename}: from the {subtype}_{plugin} plugin, not a file submission: left out")
                continue
            row = worksheet.get(participant)
            if row is None or not moodle_folder(row):
                notes.append(f"{info.filename}: participant {participant} ({fullname}) is not in the worksheet"
                             f"{'' if row is None else ' with an email address'}: left out (download the worksheet "
                             f"of the same assignment, with the email addresses shown)")
                continue
            folder = moodle_folder(row)
            student = handed.setdefault(folder, Handed(folder, (row.get("Full name") or fullname).strip(), participant,
                                                       _moodle_late(row), row["_submitted_at"]))
            student.files.append((info.filename, os.path.basename(rest), order))
    for student in handed.values():
        choose(student, assignment)
    return handed, notes


def _moodle_late(row):
    status = (row.get("Status") or "").lower()
    return "yes" if " late" in status else ("no" if status else "")


def moodle_roster(worksheet):
    people = []
    for row in worksheet.values():
        folder = moodle_folder(row)
        if folder:
            people.append({"folder": folder, "name": (row.get("Full name") or "").strip(),
                           "lms_id": (row.get("ID number") or "").strip(), "email": folder})
    return people


# --- writing the layout ---------------------------------------------------------------------

def write_layout(download, handed, assignment, to):
    """Writes each chosen notebook as TO/<folder>/<a>/<a>.ipynb (its time set to the hand-in
    time where known); returns [notes]."""
    notes = []
    with _zip(download) as archive:
        for folder, student in sorted(handed.items()):
            who = f"{folder}" + (f" ({student.name})" if student.name else "")
            if not student.notebook:
                notes.append(f"{who}: no notebook among {', '.join(os.path.basename(f) for f in student.others)}: "
                             f"nothing written (0 with a roster, and the reason)")
                continue
            info = archive.getinfo(student.notebook)
            if info.file_size > MAX_NOTEBOOK_BYTES:
                notes.append(f"{who}: {os.path.basename(student.notebook)} is over 64 MB: not written")
                continue
            target = os.path.join(to, folder, assignment, f"{assignment}.ipynb")
            with archive.open(info) as source:
                body = source.read(MAX_NOTEBOOK_BYTES + 1)   # the header's size may lie: at most this much read
            if len(body) > MAX_NOTEBOOK_BYTES:
                notes.append(f"{who}: {os.path.basename(student.notebook)} is over 64 MB: not written")
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target + ".tmp", "wb") as out:
                out.write(body)
            os.replace(target + ".tmp", target)
            if student.submitted_at:
                stamp = datetime.fromisoformat(student.submitted_at).timestamp()
                os.utime(target, (stamp, stamp))
            taken = os.path.basename(student.notebook)
            if student.others:
                notes.append(f"{who}: took {taken}; also handed in, not graded: "
                             f"{', '.join(os.path.basename(f) for f in student.others)}")
            elif closeness(_file_name(taken), assignment) > 0:
                notes.append(f"{who}: took {taken} as {assignment}.ipynb")
    return notes


def _file_name(zip_base):
    parsed = parse_canvas_name(zip_base)
    return parsed["file"] if parsed else zip_base.split("_assignsubmission_file_")[-1]


def write_times(path, handed, assignment):
    """The `grade --submitted-at` CSV: this assignment's rows replaced, the others' kept (one file
    for every assignment imported); only students whose hand-in time is known. Returns its count."""
    kept = [r for r in _csv_rows(path)[1:] if r.get("assignment") != assignment] if os.path.exists(path) else []
    rows = kept + [{"student": s.folder, "assignment": assignment, "submitted_at": s.submitted_at, "late": s.late,
                    "lms_file": os.path.basename(s.notebook)}
                   for s in sorted(handed.values(), key=lambda s: s.folder) if s.submitted_at and s.notebook]
    atomic_write(path, _csv_text(TIMES_COLUMNS, rows))
    return sum(1 for r in rows if r["assignment"] == assignment)


def write_manifest(path, handed, assignment):
    """What the import took, per student (merged across assignments as write_times is)."""
    kept = [r for r in _csv_rows(path)[1:] if r.get("assignment") != assignment] if os.path.exists(path) else []
    rows = kept + [{"student": s.folder, "assignment": assignment, "name": s.name, "lms_key": s.key,
                    "submitted_at": s.submitted_at, "late": s.late, "notebook": os.path.basename(s.notebook),
                    "other_files": " | ".join(os.path.basename(f) for f in s.others)}
                   for s in sorted(handed.values(), key=lambda s: s.folder)]
    atomic_write(path, _csv_text(MANIFEST_COLUMNS, rows))


def write_roster(path, people):
    atomic_write(path, _csv_text(ROSTER_COLUMNS, people))


def import_download(lms, download, assignment, to, roster_out=None, gradebook=None, timezone=None,
                    times_out=None, manifest_out=None):
    """The `import` command: ({folder: Handed}, [notes], {what: path written})."""
    beside = os.path.dirname(os.path.abspath(to))
    times_out = times_out or os.path.join(beside, "submitted-at.csv")
    manifest_out = manifest_out or os.path.join(beside, "import-manifest.csv")
    if lms == "canvas":
        people = read_canvas_gradebook(gradebook) if gradebook else None
        handed, notes = read_canvas(download, assignment)
        if people is not None:
            names = {p["folder"]: p["name"] for p in people}
            for folder, student in handed.items():
                student.name = names.get(folder, student.name)
                if folder not in names:
                    notes.append(f"{folder} ({student.name}) handed in but is not in {gradebook}: graded, with no name")
        notes.append("Canvas's download holds no hand-in times (only its LATE flag, in the manifest's late column): "
                     "grade without --deadlines and let Canvas's late policy apply, or give --submitted-at from elsewhere")
    elif lms == "moodle":
        if not gradebook:
            raise LmsError("a Moodle import needs --gradebook: the assignment's grading worksheet (Assignment → "
                           "View all submissions → Download grading worksheet), for each participant's email and time")
        worksheet = read_moodle_worksheet(gradebook, timezone)
        if timezone is None and any((r.get("Last modified (submission)") or "-").strip() != "-" for r in worksheet.values()):
            notes_time = [f"no --timezone: the worksheet's times ({gradebook}) have no UTC offset, so none is kept; "
                          f"give your Moodle profile's time zone (e.g. --timezone Europe/Paris) to keep them"]
        else:
            notes_time = []
        people = moodle_roster(worksheet)
        handed, notes = read_moodle(download, assignment, worksheet)
        notes = notes_time + notes
    else:
        raise LmsError(f"unknown LMS {lms!r} (canvas or moodle)")
    if not handed:
        raise LmsError(f"{download}: no student's file found in it (is it the LMS's \"Download all submissions\" zip?)")
    notes += write_layout(download, handed, assignment, to)
    written = {"submissions": to, "manifest": manifest_out}
    write_manifest(manifest_out, handed, assignment)
    if lms == "moodle":   # Canvas's download has no times to write
        write_times(times_out, handed, assignment)
        written["submitted-at"] = times_out
    if roster_out:
        if people is None:
            people = [{"folder": s.folder, "name": s.name, "lms_id": s.folder} for s in handed.values()]
            notes.append(f"{roster_out}: from the download alone (no --gradebook): Canvas's ids, no display names")
        write_roster(roster_out, people)
        written["roster"] = roster_out
    return handed, notes, written


# --- back to Moodle -------------------------------------------------------------------------

def moodle_prefix(fullname, participant):
    """`<Full Name>_<participant id>` as Moodle's download names it: `_` in the name made spaces,
    and what clean_filename removes left out."""
    name = re.sub(r'[\x00-\x1f/\\:*?"<>|]', "", fullname.replace("_", " ")).strip() or "Participant"
    return f"{name}_{participant}"


def _folders_by_email(roster):
    return {s.email.strip().lower(): folder for folder, s in (roster or {}).items() if s.email}


def feedback_zip(out, worksheet_path, assignment, to, roster=None):
    """Moodle's feedback-files zip from OUT/feedback/<folder>/<a>.html: one folder per worksheet
    participant with a feedback page, `<Full Name>_<participant id>_assignfeedback_file_/<a>.html`.
    Returns ([folder names in the zip], [notes])."""
    worksheet = read_moodle_worksheet(worksheet_path)
    by_email = _folders_by_email(roster)
    handed_in = _handed_in(os.path.join(out, "grades.csv"), assignment)
    names, notes = [], []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for participant, row in worksheet.items():
            email = moodle_folder(row)
            folder = by_email.get(email, email)
            if folder and folder not in handed_in:
                continue   # nothing handed in: no feedback file, as the grade is left blank
            page = os.path.join(out, "feedback", folder, f"{assignment}.html") if folder else ""
            if not folder or not os.path.isfile(page):
                if (row.get("Last modified (submission)") or "-").strip() != "-":
                    notes.append(f"{row.get('Full name', '')} (participant {participant}): no feedback page "
                                 f"{page or '(no email address in the worksheet)'}")
                continue
            prefix = f"{moodle_prefix(row.get('Full name', ''), participant)}_assignfeedback_file_"
            info = zipfile.ZipInfo(f"{prefix}/{assignment}.html", date_time=datetime.now().timetuple()[:6])
            info.external_attr = 0o644 << 16     # grade writes the pages 0600; the zip's copy is readable
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(page, "rb") as f:
                archive.writestr(info, f.read())
            names.append(prefix)
    if not names:
        raise LmsError(f"no feedback page in {out}/feedback for any participant of {worksheet_path} "
                       f"(grade the imported submissions into {out} first)")
    os.makedirs(os.path.dirname(os.path.abspath(to)), exist_ok=True)
    with open(to + ".tmp", "wb") as f:
        f.write(buffer.getvalue())
    os.replace(to + ".tmp", to)
    return names, notes


def graded_worksheet(grades_csv, worksheet_path, assignment, to, roster=None):
    """Moodle's grading worksheet with `Grade` (the total after any late penalty) and `Feedback
    comments` ("12/12 — see the feedback file 01-weights.html") filled for each participant graded;
    every other column as downloaded (its import compares `Last modified (grade)`). Missing work
    (nothing handed in) keeps its cells. Returns [notes]."""
    from .export import read_grades
    from .report import _number
    grades = read_grades(grades_csv)
    if assignment not in grades.possible:
        raise LmsError(f"{grades_csv} has no grades of {assignment}")
    handed_in = _handed_in(grades_csv, assignment)
    rows = _csv_rows(worksheet_path)
    header = list(rows[0])
    if "Grade" not in header:
        raise LmsError(f"{worksheet_path}: no Grade column (download the grading worksheet again)")
    if "Feedback comments" not in header:
        header.append("Feedback comments")
    by_email = _folders_by_email(roster)
    possible, notes = grades.possible[assignment], []
    for row in rows[1:]:
        email = moodle_folder(row)
        folder = by_email.get(email, email)
        if not MOODLE_PARTICIPANT.search(row.get("Identifier", "")) or folder not in handed_in:
            continue
        total = grades.scores[folder][assignment]
        row["Grade"] = _number(total)
        row["Feedback comments"] = f"{_number(total)}/{_number(possible)} — see the feedback file {assignment}.html"
        maximum = (row.get("Maximum Grade") or "").strip()
        if maximum and _float(maximum) is not None and _float(maximum) != possible and not notes:
            notes.append(f"the worksheet's Maximum Grade is {maximum}, the assignment's points {_number(possible)}: "
                         f"the grades are points; set the Moodle assignment's maximum grade to {_number(possible)}")
    atomic_write(to, _csv_text(header, rows[1:]))
    return notes


# --- small things ---------------------------------------------------------------------------

def _handed_in(grades_csv, assignment):
    """The folders with a notebook of the assignment in grades.csv (not a refusal for nothing handed in)."""
    from .export import NOTHING_HANDED_IN
    try:
        with open(grades_csv, newline="", encoding="utf-8") as f:
            return {r["student"] for r in csv.DictReader(f) if r["assignment"] == assignment
                    and not (r.get("message") or "").startswith(NOTHING_HANDED_IN)}
    except OSError as error:
        raise LmsError(f"{grades_csv}: cannot be read ({error.strerror}): grade the imported submissions first") from None


def _float(text):
    try:
        return float(text)
    except ValueError:
        return None


def _zone(name):
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise LmsError(f"unknown timezone {name!r} (an IANA name, e.g. Europe/Paris)") from None


def _safe_folder(name):
    name = name.strip().replace("/", "_").replace("\\", "_")
    return "" if name in ("", ".", "..") else name.lstrip(".")


def _csv_rows(path):
    """[header list, then a dict per row] (a spreadsheet's byte-order mark is fine)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            lines = list(reader)
    except (OSError, UnicodeDecodeError) as error:
        raise LmsError(f"{path}: cannot be read ({error})") from None
    if not lines:
        return []
    header = [h.strip() for h in lines[0]]
    return [header] + [dict(zip(header, line)) for line in lines[1:] if any(c.strip() for c in line)]


def _csv_text(header, rows):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n", extrasaction="ignore", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
