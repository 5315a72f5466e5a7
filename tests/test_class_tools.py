"""What a real class needs: a roster, the Canvas and Moodle import formats, deadlines with a late
penalty, and an estimate of the time left while grading."""
import csv
import json
import os
import shutil
from datetime import datetime, timezone

import pytest

from conftest import BIN, REPO, run

from autograder import cli
from autograder.export import CANVAS_COLUMNS, export
from autograder.late import Late, LateError, Policy, lateness, parse_time, read_deadlines
from autograder.roster import RosterError, read as read_roster

A = "01-weights"
SAMPLES = REPO / "samples" / "submitted"
ROSTER = """folder,name,lms_id,sis_user_id,sis_login_id,section,email
ada,"Lovelace, Ada",101,S1,ada1,A,ada@example.edu
bob,=HYPERLINK(1),102,S2,bob2,A,bob@example.edu
cy,Cy Young,103,S3,cy3,B,cy@example.edu
dee,Dee Dee,104,S4,dee4,B,dee@example.edu
eve,Eve Absent,105,S5,eve5,B,eve@example.edu
"""
DUE = "2026-10-05T23:59:00-04:00"            # = 2026-10-06T03:59Z
# folder -> (sample, modification time): bob 1 day late (10%), dee 2 days and a minute (3 days: 30%)
CLASS = {"ada": ("perfect", "2026-10-05T20:00:00+00:00"), "bob": ("perfect", "2026-10-06T05:00:00+00:00"),
         "cy": ("partial", "2026-10-06T03:58:00+00:00"), "dee": ("partial", "2026-10-08T04:00:00+00:00"),
         "stray": ("perfect", "2026-10-01T00:00:00+00:00")}   # not in the roster; eve is, with no folder


