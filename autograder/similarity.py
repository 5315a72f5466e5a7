"""Similarity between a class's submissions, exercise by exercise: `python -m autograder similarity`.

A pipeline: discover the class as `grade` does → each submission's code per exercise (its solution
cell, read as `grade` reads it) → fingerprints with copydetect (Stanford MOSS's winnowing: code
tokenised, names and strings replaced, so renaming variables does not hide a copy), the given code
of the released notebook's cell removed → every pair of students compared in every exercise → an
HTML page and a CSV. A notebook that cannot be read (not a notebook, an empty assignment folder,
a link) is skipped, and listed on the page and in the command's output. A flag is a reason to
look, never a verdict: short exercises leave little room to differ, so an exercise is compared
only when a submission holds enough code of its own.
"""
import csv
import io
import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from . import NOTEBOOKS_DIR
from .files import atomic_write
from .notebook import NotebookError, exercises, load_submission, nbgrader_meta
from .text import for_csv_cell, for_html

NOISE = 25            # copydetect's k: the shortest match counted, in filtered characters
GUARANTEE = 30        # every match this long is found (the winnowing window)
THRESHOLD = 0.9       # both submissions' code this much the same: flagged
MIN_TOKENS = 60       # an exercise with less code of its own than this is not compared


@dataclass(frozen=True)
class Pair:
    assignment: str
    exercise: str
    first: str
    second: str
    similarity: tuple     # the share of each one's code found in the other's

    @property
    def flagged(self):
        return min(self.similarity) >= THRESHOLD


@dataclass(frozen=True)
class Skipped:
    """A student's assignment that was not compared, and why."""
    student: str
    assignment: str
    reason: str


