"""When a class outgrows one machine: the Gradescope zip grades like `grade`, and the LMS export
has one row per student and one column per assignment."""
import csv
import json
import os
import subprocess
import zipfile

import pytest

from conftest import BIN, REPO, run
from submissions import filled_notebook, write

from autograder.gradescope import build_zip, compare, setup_sh, try_text, try_zip
from autograder import assignments
from autograder.notebook import exercises
from autograder.requirements import for_assignment

A = "01-weights"


def test_the_gradescope_zip_grades_a_submission_into_results_json(tmp_path):
    archive = tmp_path / "autograder.zip"
    run(BIN / "python", "-m", "autograder", "gradescope", A, "--out", archive)
    names = zipfile.ZipFile(archive).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt", f"solutions/{A}/{A}.ipynb",
            "autograder/pipeline.py", "autograder/checks/core.py", "autograder/checks/ch01_weights.py"} <= set(names)
    assert not any(n.startswith(("notebooks/", "tests/", "samples/")) for n in names)
    assert [n for n in names if n.startswith(("solutions/", "autograder/checks/ch"))] == \
        ["autograder/checks/ch01_weights.py", f"solutions/{A}/{A}.ipynb"]  # this chapter's alone
    assert zipfile.ZipFile(archive).read("requirements.txt").decode().split() == for_assignment(A)

    root = tmp_path / "gradescope"  # Gradescope's /autograder, laid out as it lays it out
    zipfile.ZipFile(archive).extractall(root / "source")
    partial = filled_notebook(A, {"entropy": "def entropy(weights, axis=-1):\n    return np.log2(len(weights)) + 0 * np.sum(weights, axis)"})
    write(partial, root / "submission" / f"{A}.ipynb")
    os.chmod(root / "source" / "run_autograder", 0o755)
    env = {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": str(BIN / "python")}
    subprocess.run(["bash", root / "source" / "run_autograder"], check=True, env={**os.environ, **env},
                   capture_output=True, timeout=300)
    results = json.loads((root / "results" / "results.json").read_text())
    assert set(results) >= {"score", "tests"}
    assert all({"name", "max_score", "visibility"} <= set(t) for t in results["tests"])
    assert {t["visibility"] for t in results["tests"]} == {"visible", "after_published"}
    scored = sum(t.get("score", 0) for t in results["tests"])
    assert abs(scored - results["score"]) < 1e-6 and 0 < results["score"] < 12
    entropy = [t for t in results["tests"] if t["name"].startswith("entropy:") and t.get("max_score")]
    assert any(t["score"] < t["max_score"] for t in entropy)
    assert "BEGIN" not in (root / "results" / "results.json").read_text()


def test_the_lms_export_makes_every_text_cell_inert(tmp_path):
    """A student's folder name is a cell in the export: a formula there would run in the
    instructor's spreadsheet, an escape would act in a terminal. Numbers stay numbers."""
    from autograder.report import write_grades
    from autograder.results import CheckResult, ExerciseResult, Graded
    names = ['=HYPERLINK("http://x","y")', "@SUM(1+1)", "+1", "-1", "\x1b]0;pwned\x07esc", "\tcell"]
    write_grades([Graded(n, A, [ExerciseResult("softmax", 4.0, [CheckResult("c", 4.0, 4.0)])]) for n in names], tmp_path)
    by_hand = tmp_path / "by-hand.csv"  # as an older version or an editor writes it: raw
    by_hand.write_text("student,assignment,exercise,score,max_score,message\n" +
                       "".join(f'"{n.replace(chr(34), 2 * chr(34))}",{A},softmax,-0.5,4,\n' for n in names))
    for grades in (tmp_path / "grades.csv", by_hand):
        run(BIN / "python", "-m", "autograder", "export", grades, "--to", tmp_path / "lms.csv")
        text = (tmp_path / "lms.csv").read_text()
        assert all(line.isprintable() for line in text.split("\n")), grades
        students = {r[0]: r[1:] for r in list(csv.reader(open(tmp_path / "lms.csv")))[2:]}
        assert set(students) == {"'=HYPERLINK(\"http://x\",\"y\")", "'@SUM(1+1)", "+1", "-1",
                                 "\\x1b]0;pwned\\x07esc", "\\tcell"}, grades
        assert all(float(cell) in (4, -0.5) for row in students.values() for cell in row)


def test_gradescope_refuses_to_grade_unisolated_unless_told(tmp_path, monkeypatch, capsys):
    """The instructors' notes (why it was refused, how it ran) go to stdout, which Gradescope shows
    instructors alone, never into results.json's `output`, which students see (issue 36 §9). A
    browser's name for the notebook is graded as the assignment, with one note (§4)."""
    from autograder import gradescope
    monkeypatch.setattr(gradescope, "bubblewrap_works", lambda: False)
    write(filled_notebook(A), tmp_path / "submission" / f"{A} (2).ipynb")
    monkeypatch.delenv("AUTOGRADER_ALLOW_UNISOLATED", raising=False)
    refused = gradescope.results_json(A, tmp_path / "submission", tmp_path / "results.json")
    assert refused["score"] == 0 and "Not graded" in refused["output"]
    assert "AUTOGRADER_ALLOW_UNISOLATED" not in refused["output"] and "bubblewrap" not in refused["output"]
    printed = capsys.readouterr().out
    assert "for the instructors" in printed and "AUTOGRADER_ALLOW_UNISOLATED" in printed
    monkeypatch.setenv("AUTOGRADER_ALLOW_UNISOLATED", "1")
    graded = gradescope.results_json(A, tmp_path / "submission", tmp_path / "results.json")
    assert graded["score"] == sum(e.points for e in exercises(A)) and graded["stdout_visibility"] == "hidden"
    assert "WARNING" not in graded["output"] and "isolation" not in graded["output"]
    assert graded["output"] == f"{A} (2).ipynb is graded as {A}.ipynb, the name it stands for (browsers and Colab " \
                               f"rename a copy so): name it {A}.ipynb next time"
    assert "WARNING: bubblewrap" in capsys.readouterr().out


def test_gradescope_picks_the_notebook_as_grade_does(tmp_path):
    from autograder.gradescope import submitted_notebook
    for name in (f"{A}.ipynb", f"Copy of {A}.ipynb", f"{A} (1).ipynb", "notes.ipynb", "deep/x.ipynb"):
        write(filled_notebook(A), tmp_path / name)
    chosen, notes = submitted_notebook(tmp_path, A)
    assert chosen == tmp_path / f"{A}.ipynb" and len(notes) == 1 and notes[0].startswith(f"only {A}.ipynb is graded")
    (tmp_path / f"{A}.ipynb").unlink()
    (tmp_path / f"Copy of {A}.ipynb").unlink()
    chosen, notes = submitted_notebook(tmp_path, A)
    assert chosen == tmp_path / f"{A} (1).ipynb" and notes[0].startswith(f"{A} (1).ipynb is graded as {A}.ipynb")
    assert submitted_notebook(tmp_path / "deep", A) == (tmp_path / "deep" / "x.ipynb",
                                                        [f"x.ipynb is graded as {A}.ipynb, the name it stands for "
                                                         f"(browsers and Colab rename a copy so): name it {A}.ipynb next time"])


FAKE_PYTHON = """#!/bin/sh
# a Python {version}: `-c` answers the version test, `-m venv DIR` makes DIR/bin/python, which logs its arguments
case "$1" in
  --version) echo "Python {version}" ;;
  -c) [ "{version}" != 3.10.12 ] ;;
  -m) mkdir -p "$3/bin" && printf '#!/bin/sh\\necho "$0 $*" >> {log}\\n' > "$3/bin/python" && chmod +x "$3/bin/python" ;;
esac
"""


def fake_image(tmp_path, pythons):
    """A folder for PATH: apt-get and add-apt-repository that do nothing, and the given Pythons."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("apt-get", "add-apt-repository"):
        (fake / name).write_text("#!/bin/sh\nexit 0\n")
    for name in ("python3", "python3.11", "python3.12", "python3.13"):
        version = pythons.get(name, "3.10.12")
        (fake / name).write_text(FAKE_PYTHON.format(version=version, log=tmp_path / "pip.log"))
    for path in fake.iterdir():
        path.chmod(0o755)
    return fake


def run_setup(tmp_path, pythons):
    (tmp_path / "setup.sh").write_text(setup_sh())
    return subprocess.run(["bash", tmp_path / "setup.sh"], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{fake_image(tmp_path, pythons)}:/usr/bin:/bin", "AUTOGRADER_ROOT": str(tmp_path)})


def test_setup_sh_stops_without_a_supported_python(tmp_path):
    done = run_setup(tmp_path, {})  # an Ubuntu 22.04 image: python3 is 3.10, and no 3.11 can be installed
    assert done.returncode != 0
    assert "needs Python >= 3.11" in done.stderr and "Python 3.10.12" in done.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.parametrize("pythons, chosen", [
    ({"python3.11": "3.11.9", "python3": "3.12.3"}, "python3.11 (Python 3.11.9)"),  # 3.11 first, as the pins are tested
    ({"python3": "3.12.3"}, "python3 (Python 3.12.3)"),  # no 3.11 to be had: the image's own, being >= 3.11
])
def test_setup_sh_installs_the_cpu_torch_into_a_venv_of_a_supported_python(tmp_path, pythons, chosen):
    done = run_setup(tmp_path, pythons)
    assert done.returncode == 0, done.stderr
    assert f"bin/{chosen}" in done.stdout
    assert (tmp_path / "pip.log").read_text().split()[1:] == [
        "-m", "pip", "install", "-q", "--extra-index-url", "https://download.pytorch.org/whl/cpu",
        "-r", f"{tmp_path}/source/requirements.txt"]


def test_the_try_runs_setup_sh_as_far_as_it_applies_here(tmp_path):
    """gradescope-try runs the zip's setup.sh (issue 36 §10): apt-get, add-apt-repository and useradd
    skipped and said, the venv in place kept, its pip install line run into that venv."""
    import sys
    from autograder.gradescope import TRY_SKIPPED, run_setup_sh
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "setup.sh").write_text(setup_sh())
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    fake = tmp_path / "venv" / "bin" / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "pip.log"}\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    printed, skipped = run_setup_sh(tmp_path, sys.executable, env, 120)
    assert any("apt-get install -y -qq bubblewrap" in line for line in skipped), printed
    assert any(line.startswith(f"{TRY_SKIPPED} `useradd") for line in skipped), printed
    assert "kept the try's venv" in printed
    assert (tmp_path / "pip.log").read_text().split() == [
        "-m", "pip", "install", "-q", "--extra-index-url", "https://download.pytorch.org/whl/cpu",
        "-r", f"{tmp_path}/source/requirements.txt"]
    assert not (tmp_path / "try-bin").exists()


def test_the_try_makes_one_venv_per_set_of_requirements(tmp_path, monkeypatch):
    import sys
    from autograder import gradescope
    made = []

    def fake_run(command, what, timeout, **kwargs):
        made.append(what)
        if what == "creating the venv":
            (Path(command[-1]) / "bin").mkdir(parents=True)
    from pathlib import Path
    monkeypatch.setattr(gradescope, "_run", fake_run)
    monkeypatch.setenv(gradescope.VENV_CACHE_ENV, str(tmp_path / "cache"))
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("numpy==2.4.6\n")
    two.write_text("numpy==2.4.6\ntorch==2.13.0\n")
    first, reused = gradescope.cached_venv(one, sys.executable, dict(os.environ), 60)
    assert not reused and made == ["creating the venv", "pip install -r requirements.txt"]
    assert first.parent == tmp_path / "cache" and len(first.name) == 16 and (first / "installed").is_file()
    assert gradescope.cached_venv(one, sys.executable, dict(os.environ), 60) == (first, True) and len(made) == 2
    other, reused = gradescope.cached_venv(two, sys.executable, dict(os.environ), 60)
    assert other != first and not reused and len(made) == 4
    (other / "installed").unlink()  # an install cut short: made again
    assert gradescope.cached_venv(two, sys.executable, dict(os.environ), 60) == (other, False) and len(made) == 6


def test_the_try_keeps_the_runs_files_when_asked(tmp_path):
    from autograder.gradescope import keep_run
    one = {"results": {"score": 3.0, "tests": []}, "printed": "autograder, for the instructors: WARNING\n"}
    folder = keep_run(tmp_path / "kept", one, "setup.sh: /usr/bin/python3.11\n")
    assert json.loads((folder / "results.json").read_text()) == one["results"]
    assert (folder / "run_autograder.txt").read_text() == one["printed"]
    assert (folder / "setup.txt").read_text().startswith("setup.sh:")
    text = try_text({"assignment": "a", "results": one["results"], "rows": [], "same": True, "score": 3.0,
                     "max_score": 3.0, "install_s": 1, "run_s": 1, "venv_reused": True, "venv": tmp_path / "v",
                     "kept": folder, "setup_skipped": ["setup.sh (try): skipped `apt-get update -qq` (...)"]})
    assert "venv reused" in text and f"kept in {folder}" in text and "skipped `apt-get update -qq`" in text


def test_the_try_reports_every_difference():
    graded = [{"name": "a: x", "score": 1.0, "max_score": 1.0, "output": "passed"},
              {"name": "a: y", "score": 0.5, "max_score": 1.0, "output": "value at index 2 is 1, expected 0"}]
    same = {"score": 1.5, "tests": [{"name": "your notebook runs", "score": 0, "max_score": 0}] + graded}
    assert compare(same, graded, 1.5) == ([("a: x", 1.0, 1.0, 1.0), ("a: y", 0.5, 0.5, 1.0)], True, {})
    lower = {"score": 1.0, "tests": [graded[0], {**graded[1], "score": 0.0, "output": "time limit: calling y"}]}
    rows, agree, differ = compare(lower, graded, 1.5)
    assert not agree and rows[1] == ("a: y", 0.0, 0.5, 1.0)
    assert differ == {"a: y": ("time limit: calling y", "value at index 2 is 1, expected 0")}
    assert not compare({"score": 0, "tests": []}, graded, 1.5)[1]  # no results for the checks: not the same
    assert not compare({"score": 1.5, "tests": graded[:1]}, graded, 1.5)[1]
    text = try_text({"assignment": "a", "results": lower, "rows": rows, "same": agree, "differ": differ,
                     "score": 1.5, "max_score": 2.0, "install_s": 1, "run_s": 1})
    assert "DIFFERS" in text and "DIFFERENT" in text
    assert "Gradescope's output: time limit: calling y" in text and "grade's: value at index 2 is 1" in text


# One chapter per set of requirements: the others install what one of these does (the next test says so).
TRIED = ("01-weights", "04-multi-head", "06-nadaraya-watson", "07-flash-tiling", "08-transformer")


def test_each_requirement_set_is_tried_once():
    sets = {tuple(for_assignment(a)) for a in TRIED}
    assert len(sets) == len(TRIED) and sets == {tuple(for_assignment(a)) for a in assignments()}


# In `make test`, the sets with a package of their own (transformers and the MiniLM model,
# statsmodels, triton): chapters 1 and 8 install a subset of chapter 4's. GRADESCOPE_TRY=all tries
# every set (each fresh venv costs one to three minutes).
TRIED_IN_SUITE = TRIED if os.environ.get("GRADESCOPE_TRY") == "all" else (
    "04-multi-head", "06-nadaraya-watson", "07-flash-tiling")


def test_the_sets_left_out_of_the_suite_are_subsets_of_one_tried():
    tried = [set(for_assignment(a)) for a in TRIED_IN_SUITE]
    assert all(any(set(for_assignment(a)) <= t for t in tried) for a in TRIED)


def test_each_chapters_zip_scores_the_perfect_sample_full_marks_as_gradescope_runs_it(tmp_path):
    """A fresh venv from each zip's own requirements.txt, its run_autograder on the perfect sample:
    full marks, per test the same as `grade` (a missing package costs points or results.json)."""
    for assignment in TRIED_IN_SUITE:
        archive = build_zip(assignment, tmp_path / f"{assignment}.zip")
        tried = try_zip(archive, REPO / "samples" / "submitted" / "perfect-student" / assignment / f"{assignment}.ipynb")
        print(try_text(tried).splitlines()[-1])
        total = sum(e.points for e in exercises(assignment))
        assert tried["same"], try_text(tried)
        assert tried["results"]["score"] == total == tried["max_score"], try_text(tried)
