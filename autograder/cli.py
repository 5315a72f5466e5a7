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


REPLACE = "--replace-class-settings"
REPLACE_HELP = ("replace the class settings --out keeps (roster, deadlines, late rule, seed) with the ones given: "
                "without it, a run that gives other ones than an earlier run into --out kept is refused. The roster, "
                "deadlines and late rule become exactly those given (one not given is dropped); the seed is kept "
                "unless --seed gives another")
CLASS_DEFAULTS = {"roster": None, "deadlines": None, "late_penalty": 10.0, "late_max_days": 5, "submitted_at": "mtime"}
OPTION = {"roster": "--roster", "deadlines": "--deadlines", "late_penalty": "--late-penalty",
          "late_max_days": "--late-max-days", "submitted_at": "--submitted-at"}


def _parser():
    """The command line: one subcommand per task."""
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
                       "grades.csv; a roster student with no folder gets 0 rows, a folder not in it a warning. "
                       "Kept in --out with the deadlines and the late rule: a later run into it (--student, a "
                       "resumed run, merge) uses them without their being given")
    grade.add_argument("--deadlines", metavar="FILE", help="a CSV assignment,due[,timezone] (due: ISO 8601, "
                       "e.g. 2026-10-05T23:59:00-04:00): late notebooks lose --late-penalty")
    grade.add_argument("--late-penalty", type=float, default=None, metavar="PERCENT",
                       help="with --deadlines: percent of the earned points lost per day or part of a day late (default 10)")
    grade.add_argument("--late-max-days", type=int, default=None, metavar="N",
                       help="with --deadlines: later than N days, the notebook scores 0 (default 5)")
    grade.add_argument("--submitted-at", default=None, metavar="SOURCE",
                       help="with --deadlines, when each notebook was handed in: mtime (the file's modification "
                       "time, default), gradescope (created_at of a submission_metadata.json beside the notebook) "
                       "or a CSV file student,assignment,submitted_at")
    grade.add_argument(REPLACE, action="store_true", help=REPLACE_HELP)
    merge = commands.add_parser("merge", help="combine the --out folders of `grade --shard K/N` runs into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD_OUT")
    merge.add_argument("--out", required=True, help="folder for grades.csv, summary.csv and feedback/")
    merge.add_argument("--quiet", action="store_true", help="no table")
    merge.add_argument(REPLACE, action="store_true", help="replace the class settings and seed an earlier merge "
                       "into --out kept with the shards' (refused otherwise)")
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
    scope_try = commands.add_parser("gradescope-try", help="try a Gradescope zip here as Gradescope runs it (a venv "
                                    "of its requirements.txt, made once and cached, its setup.sh where it applies, "
                                    "its run_autograder) and compare with `grade`")
    scope_try.add_argument("zip")
    scope_try.add_argument("notebook", help="a submission to grade, <assignment>.ipynb")
    scope_try.add_argument("--keep", metavar="DIR", help="keep the run's results.json and output (run_autograder.txt, "
                           "setup.txt) in DIR")
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
    export.add_argument("--roster", metavar="FILE", help="the class roster (see grade --roster): names and LMS ids "
                        "(default: the one kept in the folder of GRADES_CSV by the run that wrote it, if any)")
    export.add_argument("--moodle-id", choices=("email", "lms_id"), default="email",
                        help="with --format moodle: identify students by email (Email address, default) "
                        "or lms_id (ID number)")
    export.add_argument("--missing", choices=("blank", "zero"), default="blank",
                        help="with --format canvas or moodle, an assignment a student handed in no notebook of: "
                        "blank (default: an empty cell, which the import leaves alone, so a grade given by hand "
                        "stays) or zero (0, which overwrites it)")
    similar = commands.add_parser("similarity", help="an HTML page of the submissions that are alike, exercise by "
                                  "exercise (copydetect), the given code left out")
    similar.add_argument("submissions")
    similar.add_argument("--out", required=True, help="folder for similarity.html and similarity.csv")
    _add_lms_commands(commands)
    _add_nbgrader_prepare(commands)
    return parser


def _main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args, parser)


