"""A cgroup per student process tree, where the grader may make one: the kernel bounds the memory
of the student's processes together, every kind of page counted (anonymous memory, tmpfs and
memfd pages, System V shared memory, page tables, pipe and socket buffers), and their number of
processes and threads. Past the memory limit the kernel refuses the allocation or kills the
student's largest process, at once; no sampling thread is involved, and nothing outside the
student's cgroup is touched (the OOM killer of a cgroup picks among its members only).

cgroup v1 (a `memory` and a `pids` hierarchy) or v2 (one hierarchy with the memory and pids
controllers), whichever the host mounts. The grader's cgroups are `<its own cgroup>/autograder-
<pid>/student-<n>`: one per student process, removed when that process has ended, all of them when
the grader exits, and those of a grader that was killed by the next one to start.

Not available (`why_not()` says why) where /sys/fs/cgroup is read-only or absent, as in a
Gradescope container or for a non-root instructor without a delegated cgroup; the sandbox then
refuses the allocations that no other limit counts (`seccomp`).
"""
import atexit
import functools
import itertools
import os
import re
import select
import signal
import threading
import time

ENV_SWITCH = "AUTOGRADER_CGROUPS"  # "off": do not use cgroups (tests of the seccomp-only sandbox)
_counter = itertools.count()


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _mounts():
    """[(mount point, filesystem type, super options)] of the cgroup file systems."""
    found = []
    try:
        for line in _read("/proc/self/mountinfo").splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[4].replace("\\040", " "), tail[0], tail[2].split(",")))
    except OSError:
        pass
    return found


def _own_paths():
    """{controller or "": this process's cgroup path in that hierarchy} ("" for v2)."""
    paths = {}
    try:
        for line in _read("/proc/self/cgroup").splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    except (OSError, ValueError):
        pass
    return paths


class _Unavailable(Exception):
    pass


@functools.cache
def _setup():
    """(version, {controller: this grader's folder}) or raises _Unavailable(why)."""
    if os.environ.get(ENV_SWITCH) == "off":
        raise _Unavailable(f"{ENV_SWITCH}=off")
    mounts, own = _mounts(), _own_paths()
    v1 = {}
    for point, kind, options in mounts:
        for controller in ("memory", "pids"):
            if kind == "cgroup" and controller in options and controller in own:
                v1[controller] = os.path.join(point, own[controller].lstrip("/"))
    if "memory" in v1:
        return 1, _make_grader_folders(v1)
    for point, kind, _ in mounts:
        if kind == "cgroup2" and "" in own:
            base = os.path.join(point, own[""].lstrip("/"))
            try:
                available = _read(os.path.join(base, "cgroup.controllers")).split()
            except OSError:
                continue
            if "memory" in available:
                return 2, _make_v2_folder(base, [c for c in ("memory", "pids") if c in available])
    raise _Unavailable("no cgroup hierarchy with the memory controller is mounted")


def _grader_name(pid=None):
    return f"autograder-{pid or os.getpid()}"


def _make_grader_folders(bases):
    folders = {}
    for controller, base in bases.items():
        _remove_stale(base)
        folder = os.path.join(base, _grader_name())
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:
            if controller == "memory":
                raise _Unavailable(f"cannot create a cgroup in {base} ({error.strerror})") from None
            continue  # processes are still counted by the watcher
        folders[controller] = folder
    _at_exit(folders)
    return folders


def _at_exit(folders):
    """Remove them when this process exits: as the grader (atexit) or as a worker of `-j N`
    (multiprocessing's workers end with os._exit, after its own finalizers, not atexit's)."""
    from multiprocessing import util
    atexit.register(_remove_all, dict(folders))
    util.Finalize(None, _remove_all, args=(dict(folders),), exitpriority=10)


def _make_v2_folder(base, controllers):
    """v2: the controllers must be enabled in this grader's cgroup and in its folder. A cgroup with
    processes of its own cannot hand them down (the "no internal processes" rule): the grader then
    moves itself into a leaf of its own cgroup first, which works where it is alone there."""
    enable = " ".join(f"+{c}" for c in controllers)
    _remove_stale(base)
    try:
        try:
            _write(os.path.join(base, "cgroup.subtree_control"), enable)
        except OSError:
            leaf = os.path.join(base, f"{_grader_name()}-grader")
            os.makedirs(leaf, exist_ok=True)
            _write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))
            _write(os.path.join(base, "cgroup.subtree_control"), enable)
        folder = os.path.join(base, _grader_name())
        os.makedirs(folder, exist_ok=True)
        _write(os.path.join(folder, "cgroup.subtree_control"), enable)
    except OSError as error:
        raise _Unavailable(f"cannot delegate the memory controller in {base} ({error.strerror})") from None
    folders = {c: folder for c in controllers}
    _at_exit(folders)
    return folders


