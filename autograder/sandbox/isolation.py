"""How the student's process is walled off: bubblewrap where it runs, resource limits always.

Under bubblewrap the student's process has no network, its own PID and IPC namespaces (nothing
it starts outlives it), a read-only root, system and Python, in-memory folders as its only
writable places (its home, /tmp, /dev/shm: nothing it writes is reachable from the host), and no
view of the repository (solutions, checks), the submissions or the grader's output. It sees only
the few grader modules it needs: `wire` and `sandbox`. When the grader runs as root, the
student's processes run as the host's `nobody` wherever the kernel lets `nobody` make
namespaces (`drops_identity`); what `nobody` cannot reach is bound for it onto relay folders.

Where the kernel refuses namespaces (a container's default seccomp profile, as on Gradescope), the
student's process is a plain process with the resource limits and the seccomp filter; run by root,
it runs as `student_identity()` (the Gradescope zip's user `autograder-student`, or a throwaway user
that `gradescope-try --no-namespaces` makes for one run, else nobody) and
imports the same few grader modules from a copy that identity may read (`staged_modules`), never
from the repository or the zip's source, which the Gradescope route makes unreadable to it.
"""
import atexit
import ctypes
import functools
import os
import pwd
import re
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from . import SANDBOX_HOME, seccomp

STAGED_MODULES = ["__init__.py", "wire.py", "sandbox/__init__.py", "sandbox/calls.py", "sandbox/procfs.py",
                  "sandbox/worker.py", "sandbox/zygote.py", "sandbox/start.py", "sandbox/walls.py", "sandbox/standins.py",
                  "sandbox/probes.py", "sandbox/seccomp.py", "sandbox/emulated.py"]
STAGE_MOUNT = "/grader"
NOBODY = 65534  # the host identity of student code when the grader is root
# Files open at once in one student's process. The kernel's buffers behind them lie outside
# RLIMIT_AS: with sockets refused and a pipe kept at 64 KiB (`seccomp`), at most 64 KiB each.
# A process of the course needs a few (6 after importing numpy, torch and matplotlib; 20 with a
# multiprocessing Pool of 4 workers)
OPEN_FILES = 64
STUDENT_USER = "autograder-student"  # made by the Gradescope zip's setup.sh: the student's identity without namespaces
# Names a user of its own for the student's code, made by whoever runs the grader for this run alone:
# `gradescope-try --no-namespaces` makes a throwaway user (`processes.ThrowawayUser`) and sets it
STUDENT_USER_ENV = "AUTOGRADER_STUDENT_USER"
NOT_ISOLATED = ("bubblewrap (bwrap) is not available here: student code runs WITHOUT isolation, "
                "with resource limits only. Install the Debian package `bubblewrap` to isolate it.")


@functools.cache
def _read_only_paths():
    """[(path on the host, path in the sandbox)], bound read-only: the system, Python, and of the
    grader only the modules the student's side imports."""
    paths = [("/usr", "/usr")]
    paths += [(f"/{n}", f"/{n}") for n in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
              if os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}")]
    paths += [(p, p) for p in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/ssl/certs")
              if os.path.exists(p)]
    paths += [(p, p) for p in sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))})]
    package = Path(__file__).resolve().parent.parent
    paths += [(str(package / name), f"{STAGE_MOUNT}/autograder/{name}") for name in STAGED_MODULES]
    return paths


def _others_can_reach(path):
    """Whether a user with no rights of its own (nobody) can open `path`, by its mode bits."""
    if any(not os.stat(folder).st_mode & stat.S_IXOTH for folder in Path(path).parents):
        return False
    mode = os.stat(path).st_mode
    return bool(mode & stat.S_IROTH) and (not stat.S_ISDIR(mode) or bool(mode & stat.S_IXOTH))


