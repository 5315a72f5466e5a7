"""Grade a folder of submissions: load → run sandboxed → check → rows for the report.

SUBMISSIONS follows nbgrader's layout, `<student>/<assignment>/<assignment>.ipynb`.
"""
import contextlib
import dataclasses
import os
import signal
import stat
import tempfile
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import NamedTuple

from . import assignments, journal, notebook, reference, stated
from .checks import exercise_checks, run_exercise
from .notebook import NotebookError, load_submission
from .profile import Stages
from .results import Graded
from .sandbox import lifeline
from .sandbox.session import Limits, SandboxedStudent, kill_sandboxes_here

LAYOUT = "<student>/<assignment>/<assignment>.ipynb"


class NothingToGrade(Exception):
    """The submissions folder holds no student's notebook, or is one student's folder: the message
    says what it holds and what was expected."""


class Job(NamedTuple):
    """One student's rows for one assignment: a notebook to grade, or a refusal (0 points, and why)."""
    student: str
    assignment: str
    path: str = ""       # the notebook to grade; "" with a refusal
    refusal: str = ""    # why there is nothing to grade (names the layout expected)
    notes: tuple = ()    # layout notes for the student's feedback; not journaled (the layout may change)


def discover(submissions, skip=None):
    """(jobs, problems): every student's jobs, students in sorted order, each student's in course
    order; problems are (student, text) for the instructor (student None: about the whole class).

    Every folder under SUBMISSIONS is a student and gets rows, so nobody disappears from
    grades.csv: a folder close to an assignment's name (`01_weights`) and a notebook outside its
    folder (`carol/01-weights.ipynb`) are graded as that assignment, with a note (the student did
    the work; the layout is the collection's business, and the note says how to fix it); a
    student with nothing gradable gets 0 for each assignment the rest of the class handed in,
    with the reason. `skip`: a folder not to take for a student (the --out folder, if inside).
    A student's folder named like an assignment is a student's. Raises NothingToGrade when no
    student has a notebook, or SUBMISSIONS is one student's folder (`_one_students_folder`)."""
    known = assignments()
    students, problems = {}, []
    for name in sorted(os.listdir(submissions)):
        path = os.path.join(submissions, name)
        if name.startswith(".") or (skip and _same_folder(path, skip)):
            continue
        if os.path.islink(path):
            students[name] = ([], f"{name} is a symbolic link, not a folder")
        elif os.path.isdir(path):
            students[name] = _student_jobs(name, path, known, problems)
        else:
            problems.append((None, f"{name}: a file at the top of the submissions folder, not a student's folder; "
                                   f"not graded (expected {LAYOUT})"))
    handed_in = [a for a in known if any(j.assignment == a for jobs, _ in students.values() for j in jobs)]
    given_one_student = _one_students_folder(submissions, students, known)
    if not handed_in or given_one_student:
        raise NothingToGrade(_nothing_to_grade(submissions, students, known, given_one_student))
    for name in students:  # a student named like an assignment is a student; one that looks like an assignment's folder is said
        if _named_like_an_assignment(name, known) and not _holds_assignment_folders(os.path.join(submissions, name), known):
            problems.append((name, f"{name}/ at the top of {submissions} holds no assignment folder: graded as a student "
                                   f"named {name} (if it is an assignment's folder, its place is <student>/{name}/)"))
    found = []
    for student, (jobs, found_there) in students.items():
        if not jobs:  # still listed: 0 for what the class handed in, and why
            reason = (f"nothing to grade in {student}/ ({found_there}): hand in {student}/<assignment>/<assignment>.ipynb "
                      f"(0 for each assignment the rest of the class handed in)")
            jobs = [Job(student, a, refusal=reason) for a in handed_in]
            problems.append((student, reason))
        found.extend(jobs)
    return _flag_hard_links(submissions, found, problems), problems


