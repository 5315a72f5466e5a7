"""The book built cold beside busy cores: each page's longest cell against the cell timeout.

    .venv/bin/python benchmarks/book_on_busy_cores.py [--busy 2]

`make book` once failed on a fresh clone where other work kept both cores busy (issue 23: a page
cell past the execution timeout). This builds the book with `make book`'s command into a
temporary folder (its own, empty, execution cache: every page runs) while `--busy` processes
each keep a core busy from start to end, then prints each page's time, its longest cell and that
cell's share of the timeout, and the CPU time the busy processes got. The test suite holds every
cell to half the timeout in its own (not artificially loaded) build.
"""
import argparse
import contextlib
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from book_build import cell_seconds, jupyter_book_command, page_seconds, timed_build_env  # noqa: E402


@contextlib.contextmanager
def busy_cores(count):
    """`count` processes that each keep a core busy until the block ends; yields a dict that then
    holds how many still ran at its end and the seconds of CPU they got."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    usage = {"running": 0, "cpu_s": 0.0}
    try:
        yield usage
    finally:
        usage["running"] = sum(hog.poll() is None for hog in hogs)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for hog in hogs:
            hog.kill()
            hog.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        usage["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="busy-looping processes beside the build")
    args = parser.parse_args()
    timeout = yaml.safe_load((REPO / "_config.yml").read_text())["execute"]["timeout"]
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as timed:
        command = jupyter_book_command() + ["build", str(REPO), "--warningiserror", "--nitpick", "--keep-going",
                                            "--path-output", out]
        start = time.monotonic()
        with busy_cores(args.busy) as busy:
            proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=timed_build_env(timed))
        wall = time.monotonic() - start
        cells = cell_seconds(timed, Path(out) / "_build" / "jupyter_execute")
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        print(log[-4000:])
        sys.exit(f"the build failed (exit {proc.returncode})")
    print(f"book built cold in {wall:.0f} s beside {args.busy} busy processes "
          f"({busy['running']} still running at the end, {busy['cpu_s']:.0f} s of CPU between them)")
    print(f"{'page':32} {'seconds':>8} {'longest cell':>13} {'of the ' + str(timeout) + ' s timeout':>22}")
    for page, seconds in sorted(page_seconds(log).items(), key=lambda item: -item[1]):
        longest = max((s for s, _ in cells.get(page, [])), default=float("nan"))
        print(f"{re.sub(r'^book/', '', page):32} {seconds:8.1f} {longest:13.1f} {longest / timeout:21.0%}")


if __name__ == "__main__":
    main()
