"""A student's text made safe (autograder/text.py): bounded, inert in a terminal, a CSV, a page."""
import csv
import io
import json
import pickle

import pytest
from conftest import REPO

from autograder.results import MAX_NOTEBOOK_TEXT, MAX_NOTES, CheckResult, ExerciseResult, Graded
from autograder.text import LIMIT, bounded, for_csv_cell, for_html, for_terminal

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\r\t\x00\x7f\x85\u202e\u2028"


def test_bounded_keeps_start_and_end_and_says_how_much_was_cut():
    text = "E" * 16_000_000 + ": the message (in softmax, code cell 3, line 2)"
    kept = bounded(text)
    assert len(kept) == LIMIT and kept.startswith("EEEE") and kept.endswith("(in softmax, code cell 3, line 2)")
    assert "16,000,047 characters, cut" in kept
    assert bounded(kept) == kept and bounded("short") == "short"


def test_bounded_text_can_be_written_as_utf8():
    assert bounded("a\ud800b").encode("utf-8") == b"a?b"
    assert bounded(ValueError("not a string")) == "not a string"


def test_for_terminal_shows_every_control_character_as_an_escape():
    shown = for_terminal("name" + ESCAPES + "\n")
    assert shown == "name\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31m\\r\\t\\x00\\x7f\\x85\\u202e\\u2028\\n"
    assert shown.isprintable()
    assert for_terminal("ünïcode ok → ✓") == "ünïcode ok → ✓"


@pytest.mark.parametrize("formula", ['=HYPERLINK("http://x","y")', "@SUM(1+1)", "+1+2", "-1+cmd|' /C calc'!A0",
                                     "=1", "\t=1", "\r=1", "-", "+", "-inf", "-nan"])
def test_a_cell_a_spreadsheet_would_run_starts_with_a_quote(formula):
    cell = for_csv_cell(formula)
    assert cell.startswith(("'", "\\t", "\\r")) and cell.isprintable()


@pytest.mark.parametrize("number", ["-1", "+1", "-0.5", "1e-3", "-.5", "42"])
def test_numbers_stay_numbers(number):
    assert for_csv_cell(number) == number


def test_a_csv_cell_keeps_newlines_and_nothing_else_that_controls():
    cell = for_csv_cell("line one\nline two" + ESCAPES)
    assert cell.startswith("line one\nline two\\x1b") and all(c.isprintable() for c in cell.split("\n"))
    buffer = io.StringIO()
    csv.writer(buffer).writerow([cell])
    assert next(csv.reader(io.StringIO(buffer.getvalue()))) == [cell]
    assert for_csv_cell("'=already inert") == "'=already inert" and for_csv_cell(for_csv_cell("=x")) == "'=x"


def test_for_html_escapes_and_keeps_newlines():
    assert for_html("<script>alert(1)</script>\n\x1b[2J") == "&lt;script&gt;alert(1)&lt;/script&gt;\n\\x1b[2J"


def test_results_bound_every_string_when_it_is_set():
    huge = "E" * 10_000_000
    graded = Graded(huge, "01-weights", [ExerciseResult("softmax", 4.0, [CheckResult("random", 0.0, 4.0, huge)])],
                    problem=huge)
    for _ in range(MAX_NOTES + 100):
        graded.notes.append(huge)
    graded.exercises[0].checks[0].message = huge  # after construction too
    assert len(graded.student) == len(graded.problem) == len(graded.exercises[0].checks[0].message) == LIMIT
    assert len(graded.notes) == MAX_NOTES + 1 and "more notes were cut" in graded.notes[-1]
    graded.notes += [huge]
    graded.notes.extend([huge])
    assert len(graded.notes) == MAX_NOTES + 1
    assert len(json.dumps(graded.to_dict())) < (MAX_NOTES + 10) * LIMIT
    for copy in (pickle.loads(pickle.dumps(graded)), Graded.from_dict(json.loads(json.dumps(graded.to_dict())))):
        assert copy == graded and len(copy.notes) == MAX_NOTES + 1
    assert len(Graded.from_dict({**graded.to_dict(), "notes": [huge] * 1000}).notes) == MAX_NOTES + 1


def test_a_notebooks_messages_are_bounded_all_together_in_notebook_order():
    long = "E" * LIMIT
    checks = [CheckResult(f"check {i}", 0.0, 1.0, long) for i in range(100)]  # 100 failing checks, each at the limit
    graded = Graded("s", "01-weights", [ExerciseResult("softmax", 100.0, checks)], notes=["a note"]).bound_text()
    messages = [c.message for c in graded.exercises[0].checks]
    assert sum(map(len, messages)) + len("a note") <= MAX_NOTEBOOK_TEXT + 100 * 120
    assert messages[0] == long and "its message was cut" in messages[-1]  # the first ones are kept whole
    assert all(messages) and graded.exercises[0].score == 0  # a cut message is still a failure


def test_the_instructors_page_states_the_bounds_the_code_uses():
    page = (REPO / "book" / "instructors.md").read_text()
    assert f"cut to {LIMIT:,} characters" in page and f"at most {MAX_NOTES} notes" in page
    assert f"{MAX_NOTEBOOK_TEXT:,} characters" in page


def test_nbgrader_feedback_keeps_a_test_cells_error_bounded():
    import nbformat

    from autograder.nbgrader_feedback import ShortTestTracebacks
    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_softmax", "points": 4}}
    cell = nbformat.v4.new_code_cell("assert softmax(x) == 1", metadata=meta)
    cell.outputs = [nbformat.v4.new_output("error", ename="E" * 10_000_000, evalue="bad", traceback=["hidden test"])]
    error = ShortTestTracebacks().preprocess_cell(cell, {}, 0)[0].outputs[0]
    assert len(error["ename"]) == LIMIT and error["traceback"] == [f"{error['ename']}: bad"]
