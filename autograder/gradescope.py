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
killed before root writes results.json; and results.json's output says so.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

from . import REPO_ROOT, SOLUTIONS_DIR
from .files import atomic_write
from .notebook import NotebookError, read_notebook_bytes
from .pipeline import grade_notebook, not_graded
from .results import Graded
from .sandbox import isolation, seccomp
from .sandbox.isolation import NOT_ISOLATED, bubblewrap_works
from .sandbox.processes import end_identity

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


CELL_RAISED = re.compile(r"code cell \d+ raised ")  # pipeline.grade_notebook's note


def notebook_test(graded):
    """The test shown at once: whether the notebook ran; failed when it could not be graded or a
    cell raised."""
    output = "\n".join(([graded.problem] if graded.problem else []) + graded.notes)
    failed = bool(graded.problem) or any(CELL_RAISED.match(note) for note in graded.notes)
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
            f"processes{' (also counted by the kernel for that user)' if name == isolation.STUDENT_USER else ''}, "
            f"time; {isolation.memory_guards_text()}. Unlike under bubblewrap, it could read the image's system "
            f"files and reach the network.")


def _refused(results_path, reason):
    data = {"score": 0.0, "visibility": "visible", "tests": [],
            "output": f"Not graded: {reason} The instructor can set AUTOGRADER_ALLOW_UNISOLATED=1 in run_autograder "
                      "to grade anyway, with the student's code running as the autograder's user."}
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
        data = {"score": 0.0, "visibility": "visible", "tests": [],
                "output": f"Not graded: the autograder failed ({type(error).__name__}: {error}); "
                          "the instructor can see the traceback in the autograder's output."}
        atomic_write(results_path, json.dumps(data, indent=1))
        raise


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
    notebooks = sorted(submission_dir.rglob("*.ipynb"))
    wanted = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
    work = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        target = work / assignment / f"{assignment}.ipynb"
        target.parent.mkdir(parents=True)
        try:
            if wanted:  # read as `grade` reads it: a symlink is refused, not followed
                target.write_bytes(read_notebook_bytes(wanted[0]))
            graded = grade_notebook("student", assignment, str(target))
        except NotebookError as error:
            graded = not_graded("student", assignment, error)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tests = [notebook_test(graded)] + check_tests(graded)
    output = "\n".join(([graded.problem] if graded.problem else []) + graded.notes)
    if contained and isolation.drops_identity():
        uid, gid, name = isolation.student_identity()
        # kill(-1) as nobody would also kill others' processes (other graders' sandboxes): only a user of its own
        ended = end_identity(uid, gid) if name == isolation.STUDENT_USER else None
        output = container_text(assignment, ended) + (f"\n{output}" if output else "")
    elif not isolated:
        output = f"WARNING: {NOT_ISOLATED}\n{output}"
    data = {"score": round(graded.score, 4), "output": output or f"{assignment}: graded",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
    atomic_write(results_path, json.dumps(data, indent=1))
    return data


# ---- trying a zip here -------------------------------------------------------------------------

class TryError(Exception):
    """The zip could not be tried to the end; the message says where it stopped."""


def compare(results, graded_tests, total):
    """[(test, Gradescope's score, grade's score, max)] for every check, and whether all agree
    (and the totals too)."""
    theirs = {t["name"]: t for t in results.get("tests", []) if t.get("max_score")}
    ours = {t["name"]: t for t in graded_tests}
    rows = [(name, theirs[name]["score"] if name in theirs else None, ours[name]["score"] if name in ours else None,
             (theirs.get(name) or ours[name])["max_score"]) for name in list(ours) + [n for n in theirs if n not in ours]]
    same = all(a is not None and b is not None and abs(a - b) < 1e-4 for _, a, b, _ in rows)
    return rows, same and abs(results.get("score", -1) - total) < 1e-4


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


def try_zip(zip_path, submission, python=sys.executable, timeout=1800, no_namespaces=False):
    """Try a zip the way Gradescope runs it: its files laid out as /autograder is, in a temporary
    folder; a fresh venv (of `python`) with the zip's requirements.txt; its run_autograder on
    `submission`; and the results.json it writes compared, check by check, with what `grade` gives
    the same notebook here (run meanwhile, in a process of its own, as an instructor runs it).
    With `no_namespaces` (root only), run_autograder runs in a container as Docker's default
    profile makes one (`_without_namespaces`), with no cgroup to make, and a Python the student's
    user can run.
    Returns {"assignment", "results", "rows", "same", "score", "max_score", "install_s", "run_s"}.
    The pip index is pip's own configuration: setup.sh adds PyTorch's CPU index, which a machine
    offline cannot reach."""
    return try_zips(zip_path, [submission], python, timeout, no_namespaces)[0]


def try_zips(zip_path, submissions, python=sys.executable, timeout=1800, no_namespaces=False):
    """`try_zip` for several submissions with one venv: Gradescope's run of each in turn (the
    submission and results folders emptied between them), `grade` on them as a class. A list of
    `try_zip`'s results, one per submission, in their order."""
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
        run_env, preexec = {**env}, None
        if no_namespaces:
            if os.geteuid() != 0:
                raise TryError("--no-namespaces: Gradescope runs the autograder as root; so must this try")
            python = _python_for_others(python)
            run_env["AUTOGRADER_CGROUPS"], preexec = "off", _without_namespaces  # a container's cgroups are read-only
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
            root.chmod(0o755)  # as /autograder is: the students' processes run as nobody and need its venv
            archive.extractall(root / "source")
            start = time.monotonic()
            _run([python, "-m", "venv", root / "venv"], "creating the venv", 300, env=env)
            # --no-compile: byte-compiling torch's thousands of modules is a third of the install, and
            # changes nothing that is installed (Python compiles what it imports)
            _run([root / "venv" / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile",
                  "-r", root / "source" / "requirements.txt"],
                 "pip install -r requirements.txt", timeout, env=env)
            install_s = time.monotonic() - start
            for submission in submissions:
                for folder in ("submission", "results"):
                    shutil.rmtree(root / folder, ignore_errors=True)
                    (root / folder).mkdir()
                shutil.copyfile(submission, root / "submission" / submission.name)
                start = time.monotonic()
                try:
                    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True,
                                          text=True, timeout=timeout, env={**run_env, "AUTOGRADER_ROOT": str(root)},
                                          cwd=root, preexec_fn=preexec)
                except subprocess.TimeoutExpired:
                    raise
                except subprocess.SubprocessError as error:
                    raise TryError(f"run_autograder could not be started without namespaces: {error}") from None
                run_s = time.monotonic() - start
                try:
                    results = json.loads((root / "results" / "results.json").read_text())
                except (OSError, ValueError) as error:
                    raise TryError(f"run_autograder wrote no readable results.json ({error}); it printed:\n"
                                   f"{(done.stdout + done.stderr)[-4000:]}") from None
                tried.append({"assignment": assignment, "results": results, "install_s": install_s, "run_s": run_s})
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
                one["rows"], one["same"] = compare(one["results"], check_tests(graded), graded.score)
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
    for name, theirs, ours, most in tried["rows"]:
        mark = "" if theirs is not None and ours is not None and abs(theirs - ours) < 1e-4 else "  <-- DIFFERS"
        show = lambda x: "-" if x is None else f"{x:.2f}"
        lines.append(f"{name:<{width}}  {show(theirs):>10}  {show(ours):>5}  {most:>5.2f}{mark}")
    lines.append(f"{tried['assignment']}: Gradescope {tried['results'].get('score', 0):g}, grade {tried['score']:g} "
                 f"of {tried['max_score']:g}: {'the same' if tried['same'] else 'DIFFERENT'} "
                 f"(venv and install {tried['install_s']:.0f} s, run_autograder {tried['run_s']:.0f} s)")
    if not tried["same"] and tried["results"].get("output"):
        lines.append(f"Gradescope's output: {tried['results']['output']}")
    return "\n".join(lines)
