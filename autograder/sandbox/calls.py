"""Calling the student's code by name, in the process where it lives (worker or kernel)."""
import contextlib
import copy
import errno
import sys
import traceback

from ..wire import Handle, WireError, to_plain


class CallError(Exception):
    """The student's code raised or could not be called; the message is for the student."""


class StudentError(Exception):
    """What the grader sees of a call that failed in the student's process (raised, timed out,
    could not be called, or the process died); the message says so."""


class StudentNamespace:
    """A notebook's globals, plus the objects the grader asked to keep (models, say)."""

    def __init__(self, namespace, ask_grader=None):
        self.namespace = namespace
        self.ask_grader = ask_grader  # ask_grader(name, *args): computed by the grader, on its side
        self.objects = {}
        self.replaced = []  # [(where, key, the student's value)] to undo `use_known_good`

    def use_known_good(self, spec, probes=()):
        """Put stand-ins for the exercises whose checks are done (`spec`: their names and kinds) in
        place of the student's versions: the grader computes their every call (`standins.py`), so
        no line of a reference solution enters this process. The student's later code calls
        them by name or as a default argument it bound at definition. `probes`: names of the grader's
        probes (`probes.py`) to put in the namespace too. No code is received: only names and data."""
        from .probes import PROBES
        from .standins import StandIns
        self.restore()
        standins = StandIns(spec, lambda *request: self.ask_grader("known_good", *request))
        new = dict(standins.by_name)
        for name in probes:
            if name not in PROBES:
                raise CallError(f"the grader has no probe {name!r}")
            new[name] = PROBES[name](self.namespace, standins, self.ask_grader)
        old = {id(self.namespace[n]): value for n, value in new.items() if n in self.namespace}
        for name, value in new.items():
            self._replace(self.namespace, name, value)
        for value in list(self.namespace.values()):
            defaults = getattr(value, "__defaults__", None) if callable(value) else None
            if isinstance(defaults, tuple) and any(id(d) in old for d in defaults):
                self._replace(value, "__defaults__", tuple(old.get(id(d), d) for d in defaults), attribute=True)

    def _replace(self, where, key, value, attribute=False):
        before = getattr(where, key) if attribute else where.get(key, _MISSING)
        self.replaced.append((where, key, before, attribute))
        setattr(where, key, value) if attribute else where.__setitem__(key, value)

    def restore(self):
        """The student's own definitions back, as they were."""
        for where, key, before, attribute in reversed(self.replaced):
            if attribute:
                setattr(where, key, before)
            elif before is _MISSING:
                where.pop(key, None)
            else:
                where[key] = before
        self.replaced = []

    def call(self, target, args=(), kwargs=None, method=None, keep=False, device=None):
        """Plain result of `target(*args, **kwargs)` (or of its `method`); a Handle if `keep`.
        With `device` ("meta", say), the tensors among the arguments and the kept objects involved
        are moved to that device first (modules as copies: the kept one stays as it was), and the
        result comes back as its `layout`: a device without data cannot send values."""
        function = self._resolve(target, method, device)
        args = [self._unwrap(a, device) for a in args]
        kwargs = {k: self._unwrap(v, device) for k, v in (kwargs or {}).items()}
        try:
            with one_device() if device is not None else contextlib.nullcontext():
                result = function(*args, **kwargs)
        except Exception as error:
            raise CallError(describe_exception(error)) from None
        if keep:
            handle = Handle(len(self.objects) + 1)
            self.objects[handle.ident] = result
            return handle
        try:
            return to_plain(result) if device is None else layout(result)
        except WireError as error:
            raise CallError(f"{_name(target, method)} returned {error}") from None

    def _resolve(self, target, method, device=None):
        if isinstance(target, Handle):
            obj = self.objects[target.ident] if device is None else to_device(self.objects[target.ident], device)
        elif target in self.namespace:
            obj = self.namespace[target]
        else:
            raise CallError(f"`{target}` is not defined in your notebook (was it renamed, or did its cell fail?)")
        if method is not None:
            try:
                obj = getattr(obj, method)
            except Exception as error:
                raise CallError(describe_exception(error)) from None
        if not callable(obj):
            raise CallError(f"`{_name(target, method)}` is a {type(obj).__name__}, not a function")
        return obj

    def _unwrap(self, value, device=None):
        if isinstance(value, Handle):
            return self.objects[value.ident] if device is None else to_device(self.objects[value.ident], device)
        if type(value) in (list, tuple):
            return type(value)(self._unwrap(v, device) for v in value)
        if type(value) is dict and device is not None:
            return {k: self._unwrap(v, device) for k, v in value.items()}
        return value if device is None else to_device(value, device)


