"""Stand-ins for the reference versions of finished exercises, in the student's process.

An exercise is checked with the reference versions of the exercises before it, so a bug costs
points only where it is. Those versions never enter the student's process: each of their names
is bound here to a stand-in whose every call the grader computes on its own side
(`checks/known_good.py`) and answers over the channel. A class's stand-in holds real parameters
in this process (the student's code trains them, copies weights into them, moves them to a
device); each call sends them along, and their gradients come back through one autograd function.
This file holds no line of a solution: only the calling convention.
"""
import sys

from .emulated import NAME as EMULATED, host, mark, on_device

TAG = "__known_good__"   # marks the values that are not plain data (meta or emulated tensors, objects, stand-ins)


class StandIns:
    """The stand-ins of one exercise's known-good names; `ask(*request)` asks the grader."""

    def __init__(self, spec, ask):
        self.ask = ask
        self.by_name = {}
        for name, kind in spec.items():
            self.by_name[name] = self._class(name, kind.get("methods", ())) if kind["kind"] == "module" \
                else self._function(name)

    # -- what the student's code sees ----------------------------------------------------------

    def _function(self, name):
        standins = self

        def standin(*args, **kwargs):
            return standins.remote(("call", name), args, kwargs)
        standin.__name__ = standin.__qualname__ = name
        standin._known_good_name = name
        return standin

    def _class(self, name, methods):
        torch = sys.modules["torch"]
        standins = self

        def __init__(module, *args, **kwargs):
            torch.nn.Module.__init__(module)
            # the grader draws the parameters from a seed drawn here: the student's seed decides
            # them, and the grader never loads a generator's state from this process
            seed = int(torch.randint(0, 2**62, (1,), device="cpu").item())
            built = standins.ask("new", name, standins.send(list(args)), standins.send(kwargs), seed)
            standins.build(module, (name, built["init"][0], built["init"][1]), "", built["tree"], built["state"])

        body = {"__init__": __init__, "__module__": "__main__"}
        for method in ("forward", *methods):
            body[method] = self._method(method)
        return type(name, (torch.nn.Module,), body)

    def _method(self, method, root=None):
        """A stand-in method: the reference's `method` on the module's own parameters and buffers.
        `root`: the reference class it comes from (class name, args, kwargs), for a probe's class
        that has the student's other methods; else the module's own (`build`)."""
        standins = self

        def call(module, *args, **kwargs):
            where, path = (root, "") if root is not None else module._known_good
            state = dict(module.named_parameters(remove_duplicate=False))
            state.update(module.named_buffers(remove_duplicate=False))
            return standins.remote(("method", where, path, method, module.training), args, kwargs, state)
        call.__name__ = method
        return call

    def method_of(self, class_name, method):
        """For a probe: the reference class's `method`, computed by the grader, on any module
        that holds the parameters it reads."""
        return self._method(method, (class_name, [], {TAG: "dict", "items": []}))

    def build(self, module, root, path, tree, state, made=None):
        """Give `module` (an empty nn.Module) the reference's layout at `path`: its parameters
        (a tied one is the same Parameter) and buffers with `state`'s values, its plain
        attributes, its submodules (stand-ins too). `made`: the parameters made so far, by name."""
        torch = sys.modules["torch"]
        made = {} if made is None else made
        module._known_good = (root, path)
        for key, value in tree["attributes"].items():
            setattr(module, key, value)
        for key, about in tree["parameters"].items():
            full = _join(path, key)
            made[full] = made[about["same_as"]] if about["same_as"] else \
                torch.nn.Parameter(state[full], requires_grad=bool(about["grad"]))
            module.register_parameter(key, made[full])
        for key, persistent in tree["buffers"].items():
            module.register_buffer(key, state[_join(path, key)], persistent=persistent)
        for key, child in tree["children"].items():
            if child["container"] == "ModuleList":
                sub = torch.nn.ModuleList()
            elif child["container"] == "Sequential":
                sub = torch.nn.Sequential()
            else:
                sub = type(child["class"], (torch.nn.Module,), {"forward": self._method("forward"),
                                                                "__module__": "__main__"})()
            self.build(sub, root, _join(path, key), child, state, made)
            module.add_module(key, sub)
        return module

    # -- one call, computed by the grader ------------------------------------------------------

    def remote(self, what, args, kwargs, state=None):
        """The grader's answer to `what` on these arguments: through an autograd function when a
        tensor among them (the module's parameters included) needs its gradient."""
        torch = sys.modules.get("torch")
        call = _Call(self, what, args, kwargs, state or {})
        if torch is None or not torch.is_grad_enabled() or not call.differentiable:
            return call.run(call.differentiable, grad=False)
        outputs = _autograd_function().apply(call, *call.differentiable)
        return call.rebuild(outputs)

    def send(self, value, differentiable=None, objects=None):
        """`value` as the grader receives it: plain data, with the tensors that need a gradient
        listed in `differentiable` and the objects of the notebook's given classes in `objects`."""
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        if value is None or type(value) in (bool, int, float, str):
            return value
        if torch is not None and isinstance(value, torch.Tensor):
            if differentiable is not None and value.requires_grad and value.is_floating_point():
                index = next((i for i, t in enumerate(differentiable) if t is value), None)
                if index is None:
                    differentiable.append(value)
                    index = len(differentiable) - 1
                return {TAG: "differentiable", "index": index}
            if on_device(value):  # on the emulated GPU: its values, and where they are
                return {TAG: EMULATED, "value": host(value)}
            if value.device.type == "meta":
                return {TAG: "meta", "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
            return value.detach()
        if np is not None and isinstance(value, np.generic):
            return {TAG: "scalar", "value": np.asarray(value)}
        if getattr(value, "_known_good_name", None):
            return {TAG: "function", "name": value._known_good_name}
        if type(value) in (list, tuple):
            return type(value)(self.send(v, differentiable, objects) for v in value)
        if type(value) is dict:
            return {TAG: "dict", "items": [[self.send(k), self.send(v, differentiable, objects)] for k, v in value.items()]}
        if np is not None and isinstance(value, np.ndarray):
            return value
        if torch is not None and isinstance(value, torch.nn.Module):
            raise TypeError(f"the reference version of this exercise cannot be given a {type(value).__name__} module")
        if objects is not None and hasattr(value, "__dict__") and not callable(value):
            objects.append(value)
            state = {k: self.send(v) for k, v in vars(value).items()}
            return {TAG: "object", "class": type(value).__name__, "index": len(objects) - 1, "state": state}
        raise TypeError(f"the reference version of this exercise cannot be given a {type(value).__name__}")

    def receive(self, value, device=None):
        torch = sys.modules.get("torch")
        if type(value) in (list, tuple):
            return type(value)(self.receive(v, device) for v in value)
        if type(value) is dict and TAG in value:
            kind = value[TAG]
            if kind == "meta":
                return torch.empty(value["shape"], dtype=getattr(torch, value["dtype"]), device="meta")
            if kind == EMULATED:
                return mark(value["value"])
            if kind == "scalar":
                return value["value"][()]
            if kind == "function":
                return self.by_name[value["name"]]
            if kind == "dict":
                return {self.receive(k): self.receive(v, device) for k, v in value["items"]}
            if kind == "module":
                module = torch.nn.Module.__new__(self.by_name[value["class"]])
                torch.nn.Module.__init__(module)
                return self.build(module, tuple(value["root"]), "", value["tree"], value["state"])
            raise ValueError(f"unexpected answer from the grader ({kind})")
        if torch is not None and isinstance(value, torch.Tensor) and device is not None:
            return value.to(device)
        return value


class _Call:
    """One request: the arguments as sent, the tensors that need gradients, the objects whose
    state the call may change (a KVCache), and the answer."""

    def __init__(self, standins, what, args, kwargs, state):
        self.standins, self.what = standins, what
        self.differentiable, self.objects = [], []
        self.sent = standins.send([list(args), kwargs, state], self.differentiable, self.objects)
        torch = sys.modules.get("torch")
        devices = {t.device for t in self.tensors((args, kwargs, state))} if torch is not None else set()
        self.device = devices.pop() if len(devices) == 1 else None
        if self.device is not None and self.device.type in ("cpu", "meta", EMULATED):  # the answer says where
            self.device = None
        self.template = None

    def tensors(self, value):
        torch = sys.modules["torch"]
        if isinstance(value, torch.Tensor):
            yield value
        elif type(value) in (list, tuple):
            for v in value:
                yield from self.tensors(v)
        elif type(value) is dict:
            for v in value.values():
                yield from self.tensors(v)

    def run(self, differentiable, grad):
        """Send the request; with `grad`, the answer's differentiable outputs come back flat (for
        the autograd function) and the rest is kept to rebuild the result."""
        args, kwargs, state = self.sent
        answer = self.standins.ask(*self.what, args, kwargs, state,
                                   self.standins.send([t.detach() for t in differentiable]), grad)
        for index, updated in answer["objects"]:
            vars(self.objects[index]).update({k: self.standins.receive(v, self.device) for k, v in updated.items()})
        if not grad:
            return self.standins.receive(answer["value"], self.device)
        self.key, self.template = answer["key"], answer["value"]
        return tuple(self.standins.receive(t, self.device) for t in answer["outputs"])

    def rebuild(self, outputs):
        def fill(value):
            if type(value) in (list, tuple):
                return type(value)(fill(v) for v in value)
            if type(value) is dict and value.get(TAG) == "output":
                return outputs[value["index"]]
            return self.standins.receive(value, self.device)
        return fill(self.template)


_FUNCTION = None


def _autograd_function():
    global _FUNCTION
    if _FUNCTION is None:
        import torch

        class KnownGood(torch.autograd.Function):
            """The reference's outputs, computed by the grader; their gradients too."""

            @staticmethod
            def forward(ctx, call, *differentiable):
                ctx.call = call
                return call.run(differentiable, grad=True)

            @staticmethod
            def backward(ctx, *grads):
                call = ctx.call
                answer = call.standins.ask("backward", call.key, [g.detach() for g in grads])
                return (None, *(None if g is None else call.standins.receive(g, call.device) for g in answer))
        _FUNCTION = KnownGood
    return _FUNCTION


def _join(path, key):
    return f"{path}.{key}" if path else key
