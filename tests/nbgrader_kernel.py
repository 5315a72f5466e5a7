"""nbgrader's autograde, emulated: each notebook's code cells run in order in one namespace, in a fresh
process of its own (forked from one that has imported torch and the checks), as nbgrader's kernel runs
them. As there:
- the graded cells' sources are the course's (nbgrader puts their hidden tests back from its gradebook);
- an error does not stop the run (nbgrader's Execute allows errors);
- output is caught at the file descriptors, as ipykernel does, so a subprocess's stderr reaches the cell;
- each graded cell is scored from its outputs by nbgrader's own `determine_grade`.
test_grading proves it gives nbgrader's points on the notebooks it also grades with nbgrader itself.

    python tests/nbgrader_kernel.py OUT.json SUBMITTED/STUDENT/ASSIGNMENT/ASSIGNMENT.ipynb ...

writes {"STUDENT/ASSIGNMENT": {exercise: points}}; $AUTOGRADER_SEED is read by the checks, as in a kernel.
"""
import ast
import json
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path

import nbformat

NOTEBOOK_SECONDS = 900


def graded_sources(assignment):
    """{grade_id: source} of the course's graded (test) cells, hidden tests included."""
    from autograder import SOLUTIONS_DIR
    from autograder.notebook import nbgrader_meta
    course = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    return {nbgrader_meta(c)["grade_id"]: c.source for c in course.cells
            if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")}


class CellOutput:
    """The cell's stdout and stderr at the file descriptors (fd 1 and 2, and Python's sys.stdout and
    sys.stderr), read back when the cell is done."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.files = [tempfile.TemporaryFile() for _ in range(2)]
        self.saved = [os.dup(1), os.dup(2)]
        for fd, file in zip((1, 2), self.files):
            os.dup2(file.fileno(), fd)
        return self

    def __exit__(self, *_):
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        self.stdout, self.stderr = (self._read(f) for f in self.files)

    @staticmethod
    def _read(file):
        file.seek(0)
        text = file.read().decode(errors="replace")
        file.close()
        return text


def run_cell(source, namespace):
    """The cell's outputs as a kernel gives them: its streams, an error, or its last expression's value."""
    from IPython.lib.pretty import pretty
    outputs, value, error = [], None, None
    with CellOutput() as caught:
        try:
            tree = ast.parse(source)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
        except BaseException as exception:  # noqa: BLE001 -- a kernel reports every exception as the cell's error
            error = exception
            traceback.print_exc(file=sys.stdout)
    for name in ("stdout", "stderr"):
        if getattr(caught, name):
            outputs.append(nbformat.v4.new_output("stream", name=name, text=getattr(caught, name)))
    if error is not None:
        outputs.append(nbformat.v4.new_output("error", ename=type(error).__name__, evalue=str(error), traceback=[]))
    elif value is not None:
        outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": pretty(value)}, execution_count=1))
    return outputs


def grade(path):
    """{exercise: points} of one notebook, as nbgrader's autograde gives them."""
    from nbgrader.utils import determine_grade

    from autograder.notebook import nbgrader_meta
    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    course = graded_sources(path.parent.name)
    namespace = {"__name__": "__main__"}
    points = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id in course:
            cell.source = course[grade_id]
        cell.outputs = run_cell(cell.source, namespace)
        if grade_id in course:
            points[grade_id[len("test_"):]] = determine_grade(cell)[0]
    return points


def start(path):
    """grade(path) in a child forked from this process (no notebook sees another's state), bounded in
    time; (its pid, the file it answers in: a pipe would hold a long traceback back until it is read)."""
    descriptor, name = tempfile.mkstemp(suffix=".json")
    os.close(descriptor)
    answer_file = Path(name)
    child = os.fork()
    if child:
        return child, answer_file
    signal.alarm(NOTEBOOK_SECONDS)  # past it, the child dies and the parent says so
    try:
        answer = {"points": grade(path)}
    except BaseException:  # noqa: BLE001 -- said to the parent, which fails the test with it
        answer = {"error": traceback.format_exc()}
    answer_file.write_text(json.dumps(answer))
    os._exit(0)


def warm_up():
    """What the notebooks import, imported once before the forks (each fork paid it again, up to 1.5 s
    of a notebook's 0.2 to 9): the libraries, nbgrader's grading rule, the checks, and the scipy that
    transformers' model classes import. Not those classes themselves, nor torch._dynamo: they import
    triton, which must first see the notebook's own TRITON_INTERPRET, as in a kernel."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import IPython.lib.pretty  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import nbgrader.utils  # noqa: F401
    import scipy.optimize  # noqa: F401
    import scipy.spatial  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import autograder.checks  # noqa: F401
    assert "triton" not in sys.modules, "the warm-up imported triton before any notebook's TRITON_INTERPRET"


def main(out, *paths, jobs=2):
    warm_up()
    points, waiting, running = {}, list(paths), {}
    try:
        while waiting or running:  # `jobs` notebooks at once, as `grade -j 2` (nbgrader grades one at a time)
            while waiting and len(running) < jobs:
                path = Path(waiting.pop(0))
                running.update([(start(path), path)])
            done, _ = os.waitpid(-1, 0)  # whichever ends first
            (child, answer_file), path = next((key, path) for key, path in running.items() if key[0] == done)
            del running[child, answer_file]
            said = json.loads(answer_file.read_text() or '{"error": "the process died (killed, or past its time)"}')
            answer_file.unlink()
            if "error" in said:
                raise RuntimeError(f"{path}: {said['error']}")
            points[f"{path.parent.parent.name}/{path.parent.name}"] = said["points"]
    finally:  # a failure stops the notebooks still running
        for child, answer_file in running:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            answer_file.unlink()
    Path(out).write_text(json.dumps(points, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