_MISSING = object()


def to_device(value, device):
    """`value` with its tensors on `device`: tensors moved, a module copied and moved (nn.Module's
    `.to` moves in place), lists, tuples and dicts item by item, anything else as it is."""
    torch = sys.modules.get("torch")
    if torch is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value).to(device)
    if type(value) in (list, tuple):
        return type(value)(to_device(v, device) for v in value)
    if type(value) is dict:
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def one_device():
    """A context in which a torch call that mixes tensors of two devices raises, as it would on a
    GPU: the meta device lets some through (the CPU indices of an embedding or an index_select).
    As on a GPU, a number (a 0-dim CPU tensor) goes with any device, and indexing, copies and
    moves are not calls that mix."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves
    free = {torch.Tensor.__getitem__, torch.Tensor.__setitem__, torch.Tensor.to, torch.Tensor.copy_}

    class OneDevice(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if func not in free and any(isinstance(r, torch.Tensor) for r in tree_leaves(result)):
                devices = {t.device.type for t in tree_leaves((args, kwargs))
                           if isinstance(t, torch.Tensor) and (t.dim() or t.device.type != "cpu")}
                if len(devices) > 1:
                    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                                       f"{' and '.join(sorted(devices))} (in {getattr(func, '__name__', 'a torch call')})")
            return result
    return OneDevice()


def layout(value, _depth=0):
    """What a value is made of, without its data: a tensor as {"shape", "dtype", "device"}, a
    module as the layouts of its parameters and buffers by name, lists, tuples and dicts item by
    item, anything else as {"type": its type's name}."""
    if _depth > 20:
        raise WireError("the value is nested too deeply")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."), "device": value.device.type}
    if torch is not None and isinstance(value, torch.nn.Module):
        named = [*value.named_parameters(), *value.named_buffers()]
        return {"module": {str(name): layout(t, _depth + 1) for name, t in named[:10_000]}}
    if type(value) in (list, tuple):
        return type(value)(layout(v, _depth + 1) for v in value[:10_000])
    if isinstance(value, dict):  # a state_dict (an OrderedDict) included
        return {str(k): layout(v, _depth + 1) for k, v in list(value.items())[:10_000]}
    return {"type": str(type(value).__name__)[:100]}


def _name(target, method):
    base = "the object" if isinstance(target, Handle) else target
    return f"{base}.{method}" if method else base


def describe_exception(error):
    """`Type: message (in function, code cell N, line L)`: where in the student's code, not the grader's."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<cell")]
    where = ""
    if frames:
        frame = frames[-1]
        inside = f"in {frame.name[:100]}, " if frame.name != "<module>" else ""
        where = f" ({inside}code {frame.filename[1:-1]}, line {frame.lineno})"
    try:
        message = str(error)[:300]
    except Exception:  # noqa: BLE001 (a __str__ that raises)
        message = "(its message could not be read)"
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        message += (" (the memory limit was reached: the sandbox bounds all your processes' memory together, "
                    "and refuses memfd_create and System V shared memory)")
    kind = str(type(error).__name__)[:100]  # a class name can be megabytes long
    return f"{kind}: {message}{where}" if message else f"{kind}{where}"
