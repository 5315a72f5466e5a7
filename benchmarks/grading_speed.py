"""Grading speed: nbgrader autograde and `python -m autograder grade` on the same submissions.

    .venv/bin/python benchmarks/grading_speed.py [--students 20] [--jobs N] [--skip-nbgrader]

The issue's goals: at least 5x nbgrader's speed on a 2-core machine, and 100 students x every
assignment in under 5 minutes (`--students 100`; nbgrader then takes some 37 minutes here).

Every student hands in the reference solution of every assignment (the slowest honest case:
every check runs). Both graders run in this one process's lifetime, side by side, on the same
machine; the ratio is what to compare (the machine is shared and noisy).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from submissions import filled_notebook, write  # noqa: E402

from autograder import assignments  # noqa: E402

BIN = Path(sys.executable).parent


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


STAGES = {"start": "start the student's process (fork from the warm zygote, walls, limits)",
          "cells": "run the notebook's cells",
          "checks": "the checks: the student's code on their inputs, the comparisons",
          "grader's answers": "the grader's answers mid-call (stand-ins of earlier exercises, probes), computed in the "
                              "student's reference worker (its forks included)",
          "end": "end the process, clean up"}


def print_breakdown(folder, notebooks):
    """Seconds per notebook in each stage (summed over the workers: with -j N they overlap), and by chapter."""
    import json
    import collections
    total, by_assignment, counted = collections.Counter(), collections.defaultdict(collections.Counter), collections.Counter()
    for path in folder.glob("profile-*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            total.update(row["seconds"])
            by_assignment[row["assignment"]].update(row["seconds"])
            counted[row["assignment"]] += 1
    if not counted:
        print("  (no profile was written)")
        return
    worked = sum(total.values())
    print(f"where a notebook's time goes (worker seconds, {sum(counted.values())} of {notebooks} notebooks; "
          "the rest is the run's own start, discovery and reports):")
    for stage, what in STAGES.items():
        print(f"  {total[stage] / sum(counted.values()):6.3f} s  {100 * total[stage] / worked:4.1f} %  {what}")
    print("  by chapter, s per notebook: " + ", ".join(
        f"{a} {sum(by_assignment[a].values()) / counted[a]:.2f}" for a in sorted(counted)))


CPU = {"seconds": 0.0}  # the last command's CPU seconds


def children_cpu():
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command, env_extra=None, **kwargs):
    """The command's wall seconds; its CPU seconds (with every descendant that was waited for) in CPU.
    On a busy machine the wall time grows with the other load and the CPU time much less: the two
    ratios side by side say how much of a gap is the machine's."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", **{k: str(v) for k, v in (env_extra or {}).items()})
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run([str(c) for c in command], check=True, capture_output=True, env=env, **kwargs)
    CPU["seconds"] = children_cpu() - cpu
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--skip-nbgrader", action="store_true")
    parser.add_argument("--assignments", nargs="*", default=assignments())
    args = parser.parse_args()

    course = Path(tempfile.mkdtemp(prefix="grading-speed-"))
    try:
        for a in args.assignments:
            nb = filled_notebook(a)
            for s in range(args.students):
                write(nb, course / "submitted" / f"student{s:03d}" / a / f"{a}.ipynb")
        notebooks = args.students * len(args.assignments)
        print(f"{args.students} students x {len(args.assignments)} assignments = {notebooks} notebooks; "
              f"{os.cpu_count()} cores; autograder -j {args.jobs}")

        print(f"load average before: {load()}")

        (course / "profile").mkdir()
        ours = timed([BIN / "python", "-m", "autograder", "grade", course / "submitted", "--out", course / "ours",
                      "-j", args.jobs, "--quiet"], cwd=REPO, env_extra={"AUTOGRADER_PROFILE": course / "profile"})
        our_cpu = CPU["seconds"]
        print(f"autograder: {ours:7.1f} s  ({ours / notebooks:.2f} s per notebook; "
              f"{ours / 60:.1f} min for the class); CPU {our_cpu:.1f} s ({our_cpu / notebooks:.2f} s per notebook)")
        print_breakdown(course / "profile", notebooks)
        if args.skip_nbgrader:
            return
        shutil.copytree(REPO / "solutions", course / "solutions")
        flags = [f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{course}/gradebook.db"]
        for a in args.assignments:
            timed([BIN / "nbgrader", "generate_assignment", a, "--force", *flags], cwd=REPO)
        theirs = their_cpu = 0.0
        for a in args.assignments:
            seconds = timed([BIN / "nbgrader", "autograde", a, "--create", "--force", *flags], cwd=REPO)
            print(f"  nbgrader autograde {a}: {seconds:7.1f} s  ({seconds / args.students:.2f} s per notebook; "
                  f"CPU {CPU['seconds'] / args.students:.2f} s)")
            theirs, their_cpu = theirs + seconds, their_cpu + CPU["seconds"]
        print(f"nbgrader:   {theirs:7.1f} s  ({theirs / notebooks:.2f} s per notebook); CPU {their_cpu:.1f} s")
        print(f"ratio nbgrader / autograder: {theirs / ours:.1f}x wall, {their_cpu / our_cpu:.1f}x CPU")
        print(f"load average after: {load()}")
    finally:
        shutil.rmtree(course, ignore_errors=True)


if __name__ == "__main__":
    main()
