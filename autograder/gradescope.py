"""Gradescope: build an autograder zip for one assignment, (inside it) write results.json, and try
a zip here the way Gradescope runs it.

A zip holds this package with only its assignment's checks, the assignment's source notebook (the
reference: it never reaches the student's process), the pinned requirements of that assignment
alone (`requirements.for_assignment`) and a `setup.sh` / `run_autograder` pair. On Gradescope the
student's notebook is graded by the same pipeline as here; each check becomes one of Gradescope's
tests, shown after publication; whether the notebook ran is shown at once.

Gradescope runs each submission alone in a container of its own, as root. Where that container
lets bubblewrap make its namespaces, the student's code runs under it, as everywhere. Where it
does not (Docker's default seccomp profile refuses them), the zip grades with what the container
allows (`results_json`): the autograder's folder locked to root (`lock_down`: the checks, the
solutions, the source, the submission, results.json), the student's code run as the unprivileged
user that setup.sh makes, with the seccomp filter and the same limits; every process of that user
killed before root writes results.json; and the autograder's stdout, which Gradescope shows the
instructors alone, says so (never results.json's `output`, which students see: `for_instructors`).
"""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

from . import REPO_ROOT, SOLUTIONS_DIR
from .files import atomic_write
from .notebook import NotebookError, pick_notebook, read_notebook_bytes, renamed_note
from .pipeline import grade_notebook, not_graded
from .results import Graded
from .sandbox import isolation, seccomp
from .sandbox.isolation import NOT_ISOLATED, bubblewrap_works
from .sandbox.processes import ThrowawayUser, end_identity, writable_by_anyone

BUILD_DIR = REPO_ROOT / "build" / "gradescope"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # the CPU-only torch: Gradescope has no GPU


def min_python():
    """(3, 11): the oldest Python the course supports, from pyproject.toml's requires-python."""
    spec = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    major, minor = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip()).groups()
    return int(major), int(minor)


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
at_least() {{ command -v "$1" >/dev/null && "$1" -c 'import sys; sys.exit(sys.version_info < {need_tuple})' 2>/dev/null; }}
apt-get update -qq
apt-get install -y -qq bubblewrap >/dev/null || echo "setup.sh: could not install bubblewrap" >&2
# Where the container refuses bubblewrap's namespaces, students' code runs as this user, which cannot
# read the checks, the solutions or results.json (gradescope.py's results_json says how it ran)
id -u {student_user} >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin {student_user} || echo "setup.sh: could not add the user {student_user}; nobody is used" >&2
# Python {need}, which the course's pins are tested with: from the deadsnakes PPA (Ubuntu 22.04's
# python3 is 3.10), else from Ubuntu's archive; failing both, the image's python3 if it is >= {need}.
if ! at_least python{need}; then
  {{ apt-get install -y -qq software-properties-common >/dev/null && add-apt-repository -y ppa:deadsnakes/ppa \\
     && apt-get update -qq; }} || echo "setup.sh: no deadsnakes PPA; trying Ubuntu's own python{need}" >&2
  apt-get install -y -qq python{need} python{need}-venv >/dev/null || echo "setup.sh: could not install python{need}" >&2
fi
PYTHON=""
for p in python{need} python3; do
  if at_least "$p"; then PYTHON=$(command -v "$p"); break; fi
done
if [ -z "$PYTHON" ]; then
  echo "setup.sh: FAILED: this autograder needs Python >= {need}; the image has $(python3 --version 2>&1 || echo no python3)" \\
       "and python{need} could not be installed. Choose an Ubuntu 22.04 or 24.04 base image in Gradescope's autograder settings." >&2
  exit 1
