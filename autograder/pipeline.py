"""Grade a folder of submissions: load → run sandboxed → check → rows for the report.

SUBMISSIONS follows nbgrader's layout, `<student>/<assignment>/<assignment>.ipynb`.
"""
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from . import assignments, journal, notebook, reference
from .checks import exercise_checks, run_exercise
from .notebook import NotebookError, load_submission
from .results import Graded
from .sandbox.session import Limits, SandboxedStudent


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
        if os.path.islink(student_dir):
            problems.append(f"{student}: a symbolic link, not a folder; not graded")
            continue
        folders = sorted(f for f in os.listdir(student_dir) if not f.startswith("."))
        for folder in folders:
            if os.path.islink(os.path.join(student_dir, folder)):
                problems.append(f"{student}/{folder}: a symbolic link, not a folder; not graded")
                continue
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


def not_graded(student, assignment, reason):
    return Graded.not_graded(student, assignment, notebook.exercises(assignment), reason,
                             lambda e: [(c.name, points) for c, points in exercise_checks(assignment, e.name)])


def grade_notebook(student, assignment, path, limits=Limits()):
    try:
        submission = _load(path, assignment)
    except NotebookError as error:
        return not_graded(student, assignment, error)
    graded = Graded(student, assignment, [])
    graded.notes.extend(submission.warnings)
    extra = sorted(f for f in os.listdir(os.path.dirname(path)) if f.endswith(".ipynb") and f != f"{assignment}.ipynb")
    if extra:
        graded.notes.append(f"only {assignment}.ipynb is graded; ignored: {', '.join(extra)}")
    ref = reference.load(assignment)
    with SandboxedStudent(submission.code_cells, limits, notebook.modules_to_preload(assignment)) as student_process:
        if None in student_process.cell_errors:  # the notebook itself could not be run to its end
            return not_graded(student, assignment, student_process.cell_errors[None])
        for index, error in sorted(student_process.cell_errors.items()):
            graded.notes.append(f"code cell {index} raised {error}")
        for exercise in notebook.exercises(assignment):
            student_process.start_exercise()
            graded.exercises.append(run_exercise(assignment, exercise.name, student_process, ref))
    return graded


def _load(path, assignment):
    if not os.path.lexists(path):
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
        return not_graded(student, assignment, f"internal grader error ({type(error).__name__}: {error})")


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
            try:
                journal.save(out_dir, graded, found[i][2])
            except OSError as error:  # a full disk: the run goes on, unjournaled (a rerun grades it again)
                problems.append(f"{graded.student}/{graded.assignment}: not journaled ({error.strerror})")
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
