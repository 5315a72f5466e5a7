"""The properties an exercise's text states, checked alike by `check` and by `grade`.

A hidden check may keep its inputs secret; a rule the text states may not be a surprise. The
properties here are the rules the texts state (what a result must be on inputs the text
describes), written without the reference solutions: their expected values are computed here,
from the definitions (PyTorch's own modules, exact attention in float64). `grade` registers them
as checks of their exercise (`checks.core.stated_checks`), and `python -m autograder check` runs
them on the student's notebook, so a student's copy of the course, which has neither the
solutions nor `autograder/checks/`, learns before grading every point these can cost.

The package: the seeds and the register (`register`); what both need to call the student's code
and say what went wrong (`calling`: `Student`, `describe`), and a module of rules per chapter, named
like its checks (`ch04_multi_head` … ), each registered when this package is imported; and the device
rule, which every exercise on tensors states, with its cases by chapter (`device`).
"""
from .register import (CheckFailure, Property, fresh_seed, parse_seed, properties, rng_for, run_seed,  # noqa: F401
                       set_seed, stated, SEED_VARIABLE)
from .calling import Student, called, describe  # noqa: F401 (the checks' vocabulary)
from . import ch04_multi_head, ch05_self_masked, ch06_nadaraya_watson, ch07_flash_tiling, ch08_transformer  # noqa: F401 (each registers its rules)
from . import ch09_language_model  # noqa: F401 (registers its rules)
from .device import device_rules  # noqa: F401 (the device rule of every exercise on tensors, by chapter)
