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

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW, _ARG1_HIGH = 0, 4, 16, 24, 28  # offsets in struct seccomp_data (little-endian)


def _op(code, k, jt=0, jf=0):
    return struct.pack("<HBBI", code, jt, jf, k)


def _assemble(body):
    """Classic BPF from [("ld", offset) | ("ret", value, label) | (jump, k, label)], jump one of
    "jeq", "jne", "jge", "jset" (taken when `k & the word`): each jump goes forward to its label."""
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
            elif kind == "jset":
                code.append(_op(_JSET_K, entry[1], target, 0))
            else:
                code.append(_op(_JGE_K, entry[1], target, 0))
    return b"".join(code)


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
    return _assemble(body)


# What a container's default profile refuses a process without CAP_SYS_ADMIN (Docker's, hence
# Gradescope's): making or entering namespaces and mounting. Only to try a Gradescope zip here as
# it runs there (`gradescope-try --no-namespaces`); the student's filter above is another.
_NAMESPACE_CALLS = {
    "x86_64": {"unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "clone": 56,
               "clone3": 435},
    "aarch64": {"unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "clone": 220,
                "clone3": 435},
}
_NEW_MOUNT_API = (428, 429, 430, 431, 432, 433, 442)  # open_tree .. fspick, mount_setattr: one table
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
EPERM = 1


def no_namespaces_program():
    """A filter as a container's default seccomp profile has it: unshare, setns, the mount calls and
    clone with a namespace flag refused (EPERM), clone3 unknown (ENOSYS: the C library falls back
    to clone, as in Docker); None on an architecture it does not know."""
    table = _TABLES.get(platform.machine())
    if table is None:
        return None
    arch, _, foreign = table
    calls = _NAMESPACE_CALLS[platform.machine()]
    body = [("ld", _ARCH), ("jne", arch, "ENOSYS"), ("ld", _NR)]
    if foreign is not None:
        body.append(("jge", foreign, "ENOSYS"))
    body.append(("jeq", calls["clone3"], "ENOSYS"))
    for number in [calls[n] for n in ("unshare", "setns", "mount", "umount2", "pivot_root")] + list(_NEW_MOUNT_API):
        body.append(("jeq", number, "EPERM"))
    body.append(("jne", calls["clone"], "ALLOW"))
    body.append(("ld", _ARG0_LOW))           # clone(flags, ...)
    body.append(("jset", CLONE_NAMESPACES, "EPERM"))
    body.append(("ret", _RET_ALLOW, "ALLOW"))
    body.append(("ret", _RET_ERRNO | EPERM, "EPERM"))
    body.append(("ret", _RET_ERRNO | ENOSYS, "ENOSYS"))
    return _assemble(body)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def install(code=None):
    """Load the filter (or the program `code`) into this process and all it will start (no new
    privileges from here on). False if there is no filter for this machine or the kernel refuses it."""
    code = program() if code is None else code
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
