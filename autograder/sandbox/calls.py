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
            new[name] = PROBES[name].make(self.namespace, standins, self.ask_grader)
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

    def call(self, target, args=(), kwargs=None, method=None, keep=False, device=None, forbid=None):
        """Plain result of `target(*args, **kwargs)` (or of its `method`); a Handle if `keep`.
        With `device` ("emulated", the emulated accelerator of the device rule, or "cpu"), the
        tensors among the arguments and the kept objects involved are moved to that device first
        (modules as copies: the kept one stays as it was), and the result comes back as its
        `layout`: where its tensors are, not their values."""
        if forbid:  # the functions the exercise's text forbids fail the call (`Forbidden`)
            return Forbidden(forbid, self.namespace).run(lambda: self.call(target, args, kwargs, method, keep, device))
        function = self._resolve(target, method, device)
        args = [self._unwrap(a, device) for a in args]
        kwargs = {k: self._unwrap(v, device) for k, v in (kwargs or {}).items()}
        try:
            with on(device):
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


def on(device):
    """The context a call on `device` runs in: the emulated accelerator's rules, or none."""
    from . import emulated
    return emulated.EmulatedDevice() if device == emulated.NAME else contextlib.nullcontext()


def to_device(value, device):
    """`value` with its tensors on `device`: tensors moved, a module copied and moved (nn.Module's
    `.to` moves in place), lists, tuples and dicts item by item, anything else as it is."""
    from . import emulated
    torch = sys.modules.get("torch")
    if torch is None:
        return value
    if device == emulated.NAME:
        return emulated.to_device(value)
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
    GPU: the meta device (on which the grader measures a call's work) lets some through (the CPU
    indices of an embedding or an index_select).
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
        from .emulated import device_type
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."), "device": device_type(value)}
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


# ---- the functions an exercise's text forbids -------------------------------------------------

class ForbiddenFunction(RuntimeError):
    """The student's code called a function that the exercise's text forbids."""


class Forbidden:
    """One call during which the functions an exercise's text forbids fail. `forbid`:
    {"functions": {where the function lives ("torch.nn.functional.cross_entropy",
    "torch.Tensor.log_softmax"): how the message names it}, "why": what the text asks instead}.
    Each is replaced where it lives (its module, or torch.Tensor for a method) and wherever the
    notebook's globals bind it (`from torch.nn.functional import cross_entropy`), by a function that
    raises `ForbiddenFunction`, naming it, the student's line and `why`; all is put back after the
    call, however it ends. The call fails if it reached one, even where the student's code caught the
    error. What this catches is an honest use, a module that calls one included (nn.CrossEntropyLoss
    calls torch.nn.functional.cross_entropy); code that hides a function from it (a default
    argument, a closure, torch's private names) is not caught, and cannot harm the grader: this runs
    in the student's process, and only the call's error comes back."""

    def __init__(self, forbid, namespace):
        functions, why = (forbid.get("functions"), forbid.get("why", "")) if isinstance(forbid, dict) else (None, None)
        if not (isinstance(functions, dict) and isinstance(why, str)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items())):
            raise CallError("the grader sent a malformed list of forbidden functions (tell your instructor)")
        self.functions, self.why, self.namespace = functions, why, namespace
        self.hits = []       # the messages of the forbidden calls made, in order
        self.replaced = []   # [(owner, name, whether the owner held it itself, its value)], to put back
        self.active = False

    def run(self, call):
        """`call()`'s value, unless it reached a forbidden function (CallError, naming the first)."""
        try:
            self._install()
            try:
                value = call()
            except CallError:
                if not self.hits:
                    raise
        finally:
            self._restore()
        if self.hits:
            raise CallError(self.hits[0])
        return value

    def _guard(self, original, shown):
        def forbidden(*args, **kwargs):
            if not self.active:  # left in place by a restore that was interrupted: the function itself
                return original(*args, **kwargs)
            message = f"your code called {shown}, which this exercise's text forbids"
            message += f": {self.why}" if self.why else ""
            self.hits.append(f"{ForbiddenFunction.__name__}: {message}{_student_line()}")
            raise ForbiddenFunction(message)
        forbidden.__forbidden_original__ = original
        return forbidden

    def _install(self):
        guards = {}  # id of a function: its guard (one function may live under two names)
        for dotted, shown in self.functions.items():
            try:
                owner, name = _owner(dotted)
                current = getattr(owner, name, None) if owner is not None else None
                if current is None:  # its module is not loaded: the notebook cannot have called it
                    continue
                original = getattr(current, "__forbidden_original__", current)
                guards.setdefault(id(original), (original, self._guard(original, shown)))
                self._set(owner, name, guards[id(original)][1])
            except Exception:  # noqa: BLE001 (an owner the student's code made odd: not caught there)
                continue
        for key, value in list(self.namespace.items()):
            found = guards.get(id(value))
            if found is not None and found[0] is value:
                self.replaced.append((self.namespace, key, None, value))
                self.namespace[key] = found[1]
        self.active = True

    def _set(self, owner, name, value):
        held = name in vars(owner)  # torch.Tensor inherits its methods: put back means removed
        self.replaced.append((owner, name, held, vars(owner)[name] if held else None))
        setattr(owner, name, value)

    def _restore(self):
        self.active = False
        for owner, name, held, before in reversed(self.replaced):
            try:
                if owner is self.namespace:
                    if getattr(owner.get(name), "__forbidden_original__", None) is before:
                        owner[name] = before
                elif held:
                    setattr(owner, name, before)
                else:
                    delattr(owner, name)
            except Exception:  # noqa: BLE001 (the student's code changed the owner; its guard passes calls on)
                pass
        self.replaced = []


def _owner(dotted):
    """(the object that holds the last name of `dotted`, that name): the modules already loaded, then
    attributes ("torch.Tensor"); (None, None) when there is none."""
    parts = dotted.split(".")
    owner = sys.modules.get(parts[0])
    for i in range(1, len(parts) - 1):
        if owner is None:
            break
        owner = sys.modules.get(".".join(parts[:i + 1])) or getattr(owner, parts[i], None)
    return (owner, parts[-1]) if owner is not None else (None, None)


def _student_line():
    """` (in function, code cell N, line L)`: the student's line that is running, as `describe_exception` says it."""
    frames = [f for f in traceback.extract_stack() if f.filename.startswith("<cell")]
    if not frames:
        return ""
    frame = frames[-1]
    inside = f"in {frame.name[:100]}, " if frame.name != "<module>" else ""
    return f" ({inside}code {frame.filename[1:-1]}, line {frame.lineno})"
