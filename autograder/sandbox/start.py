"""The sandbox's entry point: `start IN_FD OUT_FD MODULES...` runs one student's notebook and
serves the grader's calls (`worker`); `start --zygote CONTROL_FD MODULES...` is a warm zygote."""
import os
import signal
import sys

from .worker import alarm, preload, serve
from .zygote import zygote


def main(argv):
    os.environ.setdefault("MPLBACKEND", "Agg")
    signal.signal(signal.SIGALRM, alarm)
    if argv[1] == "--zygote":
        zygote(int(argv[2]), argv[3:])
        return
    preload(argv[3:])
    serve(os.fdopen(int(argv[1]), "rb", buffering=0), os.fdopen(int(argv[2]), "wb", buffering=0))


if __name__ == "__main__":
    main(sys.argv)
