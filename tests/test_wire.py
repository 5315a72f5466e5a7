"""The safe format: plain data round-trips, anything else is refused, pickles never load."""
import io
import pickle
import struct

import numpy as np
import pytest
import torch

from autograder.wire import Handle, WireError, decode, encode, roundtrip


def test_plain_values_round_trip():
    value = {"a": [1, 2.5, float("nan"), None, True, "x"], "b": (np.arange(6.0).reshape(2, 3), Handle(3))}
    back = roundtrip(value)
    assert back["a"][:2] == [1, 2.5] and np.isnan(back["a"][2]) and back["a"][3:] == [None, True, "x"]
    assert type(back["b"]) is tuple and back["b"][1] == Handle(3)
    np.testing.assert_array_equal(back["b"][0], np.arange(6.0).reshape(2, 3))


def test_dtype_and_type_survive():
    assert roundtrip(np.float32(1.5)).dtype == np.float32
    tensor = roundtrip(torch.ones(2, 3, dtype=torch.float64))
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float64 and tensor.shape == (2, 3)


class Sneaky(np.ndarray):
    def __eq__(self, other):
        return True


def test_array_subclasses_arrive_as_plain_arrays():
    back = roundtrip(np.zeros(3).view(Sneaky))
    assert type(back) is np.ndarray and not (back == 1).any()


@pytest.mark.parametrize("value", [object(), np.array([object()]), {1: 2}, lambda: 0, b"bytes"])
def test_other_values_are_refused(value):
    with pytest.raises(WireError):
        encode(value)


def test_a_pickled_array_in_a_frame_is_refused():
    header = b'{"ndarray": 0}'
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    parts = [struct.pack("<Q", 2), header, buffer.getvalue()]
    frame = b"".join(struct.pack("<Q", len(p)) + p for p in parts)
    with pytest.raises(WireError):
        decode(frame)
    with pytest.raises(WireError):
        decode(pickle.dumps([1, 2]))


def test_a_frame_of_too_many_values_is_refused_before_it_is_read():
    """16 M empty lists fit in 48 MB and take 3 GB once read: counted first, refused unread."""
    from autograder.wire import MAX_FRAME_VALUES
    header = b"[" + b"[]," * MAX_FRAME_VALUES + b"[]]"
    payload = b"".join(struct.pack("<Q", len(p)) + p for p in [struct.pack("<Q", 1), header])
    with pytest.raises(WireError, match="values"):
        decode(payload)
    assert decode(encode([[]] * 1000)) == [[]] * 1000
