"""Every chapter's reference solutions called with tensors on a GPU: which run, which fail.

    python benchmarks/cuda_references.py                 (on a machine with a CUDA GPU)
    python benchmarks/cuda_references.py --device emulated   (anywhere: the graders' emulated GPU)
    python benchmarks/cuda_references.py --device meta       (anywhere: PyTorch's device without data)

Each exercise's reference (the solution cells of solutions/<a>/<a>.ipynb, nothing else) is called
once or twice on a small input whose tensors, and modules, are on the device; a call "ran" when it
returned and every tensor it returned is on that device (the course's rule: outputs keep the
input's device). The table lists every call; the exit status is 1 if one failed. Without CUDA it
says so and exits 0. On `emulated` (autograder/sandbox/emulated.py: the CPU's arithmetic, a GPU's
rules), on which the graders' device checks run every student's code, only a seeded generator and
the Triton kernel are skipped; on `meta`, the calls that need data (`.item()` in a training loop)
too. On both, a call that mixes devices raises as it would on a GPU.
"""
import argparse
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def load(assignment, folder):
    """The reference's namespace, each solution cell run from a file of its own (Triton's compiler
    reads a kernel's source from its file)."""
    from autograder.notebook import reference_code
    namespace = {"__name__": f"reference_{assignment.replace('-', '_')}"}
    with contextlib.redirect_stdout(io.StringIO()):  # what the cells print is not this table
        for index, source in enumerate(reference_code(assignment)):
            path = Path(folder) / f"{assignment.replace('-', '_')}_{index}.py"
            path.write_text(source)
            exec(compile(source, str(path), "exec"), namespace)
    return namespace


