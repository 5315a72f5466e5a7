"""Which stated rules give a notebook different verdicts on different run seeds.

A stated rule draws its inputs from the run's seed (autograder/stated/register.py), so a bug whose
effect sits near a rule's tolerance fails it on some seeds and not others: two students with the
same bug get different points. For the reference, the alternative solution and every wrong
implementation of each exercise (tests/mutants), this runs the exercise's rules on SEEDS seeds in
one sandboxed process and prints the rules whose verdict changed. Slow (minutes a chapter); run it
when a rule or a mutant changes. tests/test_run_seed.py keeps the cases it found.

    .venv/bin/python tests/seed_scan.py [ASSIGNMENT ...] [--seeds N]
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import catalogue  # noqa: E402
from submissions import filled_notebook, write  # noqa: E402

from autograder import assignments, notebook, selfcheck, stated  # noqa: E402
from autograder.sandbox.calls import StudentError  # noqa: E402
from autograder.sandbox.session import Limits, SandboxedStudent  # noqa: E402


def variants(a, exercise):
    """[(label, source or None for the reference)] of one exercise."""
    found = [("reference", None)]
    if exercise in catalogue(a).ALTERNATIVE:
        found.append(("alternative", catalogue(a).ALTERNATIVE[exercise]))
    return found + list(catalogue(a).WRONG.get(exercise, {}).items())


def verdicts(a, exercise, source, seeds, folder):
    """{rule name: {"pass", "fail"}} over `seeds`, the notebook holding `source` for `exercise`."""
    path = write(filled_notebook(a, {exercise: source} if source else {}), folder / a / f"{a}.ipynb")
    submission = selfcheck.load_submission(path, a)
    cells, _ = selfcheck.cells_to_run(submission, a, selfcheck.exercise_cells(submission, a))
    rules = stated.properties(a, exercise) + stated.device_rules(a, exercise)
    seen = {rule.name: set() for rule in rules}
    with SandboxedStudent(cells, Limits(), notebook.modules_to_preload(a)) as student:
        for seed in range(seeds):
            for rule in rules:
                student.start_exercise()
                try:
                    rule.run(stated.Student(student), stated.rng_for(rule.key, seed))
                    seen[rule.name].add("pass")
                except (stated.CheckFailure, StudentError):
                    seen[rule.name].add("fail")
    return seen


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", default=assignments())
    parser.add_argument("--seeds", type=int, default=12)
    args = parser.parse_args(argv)
    mixed = 0
    with tempfile.TemporaryDirectory() as folder:
        for a in args.assignments:
            for e in notebook.exercises(a):
                if not stated.properties(a, e.name) + stated.device_rules(a, e.name):
                    continue
                for label, source in variants(a, e.name):
                    changed = [rule for rule, seen in verdicts(a, e.name, source, args.seeds, Path(folder)).items()
                               if len(seen) > 1]
                    mixed += len(changed)
                    for rule in changed:
                        print(f"{a} {e.name} {label}: passes on some seeds and fails on others: {rule}", flush=True)
    print(f"{mixed} rule verdict{'s' if mixed != 1 else ''} that depend on the seed ({args.seeds} seeds)")
    return 1 if mixed else 0


if __name__ == "__main__":
    sys.exit(main())
