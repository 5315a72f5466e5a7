"""A student's process as the grader sees it: a channel, and how it ends. Without bubblewrap,
a fresh process per submission (`FreshProcess`); with it, a child of a warm zygote (`zygotes`)."""
import functools
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path

from . import channel, lifeline, seccomp
from .cgroups import StudentCgroup
from .isolation import apply_limits, memory_guards, remove_stale_scratch, worker_command
from .procfs import proportional_bytes, resident_bytes, session_members, task_count


class StudentProcess:
    """The channel to one student's process (`read_fd`, `write_fd`) and, in subclasses, its end."""

    def send(self, request, seconds):
        """Write a request; TimeoutError if the process stops reading it."""
        try:
            channel.send(self.write_fd, request, time.monotonic() + seconds)
        except TimeoutError:
            raise
        except OSError:
            pass  # the process is gone; receive() reports why

    def send_frame(self, data, seconds):
        """Write a frame already made (`wire.frame`), as `send` writes a request."""
        try:
            channel.write_all(self.write_fd, data, time.monotonic() + seconds)
        except TimeoutError:
            raise
        except OSError:
            pass

    def receive(self, seconds, max_bytes):
        """A reply; TimeoutError, EOFError, WireError or channel.ReplyTooLarge otherwise."""
        return channel.receive(self.read_fd, time.monotonic() + seconds, max_bytes)


