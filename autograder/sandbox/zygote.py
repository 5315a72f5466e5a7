"""A warm zygote, the student's side (under bubblewrap only): import what the assignment needs
once, then fork one child per submission, watch it, and clean up between students."""
import os
import signal
import threading

from ..wire import read_frame, write_frame
from . import SANDBOX_HOME, WRITABLE
from .procfs import is_zombie, pids, proportional_bytes, resident_bytes, task_count
from .walls import enter_own_namespaces, walls_work
from .worker import alarm, preload, serve


def zygote(control_fd, modules):
    """Under bubblewrap only: import once, then fork one child per submission.

    The child gets a fresh socket, passed to the grader, and never the control socket. When it
    ends, every other process in this PID namespace is killed and the writable folders are
    wiped before the grader hears "ready": nothing of one student is left for the next. Each
    student runs in namespaces of its own (`walls`), where no process of the grader's can be
    named; this process is also not dumpable, so nothing can trace it or read its memory."""
    import ctypes
    import socket
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4, 0: no ptrace, no /proc/<pid>/mem
    _remember_mount_points()
    preload(modules)
    walls = walls_work()
    clean = _clean_namespace()  # what the imports wrote (matplotlib's and torch's caches): the first student finds none
    control = socket.socket(fileno=control_fd)
    reader, writer = control.makefile("rb"), control.makefile("wb")
    write_frame(writer, {"ready": True, "clean": clean, "walls": walls})
    while True:
        try:
            request = read_frame(reader)  # a request for a fork
        except EOFError:
            return
        if request.get("op") != "fork":  # a late question about a child that has ended
            write_frame(writer, {"answer": None})
            continue
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                reader.close(), writer.close(), control.close(), ours.close()
                if walls:
                    enter_own_namespaces()
                if request.get("refuse_sockets"):
                    _refuse_sockets()
                signal.signal(signal.SIGALRM, alarm)
                os.chdir(SANDBOX_HOME)
                serve(theirs.makefile("rb", buffering=0), theirs.makefile("wb", buffering=0))
            finally:
                os._exit(0)
        theirs.close()
        socket.send_fds(control, [b"F"], [ours.fileno()])
        ours.close()
        watcher = ProcessWatcher(request["max_tasks"], request["max_scratch_bytes"], request["max_memory_bytes"],
                                 control, waiting=pid if walls else None)
        _, status = os.waitpid(pid, 0)
        watcher.stop()  # no thread may run while this process forks
        exited = watcher.tripped or _status_text(status)
        write_frame(writer, {"exited": exited, "ready": True, "clean": _clean_namespace()})


