"""Write autograder/stated/known_answers.py: the known answers `check` gives the stated rules.

A stated rule ships to students (autograder/stated/), so it holds no implementation of an exercise
(issue 36). Where it compares a value with the answer, it asks its `known` source
(`autograder/stated/known.py`): at grading, the reference computes the answer on inputs drawn from
the run's secret seed; in `check`, the answers stored here, recorded by running each such rule on
the reference solution itself (trusted code, in this process) with a seed drawn now and kept by
nobody. The inputs are stored with the answers; grading draws others, so they earn nothing there.

    .venv/bin/python tests/make_known_answers.py          # records and writes the file

tests/test_no_answers.py checks that every stored answer is the reference's on its stored inputs,
and the reference solutions' `check` runs read them.
"""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET = REPO / "autograder" / "stated" / "known_answers.py"

def rules_with_answers():
    from autograder import assignments, notebook, stated
    return [rule for a in assignments() for e in notebook.exercises(a) for rule in stated.properties(a, e.name)
            if rule.known]


def record():
    """{rule key: {"inputs": ..., "answers": [...]}}: every rule that asks for answers, run on the
    reference solution."""
    from autograder import reference, stated
    from autograder.checks import checks_module
    from autograder.checks.core import answer_helpers
    from autograder.checks.inprocess import InProcessStudent
    from autograder.stated.known import Recording
    seed = stated.fresh_seed()  # a seed nobody keeps
    records = {}
    for rule in rules_with_answers():
        checks_module(rule.assignment)  # registers the chapter's grader-side answers
        ref = reference.load(rule.assignment)
        recording = Recording(ref, answer_helpers(rule.assignment))
        student = stated.Student(InProcessStudent(dict(vars(ref))))
        rule.run(student, stated.rng_for(rule.key, seed), recording)  # a failure here is the rule's bug
        records[rule.key] = {"inputs": recording.inputs, "answers": recording.answers}
    return records


if __name__ == "__main__":
    from autograder.stated.known import module_text
    text = module_text(record())
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(REPO)} ({len(text):,} characters)")