@functools.cache
def _relays():
    """{host path: relay path}, for the read-only paths that nobody cannot reach (a Python
    installed under /root, mode 0700). Each relay is an empty host folder (or file) that nobody
    can reach; in the student's own mount namespace the host path is bound onto it
    (`_bind_relays`), so bubblewrap, already run as nobody, can bind it in turn."""
    hidden = [host for host, _ in _read_only_paths() if not _others_can_reach(host)]
    if not hidden:
        return {}
    remove_stale_scratch()
    folder = tempfile.mkdtemp(prefix=f"autograder-{os.getpid()}-")
    os.chmod(folder, 0o755)
    atexit.register(shutil.rmtree, folder, True)
    relays = {}
    for i, host in enumerate(hidden):
        relays[host] = os.path.join(folder, str(i))
        os.mkdir(relays[host]) if os.path.isdir(host) else open(relays[host], "x").close()
    return relays


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 0x1000, 0x4000, 0x40000


def _bind_relays():
    """In the child, still root: a mount namespace of its own, private (nothing reaches the host),
    in which each relay shows its host path."""
    def ok(result):
        if result != 0:
            raise OSError(ctypes.get_errno(), "cannot prepare the sandbox's view of the host")
    ok(_libc.unshare(CLONE_NEWNS))
    ok(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None))
    for host, relay in _relays().items():
        ok(_libc.mount(host.encode(), relay.encode(), None, MS_BIND | MS_REC, None))


