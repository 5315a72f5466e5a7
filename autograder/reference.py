"""The reference solutions, executed from the source notebooks in solutions/ (trusted code)."""
import contextlib
import functools
import io
import types

from . import has_solutions
from .notebook import reference_code, source_path


@functools.cache
def load(assignment):
    """The namespace the source notebook's solution cells define, as a module-like object."""
    if not has_solutions():
        raise RuntimeError("grading needs the course's solutions/ folder, which a student's copy does not have")
    module = types.ModuleType(f"reference_{assignment.replace('-', '_')}")
    module.__file__ = str(source_path(assignment))
    with contextlib.redirect_stdout(io.StringIO()):  # what its cells print is not the grader's output
        for index, source in enumerate(reference_code(assignment)):
            exec(compile(source, f"<reference {assignment} cell {index}>", "exec"), module.__dict__)
    return module
