"""The course agrees with itself: every chapter in every form, every check and rule on a real
exercise, every exercise's text and its device rule in step, the tables listing the chapters.

A chapter is its files, found by path (CONTRIBUTING, "Adding a chapter"): `solutions/<a>/<a>.ipynb`,
`notebooks/<a>/<a>.ipynb` (made by `make release`), `book/<a>.md`, `autograder/checks/ch<NN>_*.py`,
`tests/mutants/ch<NN>_*.py`, and the lists that name it: `_toc.yml`, the README's table, the
intro's list. This test fails, with the place to fix, where one of them is missing or disagrees.
"""
import json
import re
from pathlib import Path

import pytest
import yaml

from autograder import assignments, notebook, stated
from autograder.checks import checks_module, registered
from autograder.stated.device import DEVICE_CHECK, device_rules

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = assignments()


def module_name(a):
    return f"ch{a.replace('-', '_')}"


@pytest.mark.parametrize("a", CHAPTERS)
def test_a_chapter_has_every_form(a):
    number = a[:2]
    missing = [str(p.relative_to(REPO)) for p in (REPO / "solutions" / a / f"{a}.ipynb", REPO / "notebooks" / a / f"{a}.ipynb",
                                                  REPO / "book" / f"{a}.md",
                                                  REPO / "autograder" / "checks" / f"{module_name(a)}.py",
                                                  REPO / "tests" / "mutants" / f"{module_name(a)}.py") if not p.is_file()]
    assert not missing, f"chapter {a} lacks {', '.join(missing)}"
    assert all(p.stem.startswith(f"ch{number}_") for p in (REPO / "autograder" / "stated").glob(f"ch{number}*.py"))


def test_the_lists_name_every_chapter_in_order():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    listed = [Path(c["file"]).name for c in toc["parts"][0]["chapters"]]
    assert listed == CHAPTERS, f"_toc.yml's chapters {listed}"
    readme = re.findall(r"^\| (\d+) \| [^|]+ \| `notebooks/([^/]+)/\2\.ipynb` \|$", (REPO / "README.md").read_text(), re.M)
    assert [a for _, a in readme] == CHAPTERS and [int(n) for n, _ in readme] == list(range(1, len(CHAPTERS) + 1)), \
        f"README's table lists {readme}"
    intro = re.findall(r"^\d+\. \[\*\*[^*]+\*\*\]\(([^)]+)\.md\)", (REPO / "book" / "intro.md").read_text(), re.M)
    assert intro == CHAPTERS, f"book/intro.md's list {intro}"


@pytest.mark.parametrize("a", CHAPTERS)
def test_every_check_and_rule_names_an_exercise_and_every_exercise_has_checks(a):
    checks_module(a)
    names = [e.name for e in notebook.exercises(a)]
    rules = [r for e in names for r in stated.properties(a, e)]
    strays = [(p.exercise, p.name) for p in stated.register._PROPERTIES if p.assignment == a and p.exercise not in names]
    strays += [(r.exercise, r.name) for r in device_rules(a) if r.exercise not in names]
    assert not strays, f"{a}: rules of no exercise: {strays}"
    assert all(registered(a, e) for e in names), f"{a}: exercises without checks: {[e for e in names if not registered(a, e)]}"
    assert all(p.function.__name__ for p in rules)


def exercise_texts(a):
    """{exercise: its text}: the markdown cells between the previous exercise's cells and its solution cell."""
    cells = json.loads((REPO / "solutions" / a / f"{a}.ipynb").read_text())["cells"]
    texts, pending = {}, []
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown":
            pending.append("".join(cell["source"]))
        elif meta.get("solution") and meta.get("grade_id"):
            texts[meta["grade_id"]] = "\n".join(pending)
            pending = []
    return texts


@pytest.mark.parametrize("a", CHAPTERS)
def test_an_exercise_has_a_device_rule_exactly_where_its_text_states_one(a):
    """A text that says the grader runs it on the emulated GPU has the rule; a rule's exercise says so."""
    texts = exercise_texts(a)
    with_rule = {r.exercise for r in device_rules(a)}
    states = {e for e, text in texts.items() if "on an emulated GPU" in text}
    assert with_rule == states, (f"{a}: device rules without the text's sentence {sorted(with_rule - states)}; "
                                 f"texts stating it without a rule {sorted(states - with_rule)}")
    assert all(r.name.startswith(DEVICE_CHECK) for r in device_rules(a))


@pytest.mark.parametrize("a", CHAPTERS)
def test_every_exercise_has_mutants_and_its_mutants_name_exercises(a):
    import importlib
    mutants = importlib.import_module(f"mutants.{module_name(a)}")
    names = {e.name for e in notebook.exercises(a)}
    assert set(mutants.WRONG) <= names and set(mutants.ALTERNATIVE) <= names, a
    without = sorted(e for e in names if not mutants.WRONG.get(e))
    assert not without, f"{a}: exercises without a wrong implementation in tests/mutants: {without}"
