"""Writing the results: grades.csv, one feedback page per student and assignment, a table.
Every text from a student is written through autograder.text: inert in a spreadsheet, a page
and a terminal."""
import csv
import io
import os

from .files import atomic_write
from .text import for_csv_cell, for_html, for_terminal

COLUMNS = ["student", "assignment", "exercise", "score", "max_score", "message"]


def _number(x):
    return format(round(float(x), 6), ".10g")


def shown(x):
    """A score as a reader wants it: 0.67, not 0.666667 (grades.csv keeps the precise number)."""
    return format(round(float(x), 2), "g")


def write_grades(graded_list, out_dir):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for graded in graded_list:
        for student, assignment, exercise, score, max_score, message in graded.rows():
            writer.writerow([for_csv_cell(student), for_csv_cell(assignment), for_csv_cell(exercise),
                             _number(score), _number(max_score), for_csv_cell(message)])
    path = os.path.join(out_dir, "grades.csv")
    atomic_write(path, buffer.getvalue())
    return path


# Readable on a phone (390 px: long messages and names wrap, the table fits) and in dark mode.
STYLE = """
:root{color-scheme:light dark}
body{font-family:sans-serif;max-width:60em;margin:0 auto;padding:1em;line-height:1.4;overflow-wrap:anywhere}
.pass{color:#1a7f37}.fail{color:#b42318}.skip{color:#666}
table{border-collapse:collapse;width:100%}td,th{padding:.2em .4em;text-align:left;vertical-align:top}
td:last-child{white-space:pre-wrap}code{background:#f4f4f4}
th{overflow-wrap:normal}td:nth-child(3){white-space:nowrap;overflow-wrap:normal}
@media (prefers-color-scheme:dark){body{background:#121212;color:#e6e6e6}a{color:#8ab4f8}
.pass{color:#56d364}.fail{color:#ff7b72}.skip{color:#9e9e9e}code{background:#2b2b2b}}
"""


def feedback_html(graded):
    e = for_html
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{e(graded.assignment)} — {e(graded.student)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{e(graded.assignment)}: {shown(graded.score)} / {shown(graded.max_score)} points</h1>",
             f"<p>Feedback for <b>{e(graded.student)}</b>. Each exercise's points are split over its checks; "
             "a failing check says on which input your code went wrong and how.</p>"]
    if graded.problem:
        parts.append(f"<p class='fail'><b>{e(graded.problem)}</b></p>")
    if graded.notes:
        parts.append("<h2>While running your notebook</h2><ul>" +
                     "".join(f"<li>{e(n)}</li>" for n in graded.notes) + "</ul>")
    for exercise in graded.exercises:
        parts.append(f"<h2><code>{e(exercise.name)}</code>: {shown(exercise.score)} / {shown(exercise.max_score)}</h2>")
        parts.append("<table><tr><th></th><th>check</th><th>points</th><th>what went wrong</th></tr>")
        for r in exercise.checks:
            mark = ("<span class='pass'>✓</span>" if r.passed else "<span class='fail'>✗</span>" if r.ran
                    else "<span class='skip'>not run</span>")
            points = f"{shown(r.points)}&nbsp;/&nbsp;{shown(r.max_points)}" if r.ran else f"–&nbsp;/&nbsp;{shown(r.max_points)}"
            message = r.message if r.ran else ""  # the reason not to run is said once, above
            parts.append(f"<tr><td>{mark}</td><td>{e(r.name)}</td><td>{points}</td><td>{e(message)}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_feedback(graded_list, out_dir):
    for graded in graded_list:
        atomic_write(os.path.join(out_dir, "feedback", graded.student, f"{graded.assignment}.html"),
                      feedback_html(graded))


def table(graded_list):
    """A plain-text table: one line per student, one column per assignment."""
    assignments = sorted({g.assignment for g in graded_list})
    students = sorted({g.student for g in graded_list})
    cell = {(g.student, g.assignment): f"{shown(g.score)}/{shown(g.max_score)}" for g in graded_list}
    width = max([len("student")] + [len(for_terminal(s)) for s in students])
    lines = ["student".ljust(width) + "".join(f"  {for_terminal(a):>18}" for a in assignments)]
    for s in students:
        lines.append(for_terminal(s).ljust(width) + "".join(f"  {cell.get((s, a), '-'):>18}" for a in assignments))
    return "\n".join(lines)
