"""The run's seed, each rule's generator, and the register of the rules the texts state."""
import zlib
from dataclasses import dataclass

import numpy as np

from .failure import CheckFailure  # noqa: F401 (the register's vocabulary)
from .known import Replay


SEED_VARIABLE = "AUTOGRADER_SEED"


def fresh_seed():
    """A new run seed: 63 bits from the operating system, which nobody can compute in advance."""
    import secrets
    return secrets.randbits(63)


def parse_seed(text):
    """A seed as a user writes it (decimal); ValueError, saying what is expected, for anything else."""
    try:
        seed = int(str(text).strip())
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed {text!r}: expected a whole number from 0 to {2**63 - 1}")
    return seed


def seed_from_environment():
    """The seed of a run its caller did not give one: $AUTOGRADER_SEED (to reproduce a run of
    `grade`, of nbgrader or of `check`), else a fresh one. `grade` resolves its run's once and keeps it
    in its journal; nbgrader's test cells and `check` call this once per exercise and per run."""
    import os
    given = os.environ.get(SEED_VARIABLE, "").strip()
    return parse_seed(given) if given else fresh_seed()


def rng_for(name, seed=None):
    """The generator of one check, seeded by its name. A hidden check's (`seed` None) gives the same
    inputs on every run, in every grader: nobody who is graded can read it. A stated rule's is seeded
    by the run's `seed` too: its code ships to the students, and inputs drawn from a seed they can
    read could be computed, and answered, in advance."""
    key = zlib.crc32(name.encode())
    return np.random.default_rng(key if seed is None else [key, parse_seed(seed)])


@dataclass(frozen=True)
class Property:
    assignment: str
    exercise: str
    name: str          # the rule, as the feedback and `check` show it
    weight: float      # in `grade`, its share of the exercise's points, as a check's
    function: callable  # function(student, rng), student a `Student`; function(student, rng, known) if `known`
    known: bool = False  # whether it compares with answers (`known.py`): the reference's, or the stored ones

    @property
    def key(self):
        """The rule's stable name: its function's, not its sentence's."""
        return f"{self.assignment}/{self.function.__name__}"

    def run(self, student, rng, known=None):
        """`rng`: `rng_for(self.key, the run's seed)`. `known`: where the answers come from (`grade`
        gives the reference); by default the answers stored for `check`."""
        if not self.known:
            return self.function(student, rng)
        return self.function(student, rng, known or Replay(self.key))


_PROPERTIES = []


def stated(assignment, exercise, name, weight=1.0, known=False):
    """Decorator: `function(student, rng)` checks a rule the text of `exercise` states;
    `function(student, rng, known)` with `known`, which compares with answers (`known.py`)."""
    def register(function):
        _PROPERTIES.append(Property(assignment, exercise, name, weight, function, known))
        return function
    return register


def properties(assignment, exercise):
    return [p for p in _PROPERTIES if p.assignment == assignment and p.exercise == exercise]
