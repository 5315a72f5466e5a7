"""Wrong and alternative implementations of every exercise, one module per chapter.

`WRONG[exercise][name]` is the source of a plausible wrong solution cell: it must lose points
in that exercise (and only there, but for exercises listed in `DEPENDS[exercise]`, which call
it). `ALTERNATIVE[exercise]` is a correct solution written differently: it keeps full marks.
"""
import importlib


def catalogue(assignment):
    return importlib.import_module(f"{__name__}.ch{assignment.replace('-', '_')}")
