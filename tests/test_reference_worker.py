"""The reference worker (`autograder/sandbox/answers.py`): the grader's answers to a student's
questions are computed in a bounded process of their own, and a question that times out never puts
the student's channel out of step (issue 35 §1-3, §8)."""
import os
import time

import numpy as np
import pytest

from autograder import reference
from autograder.checks import known_good
from autograder.pipeline import grade_notebook
from autograder.sandbox.answers import ADDRESS_SPACE_BYTES, Callbacks, ReferenceWorker
from autograder.sandbox.session import Limits
from autograder import wire
from submissions import filled_notebook, write


class Counter:
    """A callback as the checks write one: it keeps state, and says which of it the check reads back."""
    shared = ("calls",)

    def __init__(self):
        self.calls = 0

    def __call__(self, what, size=0):
        self.calls += 1
        if what == "grow":
            return float(np.ones(size, dtype=np.uint8).sum())  # bytes held at once
        if what == "sleep":
            time.sleep(size)
        if what == "pid":
            return os.getpid()
        return what


def answered(answer):
    """What the student's process reads of an answer: its frame's value, or the error."""
    if isinstance(answer, bytes):
        return {"value": wire.decode(answer[wire.HEADER.size:])["value"]}
    return answer


@pytest.fixture
def worker():
    worker = ReferenceWorker()
    yield worker
    worker.end()


def test_answers_come_from_another_process_and_its_state_comes_back(worker):
    callbacks = Callbacks()
    callbacks["count"] = counter = Counter()
    assert answered(worker.answer(callbacks, "count", ["pid"], 10))["value"] != os.getpid()
    assert answered(worker.answer(callbacks, "count", ["echo"], 10)) == {"value": "echo"}
    assert counter.calls == 2 and worker.forks == 1  # one worker for one generation of callbacks
    assert answered(worker.answer(callbacks, "other", [], 10)) == {"error": "the grader answers no such question now"}


def test_memory_past_the_bound_fails_the_question_not_the_grader(worker):
    callbacks = Callbacks()
    callbacks["count"] = Counter()
    answer = answered(worker.answer(callbacks, "count", ["grow", 2 * ADDRESS_SPACE_BYTES], 30))
    assert "MemoryError" in answer["error"], answer
    assert answered(worker.answer(callbacks, "count", ["grow", 2**20], 10)) == {"value": float(2**20)}  # it goes on


def test_a_question_past_its_time_kills_the_worker_and_the_next_one_is_answered(worker):
    callbacks = Callbacks()
    callbacks["count"] = Counter()
    started = time.monotonic()
    answer = answered(worker.answer(callbacks, "count", ["sleep", 30], 0.5))
    assert time.monotonic() - started < 5 and "time limit" in answer["error"], answer
    assert worker.pid is None  # killed, not left computing
    assert answered(worker.answer(callbacks, "count", ["echo"], 10)) == {"value": "echo"} and worker.forks == 2


def test_a_new_generation_of_callbacks_gets_a_new_worker(worker):
    callbacks = Callbacks()
    callbacks["count"] = Counter()
    first = answered(worker.answer(callbacks, "count", ["pid"], 10))["value"]
    callbacks["count"] = Counter()
    assert answered(worker.answer(callbacks, "count", ["pid"], 10))["value"] != first


def test_the_seed_of_a_stand_in_is_a_number_never_a_generators_state():
    ref = reference.load("05-self-masked")
    standins = known_good.KnownGood(ref, {"CausalSelfAttention"})
    import torch
    no_kwargs = {known_good.TAG: "dict", "items": []}  # as the stand-in sends them
    with pytest.raises(RuntimeError, match="seed"):
        standins("new", "CausalSelfAttention", [16, 4], no_kwargs, torch.zeros(5056, dtype=torch.uint8))
    a = standins("new", "CausalSelfAttention", [16, 4], no_kwargs, 7)["state"]
    b = standins("new", "CausalSelfAttention", [16, 4], no_kwargs, 7)["state"]
    assert all(torch.equal(a[name], b[name]) for name in a)  # the student's seed decides the parameters


SLOW_ONCE = "AUTOGRADER_TEST_SLOW_ONCE"


def test_an_answer_that_comes_after_its_call_leaves_later_exercises_untouched(tmp_path, monkeypatch):
    """A busy machine, played by a grader's answer 7 s slow once, during TinyLM's first check, whose
    calls have 5 s (and 5 s of grace): the answer comes after the call has failed on its time, and
    every later call gets its own reply (the late answer is dropped): TinyLM's other checks, train_lm
    and generate keep their points."""
    flag = tmp_path / "slow-once"
    flag.write_text("")
    answer = known_good.KnownGood.__call__

    def slow_once(self, op, *args):
        if op == "method" and "TinyLM" not in self.names and "CausalSelfAttention" in self.names:
            try:
                flag.unlink()  # in whichever worker asks first: the flag is on disk, not in a process
                time.sleep(7)
            except FileNotFoundError:
                pass
        return answer(self, op, *args)
    monkeypatch.setattr(known_good.KnownGood, "__call__", slow_once)
    a = "05-self-masked"
    path = write(filled_notebook(a), tmp_path / "honest" / a / f"{a}.ipynb")
    graded = grade_notebook("honest", a, str(path), Limits(call_seconds=5, grace_seconds=5))
    assert not flag.exists()  # the slow answer happened
    by_name = {e.name: e for e in graded.exercises}
    failed = [c for c in by_name["TinyLM"].checks if not c.passed]
    assert len(failed) == 1 and "time limit" in failed[0].message, by_name["TinyLM"].checks
    for name in ("train_lm", "generate"):
        assert by_name[name].score == by_name[name].max_score, by_name[name].checks


def test_the_worker_starts_under_a_graders_own_lower_limits():
    """An instructor's `ulimit -v` or `ulimit -n` below the worker's bounds: the worker keeps the lower
    ones (raising a hard limit would fail, and every answer with it)."""
    import subprocess
    import sys
    code = ("import resource\n"
            "resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))\n"
            "from autograder.sandbox.answers import Callbacks, ReferenceWorker\n"
            "callbacks = Callbacks()\ncallbacks['echo'] = lambda x: x\n"
            "worker = ReferenceWorker()\nprint(worker.answer(callbacks, 'echo', ['hi'], 10, 7))\nworker.end()\n")
    from autograder import REPO_ROOT
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert run.returncode == 0 and run.stdout.strip().startswith("b'") and "hi" in run.stdout, run
