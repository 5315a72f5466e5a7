"""Where a notebook's grading time goes. With AUTOGRADER_PROFILE=DIR set, each graded notebook adds
one line of stage durations to DIR/profile-<pid>.jsonl; `benchmarks/grading_speed.py` prints the
class's breakdown from them. Unset, nothing is measured or written."""
import contextlib
import json
import os
import time


class Stages:
    def __init__(self):
        self.seconds = {}

    @contextlib.contextmanager
    def stage(self, name):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name, seconds):
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def save(self, student, assignment):
        folder = os.environ.get("AUTOGRADER_PROFILE")
        if not folder:
            return
        line = json.dumps({"student": student, "assignment": assignment, "seconds": self.seconds})
        with open(os.path.join(folder, f"profile-{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write(line + "\n")
