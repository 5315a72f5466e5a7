"""Results kept as they come, so a run that is killed loses nothing when started again.

Each graded notebook is written atomically to OUT/.journal/<student>/<assignment>.json, keyed by
the notebook's bytes and the grader's own version (checks + source notebooks): a later run
reuses it only if neither has changed, and never counts a notebook twice.

The run's seed (the stated rules' inputs, which students must not be able to
compute) is kept in OUT/.journal/.seed, readable by its owner only, the first time a run uses OUT:
a resumed run or a regrade into the same OUT draws the same inputs, so writes the same bytes. An
entry is keyed by the seed too: one graded with another seed is graded again.

What is kept is a Graded, whose every string is bounded (results.py): an entry is a few KB. One
far larger was not written by this grader (an older version kept a student's text unbounded):
it is not read, and the notebook is graded again.

A notebook whose grading starts is recorded first, in OUT/.journal/<student>/<assignment>.attempts
(`attempt`: how many times, keyed as its entry, and the process grading it), and its entry
replaces that record (`save`): a record without an entry is a notebook whose grader died while
grading it (the kernel's OOM killer, a kill -9), which the next run sees (`attempts`).
"""
import functools
import hashlib
import json
import os
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


def _key(path, seed=None):
    try:
        data = Path(path).read_bytes()
    except OSError:
        data = b"(missing)"
    salt = b"" if seed is None else f"seed {seed}".encode()
    return hashlib.sha256(grader_version().encode() + salt + hashlib.sha256(data).digest()).hexdigest()


class SeedError(Exception):
    """OUT's seed file cannot be read as a seed; the message says what to do."""


def _seed_file(out_dir):
    return Path(out_dir) / ".journal" / ".seed"  # a student folder never starts with "."


def kept_seed(out_dir):
    """The seed kept in OUT, or None where no run has used OUT yet."""
    from .stated import parse_seed
    try:
        text = _seed_file(out_dir).read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SeedError(f"{_seed_file(out_dir)} cannot be read ({error.strerror})") from None
    try:
        return parse_seed(text)
    except ValueError:
        raise SeedError(f"{_seed_file(out_dir)} holds no seed (edited?): remove it to grade again with a new seed, "
                        "or give the run's --seed") from None


def run_seed(out_dir, given=None):
    """The seed of a run into OUT: `given` (--seed) if any, else the one kept there, else a fresh one;
    kept there for the next run into OUT."""
    from .stated import fresh_seed
    seed = given if given is not None else kept_seed(out_dir)
    seed = fresh_seed() if seed is None else seed
    if kept_seed(out_dir) != seed:
        atomic_write(_seed_file(out_dir), f"{seed}\n")  # a temporary file's mode: its owner's only
    return seed


def _entry(out_dir, student, assignment):
    return Path(out_dir) / ".journal" / student / f"{assignment}.json"


def load(out_dir, student, assignment, path, seed=None):
    """The Graded kept for this notebook graded with `seed`, or None."""
    entry = _entry(out_dir, student, assignment)
    try:
        if entry.stat().st_size > MAX_ENTRY_BYTES:
            return None
        data = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != _key(path, seed):
        return None
    try:
        return Graded.from_dict(data["graded"])
    except (KeyError, TypeError):
        return None


def save(out_dir, graded, path, seed=None):
    """Journal the notebook's Graded; it replaces the record of its attempts."""
    atomic_write(_entry(out_dir, graded.student, graded.assignment),
                 json.dumps({"key": _key(path, seed), "graded": graded.to_dict()}))
    try:
        forget_attempts(out_dir, graded.student, graded.assignment)
    except OSError:  # a stale record is harmless: load finds the entry first
        pass


def _attempts_file(out_dir, student, assignment):
    return Path(out_dir) / ".journal" / student / f"{assignment}.attempts"  # not *.json: not an entry


def _attempt_list(out_dir, student, assignment, path, seed):
    """The attempts recorded for this notebook graded with `seed` ([] for another notebook or seed)."""
    record = _attempts_file(out_dir, student, assignment)
    try:
        if record.stat().st_size > MAX_ENTRY_BYTES:
            return []
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("key") != _key(path, seed) or not isinstance(data.get("attempts"), list):
        return []
    return data["attempts"]


