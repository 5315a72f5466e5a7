"""The student's side of the sandbox: run the notebook's code, then answer the grader's calls.

Started through `start` (alone, or in a zygote's child). It speaks only
the safe wire format; it never sees the checks, nor a line of a reference solution: where a later
exercise calls an earlier one, it calls a stand-in the grader answers (`standins.py`).
"""
import builtins
import contextlib
import signal
import sys

from ..wire import read_frame, write_frame
from .calls import CallError, StudentNamespace, describe_exception


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


def alarm(signum, frame):
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

    questions = iter(range(1, 2**62))

    def ask_grader(name, *args):
        """A question to the grader in the middle of a call (a probe's model whose forward the
        grader computes and counts on its side): its answer, or the grader's refusal raised. The
        call's alarm waits while the frames travel (a frame cut in two would put the channel out of
        step); a late answer to an earlier question is dropped."""
        question = next(questions)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            write_frame(channel_out, {"callback": name, "args": list(args), "q": question})
            answer = read_frame(channel_in)
            while not (isinstance(answer, dict) and answer.get("q") == question):
                answer = read_frame(channel_in)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["value"]

    calls = StudentNamespace(namespace, ask_grader)
    request = read_frame(channel_in)
    write_frame(channel_out, {"cells": run_cells(request["cells"], namespace, request["cell_seconds"])})
    while True:
        try:
            request = read_frame(channel_in)
        except EOFError:
            return
        if not (isinstance(request, dict) and "op" in request):
            continue  # an answer to a question whose call has ended: dropped
        try:
            call_seconds = request.get("seconds", 20.0)
            with time_limit(call_seconds):
                if request["op"] == "call":
                    reply = {"value": calls.call(request["target"], request["args"], request["kwargs"],
                                                 method=request["method"], keep=request["keep"],
                                                 device=request.get("device"), forbid=request.get("forbid"))}
                elif request["op"] == "known_good":
                    calls.use_known_good(request["spec"], request["probes"])
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
        reply["id"] = request.get("id")
        try:
            write_frame(channel_out, reply)
        except Exception as error:  # a result that cannot travel
            write_frame(channel_out, {"error": f"the result cannot be sent back: {error}", "id": request.get("id")})


def preload(modules):
    """Import what the assignment's notebooks import, once, before any student's code."""
    import importlib
    import os
    if any(name.split(".")[0] == "triton" for name in modules):
        # Triton decides at import whether its library runs interpreted; grading runs it so, on the CPU
        os.environ["TRITON_INTERPRET"] = "1"
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (the notebook will say so itself)
            pass
    if "torch" in modules:
        warm_meta_device()
    _fixed_mmap_threshold()


def _fixed_mmap_threshold():
    """Every allocation of 1 MB or more mapped fresh and given back when freed (glibc otherwise
    raises the threshold after the first large free and serves the next call from memory it kept):
    memory a call takes then shows in the watcher's measure on every call, not only the first."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").mallopt(-3, 2**20)  # M_MMAP_THRESHOLD: fixed at 1 MB, no dynamic raise
    except (OSError, AttributeError):  # not glibc: the measure is as it was
        pass


def warm_meta_device():
    """The first call on the `meta` device (the device checks) costs 0.9 s of PyTorch's own set-up;
    paid here, once, a forked student's process (or reference worker) starts with it done."""
    try:
        import torch
        from .calls import one_device
        with torch.no_grad(), one_device():
            x = torch.empty(2, 3, 4, device="meta")
            torch.where(torch.softmax(x @ x.transpose(-1, -2), dim=-1) > 0, x @ x.transpose(-1, -2), 0.0)
    except Exception:  # noqa: BLE001 (an optimisation only)
        pass
