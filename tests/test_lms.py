"""From Canvas or Moodle and back (autograder/lms.py): their submission downloads into the layout,
the roster from their exports, and Moodle's feedback-files zip and worksheet out of `grade`'s results.

The sample files are in tests/lms_samples/: the entry names of each download (the test writes the
zip, with chapter-1 notebooks from tests/submissions.py), Canvas's gradebook export and Moodle's
grading worksheet. The commands are the ones the instructors' guide shows."""
import csv
import zipfile
from datetime import datetime, timezone

import nbformat
import pytest

from conftest import BIN, REPO, run
from submissions import filled_notebook

from autograder.lms import (choose, closeness, Handed, parse_canvas_name, parse_moodle_path,
                            read_moodle_worksheet)
from autograder.roster import read as read_roster

A = "01-weights"
SAMPLES = REPO / "tests" / "lms_samples"
PERFECT = nbformat.writes(filled_notebook(A))
PARTIAL = nbformat.writes(filled_notebook(A, untouched={"softmax", "entropy"}))
# which entries hold the partial notebook; every other .ipynb entry holds the perfect one
PARTIAL_ENTRIES = {"babbagecharles_LATE_20002_90010_01-weights (1).ipynb",
                   "Charles Babbage_734502_assignsubmission_file_/01_weights.ipynb"}


def build_zip(listing, path):
    """The LMS's zip, from the entry names in a tests/lms_samples/*_download.txt."""
    names = [line for line in (SAMPLES / listing).read_text().splitlines() if line and not line.startswith("#")]
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            body = (PARTIAL if name in PARTIAL_ENTRIES else PERFECT) if name.endswith(".ipynb") else b"%PDF-1.4 stand-in"
            archive.writestr(name, body)
    return path


def csv_dicts(path):
    return list(csv.DictReader(open(path, newline="", encoding="utf-8")))


# --- the names, without grading ----------------------------------------------------------

def test_canvas_names_as_content_zipper_writes_them():
    assert parse_canvas_name("lovelaceada_20001_90001_01-weights.ipynb") == {
        "name": "lovelaceada", "late": None, "user": "20001", "attachment": "90001", "file": "01-weights.ipynb"}
    late = parse_canvas_name("babbagecharles_LATE_20002_90010_01-weights (1).ipynb")
    assert (late["name"], late["late"], late["user"], late["file"]) == ("babbagecharles", "LATE", "20002", "01-weights (1).ipynb")
    assert parse_canvas_name("smithjo_late_3_4_a_b_2.ipynb")["file"] == "a_b_2.ipynb"       # older downloads: "late"
    anonymous = parse_canvas_name("anon_Xy7Qz_90005_01-weights.ipynb")
    assert (anonymous["name"], anonymous["user"]) == (None, "anon_Xy7Qz")
    assert parse_canvas_name("hoppergrace_20003_text.html")["file"] == "text.html"
    assert parse_canvas_name("01-weights.ipynb") is None


def test_moodle_paths_in_folders_old_folders_and_flat():
    assert parse_moodle_path("Ada Lovelace_734501_assignsubmission_file/01-weights.ipynb") == (
        "Ada Lovelace", "734501", "assignsubmission", "file", "01-weights.ipynb")
    assert parse_moodle_path("Ada Lovelace_734501_assignsubmission_file_/sub/x.ipynb")[4] == "sub/x.ipynb"
    assert parse_moodle_path("Ada Lovelace_734501_assignsubmission_file_01-weights.ipynb")[4] == "01-weights.ipynb"
    assert parse_moodle_path("random/file.ipynb") is None


def test_the_closest_notebook_is_taken_the_others_listed():
    assert closeness("01-weights.ipynb", A) == 0
    for renamed in ("01-weights (1).ipynb", "Copy of 01-weights.ipynb", "01_weights.ipynb", "01-Weights-1.ipynb"):
        assert closeness(renamed, A) == 1, renamed
    assert closeness("scratch.ipynb", A) > 2
    student = choose(Handed("x", files=[("a", "scratch.ipynb", 1), ("b", "01-weights (2).ipynb", 2),
                                        ("c", "report.pdf", 3), ("d", "01-weights.ipynb", 0)]), A)
    assert student.notebook == "d" and student.others == ["a", "b", "c"]
    tie = choose(Handed("y", files=[("old", "01-weights (1).ipynb", 5), ("new", "Copy of 01-weights.ipynb", 9)]), A)
    assert tie.notebook == "new"        # the newest upload of two renamed copies


