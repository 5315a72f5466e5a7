"""The built book, shared by the test modules that read it (test_book.py, test_browser.py).

The book is built into the repository's `_build/` with the same command as `make book`, once
per test run: the first module (on any pytest-xdist worker) that asks for it builds it under a
file lock and writes a stamp naming the test run; every later module of the same run, on the
same worker or another, finds the stamp and reuses that build. The jupyter cache in
`_build/.jupyter_cache` makes a warm build take seconds.

The build runs on a busy machine on purpose: two busy-looping processes (`busy_cores`) share the
cores with it from start to end, as other work did when `make book` failed on a fresh clone
(issue 23: a page cell past the execution timeout of _config.yml). The build's command is
`make book`'s, so its timeouts are the same. Where the cache is cold (a fresh clone, a page whose
code changed) this slows the build, and the tests beside it, while it lasts.
"""
import contextlib
import fcntl
import json
import os
import re
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
LOCK = BUILD / ".test-book-build.lock"
STAMP = BUILD / ".test-book-build.json"
BUILD_TIMEOUT_S = 1200
BUSY_CORES = 2                 # the machine where `make book` failed had two, both kept busy

# One id per test run: pytest-xdist gives every worker of a run the same one; without xdist the
# run is this one process.
RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"process-{uuid.uuid4().hex}"


def jupyter_book_command():
    script = Path(sys.executable).parent / "jupyter-book"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]


@contextlib.contextmanager
def busy_cores(count=BUSY_CORES):
    """`count` processes that each keep a core busy until the block ends; yields a dict that
    then holds the block's wall time ("wall_s"), how many of them were still running at its end
    ("running") and the seconds of CPU they got ("cpu_s": on a machine loaded by others too,
    they share the cores with all of it)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    usage = {"wall_s": 0.0, "running": 0, "cpu_s": 0.0}
    start = time.monotonic()
    try:
        yield usage
    finally:
        usage["wall_s"] = time.monotonic() - start
        usage["running"] = sum(hog.poll() is None for hog in hogs)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)   # the children reaped so far
        for hog in hogs:
            hog.kill()
            hog.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        usage["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def this_runs_build():
    if STAMP.exists():
        try:
            stamp = json.loads(STAMP.read_text())
        except ValueError:
            return None
        if stamp.get("run") == RUN_ID:
            return stamp
    return None


def build_book():
    """Build the book (or reuse this test run's build); hold a shared lock while testing.

    A generator for a pytest fixture: it yields {"run", "returncode", "log", "busy"} (busy:
    what busy_cores measured beside the build). The build runs under an exclusive lock; readers
    share it, so modules that reuse the build read at once.
    """
    BUILD.mkdir(exist_ok=True)
    with open(LOCK, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH)
            result = this_runs_build()
            if result is None:
                fcntl.flock(handle, fcntl.LOCK_EX)     # (not atomic: look at the stamp again)
                result = this_runs_build()
            if result is None:
                command = jupyter_book_command() + [
                    "build", str(ROOT), "--warningiserror", "--nitpick", "--keep-going"]
                for _ in range(2):
                    with busy_cores() as busy:
                        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                              timeout=BUILD_TIMEOUT_S)
                    result = {"run": RUN_ID, "returncode": proc.returncode,
                              "log": (proc.stdout + proc.stderr)[-20000:], "busy": busy}
                    # A kernel that dies before it answers is the machine's race, not the book's: its
                    # TCP ports were chosen free and then taken, most likely by another test's kernel
                    # (seen once in a fresh-clone run beside nbgrader's grading). Pages already run
                    # are cached, so one more build costs little.
                    if proc.returncode == 0 or "Kernel died before replying to kernel_info" not in result["log"]:
                        break
                STAMP.write_text(json.dumps(result))
            fcntl.flock(handle, fcntl.LOCK_SH)   # readers share the lock; the next build waits for them
            yield result
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def toc_files():
    """Every document listed in _toc.yml, as a path relative to the root without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                found.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return found


def chapter_pages():
    return [f for f in toc_files() if re.fullmatch(r"book/\d\d-[\w-]+", f)]


def student_notebooks():
    return [f for f in toc_files() if f.startswith("notebooks/")]