def _same_folder(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def _student_jobs(student, folder, known, problems):
    """([Job] in course order, what the folder holds in words)."""
    try:
        entries = sorted(e for e in os.listdir(folder) if not e.startswith("."))
    except OSError as error:
        return [], f"cannot be read: {error.strerror}"
    folders = [e for e in entries if os.path.isdir(os.path.join(folder, e))
               or (os.path.islink(os.path.join(folder, e)) and not e.endswith(".ipynb"))]
    jobs, taken = {}, {}  # assignment -> its Job, and the folder it came from
    for name in folders:
        assignment = notebook.assignment_of_name(name, known)
        if assignment is None:
            problems.append((student, f"{student}/{name}: not an assignment of this course "
                                      f"(expected one of {', '.join(known)}); not graded"))
        elif assignment != name and assignment in folders:
            problems.append((student, f"{student}/{name}: ignored ({student}/{assignment}/ is graded as {assignment})"))
        elif assignment in taken:
            problems.append((student, f"{student}/{name}: ignored ({student}/{taken[assignment]}/ is graded as {assignment})"))
        elif os.path.islink(os.path.join(folder, name)):
            taken[assignment] = name
            jobs[assignment] = Job(student, assignment, refusal=f"{student}/{name} is a symbolic link, not a folder: "
                                                                f"hand in {student}/{assignment}/{assignment}.ipynb")
            problems.append((student, f"{student}/{name}: a symbolic link, not a folder; not graded"))
        else:
            notes = ()
            if assignment != name:
                notes = (f"graded as {assignment}: the folder {student}/{name} should be named {assignment}",)
                problems.append((student, notes[0]))
            taken[assignment] = name
            file = _notebook_in(os.path.join(folder, name), assignment, known)
            if file != f"{assignment}.ipynb":  # a browser's or Colab's name for it: graded, and said once
                notes += (notebook.renamed_note(file, assignment),)
                problems.append((student, f"{student}/{name}/{notes[-1]}"))
            jobs[assignment] = Job(student, assignment, os.path.join(folder, name, file), notes=notes)
    for name in entries:
        if name in folders or not name.endswith(".ipynb"):
            continue
        assignment = notebook.assignment_of_filename(name, known)
        if assignment is None:
            problems.append((student, f"{student}/{name}: not named after an assignment of this course "
                                      f"(expected {LAYOUT}); not graded"))
        elif assignment in jobs:
            problems.append((student, f"{student}/{name}: ignored ({student}/{assignment}/ is graded)"))
        else:
            note = (f"found {student}/{name}: graded as {assignment}; "
                    f"its place is {student}/{assignment}/{assignment}.ipynb")
            jobs[assignment] = Job(student, assignment, os.path.join(folder, name), notes=(note,))
            problems.append((student, note))
    shown = ", ".join(e + "/" * (e in folders) for e in entries[:5]) + (", …" if len(entries) > 5 else "")
    return [jobs[a] for a in known if a in jobs], f"found {shown}" if entries else "it is empty"


def _notebook_in(folder, assignment, known):
    """The file name to grade in an assignment's folder: `<a>.ipynb`, else a browser's or Colab's
    name for it (`notebook.pick_notebook`), else `<a>.ipynb` all the same (`_load` says what is there)."""
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    return notebook.pick_notebook(names, assignment, known) or f"{assignment}.ipynb"


def _named_like_an_assignment(name, known):
    return notebook.assignment_of_name(name, known) is not None


def _holds_assignment_folders(folder, known):
    """Whether `folder` holds a folder named (or nearly) like an assignment: a student's folder does."""
    try:
        entries = os.listdir(folder) if os.path.isdir(folder) and not os.path.islink(folder) else []
    except OSError:
        return False
    return any(not e.startswith(".") and _named_like_an_assignment(e, known) and os.path.isdir(os.path.join(folder, e))
               for e in entries)


def _one_students_folder(submissions, students, known):
    """The assignment folders SUBMISSIONS holds, if it is one student's folder given instead of the
    class's: it holds folders named like assignments that hold no assignment folders (each its
    notebook), and nothing that looks like a student's folder (one that holds assignment folders,
    or one named otherwise that holds a notebook). A student whose folder happens to be named like
    an assignment (`08-transformer/01-weights/01-weights.ipynb`) is a student: the class is graded."""
    looks_like_assignments = [n for n in students if _named_like_an_assignment(n, known)
                              and not _holds_assignment_folders(os.path.join(submissions, n), known)]
    looks_like_students = [n for n, (jobs, _) in students.items() if n not in looks_like_assignments and
                           (jobs or _holds_assignment_folders(os.path.join(submissions, n), known))]
    return [] if looks_like_students else looks_like_assignments


def _nothing_to_grade(submissions, students, known, given_one_student=()):
    if not students:
        return f"no student folder in {submissions}: expected {submissions}/{LAYOUT}"
    if given_one_student:  # given one student's folder instead of the class's
        return (f"{submissions} holds {', '.join(sorted(given_one_student))}/, an assignment: "
                f"give the folder that holds the students' folders ({LAYOUT})")
    return (f"no notebook to grade in {submissions}: none of its {len(students)} student folders holds a notebook "
            f"of this course's assignments; expected {submissions}/{LAYOUT}")


def _flag_hard_links(submissions, found, problems):
    """One file handed in by several students (hard links in the collected folder) is graded for
    each of them, and the pair is flagged: nobody can tell from the file who made the link, so
    refusing it would cost the student whose notebook it is."""
    by_file = {}
    for i, job in enumerate(found):
        try:
            info = os.lstat(job.path) if job.path else None
        except OSError:
            continue
        if info and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            by_file.setdefault((info.st_dev, info.st_ino), []).append(i)
    for group in by_file.values():
        students = sorted({found[i].student for i in group})
        if len(students) < 2:
            continue
        paths = ", ".join(os.path.relpath(found[i].path, submissions) for i in group)
        for i in group:
            others = ", ".join(s for s in students if s != found[i].student)
            note = (f"this notebook is the same file as {others}'s (a hard link in the collected folder): "
                    f"it was graded for each of you, and your instructor was told")
            found[i] = found[i]._replace(notes=found[i].notes + (note,))
        for student in students:
            problems.append((student, f"{' and '.join(students)} handed in one file ({paths}: hard links): "
                                      f"graded for each; find out whose notebook it is"))
    return found


def _closest(folder, known):
    """The assignment a folder's name stands for (`notebook.assignment_of_name`: the rule of every route)."""
    return notebook.assignment_of_name(folder, known)


def not_graded(student, assignment, reason):
    return Graded.not_graded(student, assignment, notebook.exercises(assignment), reason,
                             lambda e: [(c.name, points) for c, points in exercise_checks(assignment, e.name)])


def grade_notebook(student, assignment, path, limits=Limits(), seed=None):
    """The notebook's Graded. `seed`: the run's seed of the stated rules' inputs (None:
    `stated.seed_from_environment()`)."""
    seed = stated.seed_from_environment() if seed is None else seed
    try:
        submission = _load(path, assignment)
    except NotebookError as error:
        return not_graded(student, assignment, error)
    graded = Graded(student, assignment, [])
    graded.notes.extend(submission.warnings)
    extra = sorted(f for f in os.listdir(os.path.dirname(path)) if f.endswith(".ipynb") and f != os.path.basename(path))
    if extra:
        graded.notes.append(f"only {os.path.basename(path)} is graded; ignored: {', '.join(extra)}")
    ref = reference.load(assignment)
    stages = Stages()
    with SandboxedStudent(submission.code_cells, limits, notebook.modules_to_preload(assignment)) as student_process:
        if None in student_process.cell_errors:  # the notebook itself could not be run to its end
            return not_graded(student, assignment, student_process.cell_errors[None])
        for index, error in sorted(student_process.cell_errors.items()):
            graded.notes.append(f"code cell {index} raised {error}")
            graded.raised.append(index)
        for exercise in notebook.exercises(assignment):
            student_process.start_exercise()
            with stages.stage("checks"):
                graded.exercises.append(run_exercise(assignment, exercise.name, student_process, ref, seed=seed))
        with stages.stage("end"):
            student_process.close()
    for stage, seconds in student_process.seconds.items():
        stages.add(stage, seconds)
    stages.add("checks", -student_process.seconds.get("grader's answers", 0.0))  # counted apart
    stages.save(student, assignment)
    return graded.bound_text()  # every message was bounded here, outside the student's reach; now all together


def _load(path, assignment):
    if not os.path.lexists(path):
        folder = os.path.dirname(path)
        others = sorted(f for f in os.listdir(folder) if f.endswith(".ipynb")) if os.path.isdir(folder) else []
        hint = f" (found {', '.join(others)}: rename it to {assignment}.ipynb)" if others else ""
        raise NotebookError(f"no {assignment}.ipynb in the submission{hint}")
    return load_submission(Path(path), assignment)


KILLED = ("the grader's process was killed twice while grading this notebook (by the operating system, most likely "
          "for running out of memory), so it is not tried a third time: tell your instructor")
MAX_ATTEMPTS = 2   # a notebook whose grading killed the grader this many times is charged 0 (KILLED)


def _grade_job(job, limits=Limits(), seed=None, attempts_in=None):
    """The job's Graded. `attempts_in`: the journal's folder, where the attempt is recorded first
    (`journal.attempt`): if this process dies, the run knows which notebook it was grading."""
    if job.refusal:
        return not_graded(job.student, job.assignment, job.refusal)
    if attempts_in is not None:
        try:
            journal.attempt(attempts_in, job.student, job.assignment, job.path, seed)
        except OSError:  # a full disk: graded all the same (a death then costs the run, as before)
            pass
    try:
        return grade_notebook(job.student, job.assignment, job.path, limits, seed)
    except Exception as error:  # a grader bug must cost one notebook, not the run
        return not_graded(job.student, job.assignment, f"internal grader error ({type(error).__name__}: {error})")


def grade_all(submissions, *, seed, out_dir=None, jobs=None, limits=Limits(), progress=None, regrade=(), students=None,
              discovered=None):
    """(results, problems): every job's Graded in discovery order, whatever order the workers
    finish in, and the instructor's warnings. With `out_dir`, each result is journaled as it
    comes and a journaled one is not graded again, except the students in `regrade` (whose
    recorded attempts are forgotten). `students`: grade only these (a shard), with the layout seen
    over the whole class. `discovered`: what `discover` already returned for this run (the CLI
    looks first, to refuse a run with nothing).
    `seed`: the stated rules' inputs, resolved once by the caller (`journal.run_seed`: --seed, else
    the one kept in `out_dir`, else a fresh one); every notebook of the run is graded with it.
    Ctrl-C raises `Interrupted` at once, when nothing of the run is left running (`_CtrlC`,
    `_stop_now`); whatever ends the grader, nothing of the run outlives it (`sandbox.lifeline`).

    The grader's death costs nothing already done: each notebook's attempt is recorded before its
    grading starts (`journal.attempt`). A notebook with an attempt and no result (its grader died:
    the kernel's OOM killer, a kill -9) is graded again first, alone, so that a second death is
    its own; after MAX_ATTEMPTS it is charged 0 with the reason (KILLED), journaled. With -j N, a
    worker that dies breaks the pool: the run records what the pool was grading and goes on in a
    new one (`_grade_in_pools`); with -j 1, the same command run again goes on."""
    found, problems = discovered or discover(submissions, skip=out_dir)
    if students is not None:
        found = [job for job in found if job.student in students]
    problems = list(dict.fromkeys(text for student, text in problems
                                  if students is None or student is None or student in students))
    jobs = jobs or os.cpu_count() or 1
    with contextlib.ExitStack() as stack:
        book = out_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="autograder-attempts-"))
        for job in found:
            if job.student in regrade and job.path:
                with contextlib.suppress(OSError):
                    journal.forget_attempts(book, job.student, job.assignment)
        results = _grade_jobs(found, out_dir, book, jobs, limits, progress, regrade, seed, problems)
    for job, graded in zip(found, results):
        if graded.problem == f"not graded: {KILLED}":
            problems.append(f"{job.student}/{job.assignment}: the grader's process was killed {MAX_ATTEMPTS} times "
                            f"while grading it (out of memory?): charged 0, not graded again "
                            f"(`grade … --student {job.student}` tries again)")
    # the layout's notes are added after journaling: the journal keeps what the notebook earned
    return [dataclasses.replace(graded, notes=[*job.notes, *graded.notes]) if job.notes else graded
            for job, graded in zip(found, results)], problems


