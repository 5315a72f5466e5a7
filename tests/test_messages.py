"""What a student reads when a check fails (issue 24 §4): each message below comes from a wrong
implementation of the course (tests/mutants, or written here), graded as nbgrader grades it (the
checks in this process) and, for the feedback page, by `python -m autograder grade`."""
import numpy as np
import pytest
from conftest import BIN, run
from mutants import catalogue
from submissions import filled_notebook, reference_solutions, write

from autograder import reference
from autograder.checks import run_exercise
from autograder.checks.core import CheckFailure, expect_close
from autograder.checks.inprocess import InProcessStudent
from autograder.stated import fresh_seed

RENAMED = reference_solutions("04-multi-head")["MultiHeadAttention"].replace("self.q_proj", "self.query")
assert RENAMED.count("self.query") == 2  # defined and used


def messages(assignment, exercise, source):
    """{check name: message} of the failing checks of `exercise` with `source` in its cell."""
    namespace = dict(vars(reference.load(assignment)))
    exec(source, namespace)
    student = InProcessStudent(namespace)
    result = run_exercise(assignment, exercise, student, seed=fresh_seed())
    return {c.name: c.message for c in result.checks if c.message}


def any_message(found, *parts):
    hits = [m for m in found.values() if all(p in m for p in parts)]
    assert hits, f"no message has {parts}:\n" + "\n".join(found.values())
    return hits[0]


def test_a_failed_load_state_dict_names_every_key_that_differs():
    found = messages("04-multi-head", "MultiHeadAttention", RENAMED)
    message = any_message(found, ".load_state_dict() raised RuntimeError: ")
    assert message.endswith("raised RuntimeError: the grader's state has q_proj.bias, q_proj.weight, which your module "
                            "lacks; your module has query.bias, query.weight, which the grader's state lacks"), message


def test_a_call_is_shown_once_and_objects_are_named_by_what_they_are():
    bert = messages("04-multi-head", "mha_from_bert", "def mha_from_bert(state, num_heads):\n    raise KeyError('self.q')")
    message = any_message(bert, "mha_from_bert(a random state of size 12, 3) raised KeyError")
    assert ")(" not in message, message
    torch_side = messages("04-multi-head", "mha_from_torch", "def mha_from_torch(m):\n    raise RuntimeError('no')")
    message = any_message(torch_side, "mha_from_torch(nn.MultiheadAttention(6, 2, bias=True, batch_first=True)) raised "
                                      "RuntimeError: no")
    assert "your object" not in "".join(torch_side.values()) and "__getattribute__" not in "".join(torch_side.values())


def test_train_lm_is_shown_once():
    source = "def train_lm(model, data, steps, batch_size=16, lr=3e-3, seed=0):\n    raise KeyError('lr')"
    found = messages("05-self-masked", "train_lm", source)
    message = any_message(found, "train_lm(TinyLM(", "seed=1) raised KeyError: 'lr'")
    assert ")(" not in message and "your object" not in message, message


def test_an_exception_where_a_value_error_is_expected_is_named_once():
    source = reference_solutions("07-flash-tiling")["hbm_traffic"] + (
        "\n_counted = hbm_traffic\ndef hbm_traffic(n, d, sram_elems, method):\n"
        "    return {'standard': _counted, 'flash': _counted}[method](n, d, sram_elems, method)\n")
    found = messages("07-flash-tiling", "hbm_traffic", source)
    message = any_message(found, "should raise a ValueError")
    assert message.startswith("hbm_traffic(1024, 64, 98304, 'sparse') should raise a ValueError, but raised "
                              "KeyError: 'sparse'"), message
    assert "StudentError" not in message and message.count("hbm_traffic(") == 1, message


def test_values_that_print_alike_get_their_digits_and_the_tolerance():
    got, expected = np.array([0.09044441], np.float32), np.array([0.09044444], np.float32)  # both 0.0904444
    with pytest.raises(CheckFailure) as info:
        expect_close(got, expected, "f(x)", rtol=1e-7, atol=0.0)
    message = str(info.value)
    assert "is 0.0904444084, expected 0.0904444382" in message, message
    assert "largest difference 2.98023e-08; compared as float32, to within 0 + 1e-07 × |expected| = 9.04e-09 here" \
        in message, message
    with pytest.raises(CheckFailure) as info:  # values that print apart are left as they were
        expect_close(np.array([1.5]), np.array([1.0]), "f(x)")
    assert "is 1.5, expected 1 (1 of 1 entries differ; largest difference 0.5)" in str(info.value)


