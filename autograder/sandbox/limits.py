"""How much a student's notebook may take: time, memory, processes, bytes."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 60.0        # one cell of the notebook (the cell is stopped, the next runs)
    notebook_seconds: float = 180.0   # all of the notebook's cells (the process is killed)
    call_seconds: float = 20.0        # one call of a student's function (the call is stopped)
    exercise_seconds: float = 120.0   # all the calls of one exercise's checks; later ones fail at once
    submission_seconds: float = 600.0 # everything for one notebook; later calls fail at once
    grace_seconds: float = 5.0        # after which a process that ignores its time limit is killed
    cpu_seconds: int = 300            # CPU time of one student process
    memory_bytes: int = 4 * 2**30     # address space
    file_bytes: int = 64 * 2**20      # largest file the student's code may write
    restarts: int = 2                 # times a crashed or hung process is started again
    processes: int = 256              # processes and threads at once (in the sandbox, or the session without it)
    scratch_bytes: int = 256 * 2**20  # written to the sandbox's in-memory folders (home, /tmp, /dev/shm)
    reply_bytes: int = 64 * 2**20     # one value sent back by the student's code