class FreshProcess(StudentProcess):
    """A new worker process for one submission (bubblewrapped if it can be)."""

    def __init__(self, limits, modules):
        self.limits = limits
        remove_stale_scratch()
        self.scratch = tempfile.TemporaryDirectory(prefix=f"autograder-{os.getpid()}-")
        use_cgroups, use_seccomp = memory_guards()
        self.cgroup = student_cgroup(limits, extra_tasks=3) if use_cgroups else None  # bwrap's two processes
        filter_fd = seccomp.program_fd() if use_seccomp else None
        to_child_r, self.write_fd = os.pipe()
        self.read_fd, from_child_w = os.pipe()
        command, home = worker_command(self.scratch.name, to_child_r, from_child_w, modules,
                                       scratch_bytes=limits.scratch_bytes, seccomp_fd=filter_fd)
        fds = (to_child_r, from_child_w) + ((filter_fd,) if filter_fd is not None else ())
        load_here = use_seccomp and "--seccomp" not in command  # without bubblewrap: loaded before the exec
        grader = os.getpid()

        def prepare():  # in the child: dies with the grader's thread that started it, once it is nobody
            apply_limits(limits, self.cgroup, load_seccomp=load_here)
            lifeline.die_with_parent(grader)

        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd=self.scratch.name, env=student_env(home), pass_fds=fds,
                preexec_fn=prepare, start_new_session=True)
            _running.add(self)
        except BaseException:
            if self.cgroup is not None:
                self.cgroup.remove()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        self.output = OutputDrain(self.process.stdout)
        self.watcher = SessionWatcher(self.process.pid, limits.processes, limits.memory_bytes)

    def memory(self, op):
        return self.watcher.measure(op)

    def death(self):
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "it closed its channel"
        if self.cgroup is not None and self.cgroup.memory_limit_reached():
            return memory_limit_text(self.limits.memory_bytes)
        return self.watcher.tripped or describe_exit(code)

    def kill_now(self):
        """SIGKILL its processes, waiting for nothing (Ctrl-C); `end` still closes it."""
        for kill in (lambda: os.killpg(self.process.pid, signal.SIGKILL),
                     lambda: self.cgroup is not None and self.cgroup.kill_once()):
            try:
                kill()
            except OSError:
                pass
        kill_session(self.process.pid, seconds=0.2)

    def end(self):
        _running.discard(self)
        self.watcher.stop()
        kill_session(self.process.pid)
        self.process.wait()
        for fd in (self.write_fd, self.read_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.cgroup is not None:
            self.cgroup.remove()  # and with it any process that left the session
        self.output.join(timeout=2)  # a grandchild that escaped may still hold the pipe
        self.scratch.cleanup()


_running = weakref.WeakSet()  # the FreshProcesses of this grading process, not yet ended


def kill_running():
    for process in list(_running):
        process.kill_now()


class SessionWatcher(threading.Thread):
    """Without bubblewrap there is no PID namespace: this counts the processes of the student's
    session instead, and the memory they hold together; past a limit it kills them all. It also
    measures memory for the checks, as the zygote's watcher does (`measure`). A process that
    starts a session of its own escapes it (one more reason to install bubblewrap)."""

    def __init__(self, session, limit, max_memory_bytes):
        super().__init__(daemon=True)
        self.session, self.limit, self.max_memory_bytes = session, limit, max_memory_bytes
        self.tripped, self.stopped, self.lock = "", threading.Event(), threading.Lock()
        self.lowest = self.rise = None
        self.start()

    def _resident(self):
        members = session_members(self.session)
        return members, sum(resident_bytes(pid) for pid in members)

    def run(self):
        while not self.stopped.wait(0.002 if self.lowest is not None else 0.05):
            members, resident = self._resident()
            with self.lock:
                if self.lowest is not None:
                    self.lowest = min(self.lowest, resident)
                    self.rise = max(self.rise, resident - self.lowest)
            if sum(task_count(pid) for pid in members) > self.limit:
                self.tripped = f"too many processes and threads (more than {self.limit}): killed"
            elif resident > self.max_memory_bytes and sum(map(proportional_bytes, members)) > self.max_memory_bytes:
                self.tripped = f"its processes held more than {self.max_memory_bytes // 2**20} MB of memory together: killed"
            if self.tripped:
                kill_session(self.session)
                return

    def measure(self, op):
        """"mark": start measuring; "rise": the largest rise of resident memory over its lowest
        point since the mark."""
        _, resident = self._resident()
        with self.lock:
            if op == "mark":
                self.lowest, self.rise = resident, 0
                return resident
            if self.lowest is None:
                return None
            rise = max(self.rise, resident - min(self.lowest, resident))
            self.lowest = self.rise = None
            return rise

    def stop(self):
        self.stopped.set()
        self.join()


def kill_session(session, seconds=5.0):
    """Kill every process of the session, again until none is left (they may be forking)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        members = session_members(session)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def live_processes_of(uid):
    """The processes (not zombies) whose real user is `uid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith(("Z", "X")):
                found.append(int(entry))
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return found


def end_identity(uid, gid, seconds=5.0):
    """Without namespaces, by root: kill every process of the student's identity (`uid`, a user no
    other process of the machine is), again until none is left, a process that left its session
    included; whether none is left. A child becomes that user and signals all it may signal
    (kill(-1)): every process of that user, and nothing else."""
    deadline = time.monotonic() + seconds
    while live_processes_of(uid):
        if time.monotonic() > deadline:
            return False
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            try:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)
    return True


# Where any user may write on most machines; `writable_by_anyone` adds the others it finds
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/crash")
# File systems whose folders hold files of their own (not /proc, /sys, network or FUSE file systems)
LOCAL_FILE_SYSTEMS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs", "bcachefs", "tmpfs",
                      "ramfs", "overlay", "mqueue"}


def _local_mounts():
    """The mount points of this machine's local file systems (LOCAL_FILE_SYSTEMS), / first."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                point, kind = left.split()[4].replace("\\040", " "), right.split()[0]
                if kind in LOCAL_FILE_SYSTEMS and not point.startswith(("/proc/", "/sys/")):
                    found.append(point)
    except (OSError, IndexError):
        pass
    return sorted(set(found), key=len)


def _reachable_by_anyone(path):
    """Whether a user with no rights of its own can reach `path`: every folder on the way crossable."""
    try:
        return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in Path(path).parents)
    except OSError:
        return False


@functools.cache
def writable_by_anyone():
    """The folders of this machine where a user with no rights of its own (the student's, without
    namespaces) can create files: SHARED_WRITABLE, and every folder of a local file system that
    others may write and reach. Folders others cannot cross are not entered: nothing beneath them
    is theirs to write. Some seconds on a large disk: once per process."""
    found = {folder for folder in SHARED_WRITABLE if os.path.isdir(folder) and not os.path.islink(folder)}
    for mount in _local_mounts():
        if not _reachable_by_anyone(mount):
            continue
        try:
            device = os.lstat(mount).st_dev
        except OSError:
            continue
        todo = [mount]
        while todo:
            folder = todo.pop()
            try:
                entries = list(os.scandir(folder))
                mode = os.lstat(folder).st_mode
            except OSError:
                continue
            if not mode & stat.S_IXOTH:
                continue
            if mode & stat.S_IWOTH:
                found.add(folder)
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode) and info.st_dev == device and info.st_mode & stat.S_IXOTH:
                    todo.append(entry.path)
    return sorted(found)


def remove_files_of(uid, folders):
    """By root, once no process of `uid` is left: remove every file and folder that `uid` owns in
    `folders` and beneath them (on their own file system; links are removed, never followed).
    The paths that could not be removed."""
    left = []
    for top in folders:
        try:
            device = os.lstat(top).st_dev
        except OSError:
            continue
        todo = [top]
        while todo:
            folder = todo.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_uid == uid:
                    try:
                        if stat.S_ISDIR(info.st_mode):
                            shutil.rmtree(entry.path)  # by its descriptors: no link inside is followed
                        else:
                            os.unlink(entry.path)
                    except OSError:
                        left.append(entry.path)
                elif stat.S_ISDIR(info.st_mode) and info.st_dev == device:
                    todo.append(entry.path)
    return left


class ThrowawayUser:
    """A system user of its own for one run of student code without namespaces, made by root
    (`useradd`), then removed (`remove`): every process of it killed, every file it owns in the
    folders anyone may write removed, the user and its group deleted. No other process of the
    machine is it, so killing by uid kills the student's processes and nothing else, and no file of
    it is left for a later user of the same uid. Raises OSError where it cannot be made (not root,
    no useradd)."""

    PREFIX = "ag-try-"

    def __init__(self):
        if os.geteuid() != 0:
            raise OSError("only root can make a user")
        self.name = f"{self.PREFIX}{secrets.token_hex(4)}"
        try:
            done = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                                   "/nonexistent", "--shell", "/usr/sbin/nologin", self.name],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise OSError(f"useradd failed: {error}") from None
        if done.returncode:
            raise OSError(f"useradd failed (exit {done.returncode}): {done.stderr.strip()}")
        entry = pwd.getpwnam(self.name)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        if live_processes_of(self.uid):  # the uid of a deleted user, still running: it is not one of its own
            subprocess.run(["userdel", self.name], capture_output=True, timeout=60)
            raise OSError(f"useradd gave {self.name} the uid {self.uid}, which running processes have")

    def remove(self, folders=None):
        """Kill, clean, delete. What was left ({"processes": [pids], "files": [paths], "user": error or
        None}): nothing, unless a process could not be killed (then the user stays, so that its uid is
        not given to another) or a file could not be removed."""
        ended = end_identity(self.uid, self.gid)
        files = remove_files_of(self.uid, writable_by_anyone() if folders is None else folders)
        user = "some of its processes are still alive" if not ended else None
        if ended:
            done = subprocess.run(["userdel", self.name], capture_output=True, text=True, timeout=60)
            if done.returncode:
                user = f"userdel failed (exit {done.returncode}): {done.stderr.strip()}"
        return {"processes": live_processes_of(self.uid), "files": files, "user": user}


class OutputDrain(threading.Thread):
    """Reads and drops what the student's code prints: a flood of output costs neither memory
    nor disk, and never blocks the student's process on a full pipe."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.start()

    def run(self):
        while self.stream.read1(1 << 16):
            pass
        self.stream.close()


def student_env(home):
    return {"PATH": "/usr/bin:/bin", "HOME": home, "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{home}/.mpl",
            "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "TMPDIR": home, "PYTHONWARNINGS": "ignore", "LANG": "C.UTF-8", **lifeline.run_env()}


def student_cgroup(limits, extra_tasks):
    """A new cgroup for one student process tree, bounded by its limits; None if the kernel
    refuses one now (the seccomp filter still bounds what RLIMIT_AS does not count)."""
    try:
        return StudentCgroup(limits.memory_bytes, limits.processes + extra_tasks)
    except OSError:
        return None


def memory_limit_text(memory_bytes):
    return (f"the memory limit was reached: its processes held more than {memory_bytes // 2**20} MB of memory "
            "together (every kind of memory, counted by the kernel): killed")


def describe_exit(code):
    if code < 0:
        name = signal.Signals(-code).name
        hint = {"SIGKILL": "killed: memory or CPU limit?", "SIGXCPU": "CPU time limit",
                "SIGXFSZ": "file size limit", "SIGSEGV": "crashed"}.get(name, "signal")
        return f"{name}, {hint}"
    return f"exit status {code}: the code called os._exit(), killed its own process, or crashed"


def describe_exit_text(text):
    if text.startswith("killed by"):
        return f"{text}: a memory or CPU limit, or the code killed its own process"
    return f"{text}: the code called os._exit() or exit, or crashed"
