"""The students' guide states the grader's limits as autograder/sandbox/limits.py sets them."""
import re
from pathlib import Path

from autograder.sandbox.limits import Limits

GUIDE = Path(__file__).resolve().parent.parent / "book" / "students.md"


def stated_limits():
    """{first cell: second cell} of the table under "The grader's limits"."""
    section = GUIDE.read_text().split("### The grader's limits", 1)[1].split("\n#", 1)[0]
    return {m[1].strip(): m[2].strip() for m in re.finditer(r"^\|([^|]+)\|([^|]+)\|$", section, re.M)}


def test_the_students_guide_states_the_limits_the_grader_uses():
    table, limits = stated_limits(), Limits()
    expected = {
        "one cell of your notebook": f"{limits.cell_seconds:g} s",
        "the whole notebook, top to bottom": f"{limits.notebook_seconds:g} s",
        "one call of your function by a hidden check": f"{limits.call_seconds:g} s",
        "all the calls of one exercise's checks": f"{limits.exercise_seconds:g} s",
        "everything for one notebook": f"{limits.submission_seconds:g} s",
        "memory (address space) of your notebook's process": f"{limits.memory_bytes / 2**30:g} GiB",
        "a file your code writes": f"{limits.file_bytes / 2**20:g} MiB",
    }
    for row, value in expected.items():
        assert table.get(row, "").startswith(value), f"students.md, row {row!r}: {table.get(row)!r}, limits.py: {value}"
