"""Writes samples/submitted/: a perfect, a partial and a broken submission per assignment.

    .venv/bin/python tests/make_samples.py        (tests/test_release.py checks they are current)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import catalogue  # noqa: E402
from submissions import filled_notebook, write  # noqa: E402

from autograder import REPO_ROOT, assignments  # noqa: E402

SAMPLES = REPO_ROOT / "samples" / "submitted"


def partial_replacements(assignment):
    """The first wrong implementation of every other exercise: some points lost, some kept."""
    wrong = catalogue(assignment).WRONG
    return {exercise: next(iter(variants.values())) for exercise, variants in list(wrong.items())[::2]}


def build(root=SAMPLES):
    for assignment in assignments():
        name = f"{assignment}.ipynb"
        write(filled_notebook(assignment), root / "perfect-student" / assignment / name)
        write(filled_notebook(assignment, partial_replacements(assignment)), root / "partial-student" / assignment / name)
        broken = root / "broken-student" / assignment / name
        text = filled_notebook(assignment)
        write(text, broken)
        broken.write_bytes(broken.read_bytes()[: len(broken.read_bytes()) // 2])  # a truncated upload
    return root


if __name__ == "__main__":
    print(f"wrote {build()}")
