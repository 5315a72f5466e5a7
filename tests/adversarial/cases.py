"""The adversarial corpus: submissions that cheat, crash, flood, hang or attack the grader.

Each case names the guarantee it checks, how its notebook is made and the points it must get
(never more than it earned). Code may use {repo}, {submissions}, {out}, {marker} and {port}:
the test fills them in. Base "reference" is a correct notebook; "stubs" the untouched one.
"""
from dataclasses import dataclass, field


def _cgroups_here():
    """Whether the grader gives each student a cgroup here (its pids limit refuses a fork flood)."""
    from autograder.sandbox import cgroups
    return cgroups.why_not() is None


@dataclass
class Case:
    guarantee: str
    base: str = "stubs"               # "reference" or "stubs"
    cell: str = ""                    # a code cell added at the end (or at "position")
    position: str = "end"             # "end" or "start" (right after the imports)
    solutions: dict = field(default_factory=dict)   # exercise -> solution cell source
    expected: float = 0.0             # total points it must get
    files: dict = field(default_factory=dict)       # extra files beside the notebook
    edit: str = ""                    # a named edit of the notebook itself (see the test)
    folder: str = "01-weights"        # the assignment folder's name


ALL_FUNCTIONS = ["softmax", "hardmax", "weighted_average", "entropy", "effective_count"]
SIGNATURES = {"softmax": "scores, axis=-1, temperature=1.0", "hardmax": "scores, axis=-1",
              "weighted_average": "items, weights", "entropy": "weights, axis=-1",
              "effective_count": "weights, axis=-1"}


def every_function(body):
    """The same (cheating) body for every exercise's function."""
    return {name: f"def {name}({SIGNATURES[name]}):\n" + "\n".join("    " + line for line in body.strip().splitlines())
            for name in ALL_FUNCTIONS}


LIAR = """
class Liar:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __float__(self): return 1.0
    def __len__(self): return 1
"""

HUGE = "Huge"
ANSI = "\x1b]0;pwned\x07\x1b[2J\x1b[31mthe terminal is mine\r\t"   # retitle, clear, colour
HUGE_EXCEPTION = f"{HUGE} = type('E' * 16_000_000, (Exception,), {{{{}}}})\nraise {HUGE}({ANSI!r})"

