"""No process of a grading run outlives it, however the grader ends (`kill -9` included).

Layer by layer:

- the grading workers of `-j N` die with the grader's main process: PR_SET_PDEATHSIG (SIGKILL),
  set as each starts (`die_with_parent`);
- a zygote, or a fresh student's process, dies with the worker (or main process) that started it:
  bubblewrap's `--die-with-parent`, and PR_SET_PDEATHSIG set in the child after it has dropped
  its identity (a change of identity clears it); under bubblewrap, whatever the student's code
  starts lives in the sandbox's PID namespace, which the kernel empties when its init dies;
- what escapes both (without bubblewrap, a student's process that starts a session of its own or
  forks twice: PR_SET_PDEATHSIG is not inherited): the run's *reaper* (`Run`), a small process of
  its own session that outlives the grader. When the grader ends without saying it is done (it
  was killed), it kills what is left in the cgroups of the run's processes that are gone, and
  every process whose environment carries the run's mark (`RUN_ENV`, set in every student
  process), again until none is left; then it removes their scratch folders.

On Ctrl-C the grader does the same itself (`sweep`), after killing its workers (`pipeline`).
"""
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import time

RUN_ENV = "AUTOGRADER_RUN"  # in every student process's environment: the mark of the run it belongs to
PR_SET_PDEATHSIG = 1
_token = None  # the run this process grades for (inherited by the workers of `-j N`)
try:  # looked up here, not in a child between fork and exec (the loader's lock may be held there)
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def die_with_parent(parent=None):
    """This process gets SIGKILL when its parent (the thread that started it) ends; if `parent`
    has ended already, it exits now."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def run_env():
    """The mark to put in a student process's environment: {} outside a run."""
    return {RUN_ENV: _token} if _token else {}


class Run:
    """One grading run: its mark, and the reaper that cleans up if the grader is killed."""

    def __init__(self):
        global _token
        self.token, self.previous = secrets.token_hex(8), _token
        _token = self.token
        read_fd, self.write_fd = os.pipe()  # the workers of `-j N`, forked, hold it too: EOF once all are gone
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (f"import sys; sys.path.insert(0, {package_parent!r}); "
                "from autograder.sandbox.lifeline import _reap; _reap(sys.argv[1])")
        try:
            self.reaper = subprocess.Popen([sys.executable, "-I", "-S", "-c", code, self.token], stdin=read_fd,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True)  # Ctrl-C at the terminal does not reach it
        except OSError:
            self.reaper = None
        finally:
            os.close(read_fd)

    def close(self):
        """The run ended here (its processes ended or were swept): the reaper can go."""
        global _token
        _token = self.previous
        if self.write_fd is None:
            return
        try:
            os.write(self.write_fd, b"done")
        except OSError:
            pass
        os.close(self.write_fd)
        self.write_fd = None
        if self.reaper is not None:
            try:
                self.reaper.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.reaper.kill()
                self.reaper.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _reap(token):
    """The reaper: wait for the grader's word that it is done; if the pipe closes without it (the
    grader and its workers are gone), kill what they left."""
    said = b""
    while True:
        try:
            chunk = os.read(0, 64)
        except InterruptedError:
            continue
        if not chunk:
            break
        said += chunk
        if b"done" in said:
            return
    sweep(token, at_least=1.0, seconds=30)  # the workers may still be ending: their pipe closes first


def sweep(token, at_least=0.0, seconds=10.0):
    """Kill the run's student processes (by their mark) and what is left in the cgroups of its
    processes that are gone, again for `at_least` seconds and until a few passes in a row find
    nothing (at most `seconds`); then remove their scratch folders. The processes of the grader
    itself that are still alive are not touched."""
    from . import cgroups, isolation
    start, quiet = time.monotonic(), 0
    while (quiet < 3 or time.monotonic() < start + at_least) and time.monotonic() < start + seconds:
        found = kill_marked(token)
        found = cgroups.remove_stale_folders() or found
        quiet = 0 if found else quiet + 1
        time.sleep(0.01)
    try:
        isolation.remove_stale_scratch.__wrapped__()
    except OSError:
        pass


def kill_marked(token):
    """SIGKILL every process whose environment carries the run's mark; whether there was one."""
    needle, me, found = f"{RUN_ENV}={token}".encode(), os.getpid(), False
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                marked = needle in f.read().split(b"\0")
        except OSError:
            continue
        if marked:
            try:
                os.kill(int(entry), signal.SIGKILL)
                found = True
            except ProcessLookupError:
                pass
    return found