def why_not():
    """None if per-student cgroups work here; otherwise the reason."""
    try:
        _setup()
        return None
    except _Unavailable as error:
        return str(error)


def description():
    try:
        version, folders = _setup()
    except _Unavailable as error:
        return f"no cgroups ({error})"
    return f"cgroup v{version} ({', '.join(sorted(folders))})"


class StudentCgroup:
    """One student process tree's cgroup, with its memory limit (and process limit)."""

    def __init__(self, memory_bytes, tasks):
        self.version, grader = _setup()
        self.memory_bytes = memory_bytes
        name = f"student-{next(_counter)}"
        self.folders = {c: os.path.join(f, name) for c, f in grader.items()}
        for folder in set(self.folders.values()):
            os.makedirs(folder, exist_ok=True)
        self.oom_watch = None
        try:
            self._limit(memory_bytes, tasks)
            if self.version == 1:
                self.oom_watch = _OomWatch(self)
        except OSError:
            self.remove()
            raise

    def _limit(self, memory_bytes, tasks):
        memory, pids = self.folders["memory"], self.folders.get("pids")
        if self.version == 1:
            _write(f"{memory}/memory.limit_in_bytes", str(memory_bytes))
            if os.path.exists(f"{memory}/memory.memsw.limit_in_bytes"):  # nothing of it in swap either
                _write(f"{memory}/memory.memsw.limit_in_bytes", str(memory_bytes))
        else:
            _write(f"{memory}/memory.max", str(memory_bytes))
            if os.path.exists(f"{memory}/memory.swap.max"):
                _write(f"{memory}/memory.swap.max", "0")
            if os.path.exists(f"{memory}/memory.oom.group"):  # the OOM killer kills the whole tree
                _write(f"{memory}/memory.oom.group", "1")
        if pids:
            _write(f"{pids}/pids.max", str(tasks))

    def add(self, pid):
        """Move a process (of the grader's, or one that runs nothing of the student's yet) in."""
        for folder in set(self.folders.values()):
            _write(f"{folder}/cgroup.procs", str(pid))

    def holds(self, pid):
        """Whether `pid` is in this cgroup (or gone)."""
        try:
            lines = _read(f"/proc/{pid}/cgroup").splitlines()
        except OSError:
            return True
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if ("memory" in controllers.split(",")) if self.version == 1 else controllers == "":
                folder = self.folders["memory"]
                return folder.endswith(path.rstrip("/")) and path.endswith("/" + os.path.basename(folder))
        return False

    def adopt_tree(self, pid):
        """Move `pid` and every process below it in; again until none is left outside (a process
        forked before its parent moved stays behind, one forked after is in already)."""
        self.add(pid)
        for _ in range(100):
            outside = [p for p in descendants(pid) if not self.holds(p)]
            if not outside:
                return
            for p in outside:
                try:
                    self.add(p)
                except ProcessLookupError:
                    pass
                except OSError as error:
                    if error.errno != 3:  # ESRCH: it ended meanwhile
                        raise
        raise OSError("the student's processes could not all be moved into its cgroup")

    def members(self):
        try:
            return [int(p) for p in _read(f"{self.folders['memory']}/cgroup.procs").split()]
        except OSError:
            return []

    def memory_limit_reached(self):
        """Whether the kernel killed a process of this cgroup for memory."""
        memory = self.folders["memory"]
        try:
            if self.version == 1:
                text = _read(f"{memory}/memory.oom_control")
            else:
                text = _read(f"{memory}/memory.events")
        except OSError:
            return False
        match = re.search(r"^oom_kill (\d+)$", text, re.M)
        return bool(match and int(match.group(1)))

    def peak_bytes(self):
        memory = self.folders["memory"]
        try:
            return int(_read(f"{memory}/memory.max_usage_in_bytes" if self.version == 1 else f"{memory}/memory.peak"))
        except (OSError, ValueError):
            return None

    def kill(self):
        """Every process in it, again until none is left (they may be forking)."""
        deadline = time.monotonic() + 5
        while self.members() and time.monotonic() < deadline:
            _kill_members(self.folders["memory"])
            time.sleep(0.005)

    def kill_once(self):
        """SIGKILL its processes once, waiting for nothing (Ctrl-C)."""
        _kill_members(self.folders["memory"])

    def remove(self, seconds=5.0):
        """Kill what is left in it (nothing, normally), then remove it."""
        if self.oom_watch is not None:
            self.oom_watch.stop()
        _remove_cgroup(set(self.folders.values()), seconds)