def _limits(args):
    """The grader's limits, as `grade` and `check` are given them."""
    return Limits(cell_seconds=args.cell_seconds, call_seconds=args.call_seconds,
                  notebook_seconds=args.notebook_seconds, exercise_seconds=args.exercise_seconds,
                  submission_seconds=args.submission_seconds, memory_bytes=args.memory_mb * 2**20)


def _similarity(args, parser):
    from .pipeline import NothingToGrade, discover
    from .similarity import compare, write_report
    if not os.path.isdir(args.submissions):
        parser.error(f"{args.submissions} is not a folder")
    try:
        jobs, _ = discover(args.submissions, skip=args.out)
    except NothingToGrade as error:
        parser.error(str(error))
    pairs, skipped = compare(jobs)
    flagged = write_report(pairs, args.out, skipped)
    for s in skipped:
        print(f"not compared: {for_terminal(s.student)}/{for_terminal(s.assignment)}: {for_terminal(s.reason)}",
              file=sys.stderr)
    print(f"{len(flagged)} flagged pairs of exercises"
          f"{f', {len(skipped)} not compared (listed on the page)' if skipped else ''}; "
          f"{os.path.join(args.out, 'similarity.html')}")
    return 0


def _gradescope(args, parser):
    from .gradescope import build_zip
    print(build_zip(args.assignment, args.out))
    return 0


def _gradescope_try(args, parser):
    from .gradescope import TryError, try_text, try_zip
    try:
        tried = try_zip(args.zip, args.notebook, no_namespaces=args.no_namespaces, keep=args.keep)
    except TryError as error:
        print(f"gradescope-try: {error}", file=sys.stderr)
        return 1
    print(try_text(tried))
    return 0 if tried["same"] else 1


def _gradescope_results(args, parser):
    from .gradescope import results_json
    data = results_json(args.assignment, args.submission_dir, args.results_json)
    print(f"{args.assignment}: {data['score']:g} points")
    return 0


def _export(args, parser):
    from .export import write_lms
    from .roster import RosterError, read as read_roster
    from . import journal
    try:
        roster = read_roster(args.roster) if args.roster else None
        folder = os.path.dirname(os.path.abspath(args.grades_csv))
        kept = journal.kept_class(folder) if roster is None else None
        if kept and kept.get("roster"):  # the roster the grades were written with, kept beside them
            roster = read_roster(journal.class_file(folder, "roster"))
            print(f"{args.grades_csv}: the roster kept with it applies ({_described('roster', kept['roster'])})",
                  file=sys.stderr)
    except (RosterError, journal.ClassSettingsError) as error:
        parser.error(str(error))
    path, warnings = write_lms(args.grades_csv, args.to, args.format, roster, args.moodle_id, args.missing)
    for warning in warnings:
        print(f"warning: {for_terminal(warning)}", file=sys.stderr)
    print(path)
    return 0


def _merge(args, parser):
    from . import journal
    from .roster import RosterError, read as read_roster
    from .shards import ShardError, merge as merge_shards
    try:
        graded, problems, merged = merge_shards(args.shards)
        settings, first = merged["settings"], merged["from"]
        roster = (read_roster(journal.class_file(first, "roster"))
                  if settings and settings.get("roster") else None)
        files = {kind: journal.class_file(first, kind).read_bytes() for kind in journal.CLASS_FILES
                 if settings and isinstance(settings.get(kind), dict)}
        kept = journal.kept_class(args.out)
        if not args.replace_class_settings and (
                (kept is not None and kept != settings)
                or None not in (merged["seed"], journal.kept_seed(args.out)) and merged["seed"] != journal.kept_seed(args.out)):
            raise ShardError(f"{args.out} keeps the class settings or seed of an earlier merge, and these shards "
                             f"were graded with others: merge into a new --out, or give {REPLACE} to replace them")
    except (ShardError, RosterError, journal.ClassSettingsError, journal.SeedError, OSError) as error:
        parser.error(str(error))
    if settings is not None:
        journal.keep_class(args.out, settings, files)  # the merged folder is the class's state too
    if merged["seed"] is not None:
        journal.run_seed(args.out, merged["seed"])
    _write_results(graded, problems, args.out, args.quiet, roster, merged["late"])
    return 0


def _check(args, parser):
    from .selfcheck import UsageError, main as check_notebook
    try:
        text, status = check_notebook(args.notebook, args.assignment, _limits(args))
    except UsageError as error:
        parser.error(str(error))  # exit status 2
    print(text)
    return status


