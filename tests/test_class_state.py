"""An output folder is a class's state, and every command keeps it: the roster, the deadlines and
the late rule given once are kept in --out's journal with the seed, so `grade --student`, a resumed
run and `merge` apply them without their being given again; a command that gives other ones is
refused unless told to replace them (--replace-class-settings).

A term replayed (two assignments, a run killed and resumed, one student regraded without the
options, an extension added, the class graded in shards with one shard's student regraded, then
merged) writes every export as one clean run with the final settings writes it: no grade, name or
penalty lost or changed."""
import os
import shutil
import signal
import subprocess
import time
from datetime import datetime

import pytest
from conftest import BIN, REPO, run
from submissions import filled_notebook, write

A, B = "01-weights", "02-global-attention"
AUTOGRADER = [BIN / "python", "-m", "autograder"]
COMMON = ["-j", "2", "--quiet"]
ROSTER = """folder,name,lms_id,sis_user_id,sis_login_id,section,email
alice,"Martin, Alice",101,S1,al1,A,alice@example.edu
bob,Bob Stone,102,S2,bo2,A,bob@example.edu
carol,Carol Oak,103,S3,ca3,B,carol@example.edu
dave,Dave Late,104,S4,da4,B,dave@example.edu
eve,Eve Absent,105,S5,ev5,B,eve@example.edu
"""
DEADLINES = f"assignment,due\n{A},2026-10-05T23:59:00+00:00\n{B},2026-10-12T23:59:00+00:00\n"
EXTENDED = f"assignment,due\n{A},2026-10-07T23:59:00+00:00\n{B},2026-10-12T23:59:00+00:00\n"  # 2 more days for A
BROKEN_ENTROPY = {"entropy": "def entropy(weights, axis=-1):\n    return 0 * weights.sum(axis)"}


def _hand_in(root, student, assignment, moment, replacements=None):
    path = write(filled_notebook(assignment, replacements), root / student / assignment / f"{assignment}.ipynb")
    stamp = datetime.fromisoformat(moment).timestamp()
    os.utime(path, (stamp, stamp))


def _submissions(root, carol_again):
    _hand_in(root, "alice", A, "2026-10-05T12:00:00+00:00")
    _hand_in(root, "alice", B, "2026-10-12T12:00:00+00:00")
    _hand_in(root, "bob", A, "2026-10-06T05:00:00+00:00")                       # 1 day late, on time once extended
    _hand_in(root, "dave", A, "2026-10-13T23:00:00+00:00", BROKEN_ENTROPY)      # 8 days late, 6 once extended: 0
    if carol_again:                                                             # her second notebook, 2 days late
        _hand_in(root, "carol", A, "2026-10-07T12:00:00+00:00", BROKEN_ENTROPY)
    else:
        _hand_in(root, "carol", A, "2026-10-05T20:00:00+00:00")
    return root                                                                 # eve: in the roster only


def grade(submissions, out, *more, check=True):
    return run(*AUTOGRADER, "grade", submissions, "--out", out, *COMMON, *more, check=check)


def exports(out, roster):
    for fmt in ("plain", "canvas", "moodle"):
        run(*AUTOGRADER, "export", out / "grades.csv", "--to", out / f"{fmt}.csv", "--format", fmt, "--roster", roster)
    run(*AUTOGRADER, "export", out / "grades.csv", "--to", out / "kept-roster.csv")  # the roster kept in out