fi
echo "setup.sh: $PYTHON ($("$PYTHON" --version))"
# Debian's Pythons need their -venv package for `-m venv` (ensurepip)
"$PYTHON" -m venv "$ROOT/venv" 2>/dev/null || {{ apt-get install -y -qq "$(basename "$PYTHON")-venv" >/dev/null && "$PYTHON" -m venv "$ROOT/venv"; }}
"$ROOT/venv/bin/python" -m pip install -q --extra-index-url {torch_index} -r "$ROOT/source/requirements.txt"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grade it, write results/results.json.
set -uo pipefail
export AUTOGRADER_ROOT="${{AUTOGRADER_ROOT:-/autograder}}"  # locked to root where students' code runs as another user
ROOT="$AUTOGRADER_ROOT"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source"
"$PYTHON" -m autograder gradescope-results {assignment} "$ROOT/submission" "$ROOT/results/results.json"
"""


def setup_sh():
    need = min_python()
    return SETUP_SH.format(need=f"{need[0]}.{need[1]}", need_tuple=need, torch_index=TORCH_CPU_INDEX,
                           student_user=isolation.STUDENT_USER)


def default_zip(assignment):
    return BUILD_DIR / f"{assignment}.zip"


def package_files(assignment):
    """The package's modules, with the checks of `assignment` only (each chapter's zip grades one)."""
    package = REPO_ROOT / "autograder"
    own = f"ch{assignment.replace('-', '_')}.py"
    return [p for p in sorted(package.rglob("*.py"))
            if not (p.parent == package / "checks" and p.name.startswith("ch") and p.name != own)]


def build_zip(assignment, out_path=None):
    """The Gradescope autograder zip for `assignment` (default: build/gradescope/<assignment>.zip)."""
    from .requirements import for_assignment
    if not (SOLUTIONS_DIR / assignment / f"{assignment}.ipynb").is_file():
        known = ", ".join(sorted(p.name for p in SOLUTIONS_DIR.iterdir() if p.is_dir()))
        raise SystemExit(f"no assignment {assignment!r} in {SOLUTIONS_DIR} (the assignments: {known})")
    out_path = Path(out_path or default_zip(assignment))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in package_files(assignment):
            archive.write(path, path.relative_to(REPO_ROOT))
        for path in sorted((SOLUTIONS_DIR / assignment).iterdir()):
            archive.write(path, path.relative_to(REPO_ROOT))
        for name, text, mode in (("setup.sh", setup_sh(), 0o755),
                                 ("run_autograder", RUN_AUTOGRADER.format(assignment=assignment), 0o755),
                                 ("requirements.txt", "\n".join(for_assignment(assignment)) + "\n", 0o644)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, text)
    return out_path


def check_tests(graded):
    """Gradescope's tests, one per check: [{name, score, max_score, status, output, visibility}]."""
    return [{"name": f"{exercise.name}: {r.name}", "score": round(r.points, 4), "max_score": round(r.max_points, 4),
             "status": "passed" if r.passed and r.points >= r.max_points - 1e-9 else "failed",
             "output": r.message or "passed" if r.ran else f"not run: {r.message}", "visibility": "after_published"}
            for exercise in graded.exercises for r in exercise.checks]


def notebook_test(graded):
    """The test shown at once: whether the notebook ran; failed when it could not be graded or a
    cell raised."""
    output = "\n".join(([graded.problem] if graded.problem else []) + graded.notes)
    failed = bool(graded.problem) or bool(graded.raised)
    return {"name": "your notebook runs", "score": 0.0, "max_score": 0.0, "status": "failed" if failed else "passed",
            "output": output or "every cell ran", "visibility": "visible"}


def lock_down(root):
    """By root, before any student code runs: Gradescope's /autograder as the student's identity
    must find it. The folder itself can be crossed but not listed (the venv in it stays usable);
    everything else in it (source: the checks, the solutions, this package; submission; results;
    run_autograder) is root's alone. A folder closed to others hides all it holds."""
    root = Path(root)
    os.chmod(root, 0o711)
    for entry in root.iterdir():
        if entry.name == "venv" or entry.is_symlink():
            continue
        os.chmod(entry, 0o700 if entry.is_dir() or entry.stat().st_mode & 0o100 else 0o600)