def test_an_index_returned_for_a_bandwidth_is_not_called_a_dtype():
    source = (reference_solutions("06-nadaraya-watson")["select_bandwidth"].replace("def select_bandwidth(", "def _chosen(")
              + "\ndef select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):\n"
              "    h, scores = _chosen(x, y, bandwidths, kernel)\n    return int(np.argmin(scores)), scores\n")
    found = messages("06-nadaraya-watson", "select_bandwidth", source)
    message = any_message(found, "bandwidth: expected a float64 value, got the integer")
    assert "(a position in a list where the value at that position is expected?)" in message
    assert "expected dtype" not in message


def test_a_generator_reseeded_every_step_is_named_among_the_causes():
    found = messages("05-self-masked", "train_lm", catalogue("05-self-masked").WRONG["train_lm"]["generator_reseeded_every_step"])
    any_message(found, "The first loss matches, the later ones differ", "seeded once before the loop")
    any_message(found, "the same windows were drawn at every step", "a generator made or seeded again inside the loop")


@pytest.mark.parametrize("variant,said", [
    ("no_out_proj", "the per-head weights match, the merged heads (out_proj set to the identity) match, the final "
                    "outputs differ. Look at out_proj, applied once to the merged heads"),
    ("scale_by_sqrt_D", "the per-head weights differ, the merged heads (out_proj set to the identity) differ, the final "
                        "outputs differ. Look at the scores: q_proj and k_proj, split_heads, divided once by sqrt(d_h)"),
])
def test_forgetting_out_proj_and_scaling_wrongly_say_which_step_differs(variant, said):
    found = messages("04-multi-head", "MultiHeadAttention", catalogue("04-multi-head").WRONG["MultiHeadAttention"][variant])
    any_message(found, "against nn.MultiheadAttention(12, 3, batch_first=True) holding the same parameters", said)


def test_the_feedback_page_shows_the_messages(tmp_path):
    """The same messages through the sandbox, on the page a student opens."""
    a = "04-multi-head"
    write(filled_notebook(a, {"MultiHeadAttention": RENAMED}), tmp_path / "in" / "renamed" / a / f"{a}.ipynb")
    write(filled_notebook(a, {"MultiHeadAttention": catalogue(a).WRONG["MultiHeadAttention"]["no_out_proj"]}),
          tmp_path / "in" / "no-out-proj" / a / f"{a}.ipynb")
    run(BIN / "python", "-m", "autograder", "grade", tmp_path / "in", "--out", tmp_path / "out", "-j", "2", "--quiet")
    renamed = (tmp_path / "out" / "feedback" / "renamed" / f"{a}.html").read_text()
    assert ("the grader&#x27;s state has q_proj.bias, q_proj.weight, which your module lacks; your module has "
            "query.bias, query.weight, which the grader&#x27;s state lacks") in renamed.replace("&#39;", "&#x27;")
    no_out_proj = (tmp_path / "out" / "feedback" / "no-out-proj" / f"{a}.html").read_text()
    assert "the final outputs differ. Look at out_proj, applied once to the merged heads" in no_out_proj


def test_a_long_message_is_cut_in_grades_csv_at_a_word_with_an_ellipsis():
    """Issue 30 §10: grades.csv cut a message mid-word ("…: the "); the feedback page has it whole."""
    from autograder.results import SUMMARY_LIMIT, CheckResult, ExerciseResult, Graded
    from autograder.text import shortened
    message = "apply_rope(x float32 tensor of shape (2, 3, 5, 8)) returned " + "the wrong values again " * 40
    graded = Graded("ada", "08-transformer", [ExerciseResult("apply_rope", 2.0, [CheckResult("rotates", 0.0, 2.0, message)])])
    (*_, cell), = graded.rows()
    assert len(cell) <= SUMMARY_LIMIT and cell.endswith("…") and not cell.endswith(" …")
    whole = graded.exercises[0].summary
    kept = cell[:-1]
    assert whole.startswith(kept) and whole[len(kept)] == " "  # the cut is between two words
    assert shortened("short", 500) == "short"
    assert shortened("x" * 600, 500) == "x" * 499 + "…"  # one word longer than the field: cut inside it
