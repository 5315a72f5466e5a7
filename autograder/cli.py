"""`python -m autograder grade SUBMISSIONS --out DIR [-j N] [--student NAME] [--shard K/N --seed S]`, `merge`, `check`, `export`."""
import argparse
import os
import signal
import sys

from . import assignments, has_solutions, report, summary
from .sandbox.isolation import NO_WALLS, NOT_ISOLATED, bubblewrap_works, student_walls_work
from .sandbox.session import Limits
from .text import for_terminal


def main(argv=None):
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before or after the grading itself (`grade` says how far it got)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("\ninterrupted; run the same command again", file=sys.stderr, flush=True)
        return 130


def _main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade a folder of submissions <student>/<assignment>/<assignment>.ipynb")
    grade.add_argument("submissions")
    grade.add_argument("--out", required=True, help="folder for grades.csv and feedback/")
    grade.add_argument("-j", "--jobs", type=int, default=os.cpu_count(), help="parallel workers (default: cores)")
    grade.add_argument("--quiet", action="store_true", help="no progress and no table")
    grade.add_argument("--student", action="append", default=[], metavar="NAME",
                       help="grade this student again (repeatable); the others' results are kept from --out's journal")
    grade.add_argument("--shard", metavar="K/N", help="grade the Kth of N shares of the students "
                       "(one machine of N, each with the same --seed); `merge` combines the shards' --out folders")
    grade.add_argument("--seed", metavar="S", help="the secret seed of the inputs of the rules the exercises state "
                       "(default: the one kept in --out by an earlier run into it, else a fresh one, kept there); "
                       "every shard of one class needs the same")
    grade.add_argument("--roster", metavar="FILE", help="the class roster, a CSV with a header: folder (required), "
                       "name, lms_id, sis_user_id, sis_login_id, section, email: display names in the feedback and "
                       "grades.csv; a roster student with no folder gets 0 rows, a folder not in it a warning")
    grade.add_argument("--deadlines", metavar="FILE", help="a CSV assignment,due[,timezone] (due: ISO 8601, "
                       "e.g. 2026-10-05T23:59:00-04:00): late notebooks lose --late-penalty")
    grade.add_argument("--late-penalty", type=float, default=10.0, metavar="PERCENT",
                       help="with --deadlines: percent of the earned points lost per day or part of a day late (default 10)")
    grade.add_argument("--late-max-days", type=int, default=5, metavar="N",
                       help="with --deadlines: later than N days, the notebook scores 0 (default 5)")
    grade.add_argument("--submitted-at", default="mtime", metavar="SOURCE",
                       help="with --deadlines, when each notebook was handed in: mtime (the file's modification "
                       "time, default), gradescope (created_at of a submission_metadata.json beside the notebook) "
                       "or a CSV file student,assignment,submitted_at")
    merge = commands.add_parser("merge", help="combine the --out folders of `grade --shard K/N` runs into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD_OUT")
    merge.add_argument("--out", required=True, help="folder for grades.csv, summary.csv and feedback/")
    merge.add_argument("--quiet", action="store_true", help="no table")
    check = commands.add_parser("check", help="a student's pre-flight check of one notebook: run it as `grade` "
                                "will, with its visible tests, and say what can cost points (no hidden checks)")
    check.add_argument("notebook", help="the notebook, <assignment>.ipynb")
    check.add_argument("--assignment", help="the assignment (default: from the file name, else from its cells)")
    defaults = Limits()
    for command in (grade, check):  # `check` runs the notebook with the grader's limits
        for name, help_text in (("cell_seconds", "one notebook cell"), ("call_seconds", "one call of a student's function"),
                                ("notebook_seconds", "all the notebook's cells"), ("exercise_seconds", "one exercise's checks"),
                                ("submission_seconds", "one notebook in all")):
            command.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name),
                                 help=f"time limit in seconds for {help_text} (default {getattr(defaults, name):g})")
        command.add_argument("--memory-mb", type=int, default=defaults.memory_bytes // 2**20,
                             help=f"memory limit of a student's process (default {defaults.memory_bytes // 2**20})")
    scope = commands.add_parser("gradescope", help="build a Gradescope autograder zip for one assignment")
    scope.add_argument("assignment")
    scope.add_argument("--out", help="zip path (default: build/gradescope/<assignment>.zip)")
    scope_try = commands.add_parser("gradescope-try", help="try a Gradescope zip here as Gradescope runs it (a fresh "
                                    "venv from its requirements.txt, its run_autograder) and compare with `grade`")
    scope_try.add_argument("zip")
    scope_try.add_argument("notebook", help="a submission to grade, <assignment>.ipynb")
    scope_try.add_argument("--no-namespaces", action="store_true",
                           help="(as root) run it as in a container that refuses namespaces, as Docker's default "
                                "seccomp profile does: no bubblewrap, the student's code as an unprivileged user")
    scope_run = commands.add_parser("gradescope-results", help="(inside Gradescope) grade a submission, write results.json")
    scope_run.add_argument("assignment")
    scope_run.add_argument("submission_dir")
    scope_run.add_argument("results_json")
    export = commands.add_parser("export", help="LMS export: one row per student, one column per assignment")
    export.add_argument("grades_csv", help="grades.csv written by `grade`")
    export.add_argument("--to", required=True, help="the CSV file to write")
    export.add_argument("--format", choices=("plain", "canvas", "moodle"), default="plain",
                        help="plain (default): student, a column per assignment, total; canvas: Canvas's gradebook "
                        "import; moodle: Moodle's import of grades from CSV")
    export.add_argument("--roster", metavar="FILE", help="the class roster (see grade --roster): names and LMS ids")
    export.add_argument("--moodle-id", choices=("email", "lms_id"), default="email",
                        help="with --format moodle: identify students by email (Email address, default) "
                        "or lms_id (ID number)")
    similar = commands.add_parser("similarity", help="an HTML page of the submissions that are alike, exercise by "
                                  "exercise (copydetect), the given code left out")
    similar.add_argument("submissions")
    similar.add_argument("--out", required=True, help="folder for similarity.html and similarity.csv")
    args = parser.parse_args(argv)
    if args.command == "similarity":
        from .pipeline import NothingToGrade, discover
        from .similarity import compare, write_report
        try:
            jobs, _ = discover(args.submissions, skip=args.out)
        except NothingToGrade as error:
            parser.error(str(error))
        flagged = write_report(compare(jobs), args.out)
        print(f"{len(flagged)} flagged pairs of exercises; {os.path.join(args.out, 'similarity.html')}")
        return 0
    if args.command == "gradescope":
        from .gradescope import build_zip
        print(build_zip(args.assignment, args.out))
        return 0
    if args.command == "gradescope-try":
        from .gradescope import TryError, try_text, try_zip
        try:
            tried = try_zip(args.zip, args.notebook, no_namespaces=args.no_namespaces)
        except TryError as error:
            print(f"gradescope-try: {error}", file=sys.stderr)
            return 1
        print(try_text(tried))
        return 0 if tried["same"] else 1
    if args.command == "gradescope-results":
        from .gradescope import results_json
        data = results_json(args.assignment, args.submission_dir, args.results_json)
        print(f"{args.assignment}: {data['score']:g} points")
        return 0
    if args.command == "export":
        from .export import write_lms
        from .roster import RosterError, read as read_roster
        try:
            roster = read_roster(args.roster) if args.roster else None
        except RosterError as error:
            parser.error(str(error))
        path, warnings = write_lms(args.grades_csv, args.to, args.format, roster, args.moodle_id)
        for warning in warnings:
            print(f"warning: {for_terminal(warning)}", file=sys.stderr)
        print(path)
        return 0
    if args.command == "merge":
        from .shards import ShardError, merge as merge_shards
        try:
            graded, problems = merge_shards(args.shards)
        except ShardError as error:
            parser.error(str(error))
        _write_results(graded, problems, args.out, args.quiet)
        return 0
    limits = Limits(cell_seconds=args.cell_seconds, call_seconds=args.call_seconds,
                    notebook_seconds=args.notebook_seconds, exercise_seconds=args.exercise_seconds,
                    submission_seconds=args.submission_seconds,
                    memory_bytes=args.memory_mb * 2**20)
    if args.command == "check":
        from .selfcheck import UsageError, main as check_notebook
        try:
            text, status = check_notebook(args.notebook, args.assignment, limits)
        except UsageError as error:
            parser.error(str(error))  # exit status 2
        print(text)
        return status

    if not os.path.isdir(args.submissions):
        parser.error(f"{args.submissions} is not a folder")
    if not has_solutions():
        parser.error("grading needs the course's solutions/ folder (a student's copy has only notebooks/: "
                     "use `check`)")

    if not bubblewrap_works():
        print(f"\n*** WARNING: {NOT_ISOLATED} ***\n", file=sys.stderr)
    elif not student_walls_work():
        print(f"\n*** WARNING: {NO_WALLS} ***\n", file=sys.stderr)
    from . import journal, pipeline  # imports the checks: only grading does (`check` must run without them)
    from .shards import ShardError, parse as parse_shard, students_of, write as write_shard
    from .stated import fresh_seed, parse_seed
    from .late import LateError, Policy, lateness, read_deadlines
    from .roster import RosterError, read as read_roster
    try:
        roster = read_roster(args.roster) if args.roster else None
        deadlines = read_deadlines(args.deadlines, assignments()) if args.deadlines else None
        policy = Policy(args.late_penalty, args.late_max_days)
        discovered = found, _ = _with_roster(pipeline.discover(args.submissions, skip=args.out), roster, args)
        shard = parse_shard(args.shard) if args.shard else None
        given = parse_seed(args.seed) if args.seed is not None else None
        if shard and given is None and journal.kept_seed(args.out) is None:
            raise ShardError(f"--shard {args.shard} needs --seed: give every shard of the class the same secret seed "
                             f"(for instance --seed {fresh_seed()}, drawn now), so that they draw the same inputs")
        late, late_warnings = (lateness([(j.student, j.assignment, j.path) for j in found], deadlines, policy,
                                         args.submitted_at) if deadlines is not None else (None, []))
    except (pipeline.NothingToGrade, ShardError, journal.SeedError, RosterError, LateError, ValueError) as error:
        parser.error(str(error))  # exit status 2: a run that grades nothing is an error
    everyone = sorted({job.student for job in found})
    share = students_of(everyone, *shard) if shard else None
    for name in args.student:
        if name not in everyone:
            parser.error(f"--student {name}: no such student folder in {args.submissions}")
        if share is not None and name not in share:
            parser.error(f"--student {name}: in another shard than {args.shard}")

    clock = _Remaining(sum(1 for job in found if job.refusal and (share is None or job.student in share)))

    def progress(done, total, graded):
        if not args.quiet:
            bar = "#" * (30 * done // total)
            print(f"\r[{bar:<30}] {done}/{total} {for_terminal(graded.student)}/{graded.assignment}: "
                  f"{graded.score:g}/{graded.max_score:g}{clock.left(done, total)}".ljust(100),
                  end="\n" if done == total else "", file=sys.stderr, flush=True)

    seed = journal.run_seed(args.out, given)  # kept in --out: a rerun into it draws the same inputs
    try:
        graded, problems = pipeline.grade_all(args.submissions, out_dir=args.out, jobs=args.jobs, limits=limits,
                                              progress=progress, regrade=set(args.student), students=share,
                                              discovered=discovered, seed=seed)
        if shard:
            write_shard(args.out, *shard, everyone, graded, problems, seed)
        for warning in late_warnings:
            print(f"warning: {for_terminal(warning)}", file=sys.stderr)
        _write_results(graded, problems, args.out, args.quiet, roster, late)
    except KeyboardInterrupt as stop:  # Ctrl-C: nothing of the run is left running (`pipeline.Interrupted`)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the last words are said whole
        what = (f"{stop.done} of {stop.total} notebooks graded" if isinstance(stop, pipeline.Interrupted)
                else "every notebook graded, the results not all written")
        print(f"{'' if args.quiet else chr(10)}interrupted: {what}; run the same command again to resume",
              file=sys.stderr, flush=True)
        return 130
    if shard:
        print(f"shard {args.shard}: {len(share)} of {len(everyone)} students; when every shard is done: "
              f"python -m autograder merge SHARD_OUT... --out DIR", file=sys.stderr)
    return 0


def _write_results(graded, problems, out, quiet, roster=None, late=None):
    """grades.csv, feedback/ and summary.csv in OUT, the warnings, and the tables unless quiet.
    `roster`: {folder: roster.Student}; `late`: {(student, assignment): late.Late} (deadlines given)."""
    for problem in problems:
        print(f"warning: {for_terminal(problem)}", file=sys.stderr)
    path = report.write_grades(graded, out, roster, late)
    report.write_feedback(graded, out, roster, late)
    summary_path = summary.write_summary(graded, out, late)
    if not quiet:
        print(report.table(graded, roster, late))
        print("\nClass summary (the most common failure is each student's first failing check):")
        print(summary.text(graded, late=late))
        print(f"\n{path}; {summary_path}; feedback in {os.path.join(out, 'feedback')}")


def _with_roster(discovered, roster, args):
    """discover's (jobs, problems) with the roster's view: a roster student with no folder gets a
    refusal for each assignment the class handed in (0 points, and why), as an empty folder does;
    a folder not in the roster is graded, and the instructor is warned."""
    if roster is None:
        return discovered
    from .pipeline import Job
    found, problems = discovered
    folders = {job.student for job in found}
    handed_in = [a for a in assignments() if any(job.assignment == a and job.path for job in found)]
    for student in sorted(folders - set(roster)):
        problems.append((student, f"{student}/ is not in the roster {args.roster}: graded, with no display name "
                                  f"or LMS id (add it to the roster, or check the folder's name)"))
    for folder in sorted(set(roster) - folders):
        reason = (f"nothing to grade: no folder {folder}/ in {args.submissions} for this roster student "
                  f"(0 for each assignment the rest of the class handed in)")
        found = found + [Job(folder, a, refusal=reason) for a in handed_in]
        problems.append((folder, reason))
    order = {student: i for i, student in enumerate(sorted({job.student for job in found}))}
    return sorted(found, key=lambda job: order[job.student]), problems  # stable: each student's own order kept


class _Remaining:
    """The class's remaining time for the progress line: from the rate of the notebooks this run
    graded (not the refusals, which come first and take no time; not the journaled ones), once
    AFTER of them are done. With -j N, the rate is the workers' together."""
    AFTER = 3

    def __init__(self, refusals):
        import time
        self.time, self.refusals, self.start, self.calls = time.monotonic, refusals, time.monotonic(), 0

    def left(self, done, total):
        self.calls += 1
        graded = self.calls - self.refusals
        if graded < self.AFTER or done >= total:
            return ""
        seconds = (self.time() - self.start) / graded * (total - done)
        return f" (about {_duration(seconds)} left)"


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