def container_text(assignment, ended):
    """results.json's output where the container refuses namespaces: how the student's code ran.
    `ended`: whether every process of the student's own user was killed (None: nobody, which is
    not its own: its session was)."""
    uid, _, name = isolation.student_identity()
    end = {True: "ended every process of that user", None: "ended the student's process session",
           False: "could not kill every process of that user, but ended its session"}[ended]
    return (f"{assignment}: graded without bubblewrap, which this container cannot run (it refuses namespaces). "
            f"Each submission runs alone in its own container; in it the student's code ran in a process of its own "
            f"as the unprivileged user {name} (uid {uid}), which could neither read nor write the autograder's files "
            f"(the checks, the solutions, the source), the submission folder or results.json: the grader, root, "
            f"{end} before writing results.json. Limits: CPU time, memory, file size, "
            f"processes{' (also counted by the kernel for that user)' if isolation.own_student_user() else ''}, "
            f"open files, time; {isolation.memory_guards_text()}. Unlike under bubblewrap, it could read the image's "
            f"system files{'' if isolation.memory_guards()[1] else ' and reach the network'}.")


def for_instructors(text):
    """A note for the instructors: printed to stdout, which Gradescope shows them alone (results.json
    sets `stdout_visibility` hidden), never put in results.json's `output`, which students see."""
    print(f"autograder, for the instructors: {text}", flush=True)


def _refused(results_path, reason):
    for_instructors(f"Not graded: {reason} Set AUTOGRADER_ALLOW_UNISOLATED=1 in run_autograder to grade anyway, "
                    "with the student's code running as the autograder's user.")
    data = {"score": 0.0, "visibility": "visible", "stdout_visibility": "hidden", "tests": [],
            "output": "Not graded: the autograder cannot run notebooks safely in this container; "
                      "your instructor can see why in the autograder's output."}
    atomic_write(results_path, json.dumps(data, indent=1))
    return data


def results_json(assignment, submission_dir, results_path):
    """Grade the notebook Gradescope put in `submission_dir` and write Gradescope's results.json.
    Under bubblewrap where it runs; else, as root in run_autograder (AUTOGRADER_ROOT set), as the
    student's identity in the locked-down folder; else only if AUTOGRADER_ALLOW_UNISOLATED=1. An
    error of the autograder's own still writes a results.json that says so, then is raised."""
    try:
        return _results_json(assignment, submission_dir, results_path)
    except BaseException as error:
        data = {"score": 0.0, "visibility": "visible", "stdout_visibility": "hidden", "tests": [],
                "output": f"Not graded: the autograder failed ({type(error).__name__}: {error}); "
                          "the instructor can see the traceback in the autograder's output."}
        atomic_write(results_path, json.dumps(data, indent=1))
        raise


def submitted_notebook(submission_dir, assignment):
    """(the notebook to grade in Gradescope's submission folder or None, [notes for the student]):
    `<a>.ipynb`, else a browser's or Colab's name for it (`notebook.pick_notebook`, the rule `grade`
    and `check` use), else the only notebook handed in (it was uploaded to this assignment), else
    the first; the note says which file was graded as the assignment, and which were ignored."""
    from . import assignments
    notebooks = sorted(Path(submission_dir).rglob("*.ipynb"))
    if not notebooks:
        return None, []
    by_name = {}
    for path in notebooks:  # the shallowest of each name
        by_name.setdefault(path.name, path)
    name = pick_notebook(list(by_name), assignment, assignments()) or notebooks[0].name
    chosen = by_name[name]
    notes = [renamed_note(name, assignment)] if name != f"{assignment}.ipynb" else []
    ignored = [str(p.relative_to(submission_dir)) for p in notebooks if p != chosen]
    if ignored:
        notes.append(f"only {chosen.relative_to(submission_dir)} is graded; ignored: {', '.join(ignored)}")
    return chosen, notes


