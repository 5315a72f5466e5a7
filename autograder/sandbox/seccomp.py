"""A seccomp filter for the student's processes: it refuses the system calls that hold memory no
other limit counts, with ENOMEM ("Cannot allocate memory"). Pages written to a memfd and never
mapped are counted by neither RLIMIT_AS nor resident memory nor the in-memory folders' size;
nor is System V shared memory, nor the messages of System V queues. A cgroup counts them
(`cgroups`), but a Gradescope container has none the grader may create; this filter works
everywhere, so a notebook behaves the same in CI and on Gradescope.

Refused: memfd_create and memfd_secret, shmget with a size (looking up an existing segment,
size 0, is harmless), msgget. Nothing of the course needs them: numpy, torch on the CPU,
multiprocessing and matplotlib use anonymous memory, files, or POSIX shared memory in /dev/shm,
which is a bounded in-memory folder of the sandbox. A system call of another architecture's
table (i386's through int 0x80, x32's) is refused outright: its numbers differ.

A classic BPF program, written here (no dependency): `program()` is what `bwrap --seccomp FD`
reads; `install()` loads it into the calling process (without bubblewrap).
"""
import ctypes
import functools
import os
import platform
import struct

ENV_SWITCH = "AUTOGRADER_SECCOMP"  # "off": no filter (tests of the cgroup alone)
ENOMEM, ENOSYS = 12, 38

# audit architecture, {refused call: number}, first number of a foreign table sharing the arch
_TABLES = {
    "x86_64": (0xC000003E, {"shmget": 29, "msgget": 68, "memfd_create": 319, "memfd_secret": 447}, 0x40000000),
    "aarch64": (0xC00000B7, {"shmget": 194, "msgget": 186, "memfd_create": 279, "memfd_secret": 447}, None),
}

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG1_LOW, _ARG1_HIGH = 0, 4, 24, 28  # offsets in struct seccomp_data (little-endian)


def _op(code, k, jt=0, jf=0):
    return struct.pack("<HBBI", code, jt, jf, k)


@functools.cache
def program():
    """The filter as bytes (struct sock_filter[]), or None on an architecture it does not know."""
    table = _TABLES.get(platform.machine())
    if table is None or os.environ.get(ENV_SWITCH) == "off":
        return None
    arch, numbers, foreign = table
    refused = [numbers["memfd_create"], numbers["memfd_secret"], numbers["msgget"]]
    shmget = numbers["shmget"]
    # labels, counted from the end: ... ALLOW, ENOMEM, ENOSYS
    body = []
    body.append(("ld", _ARCH))
    body.append(("jne", arch, "ENOSYS"))
    body.append(("ld", _NR))
    if foreign is not None:
        body.append(("jge", foreign, "ENOSYS"))
    for number in refused:
        body.append(("jeq", number, "ENOMEM"))
    body.append(("jne", shmget, "ALLOW"))
    body.append(("ld", _ARG1_LOW))           # shmget(key, size, flags): any size at all is refused
    body.append(("jne", 0, "ENOMEM"))
    body.append(("ld", _ARG1_HIGH))
    body.append(("jne", 0, "ENOMEM"))
    body.append(("ret", _RET_ALLOW, "ALLOW"))
    body.append(("ret", _RET_ERRNO | ENOMEM, "ENOMEM"))
    body.append(("ret", _RET_ERRNO | ENOSYS, "ENOSYS"))
    labels = {entry[2]: i for i, entry in enumerate(body) if entry[0] == "ret"}
    code = []
    for i, entry in enumerate(body):
        kind = entry[0]
        if kind == "ld":
            code.append(_op(_LD_W_ABS, entry[1]))
        elif kind == "ret":
            code.append(_op(_RET_K, entry[1]))
        else:
            target = labels[entry[2]] - i - 1
            if kind == "jne":
                code.append(_op(_JEQ_K, entry[1], 0, target))
            elif kind == "jeq":
                code.append(_op(_JEQ_K, entry[1], target, 0))
            else:
                code.append(_op(_JGE_K, entry[1], target, 0))
    return b"".join(code)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def install():
    """Load the filter into this process and all it will start (no new privileges from here on).
    False if there is no filter for this machine or the kernel refuses it."""
    code = program()
    if code is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _Program(len(code) // 8, ctypes.addressof(buffer))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


def program_fd():
    """A pipe's reading end holding the program, for `bwrap --seccomp FD`; None without a filter.
    The caller passes it to bwrap and closes it after starting it."""
    code = program()
    if code is None:
        return None
    read_end, write_end = os.pipe()
    os.write(write_end, code)  # a few hundred bytes: the pipe holds them
    os.close(write_end)
    return read_end


@functools.cache
def works():
    """Whether the kernel accepts the filter here: a throwaway process under it must be refused
    a memfd, and run otherwise."""
    import subprocess
    import sys
    if program() is None:
        return False
    try:
        probe = subprocess.run([sys.executable, "-I", "-c", _PROBE], capture_output=True, timeout=60,
                               preexec_fn=lambda: install() or os._exit(3))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


_PROBE = """
import ctypes, os, sys
try:
    os.memfd_create("probe")
    sys.exit(1)
except OSError as error:
    sys.exit(0 if error.errno == 12 else 2)
"""
