"""Each student in namespaces of its own, inside the zygote's sandbox (the student's side).

The zygote's child calls `enter_own_namespaces()` before any student code runs. It makes a user,
PID, IPC and mount namespace for this student alone and forks the student's process into them,
as PID 1 of the new PID namespace; the child itself stays outside and only waits. So:
- the student cannot name any process of the grader's (the zygote, its watcher, the waiting
  child): they are outside its PID namespace, and a fresh /proc shows its own processes only;
  it leads a session of its own, so no process group it can signal holds them either.
  Nothing can be signalled, traced, re-limited (prlimit) or read there;
- when the student's process ends, the kernel kills every process it left (PID 1 has died), and
  its IPC namespace (System V objects, POSIX message queues) and user namespace (its user and
  session keyrings) go with them; it starts on a new, empty session keyring;
- it can create no further user namespace and holds no capability (no private tmpfs that the
  zygote's watcher would not see, no mount, no raising a limit back).
Each step that the kernel refuses is skipped where the wall above still holds without it
(a /proc that cannot be mounted: the grader's processes are still outside the PID namespace).
"""
import ctypes
import os
import platform
import signal

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWIPC = 0x20000, 0x10000000, 0x20000000, 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 38, 24
KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
KEYCTL_JOIN_SESSION_KEYRING = 1

_libc = ctypes.CDLL(None, use_errno=True)


def _ok(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), f"cannot {what}")


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def walls_work():
    """Whether this kernel lets a process here build the walls: tried in a throwaway child."""
    pid = os.fork()
    if pid == 0:
        try:
            enter_own_namespaces()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def enter_own_namespaces():
    """Returns in the student's process (PID 1 of its own namespaces); the calling process
    never returns: it waits for the student's and ends as it ended."""
    uid, gid = os.getuid(), os.getgid()
    _ok(_libc.prctl(4, 1, 0, 0, 0), "own its /proc/self")  # PR_SET_DUMPABLE: the zygote is not, and its children inherit that
    _ok(_libc.unshare(CLONE_NEWUSER), "make a user namespace")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _ok(_libc.unshare(CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNS), "make PID, IPC and mount namespaces")
    pid = os.fork()
    if pid:
        _wait_and_end_alike(pid)
    os.setsid()  # a process group of its own: kill(0, ...) would reach the zygote's group across namespaces
    _ok(_libc.prctl(1, signal.SIGKILL, 0, 0, 0), "die with its parent")  # PR_SET_PDEATHSIG
    _ok(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make its mounts private")
    if _libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0:
        try:
            _write("/proc/sys/user/max_user_namespaces", "0")  # only a fresh /proc has it writable
        except OSError:
            pass
    if KEYCTL is not None:
        _libc.syscall(KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None)  # a new, empty session keyring
    _drop_capabilities()


def _wait_and_end_alike(pid):
    """The child outside: wait for the student's process, then end as it did."""
    for fd in range(3, 1024):  # hold nothing of the student's (its channel must close when it dies)
        try:
            os.close(fd)
        except OSError:
            pass
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities():
    """The user namespace gave this process every capability inside it: give them all up, for
    good (no new privileges through setuid files either)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability the kernel knows
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _ok(_libc.capset(ctypes.byref(header), data), "drop its capabilities")
    _ok(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "forbid new privileges")
