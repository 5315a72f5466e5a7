"""The properties an exercise's text states, checked alike by `check` and by `grade`.

A hidden check may keep its inputs secret; a rule the text states may not be a surprise. The
properties here are the rules the texts state (what a result must be on inputs the text
describes), written without the reference solutions: their expected values are computed here,
from the definitions (PyTorch's own modules, exact attention in float64). `grade` registers them
as checks of their exercise (`checks.core.stated_checks`), and `python -m autograder check` runs
them on the student's notebook, so a student's copy of the course, which has neither the
solutions nor `autograder/checks/`, learns before grading every point these can cost.

The package: the seeds and the register (`register`); what both need to call the student's code
and say what went wrong (`calling`: `Student`, `describe`); where the answers a rule compares with
come from (`known`: the reference at grading, the stored `known_answers` in `check`); a module of
rules per chapter, named like its checks (`ch04_multi_head` … ), found by its name and registered
when this package is imported (a students' copy of a term holds only the chapters released); and
the device rule, which every exercise on tensors states, with its cases by chapter (`device`).
"""
import importlib
import pkgutil
import re

from .register import (CheckFailure, Property, fresh_seed, parse_seed, properties, rng_for,  # noqa: F401
                       seed_from_environment, stated, SEED_VARIABLE)
from .calling import Student, called, describe  # noqa: F401 (the checks' vocabulary)
from .device import device_rules  # noqa: F401 (the device rule of every exercise on tensors, by chapter)

CHAPTER_MODULE = re.compile(r"ch\d\d_\w+")
for _chapter in sorted(m.name for m in pkgutil.iter_modules(__path__) if CHAPTER_MODULE.fullmatch(m.name)):
    importlib.import_module(f"{__name__}.{_chapter}")  # registers its rules
