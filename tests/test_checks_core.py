"""The comparison every check uses says what differs: type, shape, dtype, NaN, first index."""
import numpy as np
import pytest
import torch

from autograder.checks.core import CheckFailure, expect_close


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
