"""The guide's Slurm recipe, run as its page shows it, on a one-node cluster started here (issue 36).

`book/recipes/grade-array.sbatch` grades one share of the class per task of an array job
(`grade --shard K/N`), `book/recipes/merge.sbatch`, submitted with `--dependency=afterok`, merges
them; the merged grades must be those of one run over the whole class, byte for byte. The cluster
is Debian's slurm-wlm (`make test` installs it when it runs as root): a munge daemon with a key of
its own, slurmctld and slurmd on this machine, all in a temporary folder, stopped at the end.
"""
import csv
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from autograder import REPO_ROOT
from submissions import filled_notebook, write

NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(c) for c in NEEDED),
    reason="needs root and Debian's slurm-wlm (make test installs it when run as root)")

A = "01-weights"
SEED = "20261127"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm")
    munge = root / "munge"
    munge.mkdir(mode=0o700)
    (munge / "key").write_bytes(os.urandom(1024))
    (munge / "key").chmod(0o400)
    subprocess.run(["munged", "--force", f"--socket={munge}/socket", f"--key-file={munge}/key",
                    f"--log-file={munge}/log", f"--pid-file={munge}/pid", f"--seed-file={munge}/seed"], check=True)
    host = socket.gethostname().split(".")[0]
    for folder in ("state", "spool"):
        (root / folder).mkdir()
    conf = root / "slurm.conf"
    conf.write_text(f"""ClusterName=grading
SlurmctldHost={host}
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket={munge}/socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmUser=root
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = dict(os.environ, SLURM_CONF=str(conf), PYTHON=sys.executable)
    daemons = [subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for daemon in ("slurmctld", "slurmd")]
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout.strip() != "idle":
            assert time.monotonic() < deadline, (root / "slurmctld.log").read_text()[-2000:]
            time.sleep(0.5)
        yield env
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
        pid = (munge / "pid").read_text().strip() if (munge / "pid").exists() else ""
        if pid:
            subprocess.run(["kill", pid])


def test_a_slurm_array_job_grades_a_class_as_one_run_does(cluster, tmp_path):
    submitted = tmp_path / "submitted"
    wrong = filled_notebook(A, {"softmax": "def softmax(scores, axis=-1, temperature=1.0):\n    return scores"})
    for student, nb in (("ada", filled_notebook(A)), ("bob", wrong), ("cy", filled_notebook(A, untouched={"entropy"})),
                        ("dee", filled_notebook(A))):
        write(nb, submitted / student / A / f"{A}.ipynb")

    env = dict(cluster, PYTHONPATH=str(REPO_ROOT))  # the tasks run the course's package from its folder

    def sbatch(*args):
        """The job's id, once submitted (with --wait: once it has ended)."""
        return subprocess.run(["sbatch", "--parsable", *args], cwd=tmp_path, env=env, check=True, capture_output=True,
                              text=True, timeout=600).stdout.strip().split(";")[0]
    recipes = REPO_ROOT / "book" / "recipes"
    grading = sbatch("--array=1-2", "-o", "task-%a.out", str(recipes / "grade-array.sbatch"), "submitted", "grades", SEED)
    sbatch("--wait", f"--dependency=afterok:{grading}", "--kill-on-invalid-dep=yes", "-o", "merge.out",
           str(recipes / "merge.sbatch"), "grades", "2")
    assert (tmp_path / "grades" / "grades.csv").exists(), [p.read_text()[-2000:] for p in tmp_path.glob("*.out")]
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(tmp_path / "one"),
                    "--seed", SEED, "--quiet"], cwd=REPO_ROOT, check=True, capture_output=True)
    for name in ("grades.csv", "summary.csv"):
        assert (tmp_path / "grades" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    with open(tmp_path / "grades" / "grades.csv", newline="") as f:
        students = {row["student"] for row in csv.DictReader(f)}
    assert students == {"ada", "bob", "cy", "dee"}
    assert {p.name for p in (tmp_path / "grades-1").iterdir()} >= {"grades.csv", "shard.json"}  # the tasks' own folders