class _OomWatch(threading.Thread):
    """cgroup v1's OOM killer kills one process, the largest; the rest of the student's tree would
    go on. Told by the kernel (an eventfd on memory.oom_control: no sampling), this kills them all,
    as v2's memory.oom.group does in the kernel."""

    def __init__(self, cgroup):
        super().__init__(daemon=True)
        self.cgroup, self.stopped = cgroup, threading.Event()
        self.closing, self.closed = threading.Lock(), False
        memory = cgroup.folders["memory"]
        self.event = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.control = os.open(f"{memory}/memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _write(f"{memory}/cgroup.event_control", f"{self.event} {self.control}")
        except OSError:
            self._close()
            raise
        self.start()

    def run(self):
        try:
            while not self.stopped.is_set():
                if select.select([self.event], [], [], 0.5)[0]:
                    try:
                        os.eventfd_read(self.event)
                    except BlockingIOError:
                        continue
                    if not self.stopped.is_set() and self.cgroup.memory_limit_reached():
                        self.cgroup.kill()
                        return
        finally:
            self._close()

    def _close(self):
        with self.closing:
            self.closed = True
            for fd in (self.event, self.control):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def stop(self):
        """Stop watching at once: the eventfd wakes the thread's select (else it waits up to 0.5 s,
        a quarter of a second per notebook on average)."""
        self.stopped.set()
        with self.closing:
            if not self.closed:
                try:
                    os.eventfd_write(self.event, 1)
                except OSError:
                    pass
        if self.is_alive():
            self.join(timeout=2)


def _remove_cgroup(folders, seconds=5.0):
    deadline = time.monotonic() + seconds
    for folder in folders:
        while os.path.isdir(folder):
            try:
                os.rmdir(folder)
            except OSError:
                if time.monotonic() > deadline:
                    break
                _kill_members(folder)
                time.sleep(0.01)


def _kill_members(folder):
    try:
        members = _read(f"{folder}/cgroup.procs").split()
    except OSError:
        return
    for pid in members:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _remove_all(folders):
    """At the grader's exit: its students' cgroups, then its own folders."""
    for folder in set(folders.values()):
        try:
            children = [os.path.join(folder, n) for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n))]
        except OSError:
            continue
        _remove_cgroup(children, seconds=2.0)
        _remove_cgroup([folder], seconds=1.0)


def _remove_stale(base, keep=()):
    """The folders of graders that were killed before they could remove theirs, but those in
    `keep`; whether there was one."""
    try:
        names = os.listdir(base)
    except OSError:
        return False
    found = False
    for name in names:
        match = re.fullmatch(r"autograder-(\d+)(-grader)?", name)
        if match and _gone(match.group(1)) and os.path.join(base, name) not in keep:
            _remove_all({"": os.path.join(base, name)})
            found = True
    return found


def _gone(pid):
    """Whether the process has ended: no such process, or a zombie."""
    try:
        return _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def remove_stale_folders():
    """The folders of grading processes that are gone, with whatever still runs in them (the
    reaper's work: `lifeline`), where this process's own would be; nothing is made. Whether
    there was one."""
    if os.environ.get(ENV_SWITCH) == "off":
        return False
    own, bases = _own_paths(), set()
    for point, kind, options in _mounts():
        if kind == "cgroup":
            bases.update(os.path.join(point, own[c].lstrip("/")) for c in ("memory", "pids") if c in options and c in own)
        elif kind == "cgroup2" and "" in own:
            bases.add(os.path.join(point, own[""].lstrip("/")))
    found = False
    for base in bases:  # a v2 grader that moved itself into a leaf of its own: the folders are beside it
        base = base.rstrip("/")
        if re.fullmatch(r"autograder-\d+-grader", os.path.basename(base)):
            found = _remove_stale(os.path.dirname(base), keep={base}) or found  # this process is in it
        found = _remove_stale(base) or found
    return found


def descendants(pid):
    """The processes below `pid` (host PIDs), from /proc's parent links."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found
