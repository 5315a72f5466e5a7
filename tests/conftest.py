import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# One thread per process, for every process the suite starts (nbgrader's kernels, `check`, the tests'
# own; the sandbox and the book's pages set theirs): `make test` runs a worker per core and one more, and
# a process with torch's default, a thread per core, spin-waits for cores the others hold: a training
# loop beside two busy processes took 2.5 times as long with two threads as with one, and 3.9 times
# the CPU (benchmarks/threads_on_busy_cores.py). Set here, before any test or worker imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# The tiers (`make test-fast` leaves these out; `make test`, which CI runs, runs everything): a module
# is marked by what makes it slow. `slow`: it grades many notebooks or runs long sandboxed sessions;
# `venv`: it makes a fresh virtual environment; `book`: it builds the book; `nbgrader`: it runs
# nbgrader's own commands.
TIERS = {
    "test_grading": ("slow", "nbgrader"), "test_class_state": ("slow",),
    "test_slurm": ("slow",), "test_adversarial_reference": ("slow",), "test_selfcheck": ("slow",),
    "test_check_device": ("slow",), "test_free_points": ("slow",), "test_shards": ("slow",),
    "test_grader_death": ("slow",), "test_adversarial": ("slow",), "test_adversarial_host": ("slow",),
    "test_memory_bound": ("slow",), "test_lms": ("slow",), "test_late_feedback": ("slow",),
    "test_adversarial_known_good": ("slow",), "test_adversarial_callbacks": ("slow",), "test_adversarial_reach": ("slow",),
    "test_autograder_cli": ("slow",), "test_run_seed": ("slow",), "test_cleanup": ("slow",),
    "test_student_copy": ("venv",), "test_gradescope_container": ("venv",), "test_gradescope_and_export": ("venv",),
    "test_release": ("nbgrader",), "test_nbgrader_route": ("nbgrader",),
    "test_book": ("book",), "test_browser": ("book",), "test_launch_buttons": ("book",), "test_term_book": ("book",),
}


def pytest_configure(config):
    for marker, what in (("slow", "grades many notebooks or runs long sandboxed sessions"),
                         ("venv", "makes a fresh virtual environment"), ("book", "builds the book"),
                         ("nbgrader", "runs nbgrader's own commands")):
        config.addinivalue_line("markers", f"{marker}: {what} (left out by make test-fast)")


# The modules that take longest, longest first: `make test` hands pytest-xdist's workers whole modules
# in this order (--dist loadfile --no-loadscope-reorder), so the long ones start at once, side by side,
# and the short ones fill in after them. test_browser builds the book the other book modules read.
LONGEST_FIRST = ["test_grading", "test_browser", "test_student_copy", "test_nbgrader_route", "test_selfcheck",
                 "test_gradescope_and_export", "test_autograder_cli", "test_adversarial_known_good",
                 "test_adversarial_reach", "test_class_state", "test_run_seed", "test_adversarial_callbacks",
                 "test_adversarial", "test_hints", "test_adversarial_host", "test_grader_death",
                 "test_adversarial_reference", "test_free_points", "test_check_device", "test_release", "test_slurm",
                 "test_cleanup", "test_book"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With PYTEST_TIMELINE=FILE, each test's worker, start, end, CPU seconds and id appended to FILE
    (what a run's workers did when, and what it cost: `benchmarks/suite_timeline.py FILE` prints it)."""
    start, cpu = time.time(), cpu_seconds()
    yield
    timeline = os.environ.get("PYTEST_TIMELINE")
    if timeline:
        with open(timeline, "a") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{start:.2f}\t{time.time():.2f}\t"
                    f"{cpu_seconds() - cpu:.2f}\t{item.nodeid}\n")


def cpu_seconds():
    """CPU time of this process and of the children it has waited for (a test's commands and kernels).
    Not the students' processes a zygote forks (they end inside bubblewrap's PID namespace, whose
    accounting is lost when the sandbox is killed): /proc/stat's `nice` column shows theirs."""
    import resource
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                          resource.RUSAGE_CHILDREN)))


def module_name(item):
    return item.module.__name__.rsplit(".", 1)[-1]


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker in TIERS.get(module_name(item), ()):
            item.add_marker(marker)
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(module_name(item), len(rank)))  # stable: the rest keep their order


def run(*command, cwd=REPO, check=True, timeout=1800, **variables):
    """Run a command from the project's venv, with environment `variables` added; its output is shown
    when it fails."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **variables)  # nbgrader runs `alembic`
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, command))} exited {result.returncode}\n"
                             f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}")
    return result


def users_shell_env(**extra):
    """The environment of a user's own shell: no venv of the course's active, and nothing of the
    `make test` that runs this suite (a make that inherits MAKELEVEL prints "make[1]: Leaving
    directory" as its last line, where a user's prints the command's own output)."""
    inherited = ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if os.path.realpath(p) != os.path.realpath(BIN))
    return dict({k: v for k, v in os.environ.items() if k not in inherited}, PATH=path, **extra)


def paths_under(root):
    """Every path under root, skipping folders that vanish while we walk: other test
    workers' sandboxes create and remove their own folders in the same /tmp."""
    for folder, dirs, files in os.walk(root):  # os.walk ignores a folder it can no longer list
        for name in dirs + files:
            yield Path(folder) / name


def setuid_files_since(root, start):
    found = []
    for path in paths_under(root):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if os.path.isfile(path) and not path.is_symlink() and st.st_mode & 0o4000 and st.st_mtime >= start - 1:
            found.append(path)
    return found


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="module")
def build():
    """The built book in _build/html: built once per test run, shared by every module that
    reads it (test_book.py, test_browser.py); see book_build.py."""
    from book_build import build_book
    yield from build_book()