def csv_rows(path):
    return list(csv.reader(open(path, newline="", encoding="utf-8")))


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The class of 6 graded once: 5 folders (one not in the roster), a roster of 5 (one with no folder)."""
    root = tmp_path_factory.mktemp("class")
    for student, (sample, moment) in CLASS.items():
        target = root / "submitted" / student / A / f"{A}.ipynb"
        target.parent.mkdir(parents=True)
        shutil.copyfile(SAMPLES / f"{sample}-student" / A / f"{A}.ipynb", target)
        stamp = datetime.fromisoformat(moment).timestamp()
        os.utime(target, (stamp, stamp))
    (root / "roster.csv").write_text(ROSTER)
    (root / "deadlines.csv").write_text(f"assignment,due\n{A},{DUE}\n")
    result = run(BIN / "python", "-m", "autograder", "grade", root / "submitted", "--out", root / "out", "-j", "2",
                 "--roster", root / "roster.csv", "--deadlines", root / "deadlines.csv")
    return root, result


def test_grades_csv_keeps_its_columns_and_adds_name_and_the_penalty_at_the_end(graded_class):
    root, result = graded_class
    rows = list(csv.DictReader(open(root / "out" / "grades.csv", newline="")))
    header = csv_rows(root / "out" / "grades.csv")[0]
    assert header == ["student", "assignment", "exercise", "score", "max_score", "message", "name",
                      "submitted_at", "due", "days_late", "penalty_percent", "score_after_penalty"]
    by = {}
    for r in rows:
        by.setdefault(r["student"], []).append(r)
    assert set(by) == {"ada", "bob", "cy", "dee", "eve", "stray"}
    assert {r["name"] for r in by["ada"]} == {"Lovelace, Ada"} and {r["name"] for r in by["stray"]} == {"stray"}
    assert {r["name"] for r in by["bob"]} == {"'=HYPERLINK(1)"}  # inert in a spreadsheet
    late = {s: (by[s][0]["days_late"], by[s][0]["penalty_percent"]) for s in by}
    assert late == {"ada": ("0", "0"), "bob": ("1", "10"), "cy": ("0", "0"), "dee": ("3", "30"),
                    "eve": ("", "0"), "stray": ("0", "0")}
    total = {s: (sum(float(r["score"]) for r in by[s]), sum(float(r["score_after_penalty"]) for r in by[s])) for s in by}
    assert total["bob"] == (12, pytest.approx(10.8)) and total["ada"] == (12, 12)
    assert total["dee"][1] == pytest.approx(0.7 * total["dee"][0]) and 0 < total["dee"][0] < 12
    assert total["eve"] == (0, 0)   # in the roster, no folder: 0 rows, as an empty folder gets
    assert "eve" in by and all("no folder eve/" in r["message"] for r in by["eve"])
    assert "stray/ is not in the roster" in result.stderr        # graded, and the instructor told
    assert "(about " in result.stderr and " left, more if some time out)" in result.stderr   # the time estimate
    assert "bob (=HYPERLINK(1))" in result.stdout and "10.8/12 late -10%" in result.stdout
    assert "late, penalized: 2 (bob, dee)" in result.stdout
    summary = list(csv.DictReader(open(root / "out" / "summary.csv", newline="")))
    assert summary[0]["late_students"] == "2"


def test_the_feedback_page_names_the_student_and_says_the_penalty(graded_class):
    root, _ = graded_class
    page = (root / "out" / "feedback" / "bob" / f"{A}.html").read_text()
    assert "10.8 / 12 points (late: 12 before the penalty)" in page
    assert "=HYPERLINK(1) (bob)" in page and "1 day after the deadline" in page and "12 → 10.8 of 12" in page
    on_time = (root / "out" / "feedback" / "ada" / f"{A}.html").read_text()
    assert "Lovelace, Ada (ada)" in on_time and "before the deadline" in on_time and "late" not in on_time.lower()


def test_canvas_and_moodle_exports_have_exactly_their_columns_with_the_penalties(graded_class):
    root, _ = graded_class
    grades = list(csv.DictReader(open(root / "out" / "grades.csv", newline="")))
    after = {}
    for r in grades:
        after[r["student"]] = after.get(r["student"], 0.0) + float(r["score_after_penalty"])
    dee = format(round(after["dee"], 6), ".10g")
    cy = format(round(after["cy"], 6), ".10g")
    for fmt in ("canvas", "moodle", "plain"):
        run(BIN / "python", "-m", "autograder", "export", root / "out" / "grades.csv", "--to", root / f"{fmt}.csv",
            "--format", fmt, "--roster", root / "roster.csv")
    assert csv_rows(root / "canvas.csv") == [
        CANVAS_COLUMNS + [A],
        ["Points Possible", "", "", "", "", "12"],
        ["Lovelace, Ada", "101", "S1", "ada1", "A", "12"],
        ["'=HYPERLINK(1)", "102", "S2", "bob2", "A", "10.8"],
        ["Cy Young", "103", "S3", "cy3", "B", cy],
        ["Dee Dee", "104", "S4", "dee4", "B", dee],
        ["Eve Absent", "105", "S5", "eve5", "B", ""],  # nothing handed in: blank, as Canvas leaves it
        ["stray", "", "", "", "", "12"]]
    assert CANVAS_COLUMNS == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert csv_rows(root / "moodle.csv") == [
        ["Email address", A], ["ada@example.edu", "12"], ["bob@example.edu", "10.8"], ["cy@example.edu", cy],
        ["dee@example.edu", dee], ["eve@example.edu", ""]]   # stray has no email: left out, with a warning
    plain = csv_rows(root / "plain.csv")
    assert plain[0] == ["student", "name", A, "total"] and plain[1] == ["Points Possible", "", "12", "12"]
    assert ["bob", "'=HYPERLINK(1)", "10.8", "10.8"] in plain
    run(BIN / "python", "-m", "autograder", "export", root / "out" / "grades.csv", "--to", root / "ids.csv",
        "--format", "moodle", "--roster", root / "roster.csv", "--moodle-id", "lms_id")
    assert csv_rows(root / "ids.csv")[:2] == [["ID number", A], ["101", "12"]]


def test_the_export_without_roster_or_penalty_is_todays_table(tmp_path):
    grades = tmp_path / "grades.csv"
    grades.write_text("student,assignment,exercise,score,max_score,message\n"
                      "bo,01-weights,a,1,2,\nbo,01-weights,b,2,2,\nal,02-global-attention,a,3,4,\n")
    text, warnings = export(grades)
    assert text == ("student,01-weights,02-global-attention,total\nPoints Possible,4,4,8\n"
                    "al,0,3,3\nbo,3,0,3\n") and warnings == []


def test_moodle_leaves_out_a_student_it_could_not_find_and_says_so(tmp_path):
    grades = tmp_path / "grades.csv"
    grades.write_text("student,assignment,exercise,score,max_score,message\nal,01-weights,a,1,2,\n")
    text, warnings = export(grades, "moodle")
    assert text == "Email address,01-weights\n" and "al: no email" in warnings[0]


def test_the_roster_refuses_what_would_empty_a_column(tmp_path):
    path = tmp_path / "roster.csv"
    for content, said in (("folder,nmae\nal,Al\n", "unknown column 'nmae'"), ("name\nAl\n", "no 'folder' column"),
                          ("folder,name\nal,A\nal,B\n", "listed twice"), ("", "empty")):
        path.write_text(content)
        with pytest.raises(RosterError, match=said):
            read_roster(path)
    path.write_text("\ufeffFolder,Email\nal,al@x\n")   # a spreadsheet's BOM and capitals
    assert read_roster(path)["al"].email == "al@x" and read_roster(path)["al"].display == "al"


def test_the_late_rule():
    policy = Policy(10, 5)
    due = parse_time(DUE)
    days = {"2026-10-06T03:59:00Z": (0, 0), "2026-10-06T03:59:01Z": (1, 10), "2026-10-08T03:59:00Z": (2, 20),
            "2026-10-11T03:59:00Z": (5, 50), "2026-10-11T03:59:01Z": (6, 100)}
    for moment, expected in days.items():
        late = Late.of(due, parse_time(moment), policy)
        assert (late.days, late.percent) == expected, moment
    assert Late.of(due, parse_time("2026-10-07T00:00:00Z"), policy).apply(7.5) == 6.75
    assert parse_time("2026-10-05 23:59", "America/New_York") == due   # daylight saving time: -04:00
    with pytest.raises(LateError, match="no UTC offset"):
        parse_time("2026-10-05 23:59")
    with pytest.raises(LateError):
        Policy(150, 5)


def test_deadlines_and_submission_times_from_each_source(tmp_path):
    (tmp_path / "d.csv").write_text("assignment,due,timezone\n01-weights,2026-10-05 23:59,Europe/Paris\n")
    deadlines = read_deadlines(tmp_path / "d.csv", [A])
    (tmp_path / "bad.csv").write_text("assignment,due\n99-nope,2026-10-05T23:59:00Z\n")
    with pytest.raises(LateError, match="not an assignment"):
        read_deadlines(tmp_path / "bad.csv", [A])
    notebook = tmp_path / "al" / A / f"{A}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    os.utime(notebook, (0, datetime(2026, 10, 6, 21, 0, tzinfo=timezone.utc).timestamp()))
    jobs = [("al", A, str(notebook)), ("bo", A, "")]
    found, warnings = lateness(jobs, deadlines, Policy())
    assert found["al", A].days == 1 and ("bo", A) not in found and warnings == []  # due 21:59Z, 23 h 01 late
    (notebook.parent / "submission_metadata.json").write_text(json.dumps({"created_at": "2026-10-05T12:00:00.5-07:00"}))
    found, _ = lateness(jobs, deadlines, Policy(), "gradescope")
    assert found["al", A].days == 0   # 19:00Z, before 21:59Z
    (tmp_path / "t.csv").write_text(f"student,assignment,submitted_at\nal,{A},2026-10-09T00:00:00+02:00\n")
    found, _ = lateness(jobs, deadlines, Policy(), str(tmp_path / "t.csv"))
    assert found["al", A].days == 4   # 22:00Z three days later: 3 days and a minute


def test_the_time_left_appears_after_a_few_notebooks(monkeypatch):
    clock = cli._Remaining(refusals=1)
    now = [clock.start]
    clock.time = lambda: now[0]
    said = []
    for done in range(1, 6):
        now[0] += 10
        said.append(clock.left(done, 12))
    assert said[:3] == ["", "", ""]   # the refusal, then the first two notebooks
    assert said[3] == " (about 1 min 20 s left, more if some time out)"   # 10 s a notebook graded, 8 to go
    now[0] += 600   # a notebook stuck until its time-outs: the median pace, not the mean, is the estimate's
    assert clock.left(6, 12) == " (about 1 min 00 s left, more if some time out)"
    assert cli._Remaining(0).left(12, 12) == ""


def test_the_instructors_page_states_the_rule_and_the_columns_the_code_uses():
    page = " ".join((REPO / "book" / "instructors.md").read_text().split())
    policy = Policy()
    assert f"loses {policy.percent_per_day:g} % of the points it earned for each day or part" in page
    assert f"for up to {policy.max_days} days; later, it scores 0" in page
    assert ", ".join(f"`{c}`" for c in CANVAS_COLUMNS) in page
    from autograder.roster import COLUMNS
    assert all(f"`{c}`" in page for c in COLUMNS)
    from autograder.report import LATE_COLUMNS
    assert ", ".join(f"`{c}`" for c in LATE_COLUMNS) in page
    assert "benchmarks/grading_speed.py" in page and "| quiet | " in page and "| busy " in page