@functools.cache  # once per grading process
def remove_stale_scratch():
    """Scratch and relay folders (`autograder-<pid>-...`) of grading processes that were killed."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        match = re.fullmatch(r"autograder-(\d+)-\w+", name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


@functools.cache
def _bubblewrap_sizes_tmpfs():
    """Whether this bwrap has `--size` (0.7 and later): a kernel bound on each in-memory folder."""
    try:
        return "--size" in subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def bubblewrap_command(as_nobody=False, scratch_bytes=None, seccomp_fd=None):
    """bwrap's arguments up to `--`. The writable places are in-memory folders of the sandbox's own,
    the rest is read-only; the zygote empties them between students. /tmp comes first: the binds
    may lie under /tmp (a venv in a clone there). Run as nobody, bwrap binds what nobody cannot
    reach from its relay. With `scratch_bytes`, the kernel bounds each in-memory folder to a quarter
    more (where bwrap can): the watcher, which kills past `scratch_bytes` in all of them together
    and says so, still sees a full folder; with `seccomp_fd`, bwrap loads that filter (`seccomp`)."""
    relays = _relays() if as_nobody else {}
    size = (["--size", str(scratch_bytes + scratch_bytes // 4)] if scratch_bytes and _bubblewrap_sizes_tmpfs()
            else [])
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "sandbox", *size, "--tmpfs", "/tmp"]
    args += [a for n in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") if os.path.islink(f"/{n}")
             for a in ("--symlink", os.readlink(f"/{n}"), f"/{n}")]
    args += [a for host, inside in _read_only_paths() for a in ("--ro-bind", relays.get(host, host), inside)]
    seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    return args + [*size, "--tmpfs", SANDBOX_HOME, "--chdir", SANDBOX_HOME, "--proc", "/proc",
                   "--dev", "/dev", *size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--remount-ro", "/",
                   *seccomp, "--"]


def _become_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@functools.cache
def student_identity():
    """(uid, gid, name): who the student's processes are without namespaces when the grader is root:
    the user named by STUDENT_USER_ENV where it is set (gradescope-try's throwaway user; never root
    or nobody: an error otherwise), else the user STUDENT_USER where it exists (the Gradescope zip's
    setup.sh makes it: no other process of the container is it), else nobody."""
    chosen = os.environ.get(STUDENT_USER_ENV)
    if chosen:
        try:
            entry = pwd.getpwnam(chosen)
        except KeyError:
            raise RuntimeError(f"{STUDENT_USER_ENV}={chosen}: there is no such user") from None
        if entry.pw_uid in (0, NOBODY) or entry.pw_gid == 0:
            raise RuntimeError(f"{STUDENT_USER_ENV}={chosen}: the student's user must be one of its own, "
                               "not root nor nobody")
        return entry.pw_uid, entry.pw_gid, chosen
    try:
        entry = pwd.getpwnam(STUDENT_USER)
        return entry.pw_uid, entry.pw_gid, STUDENT_USER
    except KeyError:
        return NOBODY, NOBODY, "nobody"


def own_student_user():
    """Whether `student_identity()` is a user of the student's alone, so that the kernel counts its
    tasks (RLIMIT_NPROC) and the grader may kill every process of it (`processes.end_identity`);
    not nobody, which other processes of the machine may be (bubblewrap's students, daemons)."""
    return student_identity()[2] != "nobody"


def _become_student():
    uid, gid, _ = student_identity()
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


@functools.cache
def staged_modules():
    """A folder holding a copy of the grader modules the student's side imports (STAGED_MODULES, as
    bubblewrap binds them at STAGE_MOUNT), owned by the grader, readable by everyone and writable
    by no one else: without bubblewrap the student's process imports them from there."""
    remove_stale_scratch()
    folder = tempfile.mkdtemp(prefix=f"autograder-{os.getpid()}-")
    atexit.register(shutil.rmtree, folder, True)
    package = Path(__file__).resolve().parent.parent
    for name in STAGED_MODULES:
        target = Path(folder, "autograder", name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / name, target)
        os.chmod(target, 0o644)
    for path in (Path(folder), Path(folder, "autograder"), Path(folder, "autograder", "sandbox")):
        os.chmod(path, 0o755)
    return folder


def _relay_as_nobody():
    _bind_relays()
    _become_nobody()


@functools.cache
def _bubblewrap_runs(as_nobody):
    try:
        probe = subprocess.run(bubblewrap_command(as_nobody) + [sys.executable, "-I", "-c", "pass"], capture_output=True,
                               timeout=30, cwd="/", preexec_fn=_relay_as_nobody if as_nobody else None)
        return probe.returncode == 0
    except (OSError, subprocess.SubprocessError):  # a container refusing unshare fails the preexec_fn: no namespaces
        return False


@functools.cache
def bubblewrap_works():
    """Whether bwrap is installed and can make its namespaces on this machine."""
    if os.environ.get("AUTOGRADER_SANDBOX") == "none" or shutil.which("bwrap") is None:
        return False
    return _bubblewrap_runs(as_nobody=os.geteuid() == 0) or (os.geteuid() == 0 and _bubblewrap_runs(as_nobody=False))


def drops_identity():
    """Whether the student's processes leave the grader's identity, root, for the host's nobody.
    Under bubblewrap they do unless it works only as root (a kernel without unprivileged user
    namespaces): then the sandbox's nobody is the host's root, which owns only what the sandbox's
    in-memory folders hold. Without bubblewrap they do, as `student_identity()`, if it can run this
    Python and import the staged modules."""
    return os.geteuid() == 0 and _nobody_runs(bubblewrap_works())


@functools.cache
def _nobody_runs(under_bubblewrap):
    if under_bubblewrap:
        return _bubblewrap_runs(as_nobody=True)
    probe = f"import sys; sys.path.insert(0, {staged_modules()!r}); import autograder.sandbox.start"
    try:
        return subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True,
                              timeout=60, cwd="/", preexec_fn=_become_student).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _bootstrap(stage):
    return f"import sys; sys.path.insert(0, {stage!r}); from autograder.sandbox.start import main; main(sys.argv)"


BOOTSTRAP = _bootstrap(STAGE_MOUNT)


