"""Writing the results: grades.csv, one feedback page per student and assignment, a table.
Every text from a student is written through autograder.text: inert in a spreadsheet, a page
and a terminal."""
import csv
import io
import os

from .files import atomic_write
from .late import sentence
from .roster import display
from .text import for_csv_cell, for_html, for_terminal

COLUMNS = ["student", "assignment", "exercise", "score", "max_score", "message"]
NAME_COLUMNS = ["name"]   # added at the end with a roster (`grade --roster`)
LATE_COLUMNS = ["submitted_at", "due", "days_late", "penalty_percent", "score_after_penalty"]  # with --deadlines


def _number(x):
    return format(round(float(x), 6), ".10g")


def shown(x):
    """A score as a reader wants it: 0.67, not 0.666667 (grades.csv keeps the precise number)."""
    return format(round(float(x), 2), "g")


def write_grades(graded_list, out_dir, roster=None, late=None):
    """grades.csv. With a `roster` ({folder: roster.Student}) a `name` column is added at the end,
    with `late` ({(student, assignment): late.Late}, deadlines given) the LATE_COLUMNS after it:
    `score` stays what the checks gave, `score_after_penalty` is what the exports use (a notebook
    with no deadline or handed in on time keeps its score there; `days_late` empty: no time known)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS + NAME_COLUMNS * (roster is not None) + LATE_COLUMNS * (late is not None))
    for graded in graded_list:
        for student, assignment, exercise, score, max_score, message in graded.rows():
            row = [for_csv_cell(student), for_csv_cell(assignment), for_csv_cell(exercise),
                   _number(score), _number(max_score), for_csv_cell(message)]
            if roster is not None:
                row.append(for_csv_cell(display(roster, student)))
            if late is not None:
                lateness = late.get((student, assignment))
                row += ([lateness.submitted.isoformat(), lateness.due.isoformat(), lateness.days,
                         _number(lateness.percent), _number(lateness.apply(score))] if lateness
                        else ["", "", "", "0", _number(score)])
            writer.writerow(row)
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


def feedback_html(graded, name=None, late=None):
    """The student's page; `name`: their display name (from the roster), `late`: their notebook's
    late.Late (deadlines given), said under the title with the points after the penalty."""
    e = for_html
    who = e(name) + f" ({e(graded.student)})" if name and name != graded.student else e(graded.student)
    score = (f"{shown(late.apply(graded.score))} / {shown(graded.max_score)} points "
             f"(late: {shown(graded.score)} before the penalty)" if late and late.percent
             else f"{shown(graded.score)} / {shown(graded.max_score)} points")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{e(graded.assignment)} — {e(name or graded.student)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{e(graded.assignment)}: {score}</h1>",
             f"<p>Feedback for <b>{who}</b>. Each exercise's points are split over its checks; "
             "a failing check says on which input your code went wrong and how.</p>"]
    if late:
        parts.append(f"<p class='{'fail' if late.percent else 'pass'}'>"
                     f"{e(sentence(late, graded.score, graded.max_score, shown))}</p>")
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


def write_feedback(graded_list, out_dir, roster=None, late=None):
    for graded in graded_list:
        name = display(roster, graded.student) if roster is not None else None
        atomic_write(os.path.join(out_dir, "feedback", graded.student, f"{graded.assignment}.html"),
                      feedback_html(graded, name, (late or {}).get((graded.student, graded.assignment))))


def table(graded_list, roster=None, late=None):
    """A plain-text table: one line per student, one column per assignment. With a roster, the
    student's display name beside the folder; with deadlines, a late notebook's points after the
    penalty, marked `late -P%`."""
    assignments = sorted({g.assignment for g in graded_list})
    students = sorted({g.student for g in graded_list})
    late = late or {}

    def cell(g):
        lateness = late.get((g.student, g.assignment))
        if lateness and lateness.percent:
            return f"{shown(lateness.apply(g.score))}/{shown(g.max_score)} late -{shown(lateness.percent)}%"
        return f"{shown(g.score)}/{shown(g.max_score)}"
    cells = {(g.student, g.assignment): cell(g) for g in graded_list}
    label = {s: for_terminal(s) + (f" ({for_terminal(display(roster, s))})" if roster and s in roster else "")
             for s in students}
    width = max([len("student")] + [len(label[s]) for s in students])
    column = max([18] + [len(c) for c in cells.values()])
    lines = ["student".ljust(width) + "".join(f"  {for_terminal(a):>{column}}" for a in assignments)]
    for s in students:
        lines.append(label[s].ljust(width) + "".join(f"  {cells.get((s, a), '-'):>{column}}" for a in assignments))
    return "\n".join(lines)
