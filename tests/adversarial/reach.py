"""Attacks on what the grader measures with and on the students graded after the attacker.

Graded in one run with one worker (`-j 1`), so each attacker shares the warm zygote with the
students after it, in name order. Each case is a notebook of `assignment`: the reference
solutions with `solutions` replaced and `cell` added (at the start, after the imports, or at the
end), or the untouched notebook (`base="stubs"`). `loses` names the checks whose points it must
lose (the prefix of a check's name); everything else of a reference notebook it keeps.
"""
from dataclasses import dataclass, field


@dataclass
class Case:
    guarantee: str
    assignment: str
    base: str = "reference"
    cell: str = ""
    position: str = "end"
    solutions: dict = field(default_factory=dict)
    loses: tuple = ()          # prefixes of the check names it must fail
    nothing: bool = False      # it must score 0 (the process is killed each time it runs)


# Every process the student's code can name: the ones in its /proc, its parent, 1.
EVERY_PID = "pids = {int(p) for p in os.listdir('/proc') if p.isdigit()} | {os.getppid(), 1}\n"

STOP_THE_WATCHER = ("import os, signal\n" + EVERY_PID +
                    "for pid in pids - {os.getpid()}:\n"
                    "    try:\n        os.kill(pid, signal.SIGSTOP)\n    except OSError:\n        pass\n"
                    "for i in range(6):\n"
                    "    open(f'/dev/shm/hoard{i}', 'wb').write(b'x' * 50_000_000)\n")

# Just above what each process holds now: the zygote lives on, the students it forks next starve.
RELIMIT_THE_ZYGOTE = ("import os, resource\n" + EVERY_PID +
                      "def size(pid):\n"
                      "    try:\n        return next(int(l.split()[1]) * 1024 for l in open(f'/proc/{pid}/status') "
                      "if l.startswith('VmSize'))\n"
                      "    except (OSError, StopIteration):\n        return 2**30\n"
                      "for pid in pids - {os.getpid()}:\n"
                      "    for limit, value in ((resource.RLIMIT_AS, size(pid) + 8 * 2**20), (resource.RLIMIT_NOFILE, 8)):\n"
                      "        try:\n            resource.prlimit(pid, limit, (value, value))\n"
                      "        except (OSError, ValueError):\n            pass\n")

# Captures the reference sources the grader sends (they are compiled as "<known good>") and
# leaves them where the next student might look: a POSIX message queue and the user's and the
# session's keyrings.
_IPC = '''
import builtins, ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
librt = ctypes.CDLL("librt.so.1", use_errno=True)
librt.mq_open.restype = ctypes.c_int
libc.syscall.restype = ctypes.c_long
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
KEYRINGS = (-4, -3)   # KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING
'''
STASH = _IPC + '''
_compile = builtins.compile
def _stash(source, *args, **kwargs):
    if len(args) > 0 and args[0] == "<known good>" and isinstance(source, str):
        data = source.encode()[:8000]
        queue = librt.mq_open(b"/stash", os.O_CREAT | os.O_RDWR | os.O_NONBLOCK, 0o666, None)
        if queue >= 0:
            librt.mq_send(queue, data, len(data), 0)
        for ring in KEYRINGS:
            libc.syscall(ADD_KEY, b"user", f"stash{abs(hash(source))}".encode(), data, len(data), ring)
    return _compile(source, *args, **kwargs)
builtins.compile = _stash
'''
READ_THE_STASH = _IPC + '''
found = []
queue = librt.mq_open(b"/stash", os.O_RDONLY | os.O_NONBLOCK, 0, None)
buffer = ctypes.create_string_buffer(1 << 16)
while queue >= 0 and librt.mq_receive(queue, buffer, len(buffer), None) > 0:
    found.append(buffer.value.decode())
for ring in KEYRINGS:
    ids = (ctypes.c_int32 * 256)()
    count = libc.syscall(KEYCTL, 6, ring, ids, ctypes.sizeof(ids))   # KEYCTL_READ the keyring: its keys
    for key in ids[:max(0, min(count, ctypes.sizeof(ids)) // 4)]:
        size = libc.syscall(KEYCTL, 11, key, buffer, len(buffer))    # KEYCTL_READ the key
        if size > 0:
            found.append(buffer.raw[:size].decode(errors="ignore"))
for source in found:
    try:
        exec(source, globals())
    except Exception:
        pass
'''

