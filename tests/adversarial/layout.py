"""Attacks on the collected folder rather than on a notebook's code: a student's folder that
points at another student's notebook (issue 22 item 7).

Each case arranges the attacker's folder from the victim's notebook, a correct one. What it
checks: the victim gets exactly the points of its notebook (full marks), as without the attacker;
the attacker gets `attacker_points`, never more than a notebook it handed in earns, and has rows
in grades.csv; with `flagged`, both feedback pages name the other student and the instructor is
warned (a hard link cannot say which of the two made it, so both are graded and the pair shown).
tests/test_layout.py grades them in one class.
"""
import os
from dataclasses import dataclass
from typing import Callable

A = "01-weights"


@dataclass
class LayoutCase:
    guarantee: str
    arrange: Callable          # arrange(attacker's folder, victim's notebook path)
    attacker_points: float     # what the attacker's rows total: "full" marks only for the victim's own file
    flagged: bool = False      # the pair is named in both feedbacks and in a warning


def _hard_link(folder, victim):
    (folder / A).mkdir(parents=True)
    os.link(victim, folder / A / f"{A}.ipynb")


def _symlink(folder, victim):
    (folder / A).mkdir(parents=True)
    os.symlink(victim, folder / A / f"{A}.ipynb")


def _symlinked_folder(folder, victim):
    os.symlink(victim.parent.parent, folder)


FULL = 12.0  # the points of chapter 1

LAYOUT_CASES = {
    "hard-link-to-another-student": LayoutCase(
        "a hard link to another student's notebook never costs that student: both graded, the pair flagged",
        _hard_link, attacker_points=FULL, flagged=True),
    "symlink-to-another-student": LayoutCase(
        "a symbolic link to another student's notebook is refused for the one who holds the link only",
        _symlink, attacker_points=0.0),
    "symlinked-student-folder": LayoutCase(
        "a student folder that is a symbolic link to another's gets rows with 0, the other is whole",
        _symlinked_folder, attacker_points=0.0),
}
