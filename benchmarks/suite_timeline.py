"""Where a `make test` run's wall time went, from the timeline its tests wrote:

    PYTEST_TIMELINE=/tmp/timeline.tsv make test
    .venv/bin/python benchmarks/suite_timeline.py /tmp/timeline.tsv

Prints each worker's modules in the order it ran them (start, end, seconds, from the run's first
test, and the CPU seconds they cost: the worker's and the processes it waited for) and how long
each worker sat idle at the end while another still ran: the tail that a better order of
LONGEST_FIRST (tests/conftest.py) can cut. The run's wall time is the last end; the modules that
cost most CPU come last (the wall time of a module depends on what ran beside it, its CPU much less)."""
import collections
import sys


def main(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        worker, start, end, cpu, nodeid = line.rstrip("\n").split("\t", 4)
        rows.append((worker, float(start), float(end), float(cpu), nodeid))
    t0 = min(r[1] for r in rows)
    spans = collections.defaultdict(dict)  # worker -> module -> [start, end, cpu]
    for worker, start, end, cpu, nodeid in sorted(rows, key=lambda r: r[1]):
        module = nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        span = spans[worker].setdefault(module, [start - t0, end - t0, 0.0])
        span[1], span[2] = max(span[1], end - t0), span[2] + cpu
    last = max(r[2] for r in rows) - t0
    print("  start    end   wall    cpu  module")
    for worker in sorted(spans):
        ends = max(end for _, end, _ in spans[worker].values())
        print(f"{worker}: ends at {ends:6.0f} s, idle {last - ends:4.0f} s at the end")
        for module, (start, end, cpu) in spans[worker].items():
            print(f"  {start:6.0f} {end:6.0f} {end - start:6.0f} {cpu:6.0f}  {module}")
    longest = sorted(rows, key=lambda r: r[1] - r[2])[:8]
    print(f"wall {last:.0f} s from the first test to the last; the longest tests:")
    for worker, start, end, cpu, nodeid in longest:
        print(f"  {end - start:6.0f} s  {start - t0:6.0f}-{end - t0:6.0f}  {worker}  {nodeid}")
    by_module = collections.Counter()
    for worker in spans.values():
        for module, (_, _, cpu) in worker.items():
            by_module[module] += cpu
    costly = sorted(((cpu, m) for m, cpu in by_module.items()), reverse=True)
    print(f"CPU {sum(r[3] for r in rows):.0f} s in all; the modules that cost most:")
    for cpu, module in costly[:12]:
        print(f"  {cpu:6.0f} s  {module}")


if __name__ == "__main__":
    main(sys.argv[1])
