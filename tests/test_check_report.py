"""Issue 30 §10, as a student meets it in the students' copy (`make student-copy`): a failing
`make check` ends on the check's summary, not on make's "Error 1"; and the notebooks' kernels,
opened by `make notebook`, do not print tqdm's "IProgress not found" warning on importing
transformers (the copy has no ipywidgets, which it does not need)."""
import os
import re
import shlex
import subprocess
import time

import nbformat
import pytest
from conftest import BIN, REPO, users_shell_env


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The students' copy, its .venv the repository's (nothing to install: the stamp is newer)."""
    dest = tmp_path_factory.mktemp("students") / "course"
    subprocess.run(["make", "--no-print-directory", "student-copy", f"DEST={dest}"], cwd=REPO, check=True,
                   capture_output=True, timeout=600)
    (dest / ".venv").symlink_to(REPO / ".venv")
    os.utime(dest / "requirements.txt", (time.time() - 10 * 365 * 86400,) * 2)
    assert (REPO / ".venv" / ".installed").stat().st_mtime > (dest / "requirements.txt").stat().st_mtime
    return dest


def test_a_failing_make_check_ends_on_the_summary_in_the_students_copy(copy):
    # as the student runs it, from their own shell (not inside `make test`: a nested make prints
    # "make[1]: Leaving directory" after everything)
    result = subprocess.run(["make", "check", "NB=notebooks/01-weights/01-weights.ipynb"], cwd=copy,
                            capture_output=True, text=True, timeout=600, env=users_shell_env())
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr
    assert "Error" not in result.stderr, result.stderr  # make's "*** [Makefile:..: check] Error 1" would be last
    assert result.stdout.splitlines()[-1] == "0 of 5 exercises ready; 5 problems to fix before you hand it in."


def kernel_stderr(tmp_path, environment):
    """What a notebook kernel prints on importing transformers, as `make notebook` starts it, without
    ipywidgets (as in the students' copy; the repository's .venv has it, through nbgrader)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import sys\nsys.modules['ipywidgets'] = None  # not installed"),
                nbformat.v4.new_code_cell("from transformers.models.llama.modeling_llama import LlamaConfig")]
    path = tmp_path / "imports.ipynb"
    nbformat.write(nb, path)
    subprocess.run([BIN / "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", path],
                   env=environment, check=True, capture_output=True, timeout=600)
    outputs = nbformat.read(path, as_version=4).cells[1].outputs
    return "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")


def test_make_notebook_silences_tqdms_ipywidgets_warning_and_only_it(copy, tmp_path):
    dry = subprocess.run(["make", "-n", "notebook"], cwd=copy, capture_output=True, text=True, check=True).stdout
    line = next(line for line in dry.splitlines() if "jupyter notebook" in line)
    (value,) = re.findall(r'PYTHONWARNINGS="([^"]*)"', line)
    value = shlex.split(f'"{value}"', posix=True)[0].replace("${PYTHONWARNINGS:+$PYTHONWARNINGS,}", "")
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    assert "TqdmWarning: IProgress not found" in kernel_stderr(tmp_path, plain)  # what students saw
    assert kernel_stderr(tmp_path, {**plain, "PYTHONWARNINGS": value}) == ""
    other = subprocess.run([BIN / "python", "-c", "import warnings; from tqdm import TqdmWarning; "
                            "warnings.warn('another of tqdm', TqdmWarning)"], env={**plain, "PYTHONWARNINGS": value},
                           capture_output=True, text=True, check=True)
    assert "another of tqdm" in other.stderr  # only that one warning is silenced