def _grade_jobs(found, out_dir, book, jobs, limits, progress, regrade, seed, problems):
    """Every job's Graded (grade_all's loops). `book`: where attempts are recorded (the journal's
    folder, or a temporary one when nothing is journaled)."""
    results = [journal.load(out_dir, job.student, job.assignment, job.path, seed)
               if out_dir and job.path and job.student not in regrade else None for job in found]
    todo = [i for i, r in enumerate(results) if r is None]
    tried = {i: journal.attempts(book, found[i].student, found[i].assignment, found[i].path, seed)
             for i in todo if not found[i].refusal}
    done = len(found) - len(todo)

    def finish(i, graded):
        nonlocal done
        results[i] = graded
        if out_dir and found[i].path:
            try:
                journal.save(out_dir, graded, found[i].path, seed)
            except OSError as error:  # a full disk: the run goes on, unjournaled (a rerun grades it again)
                problems.append(f"{graded.student}/{graded.assignment}: not journaled ({error.strerror})")
        done += 1
        progress and progress(done, len(found), graded)

    for i in [i for i in todo if found[i].refusal or tried.get(i, 0) >= MAX_ATTEMPTS]:
        finish(i, _grade_job(found[i]) if found[i].refusal else not_graded(found[i].student, found[i].assignment, KILLED))
    todo = [i for i in todo if results[i] is None]
    by_assignment = sorted(todo, key=lambda i: (found[i].assignment, i))  # a warm zygote serves one assignment
    by_assignment.sort(key=lambda i: not tried[i])  # a notebook whose grader died is graded first, alone
    with lifeline.Run() as run, _CtrlC() as ctrl_c:
        pools = _Pools()
        try:
            if jobs == 1 or len(todo) <= 1:
                if todo:
                    _set_up_grader(sorted({found[i].assignment for i in todo}))
                for i in by_assignment:
                    graded = _grade_job(found[i], limits, seed, book)
                    with ctrl_c.deferred():  # a result is journaled whole, or not at all
                        finish(i, graded)
            else:
                _grade_in_pools(found, by_assignment, tried, finish, book, jobs, limits, seed, problems, ctrl_c,
                                pools, run)
        except BaseException as error:
            _stop_now(pools.current, run)
            for i in todo:  # what the grader stopped itself was not killed: its attempt is withdrawn
                if results[i] is None:
                    with contextlib.suppress(OSError):
                        journal.keep_attempts(book, found[i].student, found[i].assignment, found[i].path, seed,
                                              tried[i])
            if isinstance(error, KeyboardInterrupt):
                raise Interrupted(done, len(found)) from None
            raise
    return results


