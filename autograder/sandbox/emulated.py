"""An emulated accelerator for the device rule: a GPU's rules, the CPU's arithmetic.

A tensor "on the device" is a CPU tensor whose storage is marked here; its `.device` says
`emulated`. Inside `EmulatedDevice()` (a TorchFunctionMode):
- a tensor made with `device=<the emulated device>` (`torch.zeros(n, device=x.device)`,
  `nn.Linear(..., device=...)`) or moved there (`.to(x.device)`, a module's `.to(device)`) is
  made on the CPU and marked;
- what an operation on a marked tensor returns is marked (views share their storage's mark);
- an operation that meets a marked tensor and an unmarked one raises, as CUDA does, unless the
  unmarked one is a 0-dimensional CPU tensor (a number, which CUDA accepts) or the operation
  moves or indexes (`.to`, `copy_`, `x[index]`, `x[index] = value`);
- `.cpu()` and `.to("cpu")` give an unmarked copy; `.numpy()` raises, as on CUDA; `.item()`,
  `.tolist()`, `bool(x)`, boolean masks and `nonzero` work, as on a GPU.
Marks live as long as the storage (a weak set of PyTorch's storage objects, which PyTorch keeps
as one Python object per storage while it lives). Values are real, so the same call can be run
here and compared with the CPU's. The backend's name is PyTorch's PrivateUse1, renamed: no kernel
runs on it, so a tensor made there by a path this mode does not see fails loudly.
"""
import sys
import weakref

NAME = "emulated"
_marked = weakref.WeakSet()
_renamed = False


def device():
    """torch.device("emulated"), the backend renamed once per process."""
    global _renamed
    import torch
    if not _renamed:
        if torch._C._get_privateuse1_backend_name() != NAME:
            torch.utils.rename_privateuse1_backend(NAME)
        if not hasattr(torch, NAME):  # torch.accelerator asks the backend's module; it has no device to offer
            import types
            module = types.ModuleType(f"torch.{NAME}")
            module.is_available, module.device_count = (lambda: False), (lambda: 0)
            module.manual_seed_all, module._is_in_bad_fork = (lambda seed: None), (lambda: False)  # its RNG is the CPU's
            torch._register_device_module(NAME, module)
        _renamed = True
    return torch.device(NAME)


def mark(tensor):
    _marked.add(tensor.untyped_storage())
    return tensor


def on_device(tensor):
    """Whether `tensor` is on the emulated device."""
    try:
        return tensor.untyped_storage() in _marked
    except (RuntimeError, NotImplementedError):  # a meta tensor, a tensor subclass without storage
        return False


def host(tensor):
    """An unmarked copy of `tensor` (its values, for the wire), made outside any mode."""
    import torch
    with torch._C.DisableTorchFunction():
        return tensor.detach().clone()


def mixed(tensors):
    """The error CUDA raises for these tensors together, or None: some on the device, and some
    not, other than 0-dimensional CPU tensors (numbers, which CUDA accepts)."""
    marked = [on_device(t) for t in tensors]
    if any(marked) and any(not m and (t.dim() or t.device.type != "cpu") for t, m in zip(tensors, marked)):
        return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {NAME} "
                            "and cpu!")
    return None


def device_type(tensor):
    """`tensor.device.type`, the emulated device's name for a marked tensor."""
    return NAME if on_device(tensor) else tensor.device.type


def to_device(value):
    """`value` with its tensors copied to the emulated device: a module copied, with its parameters
    and buffers moved; lists, tuples and dicts item by item; anything else as it is."""
    import copy
    torch = sys.modules["torch"]
    if isinstance(value, torch.Tensor):
        return mark(value.detach().clone().requires_grad_(value.requires_grad)) if value.is_leaf else mark(value.clone())
    if isinstance(value, torch.nn.Module):
        moved = copy.deepcopy(value)
        for t in [*moved.parameters(), *moved.buffers()]:
            t.data = mark(t.data.clone())
        return moved
    if type(value) in (list, tuple):
        return type(value)(to_device(v) for v in value)
    if type(value) is dict:
        return {k: to_device(v) for k, v in value.items()}
    return value


