"""Chapter 7's Triton kernel against PyTorch's scaled_dot_product_attention, on a CUDA GPU.

    python benchmarks/flash_gpu.py            (on a machine with a GPU, torch and triton)

The kernel is the reference solution's, read from the chapter's source notebook (the same code the
CPU tests run in Triton's interpreter), compiled here, with GPU-sized tiles: each shape tries a few
launch configurations and keeps the fastest. fp16, N = 1k to 16k, d = 64 and 128, causal or not;
B x N = 16k tokens and H x d = 2048, as in the FlashAttention-2 paper's benchmarks. TFLOP/s counts
4 B H N^2 d, halved when causal. Each time is the median of 20 runs after 5 warm-ups.
"""
import json
import os
import statistics
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"   # compile: the notebook's first cell would otherwise ask for the interpreter

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

NOTEBOOK = Path(__file__).resolve().parent.parent / "solutions" / "07-flash-tiling" / "07-flash-tiling.ipynb"
CONFIGS = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 4), (64, 128, 4, 3)]


def load_kernel():
    """The `_flash_forward` kernel of the notebook's reference solution (markers removed)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "flash_attention_triton")
    source = "\n".join(line for line in source.splitlines() if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    namespace = {"torch": torch, "__name__": "flash_kernel"}
    path = Path("/tmp/flash_kernel_from_notebook.py")  # triton reads a jit function's source from its file
    path.write_text(source)
    exec(compile(source, str(path), "exec"), namespace)
    return namespace["_flash_forward"]


def launch(kernel, q, k, v, causal, block_m, block_n, warps, stages):
    b, h, n, d = q.shape
    q3, k3, v3 = (t.reshape(b * h, n, d) for t in (q, k, v))
    out = torch.empty_like(q3)
    lse = torch.empty((b * h, n), dtype=torch.float32, device=q.device)
    kernel[(triton.cdiv(n, block_m), b * h)](
        q3, k3, v3, out, lse, n, n, d ** -0.5, q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1),
        v3.stride(0), v3.stride(1), out.stride(0), out.stride(1), CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n, D=d,
        num_warps=warps, num_stages=stages)
    return out.reshape(b, h, n, d)


def median_ms(run, warmup=5, repeats=20):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        print("no CUDA GPU here: this benchmark needs one (the CPU tests run the kernel in Triton's interpreter)")
        return
    kernel = load_kernel()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"{'N':>6} {'d':>4} {'causal':>6} {'SDPA TFLOP/s':>13} {'Triton TFLOP/s':>15} {'ratio':>6} {'max |diff|':>10}  tiles")
    for d in (64, 128):
        for causal in (False, True):
            for n in (1024, 2048, 4096, 8192, 16384):
                b, h = max(1, 16384 // n), 2048 // d
                q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                sdpa_ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                best = None
                for config in CONFIGS:
                    if config[0] * d > 128 * 128 and config[1] > 64:
                        continue  # too much shared memory for a d = 128 tile pair
                    try:
                        ms = median_ms(lambda: launch(kernel, q, k, v, causal, *config), warmup=2, repeats=5)
                    except Exception:  # noqa: BLE001 (a configuration this GPU cannot run)
                        continue
                    if best is None or ms < best[0]:
                        best = (ms, config)
                triton_ms = median_ms(lambda: launch(kernel, q, k, v, causal, *best[1]))
                diff = (launch(kernel, q, k, v, causal, *best[1]) - F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                print(f"{n:>6} {d:>4} {causal!s:>6} {flops / sdpa_ms / 1e9:>13.0f} {flops / triton_ms / 1e9:>15.0f} "
                      f"{sdpa_ms / triton_ms:>6.2f} {diff.abs().max().item():>10.1e}  {best[1]}")


if __name__ == "__main__":
    main()
