"""Grades for an LMS: one row per student, one column per assignment (its total), from grades.csv.
Its text cells are written through for_csv_cell again: a grades.csv written by hand or by an
older version is made as inert as the grader's own (whose cells come back unchanged)."""
import csv
import io
import os
from collections import defaultdict

from .files import atomic_write
from .report import _number
from .text import for_csv_cell


def lms_table(grades_csv):
    scores, maxima = defaultdict(dict), defaultdict(dict)
    with open(grades_csv, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            scores[row["student"]][row["assignment"]] = scores[row["student"]].get(row["assignment"], 0.0) + float(row["score"])
            maxima[row["assignment"]][row["exercise"]] = float(row["max_score"])
    assignments = sorted(maxima)
    possible = {a: sum(maxima[a].values()) for a in assignments}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student"] + [for_csv_cell(a) for a in assignments] + ["total"])
    writer.writerow(["Points Possible"] + [_number(possible[a]) for a in assignments] + [_number(sum(possible.values()))])
    for student in sorted(scores):
        row = [scores[student].get(a, 0.0) for a in assignments]  # a missing notebook counts 0
        writer.writerow([for_csv_cell(student)] + [_number(x) for x in row] + [_number(sum(row))])
    return buffer.getvalue()


def write_lms(grades_csv, path):
    atomic_write(os.path.abspath(path), lms_table(grades_csv))
    return path
