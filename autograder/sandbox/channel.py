"""The grader's end of a student's channel: length-prefixed frames (`wire.frame`), every read
and write with a deadline, however the other end behaves."""
import os
import select
import time

from ..wire import HEADER, WireError, decode, frame


class ReplyTooLarge(Exception):
    """A value over the size accepted; it was read and dropped, so the channel is still usable."""


def send(fd, value, deadline):
    """Write one frame; TimeoutError if the other end stops reading, OSError if it is gone."""
    write_all(fd, frame(value), deadline)


def receive(fd, deadline, max_bytes):
    """One frame's value; TimeoutError, EOFError, WireError or ReplyTooLarge otherwise."""
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size, deadline))
    if size > max_bytes:
        for _ in range(size // 2**20):  # read and dropped, never held
            read_exact(fd, 2**20, deadline)
        read_exact(fd, size % 2**20, deadline)
        raise ReplyTooLarge(f"a value of {size / 2**20:.0f} MB, more than the {max_bytes // 2**20} MB accepted")
    try:
        return decode(read_exact(fd, size, deadline))
    except (ValueError, KeyError, TypeError) as error:
        raise WireError(str(error)) from None


def read_exact(fd, size, deadline):
    chunks, remaining = [], size
    while remaining:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def write_all(fd, data, deadline):
    """Write everything before the deadline (TimeoutError), however slowly the reader reads."""
    view = memoryview(data)
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
    finally:
        os.set_blocking(fd, blocking)