def _results_json(assignment, submission_dir, results_path):
    isolated = bubblewrap_works()
    root = os.environ.get("AUTOGRADER_ROOT")
    contained = not isolated and root is not None and os.geteuid() == 0
    unisolated_ok = os.environ.get("AUTOGRADER_ALLOW_UNISOLATED") == "1"
    if contained:
        lock_down(root)  # before the probe: the student's identity must run Python as the lock leaves it
        if not isolation.drops_identity() and not unisolated_ok:
            return _refused(results_path, f"this container refuses namespaces (bubblewrap cannot run) and the user "
                            f"{isolation.student_identity()[2]} cannot run {sys.executable} (its venv must be "
                            f"readable by others), so the student's code would run as root.")
    elif not isolated and not unisolated_ok:
        return _refused(results_path, "this machine refuses namespaces (bubblewrap cannot run) and the grader is "
                        "not root, so the student's code cannot run as another user.")
    submission_dir = Path(submission_dir)
    wanted, notes = submitted_notebook(submission_dir, assignment)
    work = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        target = work / assignment / f"{assignment}.ipynb"
        target.parent.mkdir(parents=True)
        try:
            if wanted:  # read as `grade` reads it: a symlink is refused, not followed
                target.write_bytes(read_notebook_bytes(wanted))
            graded = grade_notebook("student", assignment, str(target))
        except NotebookError as error:
            graded = not_graded("student", assignment, error)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    graded.notes = notes + list(graded.notes)  # the file names in them are the student's: bounded as notes
    tests = [notebook_test(graded)] + check_tests(graded)
    output = "\n".join(([graded.problem] if graded.problem else []) + graded.notes)
    if contained and isolation.drops_identity():
        uid, gid, _ = isolation.student_identity()
        # kill(-1) as nobody would also kill others' processes (other graders' sandboxes): only a user of its own
        ended = end_identity(uid, gid) if isolation.own_student_user() else None
        for_instructors(container_text(assignment, ended))
    elif not isolated:
        for_instructors(f"WARNING: {NOT_ISOLATED}")
    data = {"score": round(graded.score, 4), "output": output or f"{assignment}: graded",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
    atomic_write(results_path, json.dumps(data, indent=1))
    return data


# ---- trying a zip here -------------------------------------------------------------------------

class TryError(Exception):
    """The zip could not be tried to the end; the message says where it stopped."""


def compare(results, graded_tests, total):
    """[(test, Gradescope's score, grade's score, max)] for every check, whether all agree (and the
    totals too), and {test: (Gradescope's output, grade's)} of the tests that differ."""
    theirs = {t["name"]: t for t in results.get("tests", []) if t.get("max_score")}
    ours = {t["name"]: t for t in graded_tests}
    rows = [(name, theirs[name]["score"] if name in theirs else None, ours[name]["score"] if name in ours else None,
             (theirs.get(name) or ours[name])["max_score"]) for name in list(ours) + [n for n in theirs if n not in ours]]
    differ = {name: (theirs.get(name, {}).get("output"), ours.get(name, {}).get("output"))
              for name, a, b, _ in rows if a is None or b is None or abs(a - b) >= 1e-4}
    return rows, not differ and abs(results.get("score", -1) - total) < 1e-4, differ


PR_CAPBSET_DROP, CAP_SYS_ADMIN = 24, 21


def _without_namespaces():
    """In the child that runs run_autograder: a container as Docker's default profile makes it, for
    root without CAP_SYS_ADMIN: that capability out of the bounding set (gone at the exec), and a
    seccomp filter refusing unshare, setns, mount and clone's namespace flags
    (`seccomp.no_namespaces_program`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot drop CAP_SYS_ADMIN")
    code = seccomp.no_namespaces_program()
    if code is None or not seccomp.install(code):
        raise OSError("cannot load a seccomp filter refusing namespaces")


def _python_for_others(python):
    """A Python of `python`'s version that a user with no rights of its own can run: `python` itself,
    else the system's (a pyenv Python under /root is out of the student's reach without namespaces)."""
    version = subprocess.run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    for candidate in [str(python)] + [f"{folder}/python{version}" for folder in ("/usr/bin", "/usr/local/bin")]:
        real = os.path.realpath(candidate)
        if os.path.isfile(real) and isolation._others_can_reach(real):
            prefix = subprocess.run([real, "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                                    text=True, timeout=60).stdout.strip()
            if prefix and isolation._others_can_reach(prefix):
                return real
    raise TryError(f"--no-namespaces: the student's user could not run {python} (it lies where others cannot reach) "
                   f"and there is no python{version} in /usr/bin or /usr/local/bin that it could")


def _run(command, what, timeout, **kwargs):
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout, **kwargs)
    if done.returncode:
        raise TryError(f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    return done


VENV_CACHE_ENV = "AUTOGRADER_VENV_CACHE"   # where the try keeps its venvs (default: VENV_CACHE)
VENV_CACHE = Path("~/.cache/attention-gradually/gradescope-venvs")
SHARED_VENV_CACHE = Path("/var/cache/attention-gradually/gradescope-venvs")  # --no-namespaces: others must reach it


def venv_key(requirements, python):
    """16 hex digits of the sha256 of the requirements' text and the Python (its real path and version):
    one venv per set of requirements and Python."""
    import hashlib
    version = subprocess.run([str(python), "-c", "import sys; print(sys.version)"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
    return hashlib.sha256(b"\0".join([Path(requirements).read_bytes(), os.path.realpath(python).encode(),
                                       version.encode()])).hexdigest()[:16]


def venv_cache(no_namespaces=False):
    """The folder of the try's venvs: $AUTOGRADER_VENV_CACHE, else ~/.cache/attention-gradually/
    gradescope-venvs; with --no-namespaces, where the student's user cannot reach the home's cache
    (root's home is closed to others), /var/cache/attention-gradually/gradescope-venvs."""
    if os.environ.get(VENV_CACHE_ENV):
        return Path(os.environ[VENV_CACHE_ENV]).expanduser()
    home = VENV_CACHE.expanduser()
    if no_namespaces:
        reachable = next((p for p in [home, *home.parents] if p.exists()), None)
        if reachable is None or not isolation._others_can_reach(reachable):
            return SHARED_VENV_CACHE
    return home


def cached_venv(requirements, python, env, timeout, no_namespaces=False):
    """(the venv with `requirements` installed, whether it was reused): one per requirements digest
    and Python (`venv_key`), made once (under a lock, with a mark written last: a venv whose install
    failed or was cut is made again) and reused by every later try. Made by the try's user with
    its umask: nobody else can change it."""
    import fcntl
    cache = venv_cache(no_namespaces)
    cache.mkdir(parents=True, exist_ok=True)
    if no_namespaces:
        for folder in [cache, *cache.parents]:
            if folder == Path("/") or isolation._others_can_reach(folder):
                break
            os.chmod(folder, os.stat(folder).st_mode | 0o005)  # the student's user runs its Python
    venv = cache / venv_key(requirements, python)
    with open(cache / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / "installed").is_file():
            return venv, True
        shutil.rmtree(venv, ignore_errors=True)
        _run([python, "-m", "venv", venv], "creating the venv", 300, env=env)
        # --no-compile: byte-compiling torch's thousands of modules is a third of the install, and
        # changes nothing that is installed (Python compiles what it imports)
        _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", "-r", requirements],
             "pip install -r requirements.txt", timeout, env=env)
        shutil.copyfile(requirements, venv / "requirements.txt")
        (venv / "installed").write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    return venv, False


