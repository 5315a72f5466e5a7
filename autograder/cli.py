"""`python -m autograder grade SUBMISSIONS --out DIR [-j N]`."""
import argparse
import os
import sys

from . import pipeline, report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade a folder of submissions <student>/<assignment>/<assignment>.ipynb")
    grade.add_argument("submissions")
    grade.add_argument("--out", required=True, help="folder for grades.csv and feedback/")
    grade.add_argument("-j", "--jobs", type=int, default=os.cpu_count(), help="parallel workers (default: cores)")
    grade.add_argument("--quiet", action="store_true", help="no progress and no table")
    args = parser.parse_args(argv)

    if not os.path.isdir(args.submissions):
        parser.error(f"{args.submissions} is not a folder")

    def progress(done, total, graded):
        if not args.quiet:
            print(f"[{done}/{total}] {graded.student}/{graded.assignment}: "
                  f"{graded.score:g}/{graded.max_score:g}", file=sys.stderr)

    graded, problems = pipeline.grade_all(args.submissions, jobs=args.jobs, progress=progress)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    path = report.write_grades(graded, args.out)
    report.write_feedback(graded, args.out)
    if not args.quiet:
        print(report.table(graded))
        print(f"\n{path}; feedback in {os.path.join(args.out, 'feedback')}")
    return 0