def _grade(args, parser):
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
        settings, files, read_from, reused = _class_settings(args)
        roster = read_roster(read_from["roster"]) if "roster" in read_from else None
        deadlines = read_deadlines(read_from["deadlines"], assignments()) if "deadlines" in read_from else None
        policy = Policy(settings["late_penalty"], settings["late_max_days"])
        submitted_at = read_from.get("submitted_at", settings["submitted_at"])
        discovered = found, _ = _with_roster(pipeline.discover(args.submissions, skip=args.out), roster, args,
                                             _source(settings, "roster"))
        shard = parse_shard(args.shard) if args.shard else None
        given = parse_seed(args.seed) if args.seed is not None else None
        if shard and given is None and journal.kept_seed(args.out) is None:
            raise ShardError(f"--shard {args.shard} needs --seed: give every shard of the class the same secret seed "
                             f"(for instance --seed {fresh_seed()}, drawn now), so that they draw the same inputs")
        if (given is not None and not args.replace_class_settings and journal.kept_seed(args.out) is not None
                and given != journal.kept_seed(args.out)):
            raise journal.ClassSettingsError(
                f"--seed {args.seed} is not the seed {args.out} keeps from an earlier run ({args.out}/.journal/.seed): "
                f"leave --seed out to use the kept one, or give {REPLACE} to grade every notebook again with the new one")
        late, late_warnings = (lateness([(j.student, j.assignment, j.path) for j in found], deadlines, policy,
                                         submitted_at) if deadlines is not None else (None, []))
    except (pipeline.NothingToGrade, ShardError, journal.SeedError, journal.ClassSettingsError, RosterError, LateError,
            ValueError) as error:
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

    if reused:
        print(f"{args.out}: the class settings kept there apply ({'; '.join(reused)}); {REPLACE} to change them",
              file=sys.stderr)
    journal.keep_class(args.out, settings, files)  # kept before grading: a killed run resumes with them
    seed = journal.run_seed(args.out, given)  # kept in --out: a rerun into it draws the same inputs
    try:
        graded, problems = pipeline.grade_all(args.submissions, out_dir=args.out, jobs=args.jobs, limits=_limits(args),
                                              progress=progress, regrade=set(args.student), students=share,
                                              discovered=discovered, seed=seed)
        if shard:
            write_shard(args.out, *shard, everyone, graded, problems, seed, late, settings)
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


def _source(settings, kind):
    kept = settings.get(kind)
    return kept["source"] if isinstance(kept, dict) else kept


def _described(kind, value):
    if isinstance(value, dict):
        return f"{value['source']} (sha256 {value['digest'][:12]})"
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _class_settings(args):
    """The class settings of a `grade` run into --out: (settings as journal.kept_class has them,
    {kind: the bytes of each file to keep}, {kind: the path to read each file from}, [what was
    reused from --out, said to the instructor]). Those given on the command line, and for the
    others the ones --out keeps (the defaults where it keeps none); with --replace-class-settings,
    exactly those given. Raises journal.ClassSettingsError where a given one differs from the kept
    one and --replace-class-settings was not given."""
    from . import journal
    given, files, read_from = {}, {}, {}
    for kind in CLASS_DEFAULTS:
        value = getattr(args, kind)
        if value is None:
            continue
        if kind in journal.CLASS_FILES and not (kind == "submitted_at" and value in ("mtime", "gradescope")):
            try:
                with open(value, "rb") as f:
                    files[kind] = f.read()
            except OSError as error:
                raise journal.ClassSettingsError(f"{OPTION[kind]} {value}: cannot be read ({error.strerror})") from None
            value, read_from[kind] = {"source": value, "digest": journal.digest(files[kind])}, value
        given[kind] = value
    kept = journal.kept_class(args.out)
    if kept is None or args.replace_class_settings:
        return {**CLASS_DEFAULTS, **given}, files, read_from, []
    settings = {**CLASS_DEFAULTS, **kept}

    def differs(kind):
        mine, theirs = given[kind], settings[kind]
        if isinstance(mine, dict) or isinstance(theirs, dict):
            return not (isinstance(mine, dict) and isinstance(theirs, dict) and mine["digest"] == theirs["digest"])
        return mine != theirs
    changed = [kind for kind in given if differs(kind)]
    if changed:
        said = "; ".join(f"{OPTION[k]} {_described(k, given[k])}, where it keeps {_described(k, settings[k])}"
                         for k in changed)
        raise journal.ClassSettingsError(
            f"{args.out} keeps the class settings of an earlier run, and this command gives others: {said}. "
            f"A later command into {args.out} (--student, a resumed run) uses the kept ones without their being "
            f"given: leave {', '.join(OPTION[k] for k in changed)} out, or give {REPLACE} to replace the class's "
            f"settings with exactly those given (one not given is dropped; every grade, name and penalty is written "
            f"anew)")
    reused = []
    for kind in CLASS_DEFAULTS:
        if kind in given:
            continue
        if isinstance(settings[kind], dict):
            files[kind] = journal.class_file(args.out, kind).read_bytes()
            read_from[kind] = journal.class_file(args.out, kind)
        if settings[kind] != CLASS_DEFAULTS[kind]:
            reused.append(f"{OPTION[kind]} {_described(kind, settings[kind])}")
    return settings, files, read_from, reused


