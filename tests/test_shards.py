"""`grade --shard K/N` on each of N machines, then `merge`: the same grades.csv, summary.csv,
feedback pages and LMS export, byte for byte, as one run over the whole class; shards that do
not make up one class are refused with the fix. Every shard, and the one run, is given one --seed
(the stated rules' inputs; a shard without it is refused)."""
import json
import shutil

import pytest
from conftest import BIN, run
from submissions import filled_notebook, write

from autograder.shards import ShardError, parse, students_of

A = "01-weights"
AUTOGRADER = [BIN / "python", "-m", "autograder"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("shards")
    root = base / "submitted"
    write(filled_notebook(A), root / "alice" / A / f"{A}.ipynb")
    write(filled_notebook(A, {"entropy": "def entropy(weights, axis=-1):\n    return 0 * weights.sum(axis)"}),
          root / "bob" / A / f"{A}.ipynb")
    write(filled_notebook(A, untouched=("softmax",)), root / "carol" / f"{A}.ipynb")  # outside its folder
    (root / "dave").mkdir()                                                            # nothing handed in
    write(filled_notebook(A, untouched=("hardmax", "entropy")), root / "erin" / A / f"{A}.ipynb")
    common = ["-j", "2", "--quiet", "--seed", "20240528"]
    run(*AUTOGRADER, "grade", root, "--out", base / "one", *common)
    shards = [base / f"shard{k}" for k in (1, 2)]
    for k, out in enumerate(shards, 1):
        run(*AUTOGRADER, "grade", root, "--out", out, "--shard", f"{k}/2", *common)
    run(*AUTOGRADER, "merge", *shards, "--out", base / "merged", "--quiet")
    for out in ("one", "merged"):
        run(*AUTOGRADER, "export", base / out / "grades.csv", "--to", base / out / "lms.csv")
    return base, shards


def files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".journal" not in p.parts and p.name != "shard.json"}


def test_shards_merged_equal_one_run_byte_for_byte(runs):
    base, shards = runs
    one, merged = files(base / "one"), files(base / "merged")
    assert sorted(one) == sorted(merged)
    assert {"grades.csv", "summary.csv", "lms.csv", f"feedback/carol/{A}.html", f"feedback/dave/{A}.html"} <= set(one)
    for name in one:
        assert merged[name] == one[name], name


def test_each_shard_grades_its_own_share(runs):
    _, shards = runs
    graded = [{line.split(",")[0] for line in (out / "grades.csv").read_text().splitlines()[1:]} for out in shards]
    assert graded == [{"alice", "carol", "erin"}, {"bob", "dave"}]  # every 2nd student in sorted order


@pytest.mark.parametrize("size", [0, 1, 2, 5, 12])
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_every_student_is_in_exactly_one_shard(size, n):
    students = [f"s{i:02d}" for i in range(size)]
    shares = [students_of(reversed(students), k, n) for k in range(1, n + 1)]
    assert sorted(s for share in shares for s in share) == students
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", "-1/2"])
def test_a_shard_that_means_nothing_is_refused(text):
    with pytest.raises(ShardError, match="expected K/N with 1 <= K <= N"):
        parse(text)


def _edited_copy(shard, folder, edit):
    shutil.copytree(shard, folder)
    data = json.loads((folder / "shard.json").read_text())
    edit(data)
    (folder / "shard.json").write_text(json.dumps(data))
    return folder


def test_shards_that_do_not_make_one_class_are_refused(runs, tmp_path):
    base, (first, second) = runs
    other_split = _edited_copy(second, tmp_path / "split", lambda d: d.update(shard=[2, 3]))
    other_class = _edited_copy(second, tmp_path / "class", lambda d: d["class"].append("zoe"))
    other_grader = _edited_copy(second, tmp_path / "grader", lambda d: d.update(grader="0" * 64))
    other_seed = _edited_copy(second, tmp_path / "seed", lambda d: d.update(seed=d["seed"] + 1))
    cases = {
        "given twice": [first, first, second],
        "shard 2/2 missing": [first],
        "merge the shards of one split": [first, other_split],
        "saw different classes": [first, other_class],
        "different versions of the grader": [first, other_grader],
        "graded with different seeds": [first, other_seed],
        "no shard.json": [first, base / "one"],
    }
    for says, outs in cases.items():
        result = run(*AUTOGRADER, "merge", *outs, "--out", tmp_path / "merged", check=False)
        assert result.returncode == 2 and says in result.stderr, (says, result.stderr)
    assert not (tmp_path / "merged").exists()


def test_a_shard_needs_the_class_seed(runs, tmp_path):
    base, (first, _) = runs
    assert json.loads((first / "shard.json").read_text())["seed"] == 20240528
    refused = run(*AUTOGRADER, "grade", base / "submitted", "--out", tmp_path / "out", "--shard", "2/2", check=False)
    assert refused.returncode == 2 and "--shard 2/2 needs --seed" in refused.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()
