"""The class summary: per exercise, the mean, how many lost points, and the check that failed
first most often, beside grades.csv."""
import csv

from autograder.results import CheckResult, ExerciseResult, Graded
from autograder.summary import summarise, text, write_summary


def graded(student, softmax_checks, problem=""):
    exercise = ExerciseResult("softmax", 4.0, softmax_checks)
    return Graded(student, "01-weights", [exercise, ExerciseResult("hardmax", 2.0, [CheckResult("ties", 2.0, 2.0)])],
                  problem=problem)


def ok(name, points):
    return CheckResult(name, points, points)


def failed(name, points, message):
    return CheckResult(name, 0.0, points, message)


CLASS = [
    graded("ada", [ok("random", 2.0), ok("stable", 2.0)]),
    graded("bob", [failed("random", 2.0, "got 3, expected 1"), failed("stable", 2.0, "NaN at index [0]")]),
    graded("cy", [ok("random", 2.0), failed("stable", 2.0, "inf at index [1]")]),
    graded("dee", [ok("random", 2.0), failed("stable", 2.0, "NaN at index [2]")]),
    Graded.not_graded("eve", "01-weights", [type("E", (), {"name": n, "points": p})() for n, p in
                                            (("softmax", 4.0), ("hardmax", 2.0))], "invalid JSON"),
]


def test_counts_means_and_the_most_common_first_failure():
    softmax, hardmax = summarise(CLASS)
    assert (softmax.students, softmax.lost_points, softmax.not_graded) == (5, 4, 1)
    assert softmax.mean_score == (4 + 0 + 2 + 2 + 0) / 5
    # bob's first failing check is "random": his "stable" is not counted, so one bug is one count
    assert softmax.most_common() == ("stable", 2, "inf at index [1]")
    assert (hardmax.lost_points, hardmax.not_graded, hardmax.most_common()) == (1, 1, None)


def test_written_beside_grades_and_printed(tmp_path):
    rows = list(csv.DictReader(open(write_summary(CLASS, tmp_path))))
    assert (tmp_path / "summary.csv").exists()
    assert rows[0] == {"assignment": "01-weights", "exercise": "softmax", "max_score": "4", "students": "5",
                       "mean_score": "1.6", "lost_points": "4", "not_graded": "1", "most_common_failure": "stable",
                       "failure_count": "2", "example_message": "inf at index [1]"}
    assert rows[1]["most_common_failure"] == "" and rows[1]["lost_points"] == "1"
    table = text(CLASS)
    assert "softmax" in table and "1.6/4" in table and "4 of 5" in table and "stable (2)" in table


def test_a_students_message_is_inert_in_summary_csv_and_printed(tmp_path):
    """The example message comes from a student's exception: no formula in a spreadsheet, no
    escape that acts in the instructor's terminal."""
    hostile = [graded(n, [ok("random", 2.0), failed("stable", 2.0, "=HYPERLINK(\"x\")\x1b]0;pwned\x07\x1b[2J")])
               for n in ("ada", "bob")]
    rows = list(csv.DictReader(open(write_summary(hostile, tmp_path))))
    assert rows[0]["example_message"] == "'=HYPERLINK(\"x\")\\x1b]0;pwned\\x07\\x1b[2J"
    printed = text(hostile)
    assert "e.g. =HYPERLINK" in printed and "\\x1b[2J" in printed and all(line.isprintable() for line in printed.split("\n"))