class ProcessWatcher(threading.Thread):
    """Watches the namespace while a student's child runs, from outside the student's own
    namespaces: past the limit of processes and threads (a fork or thread bomb), of bytes written
    to the in-memory folders (memory the student's limits do not count), or of memory held by all
    the student's processes together, it kills them all and says why in `tripped`.

    It also answers the grader's questions about memory on the control socket: "mark" starts a
    measurement, "rise" ends it with the largest rise of the student's resident memory over its
    lowest point since the mark (memory given back and taken again still counts). Nothing the
    student does in its own processes changes what is read here."""

    def __init__(self, max_tasks, max_scratch_bytes, max_memory_bytes, control, waiting=None):
        super().__init__(daemon=True)
        self.max_tasks, self.max_scratch_bytes, self.max_memory_bytes = max_tasks, max_scratch_bytes, max_memory_bytes
        self.control, self.waiting, self.tripped = control, waiting, ""
        self.questions = control.makefile("rb", buffering=0)
        self.answers = control.makefile("wb", buffering=0)
        self.stopped = threading.Event()
        self.lowest = self.rise = None  # the measurement under way, if any
        self.start()

    def run(self):
        import select
        me = os.getpid()
        while not self.stopped.is_set():
            interval = 0.002 if self.lowest is not None else 0.02
            if select.select([self.control], [], [], interval)[0]:
                self._answer(read_frame(self.questions))
            students = pids(excluding=(1, me, self.waiting))
            tasks = sum(task_count(pid) for pid in pids(excluding=(1, me)))
            resident = sum(resident_bytes(pid) for pid in students)
            if self.lowest is not None:
                self.lowest = min(self.lowest, resident)
                self.rise = max(self.rise, resident - self.lowest)
            if tasks > self.max_tasks:
                self.tripped = f"too many processes and threads (more than {self.max_tasks}): killed"
            elif sum(_used_bytes(folder) for folder in WRITABLE) > self.max_scratch_bytes:
                self.tripped = (f"wrote more than {self.max_scratch_bytes // 2**20} MB to its home, /tmp and "
                                "/dev/shm: killed")
            elif resident > self.max_memory_bytes and sum(map(proportional_bytes, students)) > self.max_memory_bytes:
                self.tripped = (f"its processes held more than {self.max_memory_bytes // 2**20} MB of memory "
                                "together: killed")
            if self.tripped:
                while pids(excluding=(1, me)):
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except ProcessLookupError:
                        break
                return

    def _answer(self, question):
        students = pids(excluding=(1, os.getpid(), self.waiting))
        resident = sum(resident_bytes(pid) for pid in students)
        if question.get("op") == "mark":
            self.lowest, self.rise = resident, 0
            write_frame(self.answers, {"answer": resident})
        elif question.get("op") == "rise" and self.lowest is not None:
            self.rise = max(self.rise, resident - min(self.lowest, resident))
            write_frame(self.answers, {"answer": self.rise})
            self.lowest = self.rise = None
        else:
            write_frame(self.answers, {"answer": None})

    def stop(self):
        self.stopped.set()
        self.join()


def _refuse_sockets():
    """In the student's process, before its code runs, where the zygote runs under the seccomp
    filter (`seccomp.zygote_program`, which lets it make each student's socketpair): the student's
    own filter refuses sockets of every family, loaded on top (`seccomp.no_sockets_program`), or
    no student code runs."""
    from . import seccomp
    code = seccomp.no_sockets_program()
    if code is None or not seccomp.install(code):
        os._exit(121)


def _used_bytes(folder):
    try:
        info = os.statvfs(folder)
    except OSError:
        return 0
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def _status_text(status):
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _clean_namespace():
    """Kill every process but init and this one; empty the writable folders. True if clean."""
    import shutil
    import time
    me = os.getpid()
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)  # all we may signal in this namespace, but init and us
        except ProcessLookupError:
            pass
        alive = [pid for pid in pids(excluding=(1, me)) if not is_zombie(pid)]
        if not alive:
            break
        time.sleep(0.005)
    else:
        return False
    if not _remove_sysv_ipc():
        return False
    for folder in WRITABLE:
        for entry in set(os.listdir(folder) if os.path.isdir(folder) else []) - _MOUNT_POINTS.get(folder, set()):
            path = os.path.join(folder, entry)
            try:
                os.chmod(path, 0o700)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            except OSError:
                return False
    return True


def _remove_sysv_ipc():
    """Remove the System V shared memory, message queues and semaphores a student left in the
    sandbox's IPC namespace (shared by the zygote's children). True if none is left."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    remove = {"shm": lambda i: libc.shmctl(i, 0, None), "msg": lambda i: libc.msgctl(i, 0, None),
              "sem": lambda i: libc.semctl(i, 0, 0)}  # IPC_RMID = 0
    for kind, rmid in remove.items():
        for _ in range(2):
            ids = _sysv_ids(kind)
            for ident in ids:
                rmid(ident)
        if _sysv_ids(kind):
            return False
    return True


def _sysv_ids(kind):
    try:
        with open(f"/proc/sysvipc/{kind}") as table:
            return [int(line.split()[1]) for line in table.read().splitlines()[1:] if line.strip()]
    except OSError:
        return []


_MOUNT_POINTS = {}  # what the writable folders hold at the start: the sandbox's own mount points


def _remember_mount_points():
    for folder in WRITABLE:
        _MOUNT_POINTS[folder] = set(os.listdir(folder)) if os.path.isdir(folder) else set()