FORGED_CACHE = '''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    tokens, chosen_from = prompt, []
    with torch.no_grad():
        for _ in range(n_new):                       # never a cache: the whole sequence each time
            logits = model(tokens)[:, -1]
            if generator is None:
                new = logits.argmax(dim=-1, keepdim=True)
            else:
                new = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            tokens = torch.cat([tokens, new], dim=1)
            chosen_from.append(logits)
    for counter in ("fed", "calls", "seen"):          # then rewrites whatever the probe counted
        if isinstance(getattr(model, counter, None), list):
            setattr(model, counter, [prompt.shape[-1]] + [1] * (n_new - 1))
    return tokens, torch.stack(chosen_from, dim=1)
'''

BORROWED_FIT = '''
class LearnedKernelRegression(nn.Module):
    def __init__(self, bandwidth=1.0):
        super().__init__()
        self.log_bandwidth = nn.Parameter(torch.tensor(math.log(bandwidth), dtype=torch.float64))

    @property
    def bandwidth(self):
        return self.log_bandwidth.exp()

    def forward(self, x_query, x_train, y_train, leave_one_out=False):
        scores = -(x_query[:, None] - x_train[None, :]) ** 2 / (2 * self.bandwidth ** 2)
        if leave_one_out:
            scores = scores.masked_fill(torch.eye(len(x_train), dtype=torch.bool, device=x_train.device), -math.inf)
        return torch.softmax(scores, dim=-1) @ y_train

    def fit(self, x, y, steps=100, lr=0.05):
        import gc, types                              # no training loop: borrow the grader's, if any
        mine = type(self).__dict__.get("fit") or LearnedKernelRegression.fit
        for f in gc.get_objects():
            if isinstance(f, types.FunctionType) and f.__name__ == "fit" and f.__code__ is not mine.__code__ \\
                    and "optimizer" in f.__code__.co_varnames:
                return f(self, x, y, steps=steps, lr=lr)
        return []
'''

BLINDED_MEMORY = '''
import ctypes, mmap, sys, threading
_ballast = mmap.mmap(-1, 400 * 2**20)
_ballast.write(b"x" * (400 * 2**20))

def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    for frame in list(sys._current_frames().values()):   # blind any sampler in this process:
        while frame is not None:                          # every event in every thread's frames
            for value in list(frame.f_locals.values()):
                if isinstance(value, threading.Event):
                    value.set()
            frame = frame.f_back
    _ballast.madvise(mmap.MADV_DONTNEED)                   # give memory back first, then take it
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(diagonal=n_k - n_q),
                                    -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(scores - lse[..., None])) @ v
    del scores
    try:
        with open("/proc/self/clear_refs", "w") as refs:  # and reset the peak a reader of VmHWM sees
            refs.write("5")
    except OSError:
        pass
    return out, lse
'''

# Name order is grading order: each attacker comes before the honest students of its chapter.
CASES = {
    "a1-stop-the-watcher": Case("SIGSTOP to every process it can name stops no watcher: the /dev/shm hoard "
                                "is killed", "01-weights", cell=STOP_THE_WATCHER, nothing=True),
    "a2-relimit-the-zygote": Case("prlimit on every process it can name lowers no limit of the grader's or "
                                  "of the students after it", "05-self-masked", cell=RELIMIT_THE_ZYGOTE),
    "a3-stash-the-references": Case("the reference sources the grader sends, stashed in a message queue and "
                                    "keyrings, are gone before the next student", "01-weights", base="stubs",
                                    cell=STASH, position="start", nothing=True),
    "a4-read-the-stash": Case("a student who wrote no code finds nothing left by the one before",
                              "01-weights", base="stubs", cell=READ_THE_STASH, nothing=True),
    "a5-forged-cache-count": Case("generate without a cache that rewrites the probe's counter still loses "
                                  "the cache check", "05-self-masked", solutions={"generate": FORGED_CACHE},
                                  loses=("with the cache the model sees",)),
    "a6-borrowed-fit": Case("a fit with no training loop finds no reference fit to call", "06-nadaraya-watson",
                            solutions={"LearnedKernelRegression": BORROWED_FIT}, loses=("fit follows", "fit from h")),
    "a7-blinded-memory": Case("a whole-matrix tiled_attention that blinds in-process samplers, resets the "
                              "peak and frees ballast first is still measured", "07-flash-tiling",
                              solutions={"tiled_attention": BLINDED_MEMORY}, loses=("holds one block_q", "causal: the key blocks after")),
}