def given_code(assignment):
    """{exercise: the released notebook's solution cell}: the code every student starts from."""
    import nbformat
    nb = nbformat.read(NOTEBOOKS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    return {nbgrader_meta(c).get("grade_id"): c.source for c in nb.cells
            if c.cell_type == "code" and nbgrader_meta(c).get("solution")}


def exercise_code(path, assignment):
    """{exercise: the student's solution cell}; raises NotebookError with the reason for a notebook
    that cannot be read (`discover` gives paths as strings)."""
    path = Path(path)
    if not os.path.lexists(path) and os.path.isdir(path.parent):
        raise NotebookError(f"no notebook: {path.parent.name}/ does not hold {path.name}")
    try:
        submission = load_submission(path, assignment)
    except OSError as error:  # read_notebook_bytes says why for what it opens; this is a last resort
        raise NotebookError(f"cannot read {path.name}: {error.strerror or error}") from None
    return {e.name: submission.by_grade_id[e.name][1] for e in exercises(assignment) if e.name in submission.by_grade_id}


def read_class(jobs):
    """({assignment: {student: {exercise: code}}}, [Skipped]): every notebook handed in that can be
    read, and what was not compared (a refusal of `discover`, a notebook that cannot be read)."""
    code, skipped = {}, []
    for job in jobs:
        if not job.path:
            skipped.append(Skipped(job.student, job.assignment, job.refusal or "nothing handed in"))
            continue
        try:
            code.setdefault(job.assignment, {})[job.student] = exercise_code(job.path, job.assignment)
        except NotebookError as error:
            skipped.append(Skipped(job.student, job.assignment, str(error)))
    return code, skipped


def fingerprint(code, given):
    from copydetect import CodeFingerprint
    import numpy as np
    boilerplate = np.array(sorted(CodeFingerprint("given.py", NOISE, GUARANTEE - NOISE + 1, fp=io.StringIO(given),
                                                  language="python").hashes))
    return CodeFingerprint("submission.py", NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate,
                           fp=io.StringIO(code), language="python")


def compare(jobs):
    """([Pair] for every exercise and every two students whose notebooks of the assignment could be
    read, [Skipped]: what was not compared, and why)."""
    from copydetect import compare_files
    pairs = []
    by_assignment, skipped = read_class(jobs)
    for assignment, code in sorted(by_assignment.items()):
        given = given_code(assignment)
        for exercise in (e.name for e in exercises(assignment)):
            prints = {}
            for student, cells in code.items():
                if exercise in cells:
                    found = fingerprint(cells[exercise], given.get(exercise, ""))
                    if len(found.filtered_code) >= MIN_TOKENS and found.hashes:
                        prints[student] = found
            for first, second in itertools.combinations(sorted(prints), 2):
                _, similarity, _ = compare_files(prints[first], prints[second])
                pairs.append(Pair(assignment, exercise, first, second, tuple(round(float(s), 3) for s in similarity)))
    return pairs, skipped


def write_report(pairs, out_dir, skipped=()):
    """`similarity.html` (flagged pairs first, then every pair above a third, then what was not
    compared) and `similarity.csv`."""
    os.makedirs(out_dir, exist_ok=True)
    rows = sorted(pairs, key=lambda p: (-min(p.similarity), p.assignment, p.exercise, p.first, p.second))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["assignment", "exercise", "student", "other", "similarity", "other_similarity", "flagged"])
    for p in rows:
        writer.writerow([for_csv_cell(p.assignment), for_csv_cell(p.exercise), for_csv_cell(p.first),
                         for_csv_cell(p.second), p.similarity[0], p.similarity[1], int(p.flagged)])
    atomic_write(os.path.join(out_dir, "similarity.csv"), buffer.getvalue())
    shown = [p for p in rows if max(p.similarity) >= 0.33]
    flagged = [p for p in rows if p.flagged]
    by_pair = {}
    for p in flagged:
        by_pair.setdefault((p.first, p.second), []).append(f"{p.assignment} {p.exercise}")
    table = "".join(f"<tr{' class=flag' if p.flagged else ''}><td>{for_html(p.assignment)}</td>"
                    f"<td>{for_html(p.exercise)}</td><td>{for_html(p.first)}</td><td>{for_html(p.second)}</td>"
                    f"<td>{p.similarity[0]:.0%}</td><td>{p.similarity[1]:.0%}</td></tr>" for p in shown)
    summary = "".join(f"<li><b>{for_html(a)}</b> and <b>{for_html(b)}</b>: {len(where)} exercises "
                      f"({for_html(', '.join(where))})</li>" for (a, b), where in
                      sorted(by_pair.items(), key=lambda item: -len(item[1])))
    not_compared = "".join(f"<li><b>{for_html(s.student)}</b> {for_html(s.assignment)}: {for_html(s.reason)}</li>"
                           for s in sorted(skipped, key=lambda s: (s.student, s.assignment)))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Similar submissions</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ccc;padding:.3rem;text-align:left}}
tr.flag{{background:#fde2e1}}@media (prefers-color-scheme: dark){{body{{background:#111;color:#eee}}tr.flag{{background:#5a1d1d}}}}</style>
</head><body>
<h1>Similar submissions</h1>
<p>Each exercise's code, its given lines removed, compared between every two students with copydetect
(winnowed fingerprints of the tokenised code: renamed variables and changed comments still match).
A pair is flagged when at least {THRESHOLD:.0%} of <em>each</em> one's code is found in the other's;
exercises with less than {MIN_TOKENS} characters of tokenised code of their own are not compared.
A flag is a reason to read the two notebooks, never a verdict: short exercises leave little room to differ.</p>
<h2>Flagged pairs</h2>
<ul>{summary or "<li>none</li>"}</ul>
<h2>Every pair above a third</h2>
<table><tr><th>assignment</th><th>exercise</th><th>student</th><th>other</th><th>of student's code</th>
<th>of other's code</th></tr>{table}</table>
<h2>Not compared</h2>
<p>Notebooks that could not be read, and students with nothing to read: compare them by hand.</p>
<ul>{not_compared or "<li>none</li>"}</ul>
</body></html>
"""
    atomic_write(os.path.join(out_dir, "similarity.html"), page)
    return flagged