# setup.sh in the try: what would change this machine (its packages, its users) is skipped and said;
# its Python found as on Gradescope's image; its venv is the try's (cached), its pip install run into it
TRY_SKIPPED = "setup.sh (try): skipped"
TRY_STUB = """#!/bin/sh
echo "{skipped} \\`$(basename "$0") $*\\` (the try does not change this machine's packages or users)" >&2
exit 0
"""
TRY_PYTHON = """#!/bin/sh
# python{need} as setup.sh sees it: the try's Python; `-m venv $ROOT/venv` keeps the try's venv
if [ "$1" = -m ] && [ "$2" = venv ] && [ -x "$3/bin/python" ]; then
  echo "setup.sh (try): kept the try's venv $3 (made once per set of requirements)"; exit 0  # setup.sh hides stderr here
fi
exec "{python}" "$@"
"""


def run_setup_sh(root, python, env, timeout):
    """Run the zip's setup.sh as far as it applies here: with AUTOGRADER_ROOT `root` (whose venv is
    in place), `apt-get`, `add-apt-repository` and `useradd` skipped (each said on stderr), `python`
    as the image's python3.X, and its `pip install` into the venv for real (all installed: it checks
    the line and the index options). Returns (its output, the lines that say what was skipped);
    a TryError if it fails."""
    need = "%d.%d" % min_python()
    shims = root / "try-bin"
    shims.mkdir(exist_ok=True)
    for name in ("apt-get", "add-apt-repository", "useradd"):
        (shims / name).write_text(TRY_STUB.format(skipped=TRY_SKIPPED))
    (shims / f"python{need}").write_text(TRY_PYTHON.format(need=need, python=os.path.realpath(python)))
    for path in shims.iterdir():
        path.chmod(0o755)
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], capture_output=True, text=True, timeout=timeout,
                          env={**env, "AUTOGRADER_ROOT": str(root), "PATH": f"{shims}:{env.get('PATH', '/usr/bin:/bin')}"},
                          cwd=root)
    shutil.rmtree(shims, ignore_errors=True)
    printed = done.stdout + done.stderr
    if done.returncode:
        raise TryError(f"setup.sh failed (exit {done.returncode}):\n{printed[-4000:]}")
    return printed, [line for line in printed.splitlines() if line.startswith(TRY_SKIPPED)]