def files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".journal" not in p.parts and p.name != "shard.json"}


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    base = tmp_path_factory.mktemp("term")
    (base / "roster.csv").write_text(ROSTER)
    (base / "deadlines.csv").write_text(DEADLINES)
    (base / "extended.csv").write_text(EXTENDED)
    settings = ["--roster", base / "roster.csv", "--deadlines", base / "extended.csv"]

    # the term, in one folder: the first run killed, then resumed with no option (the kept ones apply)
    live = _submissions(base / "submitted", carol_again=False)
    out = base / "term"
    command = [*AUTOGRADER, "grade", live, "--out", out, "--quiet", "-j", "1", "--seed", "31",
               "--roster", base / "roster.csv", "--deadlines", base / "deadlines.csv"]
    killed = subprocess.Popen([str(c) for c in command], cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and killed.poll() is None and not any(
            p.parent.name != ".class" for p in (out / ".journal").rglob("*.json")):
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    grade(live, out)
    resumed = (out / "grades.csv").read_text()

    _submissions(live, carol_again=True)                                     # carol hands in again, late
    regraded = grade(live, out, "--student", "carol")                       # the README's command, as it is
    after_student = (out / "grades.csv").read_text()
    refused = grade(live, out, "--deadlines", base / "extended.csv", check=False)  # the extension, not yet allowed
    grade(live, out, *settings, "--replace-class-settings")                 # the extension, replacing
    exports(out, base / "roster.csv")
    final = live
    grade(final, base / "clean", *settings, "--seed", "31")   # one clean run of the final class and settings
    exports(base / "clean", base / "roster.csv")

    # the same class in two shards, one shard's student regraded with no option, then merged
    shards = [base / f"shard{k}" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        grade(final, shard, "--shard", f"{k}/2", "--seed", "31", *settings)
    grade(final, shards[1], "--shard", "2/2", "--student", "dave")
    run(*AUTOGRADER, "merge", *shards, "--out", base / "merged", "--quiet")
    exports(base / "merged", base / "roster.csv")
    return base, resumed, after_student, regraded, refused


def test_every_export_of_the_term_is_the_clean_runs(term):
    base = term[0]
    clean = files(base / "clean")
    assert {"grades.csv", "summary.csv", "canvas.csv", "moodle.csv", "plain.csv", "kept-roster.csv",
            f"feedback/eve/{A}.html", f"feedback/dave/{A}.html"} <= set(clean)
    for folder in ("term", "merged"):
        got = files(base / folder)
        assert sorted(got) == sorted(clean), folder
        for name in clean:
            assert got[name] == clean[name], f"{folder}/{name}"


def test_the_clean_run_has_the_names_and_penalties_the_term_must_keep(term):
    base = term[0]
    canvas = (base / "clean" / "canvas.csv").read_text().splitlines()
    assert canvas[0].endswith(f",{A},{B}")
    assert '"Martin, Alice",101,S1,al1,A,12,16' in canvas
    assert "Bob Stone,102,S2,bo2,A,12," in canvas            # on time once extended
    assert "Carol Oak,103,S3,ca3,B,10," in canvas            # on time once extended
    assert "Dave Late,104,S4,da4,B,0," in canvas             # 6 days late: 0
    assert "Eve Absent,105,S5,ev5,B,," in canvas               # roster only: her 0 rows
    assert (base / "clean" / "grades.csv").read_text().count("\neve,") == 10
    page = (base / "clean" / "feedback" / "dave" / f"{A}.html").read_text()
    assert "Dave Late (dave)" in page and "6 days after the deadline" in page


def test_student_and_resume_keep_the_class_settings(term):
    base, resumed, after_student, regraded, _ = term
    for text in (resumed, after_student):
        rows = text.splitlines()
        assert rows[0].endswith(",name,submitted_at,due,days_late,penalty_percent,score_after_penalty")
        assert sum(row.startswith(f"eve,{A},") for row in rows) == 5   # the roster-only student keeps her rows
        assert all(row.endswith(",0") for row in rows if row.startswith(f"dave,{A},"))  # 8 days late: 0
        assert any("Bob Stone" in row and ",1,10," in row for row in rows)
    assert any(row.startswith(f"carol,{A},entropy,0,") and ",2,20," in row for row in after_student.splitlines())
    assert "the class settings kept there apply" in regraded.stderr and "--replace-class-settings" in regraded.stderr


def test_other_settings_are_refused_unless_replaced(term, tmp_path):
    base, *_, refused = term
    assert refused.returncode == 2
    assert "keeps the class settings of an earlier run" in refused.stderr
    assert f"--deadlines {base / 'extended.csv'}" in refused.stderr and "--replace-class-settings" in refused.stderr
    other = grade(base / "submitted", base / "term", "--seed", "32", check=False)
    assert other.returncode == 2 and "is not the seed" in other.stderr
    # a shard graded with other settings is refused by merge
    shutil.copytree(base / "shard2", tmp_path / "shard2")
    grade(base / "submitted", tmp_path / "shard2", "--shard", "2/2", "--roster", base / "roster.csv",
          "--deadlines", base / "deadlines.csv", "--replace-class-settings")
    merged = run(*AUTOGRADER, "merge", base / "shard1", tmp_path / "shard2", "--out", tmp_path / "m", check=False)
    assert merged.returncode == 2 and "different class settings (deadlines differ)" in merged.stderr
    shutil.rmtree(tmp_path / "shard2" / ".journal")   # copied without its journal
    merged = run(*AUTOGRADER, "merge", base / "shard1", tmp_path / "shard2", "--out", tmp_path / "m", check=False)
    assert merged.returncode == 2 and ".journal included" in merged.stderr