def test_moodle_worksheet_times_need_the_time_zone():
    rows = read_moodle_worksheet(SAMPLES / "moodle_worksheet.csv", "Europe/Paris")
    assert set(rows) == {"734501", "734502", "734503"}
    assert rows["734502"]["_submitted_at"] == "2026-10-07T03:00:00+02:00"
    assert rows["734503"]["_submitted_at"] == ""                                   # "-": nothing handed in
    assert read_moodle_worksheet(SAMPLES / "moodle_worksheet.csv")["734501"]["_submitted_at"] == ""


# --- in from the LMS, graded, and back ---------------------------------------------------

def moodle_import_accepts(folder, participants):
    """importziplib.php's is_valid_filename_for_import, for the path part that names the student."""
    info = folder.split("_", 4)
    return (len(info) >= 4 and info[1].isdigit() and info[1] in participants
            and (info[2], info[3]) == ("assignfeedback", "file"))


@pytest.fixture(scope="module")
def canvas_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("canvas")
    download = build_zip("canvas_download.txt", root / "canvas-download.zip")
    imported = run(BIN / "python", "-m", "autograder", "import", "canvas", download, "--assignment", A,
                   "--to", root / "submissions", "--gradebook", SAMPLES / "canvas_gradebook.csv",
                   "--roster-out", root / "roster.csv")
    graded = run(BIN / "python", "-m", "autograder", "grade", root / "submissions", "--out", root / "grades",
                 "--roster", root / "roster.csv")
    return root, imported, graded


def test_canvas_import_writes_the_layout_the_roster_and_the_notes(canvas_class):
    root, imported, _ = canvas_class
    folders = sorted(p.name for p in (root / "submissions").iterdir())
    assert folders == ["20001", "20002"]                      # Canvas's user ids; Grace handed in no notebook
    assert (root / "submissions" / "20002" / A / f"{A}.ipynb").read_text() == PERFECT   # the newer copy, 90011
    roster = read_roster(root / "roster.csv")
    assert list(roster) == ["20001", "20002", "20003", "20099"]
    ada = roster["20001"]
    assert (ada.name, ada.lms_id, ada.sis_user_id, ada.sis_login_id, ada.section) == (
        "Lovelace, Ada", "20001", "S1001", "ada", "Section A")
    notes = imported.stderr
    assert "also handed in, not graded: lovelaceada_20001_90002_report.pdf" in notes
    assert "babbagecharles_LATE_20002_90010_01-weights (1).ipynb" in notes
    assert "20003 (Hopper, Grace): no notebook" in notes
    assert "holds no hand-in times" in notes
    manifest = {r["student"]: r for r in csv_dicts(root / "import-manifest.csv")}
    assert (manifest["20002"]["late"], manifest["20001"]["late"]) == ("yes", "no")   # Canvas's LATE kept
    assert not (root / "submitted-at.csv").exists()


def test_canvas_class_grades_under_the_lms_ids_and_exports_for_canvas(canvas_class):
    root, _, graded = canvas_class
    rows = csv_dicts(root / "grades" / "grades.csv")
    total = {}
    for r in rows:
        total[r["student"]] = total.get(r["student"], 0) + float(r["score"])
    assert set(total) == {"20001", "20002", "20003", "20099"}
    assert total["20001"] == 12 and total["20002"] == 12 and total["20003"] == 0
    assert {r["name"] for r in rows if r["student"] == "20001"} == {"Lovelace, Ada"}
    run(BIN / "python", "-m", "autograder", "export", root / "grades" / "grades.csv", "--to", root / "canvas.csv",
        "--format", "canvas")
    exported = {r["ID"]: r for r in csv_dicts(root / "canvas.csv")}
    assert exported["20001"]["Student"] == "Lovelace, Ada" and exported["20001"][A] == "12"


@pytest.fixture(scope="module")
def moodle_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("moodle")
    download = build_zip("moodle_download.txt", root / "moodle-download.zip")
    worksheet = SAMPLES / "moodle_worksheet.csv"
    (root / "deadlines.csv").write_text(f"assignment,due,timezone\n{A},2026-10-06 23:59,Europe/Paris\n")
    imported = run(BIN / "python", "-m", "autograder", "import", "moodle", download, "--assignment", A,
                   "--to", root / "submissions", "--gradebook", worksheet, "--timezone", "Europe/Paris",
                   "--roster-out", root / "roster.csv")
    graded = run(BIN / "python", "-m", "autograder", "grade", root / "submissions", "--out", root / "grades",
                 "--roster", root / "roster.csv", "--deadlines", root / "deadlines.csv",
                 "--submitted-at", root / "submitted-at.csv")
    back = run(BIN / "python", "-m", "autograder", "feedback-zip", root / "grades", "--moodle", worksheet,
               "--assignment", A, "--to", root / "feedback.zip", "--worksheet-out", root / "worksheet-graded.csv")
    return root, imported, graded, back