def _with_roster(discovered, roster, args, source=None):
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
        problems.append((student, f"{student}/ is not in the roster {source or args.roster}: graded, with no display name "
                                  f"or LMS id (add it to the roster, or check the folder's name)"))
    for folder in sorted(set(roster) - folders):
        reason = (f"nothing to grade: no folder {folder}/ in {args.submissions} for this roster student "
                  f"(0 for each assignment the rest of the class handed in)")
        found = found + [Job(folder, a, refusal=reason) for a in handed_in]
        problems.append((folder, reason))
    order = {student: i for i, student in enumerate(sorted({job.student for job in found}))}
    return sorted(found, key=lambda job: order[job.student]), problems  # stable: each student's own order kept


class _Remaining:
    """The class's remaining time for the progress line: the median time between two notebooks this
    run graded (not the refusals, which come first and take no time; not the journaled ones) times
    the notebooks left, once AFTER of them are done. With -j N, the time between two is the workers'
    together. The median, not the mean: a notebook stuck until its time-outs (120 s per exercise)
    neither inflates the estimate for the rest nor is foreseen in it, so the line says so."""
    AFTER = 3

    def __init__(self, refusals):
        import time
        self.time, self.refusals, self.calls, self.gaps = time.monotonic, refusals, 0, []
        self.start = self.last = time.monotonic()

    def left(self, done, total):
        self.calls += 1
        now = self.time()
        if self.calls > self.refusals:
            self.gaps.append(now - self.last)
        self.last = now
        if len(self.gaps) < self.AFTER or done >= total:
            return ""
        import statistics
        seconds = statistics.median(self.gaps) * (total - done)
        return f" (about {_duration(seconds)} left, more if some time out)"


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


# --- From Canvas or Moodle and back (lms.py): `import` and `feedback-zip` ---------------------

LMS_COMMANDS = ("import", "feedback-zip")


