"""benchmarks/cuda_references.py, the GPU script, run here on the graders' emulated GPU: every call
it lists runs (or is skipped for needing a real GPU's generator or Triton), and a reference that
makes a tensor on the CPU is reported."""
import subprocess
import sys

from conftest import BIN, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import cuda_references  # noqa: E402


CHECKED = ("02", "03", "04", "05", "06", "07")  # the chapters whose references the device checks hold to the rule


def test_every_reference_runs_on_the_emulated_gpu():
    done = subprocess.run([BIN / "python", REPO / "benchmarks" / "cuda_references.py", "--device", "emulated"],
                          capture_output=True, text=True, timeout=300)
    rows = done.stdout.splitlines()[:-1]
    ours = [r for r in rows if r.startswith(CHECKED)]
    assert ours and all(r.endswith("ran") or "skipped: needs" in r for r in ours), done.stdout + done.stderr
    assert {"padding_mask", "mha_from_torch", "TinyLM", "tiled_attention", "LearnedKernelRegression", "train_lm",
            "train_classifier"} <= {r.split()[1] for r in ours if r.endswith("ran")}  # .item() runs there
    assert done.returncode == (1 if any("FAILED" in r for r in rows) else 0), done.stdout


def test_a_tensor_made_on_the_cpu_is_reported(monkeypatch):
    load = cuda_references.load

    def old_references(assignment, folder):
        ref = load(assignment, folder)
        if assignment == "05-self-masked":  # as they were before issue 24: the masks and positions on the CPU
            exec("def padding_mask(lengths, n):\n"
                 "    return (torch.arange(n) < torch.as_tensor(lengths)[:, None])[:, None, None, :]\n"
                 "class TinyLM(TinyLM):\n"
                 "    def forward(self, tokens, caches=None):\n"
                 "        start = caches[0].length if caches else 0\n"
                 "        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(start, start + tokens.shape[-1]))\n"
                 "        for i, block in enumerate(self.blocks):\n"
                 "            x = block(x, caches[i] if caches else None)\n"
                 "        return self.head(self.norm(x))\n", ref)
        return ref
    monkeypatch.setattr(cuda_references, "load", old_references)
    rows = {(r[1], r[2]): r[3] for r in cuda_references.run("emulated") if r[0] == "05-self-masked"}
    assert rows["padding_mask", "(lengths, 5)"].startswith("FAILED: RuntimeError: Expected all tensors to be on the same"), rows
    assert rows["TinyLM", "(tokens), and in two pieces through caches"].startswith(
        "FAILED: RuntimeError: Expected all tensors to be on the same device"), rows
    assert rows["graph_mask", "(adjacency)"] == "ran"
