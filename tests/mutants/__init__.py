"""Wrong and alternative implementations of every exercise, one module per chapter.

`WRONG[exercise][name]` is the source of a plausible wrong solution cell: it must lose points
in that exercise and nowhere else (the exercises that call it are checked with known-good
versions). `ALTERNATIVE[exercise]` is a correct solution written differently: it keeps full marks.
"""
import importlib


def catalogue(assignment):
    return importlib.import_module(f"{__name__}.ch{assignment.replace('-', '_')}")