def _add_lms_commands(commands):
    lms_in = commands.add_parser("import", help="turn Canvas's or Moodle's \"Download all submissions\" zip of one "
                                 "assignment into <student>/<assignment>/<assignment>.ipynb, with roster.csv and hand-in times")
    lms_in.add_argument("lms", choices=("canvas", "moodle"))
    lms_in.add_argument("download", help="the LMS's zip of the assignment's submissions")
    lms_in.add_argument("--assignment", required=True, help="the course's assignment, e.g. 01-weights")
    lms_in.add_argument("--to", required=True, help="the submissions folder to write (SUBMISSIONS of `grade`)")
    lms_in.add_argument("--gradebook", metavar="CSV", help="Canvas: the gradebook export (Grades → Export), for the "
                        "names, SIS ids and sections; Moodle (required): the assignment's grading worksheet, for each "
                        "participant's email (the student's folder), name and hand-in time")
    lms_in.add_argument("--roster-out", metavar="CSV", help="write the class roster (grade --roster) from --gradebook")
    lms_in.add_argument("--timezone", metavar="IANA", help="Moodle: the time zone of the worksheet's times (your "
                        "Moodle profile's, e.g. Europe/Paris); without it no hand-in time is kept")
    lms_in.add_argument("--times-out", metavar="CSV", help="Moodle: the grade --submitted-at file to write (default: "
                        "submitted-at.csv beside --to; the other assignments' rows are kept)")
    lms_in.add_argument("--manifest-out", metavar="CSV", help="what was taken from the zip, per student, with the "
                        "LMS's late flag and the files not graded (default: import-manifest.csv beside --to)")
    back = commands.add_parser("feedback-zip", help="Moodle's feedback-files zip (Upload multiple feedback files in a "
                               "zip) from grade's feedback pages, and the grading worksheet with grades and comments")
    back.add_argument("out", help="the --out folder of `grade`")
    back.add_argument("--moodle", required=True, metavar="WORKSHEET", help="the assignment's grading worksheet")
    back.add_argument("--assignment", required=True)
    back.add_argument("--to", required=True, help="the zip to write")
    back.add_argument("--worksheet-out", metavar="CSV", help="also write the worksheet with Grade and Feedback "
                      "comments filled, for Moodle's Upload grading worksheet")
    back.add_argument("--roster", metavar="FILE", help="the roster, where the folders are not the email addresses")


def _lms_command(args, parser):
    from . import assignments
    from .lms import LmsError, feedback_zip, graded_worksheet, import_download
    from .roster import RosterError, read as read_roster
    if args.assignment not in assignments():
        parser.error(f"--assignment {args.assignment}: not an assignment of this course ({', '.join(assignments())})")
    try:
        if args.command == "import":
            handed, notes, written = import_download(args.lms, args.download, args.assignment, args.to,
                                                     args.roster_out, args.gradebook, args.timezone,
                                                     args.times_out, args.manifest_out)
            for note in notes:
                print(f"note: {for_terminal(note)}", file=sys.stderr)
            taken = sum(1 for h in handed.values() if h.notebook)
            print(f"{taken} notebooks of {len(handed)} students: "
                  + "; ".join(f"{what} {path}" for what, path in written.items()))
            return 0
        roster = read_roster(args.roster) if args.roster else None
        names, notes = feedback_zip(args.out, args.moodle, args.assignment, args.to, roster)
        if args.worksheet_out:
            notes += graded_worksheet(os.path.join(args.out, "grades.csv"), args.moodle, args.assignment,
                                      args.worksheet_out, roster)
        for note in notes:
            print(f"note: {for_terminal(note)}", file=sys.stderr)
        print(f"{args.to}: {len(names)} feedback pages" + (f"; {args.worksheet_out}" if args.worksheet_out else ""))
        return 0
    except (LmsError, RosterError, OSError) as error:
        parser.error(str(error))


def _add_nbgrader_prepare(commands):
    prepare = commands.add_parser(
        "nbgrader-prepare", help="before `nbgrader autograde`: move misplaced notebooks into nbgrader's layout, write "
        "each notebook's time where nbgrader reads it (timestamp.txt), clear an interrupted run's results, and write "
        "every student (roster and folders) for `nbgrader db student import`")
    prepare.add_argument("submissions")
    prepare.add_argument("--roster", help="the class roster (as `grade --roster`)")
    prepare.add_argument("--students-out", default="students.csv", help="nbgrader's students file (default students.csv)")
    prepare.add_argument("--autograded", default="autograded", help="nbgrader's autograded folder (default autograded)")


def _nbgrader_prepare(args, parser):
    from .nbgrader_route import prepare
    from .pipeline import NothingToGrade
    from .roster import RosterError
    if not os.path.isdir(args.submissions):
        parser.error(f"{args.submissions}: no such folder")
    try:
        for line in prepare(args.submissions, args.roster, args.students_out, args.autograded):
            print(for_terminal(line))
    except (NothingToGrade, RosterError, OSError) as error:
        parser.error(str(error))
    return 0


COMMANDS = {"grade": _grade, "merge": _merge, "check": _check, "gradescope": _gradescope,
            "gradescope-try": _gradescope_try, "gradescope-results": _gradescope_results, "export": _export,
            "similarity": _similarity, "nbgrader-prepare": _nbgrader_prepare,
            **{command: _lms_command for command in LMS_COMMANDS}}  # one function per subcommand