def _is_emulated(where):
    import torch
    if isinstance(where, torch.Tensor):
        return on_device(where)
    try:
        return where is not None and torch.device(where).type == NAME
    except (RuntimeError, TypeError):
        return False


def _is_cpu(where):
    import torch
    try:
        return where is not None and not isinstance(where, torch.Tensor) and torch.device(where).type == "cpu"
    except (RuntimeError, TypeError):
        return False


def EmulatedDevice():  # noqa: N802 (a context, named as the class it makes)
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves
    target = device()
    moves = {torch.Tensor.to, torch.Tensor.copy_, torch.Tensor.__getitem__, torch.Tensor.__setitem__,
             torch.Tensor.cpu, torch.Tensor.clone, torch.Tensor.detach, torch.Tensor.requires_grad_}
    base, parse_to = torch._C.TensorBase, torch._C._nn._parse_to

    def reads(func, attribute):  # a property's getter: a new method-wrapper at each access
        return getattr(func, "__name__", None) == "__get__" and getattr(func, "__self__", None) is attribute

    class Emulated(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if reads(func, base.device):
                return target if on_device(args[0]) else func(*args, **kwargs)
            if reads(func, base.grad):  # autograd made it without this mode: it is where its tensor is
                grad = func(*args, **kwargs)
                return mark(grad) if grad is not None and on_device(args[0]) else grad
            if func is torch.Tensor.numpy and on_device(args[0]):
                raise TypeError(f"can't convert {NAME} device type tensor to numpy. Use Tensor.cpu() to copy the "
                                "tensor to host memory first.")
            if func is torch.Tensor.cpu or (func is torch.Tensor.to and _to_cpu(args, kwargs)):
                moved = func(*args, **kwargs)
                return moved.clone() if on_device(args[0]) and moved.untyped_storage() is args[0].untyped_storage() else moved
            if func is torch.Tensor.to and _to_emulated(args, kwargs):
                return _moved_here(func, args, kwargs)
            if func is parse_to:  # nn.Module.to's parsing: the device as given (a tensor's: its own), for the moves
                parsed = func(*args, **kwargs)
                if any(isinstance(a, torch.Tensor) and on_device(a) for a in [*args, *kwargs.values()]):
                    parsed = (target, *parsed[1:])
                return parsed
            made_here = _is_emulated(kwargs.get("device"))
            if made_here:
                kwargs["device"] = "cpu"
            tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            marked = [on_device(t) for t in tensors]
            result = func(*args, **kwargs)
            made = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
            if any(marked) and made and func not in moves:  # a call that makes no tensor mixes nothing
                error = mixed(tensors)
                if error is not None:
                    raise RuntimeError(f"{error} (in {getattr(func, '__name__', 'a torch call')})")
            if made_here or any(marked):
                if func is torch.Tensor.__setitem__ or (func is torch.Tensor.copy_ and not marked[0]):
                    return result  # the destination keeps its device
                for t in made:
                    mark(t)
            return result
    return Emulated()


def _to_cpu(args, kwargs):
    where = kwargs.get("device", args[1] if len(args) > 1 else None)
    return _is_cpu(where)


def _to_emulated(args, kwargs):
    where = kwargs.get("device", args[1] if len(args) > 1 else None)
    return _is_emulated(where)


def _moved_here(func, args, kwargs):
    """`x.to(<emulated>, ...)`: x itself if already there (as torch does), else a marked copy."""
    import torch
    x, rest = args[0], list(args[1:])
    if "device" in kwargs:
        kwargs = {**kwargs, "device": "cpu"}
    else:
        rest[0] = "cpu" if not isinstance(rest[0], torch.Tensor) else rest[0].dtype
    moved = func(x, *rest, **kwargs)
    if on_device(x):
        return mark(moved)
    return mark(moved.clone() if moved.untyped_storage() is x.untyped_storage() else moved)
