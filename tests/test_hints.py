"""A hint names a cause only where the check saw it (issue 30 §9).

Each hint below is said only when a test of its cause passes (the float64 hint only when the
differences are what float32 angles give, the copy hint only on a block whose outputs are right, ...).
For each, the course's wrong implementations (tests/mutants) that have the cause must be told it,
and others that fail the same check without that cause must not: they lose points there, and the
hint is not in what they read. Graded as nbgrader grades (the checks in this process, one exercise
at a time: the messages are the sandbox's, a few seconds in all but train_lm's)."""
import os

import pytest
from mutants import catalogue

from autograder import reference
from autograder.checks import run_exercise
from autograder.checks.inprocess import InProcessStudent
from autograder.stated import fresh_seed

os.environ.setdefault("TRITON_INTERPRET", "1")  # chapter 7's kernel on the CPU, as its notebook says

# (assignment, exercise, words of the hint, the check it belongs to (words of its name),
#  the wrong implementations that have its cause, those that fail that check without it)
HINTS = [
    ("08-transformer", "sinusoidal_positions", "as float32 angles' do", "4,096 positions",
     ["angles_in_float32"], ["sines_then_cosines"]),
    ("08-transformer", "sinusoidal_positions", "all the sines come first", "4,096 positions",
     ["sines_then_cosines"], ["angles_in_float32"]),
    ("08-transformer", "apply_rope", "what float32 angles give", "positions up to 100,000",
     ["angles_in_the_dtype_of_x"], ["interleaved_pairs", "theta_exponent_without_2"]),
    ("08-transformer", "apply_rope", "pairs neighbouring features", "positions up to 100,000",
     ["interleaved_pairs"], ["angles_in_the_dtype_of_x", "theta_exponent_without_2"]),
    ("08-transformer", "GroupedQueryAttention", "un-rotated", "cache.k holds",
     ["cache_rotated_after_append", "keys_rotated_after_caching"], ["positions_not_offset_by_the_cache"]),
    ("08-transformer", "DecoderBlock", "subtracts each row's mean", "as built",
     ["rms_norm_subtracts_the_mean"], ["default_eps_1e_5", "norm_weight_starts_at_zero"]),
    ("08-transformer", "DecoderBlock", "it fits an eps of", "as built",
     ["default_eps_1e_5"], ["rms_norm_subtracts_the_mean", "norm_weight_starts_at_zero"]),
    ("08-transformer", "DecoderBlock", "weight starts at ones", "as built",
     ["norm_weight_starts_at_zero"], ["rms_norm_subtracts_the_mean", "default_eps_1e_5"]),
    ("08-transformer", "DecoderBlock", "SiLU to the up branch", "the formula of the text",
     ["silu_on_the_up_branch"], ["rms_norm_subtracts_the_mean"]),
    ("08-transformer", "DecoderBlock", "its attn_norm, on x, is not", "the formula of the text",
     ["rms_norm_subtracts_the_mean"], ["silu_on_the_up_branch"]),
    ("08-transformer", "block_from_llama", "not copies of them", "a copy:",
     ["parameters_share_the_layers_tensors"], ["default_eps_and_rope_base", "norms_swapped"]),
    ("05-self-masked", "CausalSelfAttention", "the cached keys and values were not used", "with a KVCache: a sequence",
     ["cache_not_used"], ["sdpa_is_causal_top_left", "triu_mask", "no_out_proj"]),
    ("05-self-masked", "CausalSelfAttention", "masked top-left", "with a KVCache: a sequence",
     ["sdpa_is_causal_top_left"], ["cache_not_used", "triu_mask", "no_out_proj"]),
    ("05-self-masked", "train_lm", "the targets are the window shifted by one", "trained",
     ["targets_not_shifted"], ["gradients_never_zeroed", "generator_reseeded_every_step"]),
    ("05-self-masked", "train_lm", "seeded again inside the loop", "trained",
     ["generator_reseeded_every_step"], ["gradients_never_zeroed", "targets_not_shifted"]),
    ("05-self-masked", "train_lm", "ignores the seed it is given", "the losses are the recipe's",
     ["seed_ignored"], ["global_random_generator"]),
    ("07-flash-tiling", "flash_attention_triton", "exp overflowed", "keeps growing after the first key tile",
     ["max_of_the_first_tile_kept", "exp_without_the_max"], ["accumulator_not_rescaled"]),
]

_MESSAGES = {}


def messages(assignment, exercise, variant):
    """{check name: message} of the failing checks of `exercise` with the wrong implementation `variant`."""
    key = (assignment, exercise, variant)
    if key not in _MESSAGES:
        namespace = dict(vars(reference.load(assignment)))
        exec(catalogue(assignment).WRONG[exercise][variant], namespace)
        result = run_exercise(assignment, exercise, InProcessStudent(namespace), seed=fresh_seed())
        _MESSAGES[key] = {c.name: c.message for c in result.checks if c.message}
    return _MESSAGES[key]


def failing(assignment, exercise, variant, check):
    """The message of the check whose name has `check`; the variant must fail it."""
    found = {name: message for name, message in messages(assignment, exercise, variant).items() if check in name}
    assert found, f"{variant} passes the check '{check}' of {exercise}: it cannot show whether the hint is said"
    (message,) = found.values()
    return message


@pytest.mark.parametrize("assignment,exercise,hint,check,present,absent", HINTS,
                         ids=[f"{e}:{h}" for _, e, h, *_ in HINTS])
def test_a_hint_is_said_where_its_cause_is_and_nowhere_else(assignment, exercise, hint, check, present, absent):
    for variant in present:
        assert hint in failing(assignment, exercise, variant, check), f"{variant} is not told its cause"
    for variant in absent:
        assert hint not in failing(assignment, exercise, variant, check), f"{variant} is told a cause it does not have"
