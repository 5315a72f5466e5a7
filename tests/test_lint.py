"""ruff (pyproject.toml's [tool.ruff]: pyflakes and pycodestyle) finds nothing in the project's code, and mypy nothing in its annotated modules."""
import subprocess

from conftest import BIN, REPO


def test_ruff_is_clean():
    done = subprocess.run([BIN / "ruff", "check", "--output-format", "concise", "."], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_is_clean_on_the_annotated_modules():
    """pyproject.toml's [tool.mypy] files: the results, the wire, the limits and the student-process
    interface both graders implement (`sandbox/protocol.py`)."""
    done = subprocess.run([BIN / "mypy", "--no-incremental"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
