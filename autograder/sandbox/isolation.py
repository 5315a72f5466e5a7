"""How the student's process is walled off: bubblewrap where it runs, resource limits always.

Under bubblewrap the student's process has no network, its own PID namespace (nothing it starts
outlives it), a read-only view of the system and of Python, a private scratch folder as its
only writable place, and no view of the repository (solutions, checks), the submissions or the
grader's output. It sees only the few grader modules it needs: `wire` and `sandbox`.
"""
import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

STAGED_MODULES = ["__init__.py", "wire.py", "sandbox/__init__.py", "sandbox/calls.py", "sandbox/worker.py"]
SANDBOX_HOME = "/sandbox"
STAGE_MOUNT = "/grader"
NOT_ISOLATED = ("bubblewrap (bwrap) is not available here: student code runs WITHOUT isolation, "
                "with resource limits only. Install the Debian package `bubblewrap` to isolate it.")


@functools.cache
def staged_grader():
    """A folder holding only the grader modules the student's side imports."""
    package = Path(__file__).resolve().parent.parent
    stage = Path(tempfile.mkdtemp(prefix="autograder-stage-"))
    for name in STAGED_MODULES:
        target = stage / "autograder" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / name, target)
    return str(stage)


def _system_binds():
    # /tmp first: the binds below may lie under /tmp (a venv in a clone there) and must stay visible
    binds = ["--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            binds += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds += ["--ro-bind", path, path]
    for path in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/ssl/certs"):
        binds += ["--ro-bind-try", path, path]
    for path in sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}):
        binds += ["--ro-bind", path, path]
    return binds


def bubblewrap_command(scratch):
    """bwrap's arguments up to `--`; the student's process gets `scratch` as its home."""
    return (["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
             "--uid", "65534", "--gid", "65534", "--hostname", "sandbox"]
            + _system_binds()
            + ["--ro-bind", staged_grader(), STAGE_MOUNT,
               "--bind", scratch, SANDBOX_HOME, "--chdir", SANDBOX_HOME,
               "--proc", "/proc", "--dev", "/dev", "--"])


@functools.cache
def bubblewrap_works():
    """Whether bwrap is installed and can make its namespaces on this machine."""
    if os.environ.get("AUTOGRADER_SANDBOX") == "none" or shutil.which("bwrap") is None:
        return False
    scratch = tempfile.mkdtemp(prefix="autograder-probe-")
    try:
        probe = subprocess.run(bubblewrap_command(scratch) + [sys.executable, "-I", "-c", "pass"],
                               capture_output=True, timeout=30)
        return probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


BOOTSTRAP = (f"import sys; sys.path.insert(0, {STAGE_MOUNT!r}); "
             "from autograder.sandbox.worker import main; main(sys.argv)")


def worker_command(scratch, in_fd, out_fd, modules):
    """The command that starts one student's process, isolated if it can be; and its home."""
    if bubblewrap_works():
        os.chmod(scratch, 0o777)  # the sandbox user (nobody) writes there
        return (bubblewrap_command(scratch) + [sys.executable, "-I", "-c", BOOTSTRAP, str(in_fd), str(out_fd), *modules],
                SANDBOX_HOME)
    return [sys.executable, "-I", "-m", "autograder.sandbox.worker", str(in_fd), str(out_fd), *modules], scratch


def zygote_command(scratch, control_fd, modules):
    """The command that starts a zygote under bubblewrap (never without it); and its home."""
    os.chmod(scratch, 0o777)
    return (bubblewrap_command(scratch) + [sys.executable, "-I", "-c", BOOTSTRAP, "--zygote", str(control_fd), *modules],
            SANDBOX_HOME)


def apply_limits(limits):
    """In the child, before it runs anything: resource limits of the whole student process tree."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
