"""What a student's process costs to start from the warm zygote: the fork, the student's own
namespaces (`sandbox.walls`), its notebook of one cell, one call, and the clean-up after it.

    .venv/bin/python benchmarks/student_start.py [--students 30] [--modules numpy torch]

Run it in two checkouts (PYTHONPATH=the other checkout) to compare two versions of the sandbox
side by side; it prints the median and the spread of one student's start to end.
"""
import argparse
import statistics
import time

from autograder.sandbox.session import Limits, SandboxedStudent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--modules", nargs="*", default=["numpy"])
    args = parser.parse_args()
    cell = [(0, "def answer():\n    return 42")]
    with SandboxedStudent(cell, Limits(), args.modules) as student:  # the zygote starts: not counted
        student.call("answer")
    times = []
    for _ in range(args.students):
        start = time.perf_counter()
        with SandboxedStudent(cell, Limits(), args.modules) as student:
            assert student.call("answer") == 42
        times.append(time.perf_counter() - start)
    q = statistics.quantiles(times, n=10)
    print(f"one student, start to end: median {1000 * statistics.median(times):.1f} ms "
          f"(10th-90th percentile {1000 * q[0]:.1f}-{1000 * q[-1]:.1f} ms, {args.students} students, "
          f"modules {' '.join(args.modules)})")


if __name__ == "__main__":
    main()
