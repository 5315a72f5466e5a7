"""The comparison every check uses says what differs: type, shape, dtype, NaN, first index."""
import numpy as np
import pytest
import torch

from autograder.checks.core import CheckFailure, expect_close, expect_same


def failure(got, expected, **kwargs):
    with pytest.raises(CheckFailure) as info:
        expect_close(got, expected, "f(x)", **kwargs)
    return str(info.value)


def test_equal_arrays_pass():
    expect_close(np.array([1.0, np.nan]), np.array([1.0, np.nan]), "f(x)")


def test_messages_name_what_differs():
    assert "expected shape (3,), got shape (2,)" in failure(np.zeros(2), np.zeros(3))
    assert "expected dtype float32, got float64" in failure(np.zeros(2), np.zeros(2, np.float32))
    assert "NaN at index [1]" in failure(np.array([0.0, np.nan]), np.array([0.0, 1.0]))
    assert "expected NaN at index [0]" in failure(np.array([1.0]), np.array([np.nan]))
    message = failure(np.array([[0.0, 1.0], [2.0, 3.5]]), np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert "index (1, 1) is 3.5, expected 3" in message and "1 of 4 entries differ" in message
    assert "expected a NumPy array, got a torch tensor" in failure(torch.zeros(2), np.zeros(2))
    assert "expected an array, got str" in failure("no", np.zeros(2))


def test_inf_must_match_exactly():
    assert "index [0]" in failure(np.array([np.inf]), np.array([1e308]))
    expect_close(np.array([-np.inf]), np.array([-np.inf]), "f(x)")


def test_python_numbers_compare_as_numbers():
    expect_same(4456448, 4456448, "f(x)")
    expect_same(np.array(0.5), 0.5, "f(x)")
    for got, expected, says in ((4456447, 4456448, "expected the int 4456448, got 4456447"),
                                (4456448.0, 4456448, "expected the int 4456448, got 4456448.0"),
                                (True, 1, "expected the int 1, got True"), (0.5000001, 0.5, "is 0.5")):
        with pytest.raises(CheckFailure, match=says):
            expect_same(got, expected, "f(x)")


def package_imports():
    """{module: the autograder modules it imports}, read from the source."""
    import ast
    from autograder import REPO_ROOT
    root = REPO_ROOT / "autograder"
    graph = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names]
                found.update(n if n.replace(".", "/") and (root.parent / (n.replace(".", "/") + ".py")).exists()
                             or (root.parent / n.replace(".", "/")).is_dir() else target for n in names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[module] = {m for m in found if m.startswith("autograder") and m != module}
    return graph


def test_the_package_imports_form_no_cycle_and_the_sandbox_never_imports_the_checks():
    graph = package_imports()
    for module, imported in graph.items():
        if module.startswith("autograder.sandbox"):
            assert not any(m.startswith("autograder.checks") for m in imported), module
    state = {}

    def visit(module, path):
        if state.get(module) == "open":
            raise AssertionError("import cycle: " + " -> ".join(path + [module]))
        if state.get(module) != "done":
            state[module] = "open"
            for other in graph.get(module, ()):
                if other != "autograder":  # the package's __init__ imports nothing of its own
                    visit(other, path + [module])
            state[module] = "done"
    for module in graph:
        visit(module, [])