def worker_command(scratch, in_fd, out_fd, modules, scratch_bytes=None, seccomp_fd=None):
    """The command that starts one student's process, isolated if it can be; and its home.
    Without bubblewrap `seccomp_fd` is not used: `apply_limits` loads the filter itself."""
    drops_identity()  # decided here, in the grader, not in the child about to exec
    if bubblewrap_works():
        return (bubblewrap_command(drops_identity(), scratch_bytes, seccomp_fd) + [sys.executable, "-I", "-c", BOOTSTRAP, str(in_fd), str(out_fd), *modules],
                SANDBOX_HOME)
    os.chmod(scratch, 0o777)  # the student's process (student_identity(), if the grader is root) writes there
    return [sys.executable, "-I", "-c", _bootstrap(staged_modules()), str(in_fd), str(out_fd), *modules], scratch


def zygote_command(control_fd, modules, scratch_bytes=None, seccomp_fd=None):
    """The command that starts a zygote under bubblewrap (never without it); and its home."""
    drops_identity()
    return (bubblewrap_command(drops_identity(), scratch_bytes, seccomp_fd) + [sys.executable, "-I", "-c", BOOTSTRAP, "--zygote", str(control_fd), *modules],
            SANDBOX_HOME)


def apply_limits(limits, cgroup=None, load_seccomp=False):
    """In the child, before it runs anything: resource limits of the whole student process tree;
    its cgroup, if it has one (joined while still root); the seccomp filter, if bubblewrap does
    not load it (last: it sets no-new-privileges)."""
    if cgroup is not None:
        cgroup.add(os.getpid())
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
    os.nice(10)  # the grader comes first: a student's busy processes cannot starve it
    if drops_identity():
        if bubblewrap_works():
            _relay_as_nobody()
        else:
            if own_student_user():  # the kernel counts its tasks too
                resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            _become_student()
    if load_seccomp and not seccomp.install():
        os._exit(121)  # the filter was promised and cannot be loaded: run nothing


NO_WALLS = ("this kernel does not let each student have namespaces of its own inside the sandbox: students "
            "share the sandbox's, and a student's code can signal or re-limit the grader's zygote there")


@functools.cache
def student_walls_work():
    """Whether the zygote's children can be walled off from each other and from it (`walls`)."""
    if not bubblewrap_works():
        return False
    probe = BOOTSTRAP.replace("from autograder.sandbox.start import main; main(sys.argv)",
                              "from autograder.sandbox.walls import walls_work; sys.exit(0 if walls_work() else 1)")
    try:
        return subprocess.run(bubblewrap_command(drops_identity()) + [sys.executable, "-I", "-c", probe],
                              capture_output=True, timeout=60, cwd="/",
                              preexec_fn=_relay_as_nobody if drops_identity() else None).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


NO_MEMORY_BOUND = ("neither a cgroup nor a seccomp filter can be set up here: memory that no resource limit "
                   "counts (memfd, System V shared memory) is bounded only by the sampling watcher, not by the kernel")


@functools.cache
def memory_guards():
    """(cgroups, seccomp): how the kernel bounds a student's memory here, beyond RLIMIT_AS. A cgroup
    per student process tree where the grader may make one (`cgroups`); the seccomp filter
    (`seccomp`) wherever the kernel takes it, cgroup or not, so a notebook behaves alike
    everywhere. Neither: a warning, once per grading process."""
    from . import cgroups
    guards = (cgroups.why_not() is None, seccomp.works())
    if guards == (False, False):
        print(f"\n*** WARNING: {NO_MEMORY_BOUND} ({cgroups.why_not()}) ***\n", file=sys.stderr)
    return guards


def memory_guards_text():
    """One line for the instructor: what bounds the students' memory on this machine."""
    from . import cgroups
    use_cgroups, use_seccomp = memory_guards()
    parts = [cgroups.description() if use_cgroups else f"no cgroup ({cgroups.why_not()})",
             "seccomp filter (memfd_create, shmget, semget, msgget, sockets, larger socket and pipe buffers refused)"
             if use_seccomp else "no seccomp filter"]
    return "; ".join(parts)
