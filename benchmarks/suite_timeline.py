"""Where a `make test` run's wall time went, from the timeline its tests wrote:

    PYTEST_TIMELINE=/tmp/timeline.tsv make test
    .venv/bin/python benchmarks/suite_timeline.py /tmp/timeline.tsv

Prints each worker's modules in the order it ran them (start, end, seconds, from the run's first
test) and how long each worker sat idle at the end while another still ran: the tail that a
better order of LONGEST_FIRST (tests/conftest.py) can cut. The run's wall time is the last end."""
import collections
import sys


def main(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        worker, start, end, nodeid = line.rstrip("\n").split("\t", 3)
        rows.append((worker, float(start), float(end), nodeid))
    t0 = min(r[1] for r in rows)
    spans = collections.defaultdict(dict)  # worker -> module -> [start, end]
    for worker, start, end, nodeid in sorted(rows, key=lambda r: r[1]):
        module = nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        span = spans[worker].setdefault(module, [start - t0, end - t0])
        span[1] = max(span[1], end - t0)
    last = max(r[2] for r in rows) - t0
    for worker in sorted(spans):
        ends = max(end for _, end in spans[worker].values())
        print(f"{worker}: ends at {ends:6.0f} s, idle {last - ends:4.0f} s at the end")
        for module, (start, end) in spans[worker].items():
            print(f"  {start:6.0f} {end:6.0f} {end - start:6.0f}  {module}")
    longest = sorted(rows, key=lambda r: r[1] - r[2])[:8]
    print(f"wall {last:.0f} s from the first test to the last; the longest tests:")
    for worker, start, end, nodeid in longest:
        print(f"  {end - start:6.0f} s  {start - t0:6.0f}-{end - t0:6.0f}  {worker}  {nodeid}")


if __name__ == "__main__":
    main(sys.argv[1])
