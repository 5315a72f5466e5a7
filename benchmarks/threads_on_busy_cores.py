"""A training loop with torch's default threads (one per core) against one thread, on quiet and on busy cores.

    .venv/bin/python benchmarks/threads_on_busy_cores.py [--busy 2] [--steps 150]

Why tests/conftest.py sets OMP_NUM_THREADS=1 for every process the suite starts: `make test` runs a
pytest worker per core and one more, so the cores are always held, and a process whose threads
wait for each other by spinning burns the CPU the others need. Each loop (a small transformer
encoder's steps, the size of the book's pages' training) runs in a fresh process, one after the
other: quiet, then beside `--busy` processes that each keep a core busy. Printed: wall and CPU
seconds of each, and the ratios of the default's to one thread's.
"""
import argparse
import contextlib
import os
import subprocess
import sys

LOOP = """
import time, torch
torch.manual_seed(0)
model = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2)
optimizer = torch.optim.Adam(model.parameters())
x = torch.randn(32, 48, 64)
wall, cpu = time.perf_counter(), time.process_time()
for _ in range({steps}):
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
print(torch.get_num_threads(), time.perf_counter() - wall, time.process_time() - cpu)
"""


@contextlib.contextmanager
def busy_cores(count):
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def loop(steps, threads):
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", LOOP.format(steps=steps)], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), float(out[1]), float(out[2])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="busy processes (default: one per core)")
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; {args.steps} steps of a 2-layer transformer encoder, each run in a process of its own")
    print(f"{'cores':<22}{'threads':>8}{'wall s':>9}{'CPU s':>9}")
    for label, busy in (("quiet", 0), (f"beside {args.busy} busy", args.busy)):
        with busy_cores(busy):
            default, one = loop(args.steps, None), loop(args.steps, 1)
        for threads, wall, cpu in (default, one):
            print(f"{label:<22}{threads:>8}{wall:>9.2f}{cpu:>9.2f}")
        print(f"{'':<22}{'ratio':>8}{default[1] / one[1]:>9.2f}{default[2] / one[2]:>9.2f}  (default / one thread)")


if __name__ == "__main__":
    main()
