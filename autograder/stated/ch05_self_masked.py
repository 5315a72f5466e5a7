"""Chapter 5's stated rules: what the functions do to their arguments and to the gradients."""
import numpy as np

from .register import CheckFailure, stated
from .calling import describe, tensor, close_enough, expect_unchanged, backward_gradients, _parameter_names


# ---- chapter 5: what the functions do to their arguments and to the gradients ----------------

@stated("05-self-masked", "graph_mask", "the caller's adjacency is left as it was: the mask is a new tensor")
def graph_leaves_adjacency(student, rng):
    import torch
    directed = torch.from_numpy(rng.random((2, 4, 4)) < 0.5)
    for adjacency in (directed, directed.long(), directed * torch.from_numpy(rng.normal(size=(2, 4, 4)))):
        adjacency.diagonal(dim1=-2, dim2=-1).fill_(0)  # no self-loops yet: writing them in shows
        what = f"graph_mask(adjacency {describe(adjacency)}, no self-loops)"
        got = expect_unchanged(student, "graph_mask", (adjacency,), ("adjacency",), what, hint="write the self-loops "
                                "into a new tensor (`|` and torch.eye make new ones; torch.as_tensor returns the very "
                                "tensor it is given)")
        expected = (adjacency != 0) | torch.eye(4, dtype=torch.bool)
        got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
        if not (isinstance(got, torch.Tensor) and got.dtype == torch.bool and torch.equal(got, expected)):
            raise CheckFailure(f"{what} returned {describe(got)}, expected the bool mask {describe(expected)}, True "
                               "where the adjacency is nonzero and on the diagonal: whether it leaves the adjacency as "
                               "it was is judged on a right mask")


def _expect_gradients(student, class_name, init, x, name="x"):
    """`class_name(*init)`'s output on `x` (called `name`), summed and backpropagated in the
    student's process, leaves a gradient on every parameter."""
    label = f"{class_name}{init}"
    module = student.call(class_name, *init, keep=True, _label=label)
    out = student.call(module, x, keep=True, _label=label)
    loss = student.call(out, method="sum", keep=True, _label=f"{label}({name}).sum()")
    backward_gradients(student, module, loss, _parameter_names(student, module, label), label,
                        f"{label} on {name} {describe(x)}: its output's sum().backward()")


@stated("05-self-masked", "CausalSelfAttention", "trainable: sum(output).backward() gives every parameter a gradient")
def layer_gradients(student, rng):
    _expect_gradients(student, "CausalSelfAttention", (8, 2), tensor(rng, (2, 5, 8)))


@stated("05-self-masked", "TinyLM", "trainable: sum(logits).backward() gives every parameter a gradient")
def lm_gradients(student, rng):
    import torch
    _expect_gradients(student, "TinyLM", (11, 12, 2, 2, 10), torch.from_numpy(rng.integers(0, 11, size=(2, 6))), "tokens")


@stated("05-self-masked", "generate", "under torch.no_grad(): the logits it returns carry no gradient graph, with "
        "the cache and without")
def generate_without_gradients(student, rng):
    import torch
    label = "TinyLM(13, 16, 2, 2, 12)"
    model = student.call("TinyLM", 13, 16, 2, 2, 12, keep=True, _label=label)
    prompt = torch.from_numpy(rng.integers(0, 13, size=(2, 3)))
    for use_cache in (True, False):
        what = f"generate({label}, prompt {describe(prompt)}, 3, use_cache={use_cache})"
        result = student.call("generate", model, prompt, 3, use_cache=use_cache, keep=True, _label=what)
        logits = student.call(result, 1, method="__getitem__", keep=True, _label=f"{what}[1]")
        if student.call(logits, "requires_grad", method="__getattribute__", _label=f"{what}[1].requires_grad"):
            raise CheckFailure(f"{what}: the logits it returns require grad, so every step recorded a graph for "
                               "backward that nothing uses (memory and time): run the loop under torch.no_grad()")
        got = tuple(student.call(result, i, method="__getitem__", _label=f"{what}[{i}]") for i in (0, 1))
        _expect_greedy(student, model, prompt, got, what, label)


def _expect_greedy(student, model, prompt, got, what, label):
    """`got` is greedy decoding's (tokens, logits) from `prompt`, as the text defines it: each new token
    the arg-max of the model's logits at the last position, those logits returned. The model's
    logits are its own on the tokens returned, computed in one call without a cache here."""
    import torch
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise CheckFailure(f"{what} should return a pair (tokens, logits), got {describe(got)}")
    tokens, logits = (torch.as_tensor(np.asarray(v)) for v in got)
    n0, n_new = prompt.shape[-1], 3
    if tokens.shape != (prompt.shape[0], n0 + n_new) or not torch.equal(tokens[:, :n0], prompt):
        raise CheckFailure(f"{what}: tokens should be the prompt followed by {n_new} new ones, shape "
                           f"{(prompt.shape[0], n0 + n_new)}, got {describe(tokens)}: whether it runs under "
                           "torch.no_grad() is judged on a right result")
    own = torch.as_tensor(np.asarray(student.call(model, tokens[:, :-1], _label=label)))[:, n0 - 1:]
    if logits.shape != own.shape:
        differs = f"logits {describe(logits)}, expected shape {tuple(own.shape)}"
    elif not close_enough(logits, own, 1e-4, 1e-5):
        index = tuple(int(i) for i in torch.nonzero(~torch.isclose(logits.double(), own.double(), 1e-4, 1e-5))[0])
        differs = f"logits{list(index)} is {logits[index].item():.6g}, expected {own[index].item():.6g}"
    elif not torch.equal(tokens[:, n0:], own.argmax(-1)):
        row, step = (int(i) for i in torch.nonzero(tokens[:, n0:] != own.argmax(-1))[0])
        differs = f"new token {step} of row {row} is {int(tokens[row, n0 + step])}, the arg-max {int(own[row, step].argmax())}"
    else:
        return
    raise CheckFailure(f"{what}: the tokens and logits are not greedy decoding's (each new token the arg-max of the "
                       f"model's logits at the last position, those logits returned; {differs}, from {label} on the "
                       "tokens returned): whether it runs under torch.no_grad() is judged on a right result")