def calls(assignment, ref, device):
    """[(exercise, what, thunk, needs)] for one chapter; `needs` names what `meta` cannot give (None: runs there)."""
    import torch
    g = torch.Generator().manual_seed(0)

    def t(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype).to(device)

    def mask(*shape):
        m = torch.rand(*shape, generator=g) < 0.6
        m[..., 0] = True
        return m.to(device)

    def module(cls, *init):
        return cls(*init).to(device).eval()

    if assignment == "02-global-attention":
        clf = module(ref["AttentionDocClassifier"], 30, 8, 3)
        tokens, pad = torch.randint(0, 30, (40, 7), generator=g).to(device), mask(40, 7)
        data = {"tokens": tokens, "mask": pad, "labels": torch.randint(0, 3, (40,), generator=g).to(device)}
        return [("attention_pool", "(x, scores, mask)", lambda: ref["attention_pool"](t(2, 5, 4), t(2, 5), mask(2, 5)), None),
                ("GlobalAttentionPooling", "(x, mask)", lambda: module(ref["GlobalAttentionPooling"], 4)(t(2, 5, 4), mask(2, 5)), None),
                ("AttentionDocClassifier", "(tokens, mask)", lambda: clf(tokens, pad), None),
                ("attention_mass", "(p, selected)", lambda: ref["attention_mass"](t(2, 5).softmax(-1), mask(2, 5)), None),
                ("train_classifier", "(model, dataset, epochs=1)", lambda: ref["train_classifier"](clf, data, epochs=1), ".item()")]
    if assignment == "03-qkv":
        return [("soft_lookup", "(query, keys, values, 1.0)", lambda: ref["soft_lookup"](t(3), t(6, 3), t(6, 2), 1.0), None),
                ("dot_product_scores", "(q, k)", lambda: ref["dot_product_scores"](t(2, 3, 4), t(2, 5, 4)), None),
                ("scaled_dot_product_scores", "(q, k)", lambda: ref["scaled_dot_product_scores"](t(2, 3, 4), t(2, 5, 4)), None),
                ("GeneralScore", "(q, k)", lambda: module(ref["GeneralScore"], 3, 5)(t(2, 4, 3), t(2, 6, 5)), None),
                ("AdditiveScore", "(q, k)", lambda: module(ref["AdditiveScore"], 3, 5, 4)(t(2, 4, 3), t(2, 6, 5)), None),
                ("masked_softmax", "(scores, mask with an empty row)",
                 lambda: ref["masked_softmax"](t(2, 3, 5), mask(2, 3, 5) & (torch.arange(3) != 1)[:, None].to(device)), None),
                ("attention", "(q, k, v, mask)", lambda: ref["attention"](t(2, 3, 4), t(2, 5, 4), t(2, 5, 6), mask(2, 3, 5)), None)]
    if assignment == "04-multi-head":
        def from_torch():
            m = torch.nn.MultiheadAttention(6, 2, batch_first=True).to(device)
            return ref["mha_from_torch"](m)(t(2, 3, 6), t(2, 4, 6), t(2, 4, 6), mask(2, 1, 1, 4))

        def from_bert():
            state = {f"{n}.{p}": t(6, 6) if p == "weight" else t(6)
                     for n in ("self.query", "self.key", "self.value", "output.dense") for p in ("weight", "bias")}
            return ref["mha_from_bert"](state, 2)(t(2, 4, 6), t(2, 4, 6), t(2, 4, 6), mask(2, 1, 1, 4))
        return [("split_heads", "(x, 2)", lambda: ref["split_heads"](t(2, 3, 6), 2), None),
                ("merge_heads", "(x)", lambda: ref["merge_heads"](t(2, 2, 3, 3)), None),
                ("MultiHeadAttention", "(q, k, v, mask)",
                 lambda: module(ref["MultiHeadAttention"], 6, 2)(t(2, 3, 6), t(2, 4, 6), t(2, 4, 6), mask(2, 1, 1, 4)), None),
                ("mha_from_torch", "(nn.MultiheadAttention on the device), then called", from_torch, None),
                ("bert_padding_mask", "(attention_mask)", lambda: ref["bert_padding_mask"](mask(2, 5).long()), None),
                ("mha_from_bert", "(a state on the device, 2), then called", from_bert, None)]
    if assignment == "05-self-masked":
        lm = (11, 12, 2, 2, 10)

        def layer():
            attention, x = module(ref["CausalSelfAttention"], 6, 2), t(2, 5, 6)
            cache = ref["KVCache"]()
            return attention(x), attention(x[:, :3], cache), attention(x[:, 3:], cache)

        def tiny():
            model, x = module(ref["TinyLM"], *lm), torch.randint(0, 11, (2, 6), generator=g).to(device)
            caches = [ref["KVCache"]() for _ in range(lm[3])]
            return model(x), model(x[:, :4], caches), model(x[:, 4:], caches)

        def prompt():
            return torch.randint(0, 11, (2, 3), generator=g).to(device)
        data = torch.randint(0, 11, (500,), generator=g).to(device)
        return [("padding_mask", "(lengths, 5)", lambda: ref["padding_mask"](torch.tensor([3, 1, 5]).to(device), 5), None),
                ("graph_mask", "(adjacency)", lambda: ref["graph_mask"](mask(4, 4)), None),
                ("CausalSelfAttention", "(x), and in two pieces through a KVCache", layer, None),
                ("TinyLM", "(tokens), and in two pieces through caches", tiny, None),
                ("train_lm", "(model, data, 2 steps)", lambda: ref["train_lm"](module(ref["TinyLM"], *lm).train(), data, 2, batch_size=4), ".item()"),
                ("generate", "greedy, with the cache and without",
                 lambda: (ref["generate"](module(ref["TinyLM"], *lm), prompt(), 4),
                          ref["generate"](module(ref["TinyLM"], *lm), prompt(), 4, use_cache=False)), None),
                ("generate", "seeded", lambda: ref["generate"](module(ref["TinyLM"], *lm), prompt(), 4, seed=3), "a generator")]
    if assignment == "06-nadaraya-watson":
        def learned():
            model, x, y = module(ref["LearnedKernelRegression"], 1.0), t(12, dtype=torch.float64), t(12, dtype=torch.float64)
            return model(t(5, dtype=torch.float64), x, y), model(x, x, y, leave_one_out=True)

        def fit():
            model, x = module(ref["LearnedKernelRegression"], 1.0), t(12, dtype=torch.float64)
            model.fit(x, torch.sin(x), steps=2)
            return model
        return [("LearnedKernelRegression", "forward, leave_one_out too", learned, None),
                ("LearnedKernelRegression", "fit(x, y, steps=2)", fit, ".item()")]
    if assignment == "07-flash-tiling":
        return [("tiled_attention", "(q, k, v), Nq != Nk", lambda: ref["tiled_attention"](t(2, 20, 8), t(2, 28, 8), t(2, 28, 8), 8, 8), None),
                ("tiled_attention", "causal=True", lambda: ref["tiled_attention"](t(2, 20, 8), t(2, 28, 8), t(2, 28, 8), 8, 8, causal=True), None),
                ("flash_attention_triton", "float16, causal=True",
                 lambda: ref["flash_attention_triton"](t(2, 40, 16).half(), t(2, 40, 16).half(), t(2, 40, 16).half(), causal=True),
                 "a Triton GPU")]
    if assignment == "08-transformer":
        def gqa():
            attention, x = module(ref["GroupedQueryAttention"], 8, 4, 2), t(2, 5, 8)
            cache = ref["KVCache"]()
            return attention(x), attention(x[:, :3], cache=cache), attention(x[:, 3:], cache=cache)

        def from_llama():
            from transformers.models.llama.modeling_llama import LlamaConfig, LlamaDecoderLayer
            config = LlamaConfig(hidden_size=8, num_attention_heads=4, num_key_value_heads=2, intermediate_size=12)
            return ref["block_from_llama"](LlamaDecoderLayer(config, layer_idx=0).to(device))(t(2, 5, 8))
        return [("apply_rope", "(x, positions)", lambda: ref["apply_rope"](t(2, 3, 5, 4), torch.arange(5).to(device)), None),
                ("GroupedQueryAttention", "(x), and in two pieces through a KVCache", gqa, None),
                ("DecoderBlock", "(x)", lambda: module(ref["DecoderBlock"], 8, 4, 2, 12)(t(2, 5, 8)), None),
                ("block_from_llama", "(a LlamaDecoderLayer on the device), then called", from_llama, None)]
    return []


