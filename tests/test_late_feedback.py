"""Issue 36: the feedback says the hand-in time and the deadline in one zone, named; a notebook
with no hand-in time is warned about with what is actually missing."""
import os
from datetime import datetime, timezone

from autograder.late import Late, Policy, lateness, parse_time, sentence

A = "01-weights"


def test_the_hand_in_time_is_said_in_the_deadlines_zone():
    due = parse_time("2026-10-05 23:59", "America/New_York")
    handed = datetime(2026, 10, 6, 3, 30, tzinfo=timezone.utc)  # a file's mtime: 23:30 in New York, on time
    text = sentence(Late.of(due, handed, Policy()), 12, 12)
    assert text == "Handed in 2026-10-05 23:30 EDT, before the deadline (2026-10-05 23:59 EDT)."
    late = sentence(Late.of(parse_time("2026-10-05T23:59:00-04:00"), datetime(2026, 10, 7, 4, 0, tzinfo=timezone.utc),
                            Policy()), 10, 12)
    assert late.startswith("Handed in 2026-10-07 00:00 UTC-04:00, 2 days after the deadline (2026-10-05 23:59 UTC-04:00;")


def test_a_missing_hand_in_time_is_said_for_what_it_is(tmp_path):
    notebook = tmp_path / "al" / A / f"{A}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    due = {A: parse_time("2026-10-05T23:59:00Z")}
    found, warnings = lateness([("al", A, str(notebook))], due, Policy(), "gradescope")
    assert not found and warnings == [f"al/{A}: no late penalty applied: no submission_metadata.json beside {A}.ipynb "
                                      "(Gradescope's export puts one there)"]
    gone = tmp_path / "bo" / A / f"{A}.ipynb"  # nothing where it was looked for: scored 0, no time to warn about
    assert lateness([("bo", A, str(gone))], due, Policy(), "mtime") == ({}, [])
    times = tmp_path / "times.csv"
    times.write_text("student,assignment,submitted_at\n")
    assert lateness([("al", A, str(notebook))], due, Policy(), str(times))[1] == [
        f"al/{A}: no late penalty applied: no line al,{A} in {times}"]
    assert os.path.exists(notebook)
