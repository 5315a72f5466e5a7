"""The student's side of the sandbox: run the notebook's code, then answer the grader's calls.

Started by `session` as `python -I -m autograder.sandbox.worker IN_FD OUT_FD`. It speaks only
the safe wire format; it never sees the checks, nor a reference solution before the checks of
its exercise are done (then it may be asked to use it: see `StudentNamespace.use_known_good`).
"""
import builtins
import contextlib
import os
import signal
import sys
import threading

from ..wire import read_frame, write_frame
from . import SANDBOX_HOME, WRITABLE
from .calls import CallError, StudentNamespace, describe_exception
from .procfs import is_zombie, pids, task_count


class _IPythonShim:
    """Enough of `get_ipython()` for transformed magics (%matplotlib, !pip) to be no-ops."""

    def run_line_magic(self, *args, **kwargs):
        return None

    run_cell_magic = system = getoutput = run_line_magic


def python_source(cell_source):
    """Cell source as plain Python: IPython's magics and shell escapes become shim calls."""
    if not any(line.lstrip().startswith(("%", "!")) or line.rstrip().endswith("?")
               for line in cell_source.splitlines()):
        return cell_source
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(cell_source)


class TimeLimit(BaseException):
    """Raised in the student's code when its time is up (a BaseException: `except Exception` in
    the student's code does not swallow it)."""


def _alarm(signum, frame):
    raise TimeLimit


@contextlib.contextmanager
def time_limit(seconds):
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def run_cells(cells, namespace, cell_seconds):
    """Execute each cell; one that fails or runs out of time is reported, the next ones still run."""
    report = []
    for index, source in cells:
        try:
            with time_limit(cell_seconds):
                exec(compile(python_source(source), f"<cell {index}>", "exec"), namespace)
            error = None
        except TimeLimit:
            error = f"time limit: the cell ran for more than {cell_seconds:g} s and was stopped"
        except SystemExit:
            error = "the cell called exit() or sys.exit()"
        except BaseException as exc:  # noqa: BLE001 (KeyboardInterrupt included: keep grading)
            error = describe_exception(exc)
        finally:
            _close_figures()
        report.append([index, error])
    return report


def _no_input(prompt=""):
    raise RuntimeError("input() cannot be answered while the notebook is graded: remove it")


def _close_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def serve(channel_in, channel_out):
    namespace = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": _IPythonShim,
                 "input": _no_input}
    calls = StudentNamespace(namespace)
    request = read_frame(channel_in)
    write_frame(channel_out, {"cells": run_cells(request["cells"], namespace, request["cell_seconds"])})
    while True:
        try:
            request = read_frame(channel_in)
        except EOFError:
            return
        try:
            call_seconds = request.get("seconds", 20.0)
            with time_limit(call_seconds):
                if request["op"] == "call":
                    reply = {"value": calls.call(request["target"], request["args"], request["kwargs"],
                                                 method=request["method"], keep=request["keep"])}
                elif request["op"] == "known_good":
                    calls.use_known_good(request["sources"], request["names"])
                    reply = {"value": None}
                else:
                    reply = {"error": f"unknown request {request['op']!r}"}
        except TimeLimit:
            reply = {"error": f"time limit: the call ran for more than {call_seconds:g} s and was stopped"}
        except CallError as error:
            reply = {"error": str(error)}
        except SystemExit:
            reply = {"error": "your code called exit() or sys.exit()"}
        except BaseException as error:  # noqa: BLE001
            reply = {"error": describe_exception(error)}
        finally:
            _close_figures()
        try:
            write_frame(channel_out, reply)
        except Exception as error:  # a result that cannot travel
            write_frame(channel_out, {"error": f"the result cannot be sent back: {error}"})


def preload(modules):
    """Import what the assignment's notebooks import, once, before any student's code."""
    import importlib
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (the notebook will say so itself)
            pass


def zygote(control_fd, modules):
    """Under bubblewrap only: import once, then fork one child per submission.

    The child gets a fresh socket, passed to the grader, and never the control socket. When it
    ends, every other process in this PID namespace is killed and the writable folders are
    wiped before the grader hears "ready": nothing of one student is left for the next. This
    process is not dumpable, so the students' processes can neither trace it nor read or write
    its memory."""
    import ctypes
    import socket
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4, 0: no ptrace, no /proc/<pid>/mem
    _remember_mount_points()
    preload(modules)
    control = socket.socket(fileno=control_fd)
    reader, writer = control.makefile("rb"), control.makefile("wb")
    write_frame(writer, {"ready": True, "clean": True})
    while True:
        try:
            request = read_frame(reader)  # a request for a fork
        except EOFError:
            return
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                reader.close(), writer.close(), control.close(), ours.close()
                signal.signal(signal.SIGALRM, _alarm)
                os.chdir(SANDBOX_HOME)
                serve(theirs.makefile("rb", buffering=0), theirs.makefile("wb", buffering=0))
            finally:
                os._exit(0)
        theirs.close()
        socket.send_fds(control, [b"F"], [ours.fileno()])
        ours.close()
        watcher = ProcessWatcher(request["max_tasks"], request["max_scratch_bytes"])
        _, status = os.waitpid(pid, 0)
        watcher.stop()  # no thread may run while this process forks
        exited = watcher.tripped or _status_text(status)
        write_frame(writer, {"exited": exited, "ready": True, "clean": _clean_namespace()})


class ProcessWatcher(threading.Thread):
    """Watches the namespace while a student's child runs: past the limit of processes and
    threads (a fork or thread bomb), or of bytes written to the in-memory folders (which are
    memory the student's limits do not count), it kills them all and says why in `tripped`."""

    def __init__(self, max_tasks, max_scratch_bytes):
        super().__init__(daemon=True)
        self.max_tasks, self.max_scratch_bytes, self.tripped = max_tasks, max_scratch_bytes, ""
        self.stopped = threading.Event()
        self.start()

    def run(self):
        me = os.getpid()
        while not self.stopped.wait(0.02):
            tasks = sum(task_count(pid) for pid in pids(excluding=(1, me)))
            written = sum(_used_bytes(folder) for folder in WRITABLE)
            if tasks > self.max_tasks:
                self.tripped = f"too many processes and threads (more than {self.max_tasks}): killed"
            elif written > self.max_scratch_bytes:
                self.tripped = (f"wrote more than {self.max_scratch_bytes // 2**20} MB to its home, /tmp and "
                                "/dev/shm: killed")
            if self.tripped:
                while pids(excluding=(1, me)):
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except ProcessLookupError:
                        break
                return

    def stop(self):
        self.stopped.set()
        self.join()


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


def main(argv):
    os.environ.setdefault("MPLBACKEND", "Agg")
    signal.signal(signal.SIGALRM, _alarm)
    if argv[1] == "--zygote":
        zygote(int(argv[2]), argv[3:])
        return
    preload(argv[3:])
    channel_in = os.fdopen(int(argv[1]), "rb", buffering=0)
    channel_out = os.fdopen(int(argv[2]), "wb", buffering=0)
    serve(channel_in, channel_out)


if __name__ == "__main__":
    main(sys.argv)
