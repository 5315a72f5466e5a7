"""A seccomp filter for the student's processes: it refuses the system calls that hold memory no
other limit counts. Pages written to a memfd and never mapped are counted by neither RLIMIT_AS nor
resident memory nor the in-memory folders' size; nor is System V shared memory, nor the messages
of System V queues, nor the kernel's buffers behind a file descriptor (a socket's, a pipe's). A
cgroup counts them (`cgroups`), but a Gradescope container has none the grader may create, nor
has a non-root instructor; this filter works everywhere, so a notebook behaves the same in CI and
on Gradescope, and where no cgroup can be made it is what bounds that memory.

Refused with ENOMEM ("Cannot allocate memory"): memfd_create and memfd_secret, shmget and semget
with a size (looking up an existing object, size 0, is harmless), msgget. Refused with EPERM:
- socket and socketpair, of every family: a socket's buffers lie outside RLIMIT_AS (AF_UNIX
  socketpairs with 4 MB SO_SNDBUF held 2.2 GB of a host's memory under a 1 GB limit; a datagram
  socket queues ten messages of a sender that has closed; TCP grows its buffers by itself), and no
  chapter needs a socket (nor the network: under bubblewrap there is none). The zygote, which runs
  only the grader's code, keeps AF_UNIX socketpairs (`zygote_program`: it makes each student's
  channel) and its child refuses sockets again before any student code runs (`no_sockets_program`);
- setsockopt of SO_SNDBUF, SO_RCVBUF and their FORCE variants (the student's channel is a socket);
- fcntl F_SETPIPE_SZ: a pipe keeps its 64 KiB, not the 1 MiB an unprivileged user may set;
- vmsplice and splice: a pipe's 16 slots would hold user pages (a whole 2 MB huge page for one
  4 KiB slot) that are no longer mapped, or a file's pages after it is deleted;
- mq_open with O_CREAT: a POSIX message queue outlives its process where there is no IPC namespace.
Nothing of the course needs them: numpy, torch on the CPU, multiprocessing (pipes) and matplotlib
use anonymous memory, files, pipes, or POSIX shared memory in /dev/shm, which is a bounded
in-memory folder of the sandbox. With RLIMIT_NOFILE (`isolation.OPEN_FILES`) this bounds what the
kernel holds behind a student's file descriptors: a pipe's 64 KiB per descriptor. A system call
of another architecture's table (i386's through int 0x80, x32's) is refused outright: its numbers
differ.

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
    "x86_64": (0xC000003E, {"shmget": 29, "msgget": 68, "semget": 64, "memfd_create": 319, "memfd_secret": 447,
                            "socket": 41, "socketpair": 53, "setsockopt": 54, "fcntl": 72, "vmsplice": 278,
                            "splice": 275, "mq_open": 240}, 0x40000000),
    "aarch64": (0xC00000B7, {"shmget": 194, "msgget": 186, "semget": 190, "memfd_create": 279, "memfd_secret": 447,
                             "socket": 198, "socketpair": 199, "setsockopt": 208, "fcntl": 25, "vmsplice": 75,
                             "splice": 76, "mq_open": 180}, None),
}
EPERM = 1
AF_UNIX, SOL_SOCKET, F_SETPIPE_SZ, O_CREAT = 1, 1, 1031, 0o100
SOCKET_BUFFERS = (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW, _ARG1_HIGH, _ARG2_LOW = 0, 4, 16, 24, 28, 32  # in struct seccomp_data (little-endian)


def _op(code, k, jt=0, jf=0):
    return struct.pack("<HBBI", code, jt, jf, k)


def _assemble(body):
    """Classic BPF from [("ld", offset[, label]) | ("ret", value, label) | (jump, k, label)], jump one
    of "jeq", "jne", "jge", "jset" (taken when `k & the word`): each jump goes forward to its label."""
    labels = {entry[2]: i for i, entry in enumerate(body) if entry[0] in ("ld", "ret") and len(entry) > 2}
    code = []
    for i, entry in enumerate(body):
        kind = entry[0]
        if kind == "ld":
            code.append(_op(_LD_W_ABS, entry[1]))
        elif kind == "ret":
            code.append(_op(_RET_K, entry[1]))
        else:
            target = labels[entry[2]] - i - 1
            assert 0 <= target < 256, f"a jump of {target} to {entry[2]}"
            if kind == "jne":
                code.append(_op(_JEQ_K, entry[1], 0, target))
            elif kind == "jeq":
                code.append(_op(_JEQ_K, entry[1], target, 0))
            elif kind == "jset":
                code.append(_op(_JSET_K, entry[1], target, 0))
            else:
                code.append(_op(_JGE_K, entry[1], target, 0))
    return b"".join(code)


def _body(sockets):
    """The student's filter as `_assemble`'s body; `sockets`: None (refused), "unix" (AF_UNIX only)."""
    arch, numbers, foreign = _TABLES[platform.machine()]
    # labels: ... ALLOW, ENOMEM, EPERM, ENOSYS, after the checks of each call's arguments
    body = [("ld", _ARCH), ("jne", arch, "ENOSYS"), ("ld", _NR)]
    if foreign is not None:
        body.append(("jge", foreign, "ENOSYS"))
    for name in ("memfd_create", "memfd_secret", "msgget"):
        body.append(("jeq", numbers[name], "ENOMEM"))
    for name in ("vmsplice", "splice"):
        body.append(("jeq", numbers[name], "EPERM"))
    for name in ("socket", "socketpair"):
        body.append(("jeq", numbers[name], "SOCKET" if sockets == "unix" else "EPERM"))
    for name in ("shmget", "semget", "setsockopt", "fcntl", "mq_open"):
        body.append(("jeq", numbers[name], name.upper()))
    body.append(("ret", _RET_ALLOW, "ALLOW"))
    # shmget(key, size, flags): any size at all is refused (a size_t: both words)
    body += [("ld", _ARG1_LOW, "SHMGET"), ("jne", 0, "ENOMEM"), ("ld", _ARG1_HIGH), ("jne", 0, "ENOMEM"),
             ("ret", _RET_ALLOW, "ALLOW_SHMGET")]
    # semget(key, nsems, flags), setsockopt(fd, level, name, ...), fcntl(fd, cmd, ...),
    # mq_open(name, flags, ...), socket(family, ...): ints, of which the kernel reads the low word only
    body += [("ld", _ARG1_LOW, "SEMGET"), ("jne", 0, "ENOMEM"), ("ret", _RET_ALLOW, "ALLOW_SEMGET")]
    body += [("ld", _ARG1_LOW, "SETSOCKOPT"), ("jne", SOL_SOCKET, "ALLOW_SETSOCKOPT"), ("ld", _ARG2_LOW)]
    body += [("jeq", name, "EPERM") for name in SOCKET_BUFFERS] + [("ret", _RET_ALLOW, "ALLOW_SETSOCKOPT")]
    body += [("ld", _ARG1_LOW, "FCNTL"), ("jeq", F_SETPIPE_SZ, "EPERM"), ("ret", _RET_ALLOW, "ALLOW_FCNTL")]
    body += [("ld", _ARG1_LOW, "MQ_OPEN"), ("jset", O_CREAT, "EPERM"), ("ret", _RET_ALLOW, "ALLOW_MQ_OPEN")]
    body += [("ld", _ARG0_LOW, "SOCKET"), ("jne", AF_UNIX, "EPERM"), ("ret", _RET_ALLOW, "ALLOW_SOCKET")]
    body.append(("ret", _RET_ERRNO | ENOMEM, "ENOMEM"))
    body.append(("ret", _RET_ERRNO | EPERM, "EPERM"))
    body.append(("ret", _RET_ERRNO | ENOSYS, "ENOSYS"))
    return body


def _known():
    return _TABLES.get(platform.machine()) is not None and os.environ.get(ENV_SWITCH) != "off"


@functools.cache
def program():
    """The student's filter as bytes (struct sock_filter[]), or None on an architecture it does not
    know: every call above refused, sockets of every family included."""
    return _assemble(_body(sockets=None)) if _known() else None


@functools.cache
def zygote_program():
    """The zygote's filter: the student's, but for AF_UNIX socketpairs (it makes each student's
    channel). Its child loads `no_sockets_program` on top before any student code runs."""
    return _assemble(_body(sockets="unix")) if _known() else None


@functools.cache
def no_sockets_program():
    """socket and socketpair refused (EPERM), everything else allowed: loaded over the zygote's
    filter in each student's process, so that it is under the student's filter."""
    if not _known():
        return None
    arch, numbers, foreign = _TABLES[platform.machine()]
    body = [("ld", _ARCH), ("jne", arch, "ENOSYS"), ("ld", _NR)]
    if foreign is not None:
        body.append(("jge", foreign, "ENOSYS"))
    body += [("jeq", numbers["socket"], "EPERM"), ("jeq", numbers["socketpair"], "EPERM"),
             ("ret", _RET_ALLOW, "ALLOW"), ("ret", _RET_ERRNO | EPERM, "EPERM"),
             ("ret", _RET_ERRNO | ENOSYS, "ENOSYS")]
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


def program_fd(code=None):
    """A pipe's reading end holding the program (default: the student's), for `bwrap --seccomp FD`;
    None without a filter. The caller passes it to bwrap and closes it after starting it."""
    code = program() if code is None else code
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