def test_moodle_import_writes_the_layout_times_and_roster(moodle_class):
    root, imported, _, _ = moodle_class
    assert sorted(p.name for p in (root / "submissions").iterdir()) == ["ada@example.edu", "charles@example.edu"]
    notebook = root / "submissions" / "charles@example.edu" / A / f"{A}.ipynb"
    assert notebook.read_text() == PARTIAL
    assert datetime.fromtimestamp(notebook.stat().st_mtime, timezone.utc) == datetime(2026, 10, 7, 1, 0, tzinfo=timezone.utc)
    times = {r["student"]: r for r in csv_dicts(root / "submitted-at.csv")}
    assert times["charles@example.edu"]["submitted_at"] == "2026-10-07T03:00:00+02:00"
    assert times["charles@example.edu"]["late"] == "yes" and times["ada@example.edu"]["late"] == "no"
    roster = read_roster(root / "roster.csv")
    assert list(roster) == ["ada@example.edu", "charles@example.edu", "grace@example.edu"]
    assert roster["ada@example.edu"].name == "Ada Lovelace" and roster["ada@example.edu"].email == "ada@example.edu"
    assert "from the assignsubmission_onlinetext plugin, not a file submission" in imported.stderr
    assert "also handed in, not graded: report.pdf" in imported.stderr


def test_moodle_class_is_graded_with_the_imported_times(moodle_class):
    root, _, graded, _ = moodle_class
    rows = csv_dicts(root / "grades" / "grades.csv")
    assert {r["student"] for r in rows} == {"ada@example.edu", "charles@example.edu", "grace@example.edu"}
    charles = [r for r in rows if r["student"] == "charles@example.edu"]
    assert {r["days_late"] for r in charles} == {"1"}                   # 3 h 1 min after the deadline
    assert {r["days_late"] for r in rows if r["student"] == "ada@example.edu"} == {"0"}


def test_moodle_feedback_zip_folders_are_the_worksheets_participants(moodle_class):
    root, _, _, back = moodle_class
    participants = set(read_moodle_worksheet(SAMPLES / "moodle_worksheet.csv"))
    with zipfile.ZipFile(root / "feedback.zip") as archive:
        names = archive.namelist()
        assert sorted(names) == [f"Ada Lovelace_734501_assignfeedback_file_/{A}.html",
                                 f"Charles Babbage_734502_assignfeedback_file_/{A}.html"]
        for name in names:
            assert moodle_import_accepts(name.split("/")[0], participants)
            assert (archive.getinfo(name).external_attr >> 16) & 0o044       # readable once unzipped
        assert b"Ada" in archive.read(names[0])
    sheet = {r["Identifier"]: r for r in csv_dicts(root / "worksheet-graded.csv")}
    assert sheet["Participant 734501"]["Grade"] == "12"
    assert sheet["Participant 734501"]["Feedback comments"] == f"12/12 — see the feedback file {A}.html"
    charles = float(sheet["Participant 734502"]["Grade"])
    assert 0 < charles < 12 and sheet["Participant 734502"]["Feedback comments"].startswith(sheet["Participant 734502"]["Grade"])
    assert sheet["Participant 734503"]["Grade"] == "" and sheet["Participant 734503"]["Last modified (grade)"] == "-"
    assert list(sheet["Participant 734501"]) == next(csv.reader(open(SAMPLES / "moodle_worksheet.csv")))


def test_moodle_import_without_the_worksheet_is_refused(tmp_path):
    download = build_zip("moodle_download.txt", tmp_path / "d.zip")
    result = run(BIN / "python", "-m", "autograder", "import", "moodle", download, "--assignment", A,
                 "--to", tmp_path / "s", check=False)
    assert result.returncode == 2 and "needs --gradebook" in result.stderr


def test_the_instructors_page_gives_the_commands_the_tests_run():
    page = " ".join((REPO / "book" / "instructors.md").read_text().replace("\\\n", " ").split())
    for command in (
            "import canvas canvas-download.zip --assignment 01-weights --to submissions "
            "--gradebook canvas_gradebook.csv --roster-out roster.csv",
            "import moodle moodle-download.zip --assignment 01-weights --to submissions "
            "--gradebook moodle_worksheet.csv --timezone Europe/Paris --roster-out roster.csv",
            "grade submissions --out grades --roster roster.csv --deadlines deadlines.csv --submitted-at submitted-at.csv",
            "feedback-zip grades --moodle moodle_worksheet.csv --assignment 01-weights --to feedback.zip "
            "--worksheet-out worksheet-graded.csv",
            "Ada Lovelace_734501_assignfeedback_file_/01-weights.html"):
        assert command in page, command
