"""A check passes only when it saw the behaviour it checks: code that does nothing earns nothing.

For every chapter, notebooks in which every exercise's solution cell does nothing useful: the
untouched stubs, functions (and methods) that `return None`, that `return 0`, that return their
first argument, and that raise the very error PyTorch's meta device raises where it has no data
("nonzero ... cannot be called on meta tensors"), which the device checks must not take for a pass.
A class keeps an `__init__` that calls `super().__init__()` and nothing else, so that its methods
are reached; each must score 0 in every exercise.

The *hollow* notebooks keep the reference's `__init__` (the right parameters) and empty every other
method and function the same ways: they earn the checks of what `__init__` builds
(`INIT_ONLY`), and nothing else. All are graded in one run of `python -m autograder grade`.
"""
import ast
import csv
from collections import defaultdict

import pytest
from conftest import BIN, run
from submissions import reference_solutions, student_notebook, write

from autograder import assignments
from autograder.checks import exercise_checks
from autograder.notebook import exercises, nbgrader_meta

ASSIGNMENTS = assignments()
META_ERROR = "nonzero is not supported for meta tensors: .item() cannot be called on meta tensors"
FIRST_ARGUMENT = None  # a body: `return` the function's first argument
BODIES = {
    "return-none": "return None",
    "return-zero": "return 0",
    "return-input": FIRST_ARGUMENT,
    "raise-meta": f"raise RuntimeError({META_ERROR!r})",
}
HOLLOW = {"hollow-input": FIRST_ARGUMENT, "hollow-meta": BODIES["raise-meta"]}
STUDENTS = ["stubs", *BODIES]
# The checks that judge only what a class's __init__ builds (its parameters' names and shapes).
INIT_ONLY = {
    "02-global-attention": ["self.context is an nn.Parameter of shape (dim,), the module's only parameter",
                            "holds exactly an embedding, a context vector, a linear layer's weight and bias"],
    "03-qkv": ["W = nn.Linear(key_dim, query_dim, bias=False): one parameter W.weight (query_dim, key_dim)",
               "W_q (hidden, query_dim), W_k (hidden, key_dim), v (1, hidden): nn.Linear, no biases"],
    "04-multi-head": ["q_proj, k_proj, v_proj, out_proj: nn.Linear(D, D, bias=bias), and no other parameter"],
    "05-self-masked": ["q_proj, k_proj, v_proj, out_proj: nn.Linear(D, D) with bias, and no other parameter",
                       "token_embedding, position_embedding, blocks (num_layers Blocks), norm, head, and context"],
    "06-nadaraya-watson": ["one parameter, log_bandwidth: a float64 scalar holding log h"],
    "08-transformer": ["q_proj (D, H*d_h), k_proj and v_proj (D, G*d_h), o_proj: no biases, no other parameter",
                       "attn_norm, attention, mlp_norm, gate_proj, up_proj, down_proj, and no other parameter"],
    "09-language-model": ["embed, layers (num_layers DecoderBlocks), norm, lm_head (dim -> vocab_size, no bias), "
                          "and no other parameter",
                          "tie_embeddings=True: lm_head.weight is embed.weight, one nn.Parameter (a copy is not a tie); "
                          "tie_embeddings=False: two"],
    "10-encoder-decoder": ["q_proj, k_proj, v_proj, out_proj: nn.Linear(embed_dim, embed_dim) with bias, and no other "
                           "parameter",
                           "EncoderLayer: self_attn, self_attn_norm, fc1, fc2, ffn_norm; DecoderLayer: also cross_attn "
                           "and cross_attn_norm; no other parameter",
                           "embed, encoder_layers, decoder_layers (num_layers each), lm_head (dim -> vocab_size, no "
                           "bias) whose weight is embed.weight, one nn.Parameter; no other parameter"],
}
HOLLOW_ASSIGNMENTS = [a for a in ASSIGNMENTS if a in INIT_ONLY]  # the chapters with classes


def _is_jit(node):
    """A Triton kernel (`@triton.jit`): given as part of the cell, left as it is."""
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _body(node, statement, method=False):
    """`node`'s docstring, if any, then `statement` (FIRST_ARGUMENT: return the first argument)."""
    if statement is FIRST_ARGUMENT:
        names = [a.arg for a in node.args.args][1 if method else 0:]
        statement = f"return {names[0]}" if names else "return None"
    docstring = node.body[:1] if ast.get_docstring(node) is not None else []
    return docstring + ast.parse(statement).body


