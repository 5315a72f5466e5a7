"""The built book, shared by the test modules that read it (test_book.py, test_browser.py).

The book is built into the repository's `_build/` with the same command as `make book`, once
per test run: the first module (on any pytest-xdist worker) that asks for it builds it under a
file lock and writes a stamp naming the test run; every later module of the same run, on the
same worker or another, finds the stamp and reuses that build. The jupyter cache in
`_build/.jupyter_cache` makes a warm build take seconds.

The build shares the machine with the rest of the suite (the other pytest-xdist workers grade
notebooks beside it). Its kernels time every cell they run (`CELL_TIMER`, an IPython startup file
of the build's own IPYTHONDIR): test_book.py holds every cell to half the execution timeout of
_config.yml, the limit a cell of a slow page would hit. `benchmarks/book_on_busy_cores.py` builds the
book cold beside two busy-looping processes, as on the machine where `make book` once failed
(issue 23: a page cell past the timeout), and prints each page's longest cell against the timeout.
"""
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
LOCK = BUILD / ".test-book-build.lock"
STAMP = BUILD / ".test-book-build.json"
BUILD_TIMEOUT_S = 1200

# One id per test run: pytest-xdist gives every worker of a run the same one; without xdist the
# run is this one process.
RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"process-{uuid.uuid4().hex}"


def jupyter_book_command():
    script = Path(sys.executable).parent / "jupyter-book"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]


def page_seconds(log):
    """{page: seconds its code ran} from the build's log (myst-nb's "Executed notebook in" lines;
    a page whose execution is cached is not in it)."""
    found = re.findall(r"^(\S+?)\.(?:md|ipynb): Executed notebook in ([\d.]+) seconds", log, re.M)
    return {os.path.relpath(path, ROOT): float(seconds) for path, seconds in found}


# Run by every kernel of the build at its start: each cell's wall time, appended to the file
# $BOOK_CELL_SECONDS with the kernel's pid and the cell's source (which name its page). Only the
# function's name is left in the page's namespace, and deleted.
CELL_TIMER = """\
def _time_cells():
    import json, os, time
    started = []
    def pre_run_cell(info):
        started.append(time.perf_counter())
    def post_run_cell(result):
        seconds = time.perf_counter() - started.pop()
        with open(os.environ["BOOK_CELL_SECONDS"], "a") as out:
            out.write(json.dumps({"pid": os.getpid(), "seconds": seconds, "source": result.info.raw_cell}) + "\\n")
    get_ipython().events.register("pre_run_cell", pre_run_cell)
    get_ipython().events.register("post_run_cell", post_run_cell)
_time_cells()
del _time_cells
"""


def timed_build_env(folder):
    """The build's environment: its kernels time their cells into `folder`/cells.jsonl."""
    startup = Path(folder) / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-time-cells.py").write_text(CELL_TIMER)
    return {**os.environ, "IPYTHONDIR": str(Path(folder) / "ipython"), "BOOK_CELL_SECONDS": str(Path(folder) / "cells.jsonl")}


def cell_seconds(folder, executed=BUILD / "jupyter_execute"):
    """{page: [(seconds, first line of the cell)] in the order run} of the cells the build's kernels
    ran: each kernel's cells belong to the executed notebook that holds all their sources."""
    path = Path(folder) / "cells.jsonl"
    by_kernel = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        cell = json.loads(line)
        by_kernel.setdefault(cell["pid"], []).append(cell)
    sources = {}
    for notebook in executed.rglob("*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        page = os.path.relpath(notebook.with_suffix(""), executed)
        sources[page] = {"".join(c["source"]) for c in cells if c["cell_type"] == "code"}
    found = {}
    for cells in by_kernel.values():
        pages = [page for page, held in sources.items() if all(c["source"] in held for c in cells)]
        page = pages[0] if len(pages) == 1 else f"a page of {len(pages)} that hold its cells"
        found.setdefault(page, []).extend((c["seconds"], (c["source"].strip().splitlines() or [""])[0]) for c in cells)
    return found


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

    A generator for a pytest fixture: it yields {"run", "returncode", "log", "page_seconds",
    "cell_seconds"}. The build runs under an exclusive lock; readers share it, so modules that reuse
    the build read at once.
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
                    with tempfile.TemporaryDirectory() as timed:
                        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                              timeout=BUILD_TIMEOUT_S, env=timed_build_env(timed))
                        result = {"run": RUN_ID, "returncode": proc.returncode,
                                  "log": (proc.stdout + proc.stderr)[-20000:],
                                  "page_seconds": page_seconds(proc.stdout + proc.stderr),
                                  "cell_seconds": cell_seconds(timed)}
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