def attempts(out_dir, student, assignment, path, seed=None):
    """How many times grading this notebook with `seed` started and never ended with a result kept."""
    return len(_attempt_list(out_dir, student, assignment, path, seed))


def attempt(out_dir, student, assignment, path, seed=None):
    """Record, before grading this notebook starts, that it starts now in this process; the count
    so far. Raises OSError if it cannot be written."""
    tried = [*_attempt_list(out_dir, student, assignment, path, seed), {"pid": os.getpid()}]
    atomic_write(_attempts_file(out_dir, student, assignment), json.dumps({"key": _key(path, seed), "attempts": tried}))
    return len(tried)


def keep_attempts(out_dir, student, assignment, path, seed=None, count=0):
    """Keep only the first `count` recorded attempts: those after were stopped by the grader itself
    (Ctrl-C, an error of its own), not deaths."""
    tried = _attempt_list(out_dir, student, assignment, path, seed)
    if len(tried) <= count:
        return
    if count == 0:
        forget_attempts(out_dir, student, assignment)
    else:
        atomic_write(_attempts_file(out_dir, student, assignment),
                     json.dumps({"key": _key(path, seed), "attempts": tried[:count]}))


def forget_attempts(out_dir, student, assignment):
    """Forget the notebook's recorded attempts (`grade --student`: tried again as never before)."""
    _attempts_file(out_dir, student, assignment).unlink(missing_ok=True)


# The class's settings: the roster, the deadlines and the late rule (`grade --roster --deadlines
# --late-penalty --late-max-days --submitted-at`), kept in OUT/.journal/.class/ beside the seed:
# `settings` (JSON; not *.json, which are the entries) says which, each file's name as given and
# its sha256, and a copy of each file's bytes is kept there, so a later command into OUT
# (`--student`, a resumed run, `merge` of shards)
# applies them without their being given again, and one that gives other ones is refused unless
# told to replace them (`--replace-class-settings`).

CLASS_FILES = ("roster", "deadlines", "submitted_at")  # submitted_at: a file only when a CSV of times


class ClassSettingsError(Exception):
    """OUT's kept class settings cannot be read, or a command would change them; the message says what to do."""


def _class_dir(out_dir):
    return Path(out_dir) / ".journal" / ".class"  # a student folder never starts with "."


def digest(data):
    return hashlib.sha256(data).hexdigest()


def class_file(out_dir, kind):
    """The kept copy of the class's `kind` file (CLASS_FILES)."""
    return _class_dir(out_dir) / f"{kind}.csv"


def kept_class(out_dir):
    """The class settings kept in OUT, or None where no run has kept any: {"roster": {"source", "digest"}
    or None, "deadlines": likewise, "late_penalty": float, "late_max_days": int, "submitted_at":
    "mtime", "gradescope" or {"source", "digest"}}. Each kept copy is checked against its digest."""
    record = _class_dir(out_dir) / "settings"  # not *.json: not an entry
    try:
        settings = json.loads(record.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ClassSettingsError(f"{record} cannot be read ({error}): give the class's settings again with "
                                 "--replace-class-settings") from None
    for kind in CLASS_FILES:
        kept = settings.get(kind)
        if isinstance(kept, dict):
            try:
                same = digest(class_file(out_dir, kind).read_bytes()) == kept.get("digest")
            except OSError:
                same = False
            if not same:
                raise ClassSettingsError(f"{class_file(out_dir, kind)} is missing or was edited (its digest is not "
                                         f"the one kept): give the class's settings again with --replace-class-settings")
    return settings


def keep_class(out_dir, settings, files):
    """Keep the class settings in OUT; `files`: {kind: the bytes of each file the settings name}."""
    for kind in CLASS_FILES:
        path = class_file(out_dir, kind)
        if kind in files:
            atomic_write(path, files[kind].decode("utf-8"))  # read as UTF-8 already: the same bytes
        else:
            path.unlink(missing_ok=True)
    atomic_write(_class_dir(out_dir) / "settings", json.dumps(settings, sort_keys=True))
