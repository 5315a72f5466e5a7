"""Grading one class on several machines: `grade --shard K/N` grades the Kth of N shares of the
students (every Nth student in sorted order, from the Kth: each student in exactly one share),
and `merge` combines the shares' results into what one run writes.

Each shard writes OUT/shard.json beside its own grades.csv: which shard it is, the whole class
as discovery saw it, the grader's version, the run's seed (the stated rules' inputs: every shard
is given the same `--seed`, so the shards draw the inputs one run draws), and its results.
`merge` refuses shards of another split, class, grader or seed, a shard given twice and a missing
one, each with the fix.

The class settings (the roster, the deadlines and the late rule, `grade --roster --deadlines`) are
kept in each shard's journal (`journal.kept_class`); shard.json names them (their digests) and
holds each notebook's lateness (`late`: when it was due and handed in, which the merge cannot see).
`merge` refuses shards graded with different class settings, or whose journal does not hold the
ones shard.json names, and gives the merged folder the names, penalties and late notes of one run.
"""
import json
import os

from datetime import datetime

from . import journal
from .files import atomic_write
from .late import Late
from .results import Graded

MANIFEST = "shard.json"


class ShardError(Exception):
    """Shards that cannot be merged, or a --shard that means nothing; the message says why."""


def parse(text):
    """'K/N' -> (K, N)."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise ShardError(f"--shard {text}: expected K/N with 1 <= K <= N (1/4 is the first of four shares)")
    return k, n


def students_of(class_students, k, n):
    return set(sorted(class_students)[k - 1::n])


def write(out_dir, k, n, class_students, results, problems, seed=None, late=None, settings=None):
    """`late`: {(student, assignment): late.Late} (deadlines given) or None; `settings`: the class
    settings the shard was graded with (as `journal.kept_class` has them) or None."""
    data = {"shard": [k, n], "grader": journal.grader_version(), "class": sorted(class_students), "seed": seed,
            "results": [graded.to_dict() for graded in results], "problems": problems,
            "class_settings": settings,
            "late": None if late is None else [[student, assignment, x.due.isoformat(), x.submitted.isoformat(),
                                                 x.days, x.percent] for (student, assignment), x in sorted(late.items())]}
    atomic_write(os.path.join(out_dir, MANIFEST), json.dumps(data))


def _read(out_dir):
    path = os.path.join(out_dir, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        k, n = data["shard"]
        return k, n, data
    except OSError:
        raise ShardError(f"{out_dir}: no {MANIFEST}; give the --out folders of `grade --shard K/N` runs") from None
    except (ValueError, KeyError, TypeError):
        raise ShardError(f"{path} is not a shard's record (copied incompletely?): grade that shard again") from None


def _late(out, data):
    try:
        return {(student, assignment): Late(datetime.fromisoformat(due), datetime.fromisoformat(submitted),
                                            int(days), float(percent))
                for student, assignment, due, submitted, days, percent in data["late"]}
    except (ValueError, TypeError):
        raise ShardError(f"{os.path.join(out, MANIFEST)} is not a shard's record (copied incompletely?): "
                         "grade that shard again") from None


def _settings(out, data):
    """The class settings the shard keeps in its journal, checked against those its shard.json names."""
    try:
        kept = journal.kept_class(out)
    except journal.ClassSettingsError as error:
        raise ShardError(f"shard {out}: {error}") from None
    if kept != data.get("class_settings"):
        raise ShardError(f"{out}/.journal/.class does not hold the class settings (roster, deadlines, late rule) "
                         f"that {out}/{MANIFEST} was graded with (copied without its .journal, or graded again "
                         "since?): copy each shard's whole --out folder, .journal included, or grade that shard again")
    return kept


def _differences(one, other):
    one, other = one or {}, other or {}
    return [kind.replace("_", "-") for kind in sorted(set(one) | set(other)) if one.get(kind) != other.get(kind)]


def merge(out_dirs):
    """(results, problems, class) of the whole class, in the order one run lists them; `class`:
    {"settings": the class settings kept by every shard (or None), "from": a shard's --out that
    keeps them, "late": {(student, assignment): late.Late} (None without deadlines), "seed"}."""
    shards = {}
    first = None
    for out in out_dirs:
        k, n, data = _read(out)
        first = first or (out, n, data)
        if n != first[1]:
            raise ShardError(f"{first[0]} is a shard of {first[1]} but {out} is shard {k}/{n}: merge the shards of one split")
        if data["grader"] != first[2]["grader"]:
            raise ShardError(f"{out} and {first[0]} were graded by different versions of the grader "
                             "(checks or solutions changed between them): grade every shard with the same course")
        if data.get("seed") != first[2].get("seed"):
            raise ShardError(f"{out} and {first[0]} were graded with different seeds: grade every shard with the same "
                             f"--seed (its inputs differ from the others'), e.g. --seed {first[2].get('seed')}")
        settings = _settings(out, data)
        if settings != _settings(first[0], first[2]):
            raise ShardError(f"{out} and {first[0]} were graded with different class settings "
                             f"({', '.join(_differences(settings, _settings(first[0], first[2])))} differ): grade "
                             "every shard with the same --roster, --deadlines and late rule (a shard graded with "
                             "others again, with --replace-class-settings)")
        if data["class"] != first[2]["class"]:
            raise ShardError(f"{out} and {first[0]} saw different classes: grade every shard from the same "
                             "submissions folder")
        if k in shards:
            raise ShardError(f"shard {k}/{n} given twice ({shards[k][0]} and {out}): give each shard once")
        shards[k] = out, data
    if not shards:
        raise ShardError("no shard to merge")
    n = first[1]
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in shards]
    if missing:
        raise ShardError(f"shard{'s' * (len(missing) > 1)} {', '.join(missing)} missing: give the --out of every "
                         f"shard (the students of a missing shard would disappear from grades.csv)")
    order = {student: i for i, student in enumerate(first[2]["class"])}
    results, problems = [], []
    settings = _settings(first[0], first[2])
    late = {} if settings and settings.get("deadlines") else None
    for k, (out, data) in sorted(shards.items()):
        share = students_of(data["class"], k, n)
        graded = [Graded.from_dict(d) for d in data["results"]]
        if any(g.student not in share for g in graded):
            raise ShardError(f"{out} holds students outside shard {k}/{n}: grade that shard again")
        results.extend(graded)
        problems.extend(data["problems"])
        if late is not None:
            if data.get("late") is None:
                raise ShardError(f"{os.path.join(out, MANIFEST)} has no late records though its class has "
                                 "deadlines: grade that shard again")
            late.update(_late(out, data))
    results.sort(key=lambda g: order[g.student])  # stable: a student's assignments stay in course order
    return results, list(dict.fromkeys(problems)), {"settings": settings, "from": first[0], "late": late,
                                                    "seed": first[2].get("seed")}