def does_nothing(source, statement, keep_init=False):
    """The cell `source` with every function's body, and every method's but `__init__`'s, replaced by
    `statement`; `__init__` only calls `super().__init__()` unless `keep_init`; properties are kept."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not _is_jit(node):
            node.body = _body(node, statement)
        elif isinstance(node, ast.ClassDef):
            for method in node.body:
                if not isinstance(method, ast.FunctionDef) or any("property" in ast.unparse(d)
                                                                   for d in method.decorator_list):
                    continue
                if method.name != "__init__":
                    method.body = _body(method, statement, method=True)
                elif not keep_init:
                    method.body = _body(method, "super().__init__()")
    return ast.unparse(tree)


def notebook(assignment, statement="", hollow=False):
    """The student notebook with every solution cell done nothing with `statement` ("": the stubs as
    they are); `hollow`: from the reference solutions, whose `__init__`s are kept."""
    nb = student_notebook(assignment)
    references = reference_solutions(assignment)
    if statement != "":
        for cell in nb.cells:
            grade_id = nbgrader_meta(cell).get("grade_id")
            if nbgrader_meta(cell).get("solution"):
                cell.source = does_nothing(references[grade_id] if hollow else cell.source, statement, keep_init=hollow)
    return nb


def test_does_nothing_rewrites_functions_and_methods():
    source = ("@triton.jit\ndef kernel(x):\n    y = x\n"
              "def f(a, b=1):\n    '''doc'''\n    raise NotImplementedError()\n"
              "class M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.n = n\n"
              "    @property\n    def h(self):\n        return self.n\n"
              "    def forward(self, x):\n        raise NotImplementedError()\n")
    for statement, returned in (("return 0", 0), (FIRST_ARGUMENT, 5)):
        namespace = {"triton": type("Triton", (), {"jit": staticmethod(lambda f: f)})}
        exec(does_nothing(source, statement).replace("nn.Module", "object"), namespace)
        assert namespace["f"](5) == returned and namespace["M"](3).forward(5) == returned
        assert namespace["kernel"](5) is None and not hasattr(namespace["M"](3), "n")
    namespace = {"triton": type("Triton", (), {"jit": staticmethod(lambda f: f)})}
    exec(does_nothing(source, "return None", keep_init=True).replace("nn.Module", "object"), namespace)
    assert namespace["M"](3).h == 3 and namespace["M"](3).forward(1) is None and namespace["f"](1) is None


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    """{(student, assignment): {exercise: score}}, from one grading run of every notebook."""
    root = tmp_path_factory.mktemp("free-points") / "submitted"
    for a in ASSIGNMENTS:
        write(notebook(a), root / "stubs" / a / f"{a}.ipynb")
        for student, statement in BODIES.items():
            write(notebook(a, statement), root / student / a / f"{a}.ipynb")
    for a in HOLLOW_ASSIGNMENTS:
        for student, statement in HOLLOW.items():
            write(notebook(a, statement, hollow=True), root / student / a / f"{a}.ipynb")
    out = tmp_path_factory.mktemp("free-points-grades")
    run(BIN / "python", "-m", "autograder", "grade", root, "--out", out, "-j", "2", "--quiet")
    found = defaultdict(dict)
    with open(out / "grades.csv") as f:
        for row in csv.DictReader(f):
            found[row["student"], row["assignment"]][row["exercise"]] = float(row["score"])
    return found


@pytest.mark.parametrize("student", STUDENTS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_code_that_does_nothing_scores_zero(assignment, student, points):
    zero = {e.name: 0.0 for e in exercises(assignment)}
    assert points[student, assignment] == zero, {e: p for e, p in points[student, assignment].items() if p}


@pytest.mark.parametrize("student", HOLLOW)
@pytest.mark.parametrize("assignment", HOLLOW_ASSIGNMENTS)
def test_the_right_parameters_alone_earn_only_their_checks(assignment, student, points):
    assert all(any(c.name == name for e in exercises(assignment) for c, _ in exercise_checks(assignment, e.name))
               for name in INIT_ONLY[assignment]), "INIT_ONLY names a check that does not exist"
    earned = {e.name: sum(p for c, p in exercise_checks(assignment, e.name) if c.name in INIT_ONLY[assignment])
              for e in exercises(assignment)}
    assert points[student, assignment] == pytest.approx(earned, abs=1e-5)  # grades.csv has 6 digits