CASES = {
    # -- fooling the comparison ------------------------------------------------------------
    "eq-always-true": Case("an object whose __eq__ is always True earns nothing",
                           cell=LIAR, position="start", solutions=every_function("return Liar()")),
    "ndarray-subclass-lies": Case("an ndarray subclass with lying comparisons arrives as plain numbers",
                                  cell="class Lying(np.ndarray):\n    def __eq__(self, o): return np.ones(self.shape, bool)\n"
                                       "np.allclose = lambda *a, **k: True\nnp.isclose = lambda a, b, **k: np.ones(np.shape(a), bool)",
                                  position="start",
                                  solutions=every_function("return np.zeros(3).view(Lying)")),
    "array-protocol-object": Case("an object with __array__ is refused, not converted",
                                  cell="class Fake:\n    def __array__(self, dtype=None, copy=None): return np.zeros(3)",
                                  position="start", solutions=every_function("return Fake()")),
    "patched-numpy-comparisons": Case("monkeypatched np.allclose / np.isclose / assert_allclose fool only the student's process",
                                      cell="np.allclose = lambda *a, **k: True\nnp.isclose = lambda a, b, *r, **k: np.ones(np.broadcast(a, b).shape, bool)\n"
                                           "np.testing.assert_allclose = lambda *a, **k: None\nnp.all = lambda *a, **k: True",
                                      position="start", solutions=every_function("return np.zeros(1)")),
    "patched-builtins": Case("patched builtins in the student's process do not reach the grader",
                             cell="import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.type = lambda *a: float\n"
                                  "builtins.AssertionError = type('Quiet', (Exception,), {{}})",
                             position="start", solutions=every_function("return 0.0")),
    "patched-torch-comparisons": Case("monkeypatched torch.allclose / torch.equal fool nothing",
                                      cell="import torch\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
                                           "torch.testing.assert_close = lambda *a, **k: None",
                                      position="start", solutions=every_function("import torch\nreturn torch.zeros(1)")),
    "pickled-return": Case("a pickled object or bytes in a result is refused",
                           solutions=every_function("import pickle\nreturn pickle.dumps(np.zeros(3))")),
    # -- stopping or hanging the grader ----------------------------------------------------------
    "sys-exit-in-cell": Case("sys.exit() in a cell stops that cell only", base="reference",
                             cell="import sys\nsys.exit(0)", position="start", expected=12),
    "os-exit-in-cell": Case("os._exit() ends the student's process, not the run", base="reference",
                            cell="import os\nos._exit(0)", expected=0),
    "infinite-loop": Case("an endless loop in a cell is stopped and the rest is graded", base="reference",
                          cell="while True:\n    pass", expected=12),
    "loop-ignoring-signals": Case("a loop that ignores SIGALRM, SIGINT and SIGTERM is killed at the deadline",
                                  base="reference",
                                  cell="import signal\nfor s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM):\n"
                                       "    signal.signal(s, signal.SIG_IGN)\nsignal.setitimer = lambda *a: None\nwhile True:\n    pass",
                                  expected=0),
    "memory-bomb": Case("a memory bomb hits the memory limit; the rest is graded", base="reference",
                        cell="hoard = []\nwhile True:\n    hoard.append(bytearray(50 * 2**20))", expected=12),
    "many-children": Case("child processes die with the student's process", base="reference",
                          cell="import subprocess\nkids = [subprocess.Popen(['sh', '-c', 'sleep 600; : {marker}']) for _ in range(40)]",
                          expected=12),
    # Stopped at the limit either way: where the student has a cgroup, the kernel refuses the fork
    # past it (the cell raises; the notebook's correct work keeps its points); elsewhere the grader's
    # watcher sees the flood and kills the whole sandbox (the notebook gets 0).
    "process-flood": Case("a flood of processes is stopped at the process limit", base="reference",
                          cell="import subprocess\nkids = [subprocess.Popen(['sh', '-c', 'sleep 600; : {marker}']) for _ in range(300)]",
                          expected=12 if _cgroups_here() else 0),
    "output-flood": Case("a flood of output is drained and cut, grading goes on", base="reference",
                         cell="import sys\nline = 'x' * 1000 + '\\n'\nfor _ in range(50_000):\n    sys.stdout.write(line)",
                         expected=12),
    "background-writer": Case("a background process that outlives its cell cannot write anywhere that matters",
                              base="reference",
                              cell="import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 2; echo pwned > {out}/pwned; "
                                   "echo pwned >> {submissions}/honest-reference/01-weights/01-weights.ipynb; sleep 600; : {marker}'],"
                                   " start_new_session=True)",
                              expected=12),
    "kill-the-grader": Case("killing its parent, its group or every process reaches only the sandbox",
                            cell="import os, signal\nfor pid in (os.getppid(), 1, -1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
                                 "    except Exception:\n        pass\nos.killpg(0, signal.SIGKILL)",
                            expected=0),
    "forged-replies": Case("garbage written to the grader's channel costs the cheater, not the run",
                           cell="import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\xff' * 64)\n    except OSError:\n        pass",
                           expected=0),
    "patched-exec": Case("patching exec or compile in the student's process switches off no check: the graded "
                         "cells run nothing there",
                         cell="import builtins\n_exec, _compile = builtins.exec, builtins.compile\n"
                              "builtins.exec = lambda code, *a, **k: None\nbuiltins.compile = lambda *a, **k: _compile('pass', '<x>', 'exec')",
                         position="start", solutions=every_function("return np.zeros(3)"), expected=0),
    "fill-memory-folders": Case("filling the in-memory folders (/dev/shm) kills the student, not the grader",
                                base="reference",
                                cell="import os\nfor i in range(40):\n    open(f'/dev/shm/fill{{i}}', 'wb').write(b'x' * 50_000_000)",
                                expected=0),
    "thread-flood": Case("threads count as processes: a thread flood is stopped at the limit (as process-flood)",
                         base="reference",
                         cell="import threading, time\nthreading.stack_size(64 * 1024)\nfor _ in range(2000):\n"
                              "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()",
                         expected=12 if _cgroups_here() else 0),
    "huge-return-value": Case("a huge return value is refused, read and dropped: it costs its own exercise",
                              base="reference", solutions={"softmax": "def softmax(scores, axis=-1, temperature=1.0):\n"
                                                           "    return np.zeros(20_000_000)"},
                              expected=8),
    "setuid-copy": Case("a setuid copy of a program made in the sandbox is never on the host", base="reference",
                        cell="import os, shutil\nfor d in ('.', '/tmp', '/dev/shm'):\n"
                             "    shutil.copy('/usr/bin/env', f'{{d}}/env-{marker}')\n    os.chmod(f'{{d}}/env-{marker}', 0o4755)",
                        expected=12),
    # -- reading and writing what it must not -----------------------------------------------------
    "read-reference-solutions": Case("the reference solutions are not visible to the student's code",
                                     cell="import json\nnb = json.load(open('{repo}/solutions/01-weights/01-weights.ipynb'))\n"
                                          "for c in nb['cells']:\n    if c['metadata'].get('nbgrader', {{}}).get('solution'):\n"
                                          "        exec(''.join(c['source']))",
                                     expected=0),
    "read-hidden-tests": Case("the checks (hidden tests) are not visible to the student's code",
                              cell="source = open('{repo}/autograder/checks/ch01_weights.py').read()", expected=0),
    "write-fake-grades": Case("the grader's output folder is not visible: a fake grades.csv or journal is no use",
                              cell="import os\nos.makedirs('{out}/.journal/write-fake-grades', exist_ok=True)\n"
                                   "open('{out}/grades.csv', 'w').write('student,assignment,exercise,score,max_score\\n')\n"
                                   "open('{out}/.journal/write-fake-grades/01-weights.json', 'w').write('{{}}')\n"
                                   "open('grades.csv', 'w').write('write-fake-grades,01-weights,softmax,4,4\\n')",
                              expected=0),
    "delete-other-submissions": Case("other students' submissions can be neither deleted nor rewritten",
                                     cell="import shutil, glob\nshutil.rmtree('{submissions}')\n"
                                          "for p in glob.glob('{submissions}/**/*.ipynb', recursive=True) + glob.glob('/work/**/*.ipynb', recursive=True):\n"
                                          "    open(p, 'w').write('{{}}')",
                                     expected=0),
    "poison-the-venv": Case("Python and its packages are read-only: nothing poisons later notebooks",
                            base="reference",
                            cell="import numpy, os\ntry:\n    open(os.path.join(os.path.dirname(numpy.__file__), '__init__.py'), 'a').write('raise SystemExit')\n"
                                 "except OSError:\n    pass",
                            expected=12),
    "network-connection": Case("no network: a connection to the grader's machine is refused", base="reference",
                               cell="import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'{marker}')\n"
                                    "except OSError:\n    pass",
                               expected=12),
    "conftest-beside-notebook": Case("a conftest.py beside the notebook is never run",
                                     files={"conftest.py": "import os\nos._exit(0)\n"
                                                           "def pytest_runtest_makereport(item, call):\n    pass\n"},
                                     expected=0),
    "numpy-shadow-beside-notebook": Case("a numpy.py beside the notebook shadows nothing", base="reference",
                                         files={"numpy.py": "raise SystemExit('shadowed')\n"}, expected=12),
    # -- honest mistakes in the notebook itself -----------------------------------------------------
    "renamed-function": Case("a renamed function costs its exercise only", base="reference",
                             edit="rename-softmax", expected=8),
    "deleted-test-cells": Case("deleted test cells are restored from the source", base="reference",
                               edit="delete-tests", expected=12),
    "edited-points": Case("points edited in the notebook's metadata are ignored", base="reference",
                          edit="points-100", expected=12),
    "duplicate-cell-ids": Case("duplicated cell ids do not stop grading", base="reference",
                               edit="duplicate-ids", expected=12),
    "input-call": Case("input() fails its cell with a message; the rest is graded", base="reference",
                       cell="name = input('your name? ')", position="start", expected=12),
    "syntax-error-cell": Case("a syntax error costs only that cell", base="reference",
                              cell="def broken(:\n    pass", position="start", expected=12),
    "nbformat-3": Case("an old notebook format is converted", base="reference", edit="nbformat-3", expected=12),
    "invalid-json": Case("invalid JSON gets rows and a message", base="reference", edit="truncate", expected=0),
    "wrong-folder-name": Case("a misnamed assignment folder is graded as its assignment", base="reference",
                              folder="01_weights", expected=12),
    "missing-notebook": Case("a missing notebook gets rows and a message", base="reference",
                             edit="rename-file", expected=0),
    "extra-notebook": Case("an extra notebook is ignored", base="reference",
                           files={"scratch.ipynb": "{{}}"}, expected=12),
    # -- what the instructor opens (the key is the student's folder name) -----------------------
    "huge-exception-name": Case("an exception class with a 16 MB name and a message with terminal escapes is kept "
                                "bounded and shown inert",
                                cell=HUGE_EXCEPTION, position="start", solutions=every_function(f"raise {HUGE}({ANSI!r})")),
    '=HYPERLINK("evil.example","click")': Case("a folder name that is a formula is inert in every CSV",
                                                base="reference", expected=12),
    "@SUM(1+1)": Case("a folder name that is an @-formula is inert in every CSV", base="reference", expected=12),
    "+1": Case("a folder name that is a number stays that number", base="reference", expected=12),
    "-1": Case("a folder name that is a negative number stays that number", base="reference", expected=12),
    "\x1b]0;pwned\x07\x1b[2J\tescape": Case("a folder name with terminal escapes never reaches a terminal or a CSV raw",
                                             base="reference", expected=12),
}