def keep_run(folder, one, setup_printed):
    """--keep: the run's results.json, what run_autograder printed (the instructors' notes among it)
    and setup.sh's output, in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "results.json", json.dumps(one["results"], indent=1))
    atomic_write(folder / "run_autograder.txt", one.get("printed") or "")
    atomic_write(folder / "setup.txt", setup_printed or "")
    return folder


def try_zip(zip_path, submission, python=sys.executable, timeout=1800, no_namespaces=False, keep=None):
    """Try a zip the way Gradescope runs it: its files laid out as /autograder is, in a temporary
    folder; a fresh venv (of `python`) with the zip's requirements.txt; its run_autograder on
    `submission`; and the results.json it writes compared, check by check, with what `grade` gives
    the same notebook here (run meanwhile, in a process of its own, as an instructor runs it).
    With `no_namespaces` (root only), run_autograder runs in a container as Docker's default
    profile makes one (`_without_namespaces`), with no cgroup to make, a Python the student's
    user can run, and as the student's user a throwaway user of its own (`run_submission`).
    The venv is made once per set of requirements and Python and reused (`cached_venv`), and the
    zip's setup.sh run as far as it applies here (`run_setup_sh`). `keep`: a folder where the run's
    results.json and output are kept (`keep_run`).
    Returns {"assignment", "results", "rows", "same", "differ", "score", "max_score", "install_s", "run_s",
    "student_user", "printed", "venv", "venv_reused", "setup_skipped", "kept"}. The venv's pip index
    is pip's own configuration: setup.sh adds PyTorch's CPU index, which a machine offline cannot reach."""
    return try_zips(zip_path, [submission], python, timeout, no_namespaces, keep)[0]


def run_submission(root, submission, env, timeout=1800, no_namespaces=False, folders=None):
    """Gradescope's run of one submission in `root`, laid out as /autograder (source, venv): the
    submission and results folders emptied, `submission` put in, the zip's run_autograder run.
    With `no_namespaces`, in a container as Docker's default profile makes one, and the student's
    code runs as a throwaway user of its own (`ThrowawayUser`), never as an identity other
    processes of this machine have (the host's nobody: a process of a student's that outlived the
    try could kill the sandboxes of a later `grade` run, which bubblewrap runs as nobody): made for
    this run, every process of it killed after the run (one that left its session included), every
    file it owns in the folders anyone may write (`folders`, default `writable_by_anyone()`)
    removed, and the user deleted; a TryError if anything of it is left.
    Returns {"results", "run_s", "student_user": (name, uid) or None}."""
    root, submission = Path(root), Path(submission)
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    shutil.copyfile(submission, root / "submission" / submission.name)
    run_env, user = {**env, "AUTOGRADER_ROOT": str(root)}, None
    if no_namespaces:
        if os.geteuid() != 0:
            raise TryError("--no-namespaces: Gradescope runs the autograder as root; so must this try, which runs "
                           "the student's code as a throwaway user of its own and removes it after (without root "
                           "it could neither make that user nor kill what the student's code left running)")
        try:
            user = ThrowawayUser()
        except OSError as error:
            raise TryError(f"--no-namespaces: could not make a throwaway user for the student's code ({error}); "
                           "the try never runs it as an identity other processes have, such as nobody") from None
        run_env.update({"AUTOGRADER_CGROUPS": "off",  # a container's cgroups are read-only
                        isolation.STUDENT_USER_ENV: user.name})
    start, left, raised = time.monotonic(), None, True
    try:
        try:
            process = subprocess.Popen(["bash", str(root / "source" / "run_autograder")], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, env=run_env, cwd=root,
                                       preexec_fn=_without_namespaces if no_namespaces else None,
                                       start_new_session=True)
        except subprocess.SubprocessError as error:
            raise TryError(f"run_autograder could not be started without namespaces: {error}") from None
        try:
            printed, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the grader too, not only bash
            process.wait()
            raise
        raised = False
    finally:
        if user is not None:
            left = user.remove(folders)
            if any(left.values()) and not raised:
                raise TryError(f"--no-namespaces: the student's user {user.name} (uid {user.uid}) could not be "
                               f"removed entirely: {left}")
    run_s = time.monotonic() - start
    try:
        results = json.loads((root / "results" / "results.json").read_text())
    except (OSError, ValueError) as error:
        raise TryError(f"run_autograder wrote no readable results.json ({error}); it printed:\n"
                       f"{printed[-4000:]}") from None
    return {"results": results, "run_s": run_s, "student_user": (user.name, user.uid) if user else None,
            "printed": printed}


def try_zips(zip_path, submissions, python=sys.executable, timeout=1800, no_namespaces=False, keep=None):
    """`try_zip` for several submissions with one venv: Gradescope's run of each in turn
    (`run_submission`; without namespaces each as a throwaway user of its own), `grade` on them as
    a class. A list of `try_zip`'s results, one per submission, in their order. `keep`: each run's
    files in that folder (one submission) or in its student1/, student2/, ... (several)."""
    zip_path, submissions = Path(zip_path), [Path(s) for s in submissions]
    for path, what in [(zip_path, "zip")] + [(s, "notebook") for s in submissions]:
        if not path.is_file():
            raise TryError(f"no {what} {path}")
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        found = sorted({n.split("/")[1] for n in names if n.startswith("solutions/") and n.count("/") >= 2})
        if len(found) != 1 or not {"setup.sh", "run_autograder", "requirements.txt"} <= set(names):
            raise TryError(f"{zip_path} is not a zip built by `python -m autograder gradescope`")
        assignment = found[0]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        folders = None
        if no_namespaces:
            if os.geteuid() != 0:
                raise TryError("--no-namespaces: Gradescope runs the autograder as root; so must this try, which "
                               "runs the student's code as a throwaway user of its own and removes it after")
            python = _python_for_others(python)
            folders = writable_by_anyone()  # where the student's user may leave files: looked for once
        root, grading, tried = Path(tempfile.mkdtemp(prefix="gradescope-try-")), None, []
        students = [f"student{i + 1}" for i in range(len(submissions))]
        try:
            # `grade` on the same notebooks, while the venv is made: a class of their own
            for student, submission in zip(students, submissions):
                notebook = root / "grade" / "submitted" / student / assignment / f"{assignment}.ipynb"
                notebook.parent.mkdir(parents=True)
                shutil.copyfile(submission, notebook)
            grading = subprocess.Popen([sys.executable, "-m", "autograder", "grade", root / "grade" / "submitted",
                                        "--quiet", "-j", "1", "--out", root / "grade" / "out"], cwd=REPO_ROOT, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            root.chmod(0o755)  # as /autograder is: the student's processes run as another user and need its venv
            archive.extractall(root / "source")
            start = time.monotonic()
            venv, reused = cached_venv(root / "source" / "requirements.txt", python, env, timeout, no_namespaces)
            (root / "venv").symlink_to(venv, target_is_directory=True)  # lock_down leaves a link alone
            setup_printed, skipped = run_setup_sh(root, python, env, timeout)
            install_s = time.monotonic() - start
            for i, submission in enumerate(submissions):
                one = run_submission(root, submission, env, timeout, no_namespaces, folders)
                tried.append({"assignment": assignment, "install_s": install_s, "venv": venv, "venv_reused": reused,
                              "setup_skipped": skipped, "kept": None, **one})
                if keep is not None:
                    tried[-1]["kept"] = keep_run(Path(keep) / (f"student{i + 1}" if len(submissions) > 1 else ""),
                                                 one, setup_printed)
            output, _ = grading.communicate(timeout=timeout)
            for student, one in zip(students, tried):
                # grade's result, read from its journal (journal.py's layout) without journal.load's check
                # that the course's code is unchanged since: that check is for reusing it in a later run
                entry = root / "grade" / "out" / ".journal" / student / f"{assignment}.json"
                try:
                    graded = Graded.from_dict(json.loads(entry.read_text())["graded"])
                except (OSError, ValueError, KeyError, TypeError):
                    raise TryError(f"`grade` on the same notebook failed (exit {grading.returncode}):\n"
                                   f"{output[-4000:]}") from None
                one["rows"], one["same"], one["differ"] = compare(one["results"], check_tests(graded), graded.score)
                one["score"], one["max_score"] = graded.score, graded.max_score
        finally:
            if grading and grading.poll() is None:
                grading.kill()
                grading.wait()
            shutil.rmtree(root, ignore_errors=True)
    return tried


def try_text(tried):
    """The try's report: per test the two scores, then the totals and timings."""
    width = max([len(r[0]) for r in tried["rows"]] + [4])
    lines = [f"{'test':<{width}}  gradescope  grade    max"]
    differ = tried.get("differ", {})
    for name, theirs, ours, most in tried["rows"]:
        mark = "  <-- DIFFERS" if name in differ else ""
        def show(x):
            return "-" if x is None else f"{x:.2f}"
        lines.append(f"{name:<{width}}  {show(theirs):>10}  {show(ours):>5}  {most:>5.2f}{mark}")
    lines.append(f"{tried['assignment']}: Gradescope {tried['results'].get('score', 0):g}, grade {tried['score']:g} "
                 f"of {tried['max_score']:g}: {'the same' if tried['same'] else 'DIFFERENT'} "
                 f"({'venv reused' if tried.get('venv_reused') else 'venv made'} and setup.sh "
                 f"{tried['install_s']:.0f} s, run_autograder {tried['run_s']:.0f} s)")
    if tried.get("venv"):
        lines.append(f"venv: {tried['venv']} (one per set of requirements and Python; delete it to make it again)")
    for line in tried.get("setup_skipped") or ():
        lines.append(line)
    if tried.get("kept"):
        lines.append(f"kept in {tried['kept']}: results.json, run_autograder.txt (its output, the instructors' notes "
                     f"among it), setup.txt")
    if tried.get("student_user"):
        name, uid = tried["student_user"]
        lines.append(f"the student's code ran as {name} (uid {uid}), a user made for this run alone: after it, every "
                     f"process of that user was killed, every file it owned in {', '.join(writable_by_anyone())} "
                     f"removed, and the user deleted")
    for name, (theirs, ours) in differ.items():
        lines.append(f"{name}:\n  Gradescope's output: {theirs}\n  grade's: {ours}")
    if not tried["same"] and tried["results"].get("output"):
        lines.append(f"Gradescope's output: {tried['results']['output']}")
    return "\n".join(lines)
