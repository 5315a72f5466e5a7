"""The safe format values cross a process boundary in: a JSON header and raw .npy arrays.

Only plain data travels: None, bool, int, float, str, lists, tuples, dicts with string keys,
numeric NumPy arrays and torch tensors (sent as their NumPy data). Arrays are read back with
`allow_pickle=False`, so nothing the student process sends can run code in the grader.
"""
import io
import json
import struct
from typing import IO, Any

import numpy as np

MAX_FRAME_BYTES = 512 * 2**20
MAX_FRAME_VALUES = 2**20   # values in a frame's JSON part (the arrays and tensors go beside it, as bytes)
HEADER = struct.Struct("<Q")  # a frame: its payload's length, then the payload (`encode`)
_ARRAY_KINDS = "biufc"  # bool, int, uint, float, complex


class WireError(ValueError):
    """A value that cannot travel, or a frame that is not well formed."""


class Handle:
    """A reference to an object that lives in the student process (a model, say)."""

    def __init__(self, ident: int) -> None:
        self.ident = int(ident)

    def __repr__(self) -> str:
        return f"Handle({self.ident})"

    def __eq__(self, other: object) -> bool:
        return type(other) is Handle and other.ident == self.ident

    def __hash__(self) -> int:
        return hash(self.ident)


def _torch():
    import sys
    return sys.modules.get("torch")


def to_plain(value: Any, _depth: int = 0) -> Any:
    """Turn a value into plain data, or raise WireError saying what it is."""
    if _depth > 20:
        raise WireError("the value is nested too deeply")
    torch = _torch()
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) in (Handle, PlainTensor):
        return value
    if isinstance(value, np.generic):
        return _plain_array(np.asarray(value))
    if isinstance(value, np.ndarray):
        return _plain_array(value)
    if torch is not None and isinstance(value, torch.Tensor):
        return PlainTensor(_plain_array(value.detach().cpu().resolve_conj().resolve_neg().numpy()))
    if isinstance(value, (list, tuple)):  # named tuples and the like: their items only
        items = [to_plain(v, _depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):  # OrderedDict (a state_dict) included
        if not all(type(k) is str for k in value):
            raise WireError("a dict with non-string keys cannot be sent")
        return {k: to_plain(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str)):  # subclasses: keep the plain value only
        return type(value).__mro__[-2](value)
    raise WireError(f"a value of type {type(value).__name__} cannot be sent; return arrays, tensors or numbers")


class PlainTensor:
    """A torch tensor's data, as it travels (decoded as a torch tensor)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _plain_array(array: Any) -> np.ndarray:
    array = np.array(array, copy=True, subok=False)
    if array.dtype.kind not in _ARRAY_KINDS or array.dtype.hasobject:
        raise WireError(f"an array of dtype {array.dtype} cannot be sent; use a numeric dtype")
    return array


def _encode_value(v: Any, arrays: list[np.ndarray]) -> Any:
    """A plain value as JSON, its arrays appended to `arrays` (a module function, not a closure: a
    recursive closure is a cycle that keeps the arrays alive until the next garbage collection)."""
    if v is None or type(v) in (bool, int, str):
        return v
    if type(v) is float:
        return {"float": repr(v)}
    if type(v) is Handle:
        return {"handle": v.ident}
    if type(v) is np.ndarray:
        arrays.append(v)
        return {"ndarray": len(arrays) - 1}
    if type(v) is PlainTensor:
        arrays.append(v.array)
        return {"tensor": len(arrays) - 1}
    if type(v) is list:
        return [_encode_value(x, arrays) for x in v]
    if type(v) is tuple:
        return {"tuple": [_encode_value(x, arrays) for x in v]}
    if type(v) is dict:
        return {"dict": [[k, _encode_value(x, arrays)] for k, x in v.items()]}
    raise WireError(f"cannot encode {type(v).__name__}")


def encode(value: Any) -> bytes:
    """Plain value -> bytes. Raises WireError for anything that is not plain data."""
    arrays: list[np.ndarray] = []
    header = json.dumps(_encode_value(to_plain(value), arrays)).encode()
    parts = [header]
    for array in arrays:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, array, allow_pickle=False)
        parts.append(buffer.getvalue())
    return b"".join(struct.pack("<Q", len(p)) + p for p in [struct.pack("<Q", len(parts))] + parts)


def _decode_value(v: Any, arrays: list[np.ndarray]) -> Any:
    """The plain value of a frame's JSON part (a module function: see `_encode_value`)."""
    if v is None or type(v) in (bool, int, str):
        return v
    if type(v) is list:
        return [_decode_value(x, arrays) for x in v]
    if type(v) is dict and len(v) == 1:
        (tag, x), = v.items()
        if tag == "float":
            return float(x)
        if tag == "handle":
            return Handle(x)
        if tag == "ndarray":
            return arrays[x]
        if tag == "tensor":
            import torch
            return torch.from_numpy(arrays[x])
        if tag == "tuple":
            return tuple(_decode_value(i, arrays) for i in x)
        if tag == "dict":
            return {str(k): _decode_value(i, arrays) for k, i in x}
    raise WireError("malformed value in frame")


def decode(data: bytes) -> Any:
    """bytes -> plain value; torch tensors come back as torch tensors."""
    view = memoryview(data)
    chunks: list[bytes] = []
    offset = 0
    while offset < len(view):
        if offset + 8 > len(view):
            raise WireError("truncated frame")
        (size,) = struct.unpack_from("<Q", view, offset)
        offset += 8
        if size > len(view) - offset:
            raise WireError("truncated frame")
        chunks.append(bytes(view[offset:offset + size]))
        offset += size
    if not chunks or struct.unpack("<Q", chunks[0])[0] != len(chunks) - 1:
        raise WireError("malformed frame")
    header, blobs = chunks[1], chunks[2:]
    values = header.count(b",") + header.count(b"[") + header.count(b"{")  # at least the values it holds, less one
    if values > MAX_FRAME_VALUES:  # 16 M empty lists fit in 48 MB and take 3 GB once read
        raise WireError(f"frame of more than {MAX_FRAME_VALUES:,} values (lists, dicts, numbers, strings) refused: "
                        "send arrays or tensors")
    try:
        tree = json.loads(header)
        arrays = [np.lib.format.read_array(io.BytesIO(b), allow_pickle=False) for b in blobs]
    except (ValueError, OSError) as error:
        raise WireError(f"malformed frame: {error}") from None
    for array in arrays:
        if array.dtype.kind not in _ARRAY_KINDS:
            raise WireError(f"array of dtype {array.dtype} refused")

    return _decode_value(tree, arrays)


def roundtrip(value: Any) -> Any:
    """What the grader would receive if `value` were sent from another process."""
    return decode(encode(value))


def frame(value: Any) -> bytes:
    payload = encode(value)
    return HEADER.pack(len(payload)) + payload


def write_frame(fd_file: IO[bytes], value: Any) -> None:
    fd_file.write(frame(value))
    fd_file.flush()


def read_frame(fd_file: IO[bytes]) -> Any:
    head = b""
    while len(head) < HEADER.size:
        chunk = fd_file.read(HEADER.size - len(head))
        if not chunk:
            raise EOFError("the other process closed the channel")
        head += chunk
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME_BYTES:
        raise WireError(f"frame of {size} bytes is over the limit")
    chunks, remaining = [], size
    while remaining:  # a raw pipe or socket returns what it has: read until the frame is whole
        chunk = fd_file.read(remaining)
        if not chunk:
            raise EOFError("the other process closed the channel mid-frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return decode(b"".join(chunks))