LACKS = {"meta": (".item()", "a generator", "a Triton GPU"), "emulated": ("a generator", "a Triton GPU")}


def run(device):
    """[(assignment, exercise, what, result)] for every call; result 'ran', 'skipped: ...' or 'FAILED: ...'."""
    from autograder import assignments
    from autograder.checks.core import tensor_devices
    from autograder.sandbox.calls import layout, on, one_device
    rules = (lambda: one_device()) if device == "meta" else (lambda: on(device))  # noqa: E731 (meta alone lets some through)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for assignment in assignments():
            if assignment == "01-weights":
                continue  # NumPy only
            try:
                ref = load(assignment, folder)
                with rules():  # the inputs are made on the device too
                    listed = calls(assignment, ref, device)
            except Exception as error:  # noqa: BLE001 (a chapter whose reference cannot even load)
                rows.append((assignment, "(loading)", "", f"FAILED: {type(error).__name__}: {str(error)[:200]}"))
                continue
            if not listed:
                rows.append((assignment, "(none listed)", "", "skipped: add its calls to calls() here"))
            for exercise, what, thunk, needs in listed:
                if needs in LACKS.get(device, ()):
                    rows.append((assignment, exercise, what, f"skipped: needs {needs}, which {device} has not"))
                    continue
                try:
                    with rules():
                        returned = thunk()
                    wrong = [(where, found) for where, found in tensor_devices(layout(returned)) if found != device]
                    result = "ran" if not wrong else "FAILED: returned " + ", ".join(f"{w} on {d}" for w, d in wrong)
                except Exception as error:  # noqa: BLE001
                    result = f"FAILED: {type(error).__name__}: {' '.join(str(error).split())[:200]}"
                rows.append((assignment, exercise, what, result))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the default), emulated or meta")
    device = parser.parse_args().device
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        print("No CUDA device here (torch.cuda.is_available() is False): nothing was run. "
              "Run this on a machine with a GPU, or with --device emulated.")
        return 0
    if device == "cuda":
        os.environ["TRITON_INTERPRET"] = "0"  # compile the kernel (chapter 7's first cell would ask for the interpreter)
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = run(device)
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
    failed = sum(r[3].startswith("FAILED") for r in rows)
    ran = sum(r[3] == "ran" for r in rows)
    print(f"{ran} of {len(rows)} calls ran on {device}, {failed} failed, {len(rows) - ran - failed} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
