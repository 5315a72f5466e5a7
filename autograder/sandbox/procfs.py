"""What /proc says about processes: the one reader of it, for both sides of the sandbox."""
import os


def pids(excluding=()):
    """The processes this process can see (in a PID namespace: those of the namespace)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in excluding]


def stat_fields(pid):
    """/proc/<pid>/stat after the command name: state, ppid, pgrp, session, ...; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def is_zombie(pid):
    fields = stat_fields(pid)
    return fields is None or fields[0] == b"Z"


def session_members(session):
    """The live (not zombie) processes of a session."""
    return [pid for pid in pids() if (f := stat_fields(pid)) is not None and f[0] != b"Z" and int(f[3]) == session]


def task_count(pid):
    """Its threads (a process is one task, each more thread another)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes(pid):
    """Its resident memory (shared pages counted in full: a cheap upper bound)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def proportional_bytes(pid):
    """Its proportional share of memory (a page shared by n processes counts 1/n): slower to read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            return next(int(line.split()[1]) for line in rollup if line.startswith(b"Pss:")) * 1024
    except (OSError, StopIteration, ValueError):
        return resident_bytes(pid)
