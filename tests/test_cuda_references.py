"""benchmarks/cuda_references.py, the GPU script, run here on the meta device: every call it lists
runs (or is skipped for needing data), and a reference that makes a tensor on the CPU is reported."""
import subprocess
import sys

from conftest import BIN, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import cuda_references  # noqa: E402


def test_every_reference_runs_on_meta():
    done = subprocess.run([BIN / "python", REPO / "benchmarks" / "cuda_references.py", "--device", "meta"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = done.stdout.splitlines()[:-1]
    assert rows and all(r.endswith("ran") or "skipped: needs" in r for r in rows), done.stdout
    assert {"padding_mask", "mha_from_torch", "tiled_attention", "LearnedKernelRegression"} <= {r.split()[1] for r in rows}
    assert " 0 failed" in done.stdout.splitlines()[-1]


def test_a_tensor_made_on_the_cpu_is_reported(monkeypatch):
    load = cuda_references.load

    def old_padding_mask(assignment, folder):
        ref = load(assignment, folder)
        if assignment == "05-self-masked":
            exec("def padding_mask(lengths, n):\n"
                 "    return (torch.arange(n) < torch.as_tensor(lengths)[:, None])[:, None, None, :]\n", ref)
        return ref
    monkeypatch.setattr(cuda_references, "load", old_padding_mask)
    rows = {(r[1], r[2]): r[3] for r in cuda_references.run("meta") if r[0] == "05-self-masked"}
    assert rows["padding_mask", "(lengths, 5)"].startswith("FAILED: RuntimeError: Tensor on device"), rows
    assert rows["graph_mask", "(adjacency)"] == "ran"
