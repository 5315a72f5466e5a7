"""Grade a folder of submissions: load → run sandboxed → check → rows for the report.

SUBMISSIONS follows nbgrader's layout, `<student>/<assignment>/<assignment>.ipynb`.
"""
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import assignments, journal, notebook, reference
from .checks import run_exercise
from .notebook import NotebookError, load_submission
from .sandbox.session import Limits, SandboxedStudent


@dataclass
class Graded:
    """One student's notebook for one assignment, graded."""
    student: str
    assignment: str
    exercises: list                     # [(Exercise, [CheckResult], note)]
    problem: str = ""                   # why the notebook could not be graded at all
    notes: list = field(default_factory=list)   # cell errors and other things worth saying

    @property
    def score(self):
        return sum(_exercise_score(results, note) for _, results, note in self.exercises)

    @property
    def max_score(self):
        return sum(e.points for e, _, _ in self.exercises)

    def rows(self):
        for exercise, results, note in self.exercises:
            failed = [r for r in results if r.message]
            message = note or (f"{len(failed)} of {len(results)} checks failed; first: "
                               f"{failed[0].name}: {failed[0].message}" if failed else "")
            yield (self.student, self.assignment, exercise.name, _exercise_score(results, note),
                   exercise.points, message[:500])


def _exercise_score(results, note):
    return 0.0 if note else round(sum(r.points for r in results), 6)


def discover(submissions):
    """[(student, assignment, notebook path)] in a stable order, plus problems with the layout.

    A folder whose name is close to an assignment's (`01_weights`, `01-Weights`) is graded as
    that assignment, with a note, unless the student also has the right folder."""
    known = assignments()
    found, problems = [], []
    for student in sorted(os.listdir(submissions)):
        student_dir = os.path.join(submissions, student)
        if not os.path.isdir(student_dir) or student.startswith("."):
            continue
        folders = sorted(f for f in os.listdir(student_dir) if not f.startswith("."))
        for folder in folders:
            assignment = folder if folder in known else _closest(folder, known)
            if assignment is None or (assignment != folder and assignment in folders):
                problems.append(f"{student}/{folder}: not an assignment of this course "
                                f"(expected one of {', '.join(known)}); not graded")
                continue
            if assignment != folder:
                problems.append(f"{student}/{folder}: graded as {assignment} (the folder should be named {assignment})")
            found.append((student, assignment, os.path.join(student_dir, folder, f"{assignment}.ipynb")))
    return found, problems


def _closest(folder, known):
    import difflib
    normal = folder.lower().replace("_", "-").replace(" ", "-")
    match = difflib.get_close_matches(normal, known, n=1, cutoff=0.8)
    return match[0] if match else None


def grade_notebook(student, assignment, path, limits=Limits()):
    exercises = notebook.exercises(assignment)
    graded = Graded(student, assignment, [])
    try:
        submission = _load(path, assignment)
    except NotebookError as error:
        graded.problem = f"not graded: {error}"
        graded.exercises = [(e, [], graded.problem) for e in exercises]
        return graded
    graded.notes.extend(submission.warnings)
    extra = sorted(f for f in os.listdir(os.path.dirname(path)) if f.endswith(".ipynb") and f != f"{assignment}.ipynb")
    if extra:
        graded.notes.append(f"only {assignment}.ipynb is graded; ignored: {', '.join(extra)}")
    ref = reference.load(assignment)
    with SandboxedStudent(submission.code_cells, limits, notebook.modules_to_preload(assignment)) as student_process:
        if None in student_process.cell_errors:  # the notebook itself could not be run to its end
            graded.problem = f"not graded: {student_process.cell_errors[None]}"
            graded.exercises = [(e, [], graded.problem) for e in exercises]
            return graded
        for index, error in sorted(student_process.cell_errors.items()):
            graded.notes.append(f"notebook cell {index + 1} raised {error}")
        for exercise in exercises:
            student_process.start_exercise()
            visible_error = student_process.run_code(exercise.visible_test)
            note = f"the exercise's visible tests fail ({visible_error}), so it scores 0" if visible_error else ""
            graded.exercises.append((exercise, run_exercise(assignment, exercise.name, student_process, ref), note))
    return graded


def _load(path, assignment):
    if not os.path.isfile(path):
        folder = os.path.dirname(path)
        others = sorted(f for f in os.listdir(folder) if f.endswith(".ipynb")) if os.path.isdir(folder) else []
        hint = f" (found {', '.join(others)}: rename it to {assignment}.ipynb)" if others else ""
        raise NotebookError(f"no {assignment}.ipynb in the submission{hint}")
    return load_submission(Path(path), assignment)


def _grade_job(job, limits=Limits()):
    student, assignment, path = job
    try:
        return grade_notebook(student, assignment, path, limits)
    except Exception as error:  # a grader bug must cost one notebook, not the run
        graded = Graded(student, assignment, [])
        graded.problem = f"not graded: internal grader error ({type(error).__name__}: {error})"
        graded.exercises = [(e, [], graded.problem) for e in notebook.exercises(assignment)]
        return graded


def grade_all(submissions, out_dir=None, jobs=None, limits=Limits(), progress=None):
    """Grade every notebook; results in discovery order, whatever order the workers finish in.
    With `out_dir`, each result is journaled as it comes and a journaled one is not graded again."""
    found, problems = discover(submissions)
    jobs = jobs or os.cpu_count() or 1
    results = [journal.load(out_dir, *job) if out_dir else None for job in found]
    todo = [i for i, r in enumerate(results) if r is None]
    done = len(found) - len(todo)

    def finish(i, graded):
        nonlocal done
        results[i] = graded
        if out_dir:
            journal.save(out_dir, graded, found[i][2])
        done += 1
        progress and progress(done, len(found), graded)

    by_assignment = sorted(todo, key=lambda i: (found[i][1], i))  # a warm zygote serves one assignment
    if jobs == 1 or len(todo) <= 1:
        for i in by_assignment:
            finish(i, _grade_job(found[i], limits))
    else:
        with ProcessPoolExecutor(max_workers=jobs, initializer=_warm_up) as pool:
            futures = {pool.submit(_grade_job, found[i], limits): i for i in by_assignment}
            for future in as_completed(futures):
                finish(futures[future], future.result())
    return results, problems


def _warm_up():
    """Each grading worker loads the references once, before its first notebook."""
    for assignment in assignments():
        reference.load(assignment)
