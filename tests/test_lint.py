"""ruff (pyproject.toml's [tool.ruff]: pyflakes and pycodestyle) finds nothing in the project's code."""
import subprocess

from conftest import BIN, REPO


def test_ruff_is_clean():
    done = subprocess.run([BIN / "ruff", "check", "--output-format", "concise", "."], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
