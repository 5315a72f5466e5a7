"""An exercise is checked with known-good versions of the exercises before it: the names, and
default arguments bound to the student's versions, point to the reference until restored."""
from autograder.sandbox.calls import StudentNamespace

STUDENT = """
def scores(x):
    return x + 100          # the student's bug

def attention(x, score_fn=scores):
    return score_fn(x) + scores(x)
"""


def test_known_good_versions_replace_names_and_bound_defaults_until_restored():
    namespace = {}
    exec(STUDENT, namespace)
    own_scores, own_defaults = namespace["scores"], namespace["attention"].__defaults__
    calls = StudentNamespace(namespace)
    assert calls.call("attention", [0]) == 200
    calls.use_known_good(["def scores(x):\n    return x + 1"], ["scores"])
    assert calls.call("attention", [0]) == 2 and namespace["scores"] is not own_scores
    calls.use_known_good(["def scores(x):\n    return x + 1"], ["scores"])  # twice: still one layer to undo
    calls.restore()
    assert namespace["scores"] is own_scores and namespace["attention"].__defaults__ == own_defaults
    assert calls.call("attention", [0]) == 200
