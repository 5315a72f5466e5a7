"""Grading one class on several machines: `grade --shard K/N` grades the Kth of N shares of the
students (every Nth student in sorted order, from the Kth: each student in exactly one share),
and `merge` combines the shares' results into what one run writes.

Each shard writes OUT/shard.json beside its own grades.csv: which shard it is, the whole class
as discovery saw it, the grader's version, the run's seed (the stated rules' inputs: every shard
is given the same `--seed`, so the shards draw the inputs one run draws), and its results.
`merge` refuses shards of another split, class, grader or seed, a shard given twice and a missing
one, each with the fix.
"""
import json
import os

from . import journal
from .files import atomic_write
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


def write(out_dir, k, n, class_students, results, problems, seed=None):
    data = {"shard": [k, n], "grader": journal.grader_version(), "class": sorted(class_students), "seed": seed,
            "results": [graded.to_dict() for graded in results], "problems": problems}
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


def merge(out_dirs):
    """(results, problems) of the whole class, in the order one run lists them."""
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
    for k, (out, data) in sorted(shards.items()):
        share = students_of(data["class"], k, n)
        graded = [Graded.from_dict(d) for d in data["results"]]
        if any(g.student not in share for g in graded):
            raise ShardError(f"{out} holds students outside shard {k}/{n}: grade that shard again")
        results.extend(graded)
        problems.extend(data["problems"])
    results.sort(key=lambda g: order[g.student])  # stable: a student's assignments stay in course order
    return results, list(dict.fromkeys(problems))