class _Pools:
    """The pool of workers now grading (for `_stop_now`)."""
    current = None


def _grade_in_pools(found, order, tried, finish, book, jobs, limits, seed, problems, ctrl_c, pools, run):
    """Grade `order` with -j `jobs` workers. A worker that dies (killed by the kernel's OOM killer,
    say) breaks its pool, and the pool's other workers are stopped with it: the notebooks whose
    attempt the dead pool recorded (`tried` grows) are graded again, each alone in a pool of one
    worker, before the rest, in a new pool; one that dies MAX_ATTEMPTS times is charged 0 (KILLED).
    A pool that dies grading nothing (its workers cannot start) ends the run with its error."""
    pending = list(order)
    while pending:
        suspects = [i for i in pending if tried[i]]
        batch, workers = (suspects, 1) if suspects else (pending, jobs)
        finished = set()
        pools.current = ProcessPoolExecutor(
            max_workers=workers, initializer=_start_worker,
            initargs=(os.getpid(), max(1, (os.cpu_count() or 1) // workers),
                      sorted({found[i].assignment for i in batch}) if workers > 1 else ()))
        futures = {pools.current.submit(_grade_job, found[i], limits, seed, book): i for i in batch}
        broken = None
        for future in as_completed(futures):
            try:
                graded = future.result()
            except BrokenProcessPool as error:  # a worker died: every future not done fails so
                broken = error
                continue
            with ctrl_c.deferred():
                finish(futures[future], graded)
                finished.add(futures[future])
        if broken is None:
            pools.current.shutdown()
            pools.current = None
        else:
            _stop_pool(pools.current)
            pools.current = None
            lifeline.sweep(run.token, seconds=5)  # what the dead pool's students left
            died = []
            for i in batch:
                if i in finished:
                    continue
                now = journal.attempts(book, found[i].student, found[i].assignment, found[i].path, seed)
                if now > tried[i]:  # its grading had started: its worker died, or was stopped with the pool
                    tried[i] = now
                    died.append(i)
            if not died and not finished:
                raise broken
            if died and workers > 1:  # alone, its death is its own: said with its 0 (grade_all)
                names = ", ".join(f"{found[i].student}/{found[i].assignment}" for i in died)
                problems.append(f"a grading worker died (killed by the system: out of memory?) while {names} "
                                f"{'was' if len(died) == 1 else 'were'} being graded: each was graded again, alone")
            for i in died:
                if tried[i] >= MAX_ATTEMPTS:
                    with ctrl_c.deferred():
                        finish(i, not_graded(found[i].student, found[i].assignment, KILLED))
        pending = [i for i in pending if i not in finished and tried[i] < MAX_ATTEMPTS]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run: `done` of `total` notebooks are graded and journaled, nothing of the
    run is left running; the same command grades the rest."""

    def __init__(self, done, total):
        super().__init__(f"interrupted: {done} of {total} notebooks graded")
        self.done, self.total = done, total


class _CtrlC:
    """While grading, SIGINT (Ctrl-C) in the grader's main process kills the student processes it
    runs itself and raises KeyboardInterrupt, except while a result is journaled (`deferred`):
    then at its end. A second Ctrl-C changes nothing; a worker of `-j N` ignores it (the main
    process stops the workers). Only in the main thread, where signals are handled."""

    def __init__(self):
        self.owner, self.pending, self.deferring, self.previous = os.getpid(), False, 0, None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def _handle(self, signum, frame):
        if os.getpid() != self.owner or self.pending:  # a worker forked before its own handler, or said already
            return
        self.pending = True
        kill_sandboxes_here()
        if not self.deferring:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self):
        self.deferring += 1
        try:
            yield
        finally:
            self.deferring -= 1
        if self.pending and not self.deferring:
            raise KeyboardInterrupt


def _start_worker(parent, threads, warm=None):
    """A worker of `-j N`: it dies with the grader's main process, and leaves Ctrl-C to it. Its
    share of the cores for torch (the stand-ins' and the checks' own tensors): N workers that each
    ran one thread per core would fight over them. `warm`: the assignments whose references it
    loads before its first notebook (None: all)."""
    import torch
    torch.set_num_threads(threads)
    lifeline.die_with_parent(parent)
    signal.signal(signal.SIGINT, lambda *_: None)  # a handler, not SIG_IGN: the student processes it starts get the default
    _set_up_grader(warm)


def _set_up_grader(warm=None):
    """A grading process (a pool's worker, or this one with -j 1): torch imported, and the references of
    `warm` loaded (None: every assignment's), once before the first notebook. Without torch here
    (chapter 1's references do not import it), every reference worker forked for an answer imported
    it again, in the student's call (1.3 s here)."""
    import torch  # noqa: F401
    for assignment in assignments() if warm is None else warm:
        reference.load(assignment)


def _stop_now(pool, run):
    """Ctrl-C or an error: kill the workers (their zygotes die with them), then whatever of the run
    is left (`lifeline.sweep`), waiting for no notebook to finish."""
    kill_sandboxes_here()
    if pool is not None:
        _stop_pool(pool)
    lifeline.sweep(run.token, seconds=5)


def _stop_pool(pool):
    """Kill the pool's workers (their zygotes die with them) and wait for them."""
    workers = list((pool._processes or {}).values())
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.join(timeout=2)
    pool.shutdown(wait=False, cancel_futures=True)
