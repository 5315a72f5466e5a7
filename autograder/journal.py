"""Results kept as they come, so a run that is killed loses nothing when started again.

Each graded notebook is written atomically to OUT/.journal/<student>/<assignment>.json, keyed by
the notebook's bytes and the grader's own version (checks + source notebooks): a later run
reuses it only if neither has changed, and never counts a notebook twice.

What is kept is a Graded, whose every string is bounded (results.py): an entry is a few KB. One
far larger was not written by this grader (an older version kept a student's text unbounded):
it is not read, and the notebook is graded again.
"""
import functools
import hashlib
import json
from pathlib import Path

from . import REPO_ROOT
from .files import atomic_write
from .results import Graded

MAX_ENTRY_BYTES = 4 * 2**20


@functools.cache
def grader_version():
    digest = hashlib.sha256()
    for path in sorted([*(REPO_ROOT / "autograder").rglob("*.py"), *(REPO_ROOT / "solutions").rglob("*.ipynb")]):
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _key(path):
    try:
        data = Path(path).read_bytes()
    except OSError:
        data = b"(missing)"
    return hashlib.sha256(grader_version().encode() + hashlib.sha256(data).digest()).hexdigest()


def _entry(out_dir, student, assignment):
    return Path(out_dir) / ".journal" / student / f"{assignment}.json"


def load(out_dir, student, assignment, path):
    """The Graded kept for this notebook, or None."""
    entry = _entry(out_dir, student, assignment)
    try:
        if entry.stat().st_size > MAX_ENTRY_BYTES:
            return None
        data = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != _key(path):
        return None
    try:
        return Graded.from_dict(data["graded"])
    except (KeyError, TypeError):
        return None


def save(out_dir, graded, path):
    atomic_write(_entry(out_dir, graded.student, graded.assignment), json.dumps({"key": _key(path), "graded": graded.to_dict()}))
