"""Chapter 9's stated rules: the model's parameters and its tie, Llama 2 7B's count, the loss and the
clipping as PyTorch computes them, and the device rule of the exercises on tensors."""
import numpy as np

from .register import CheckFailure, stated
from .calling import StudentError, describe, tensor, close_enough

ASSIGNMENT = "09-language-model"


# ---- LlamaLM: the attributes of the text ----------------------------------------------------------

def _lm_shapes(vocab, dim, layers, heads, kv_heads, hidden):
    d_h = dim // heads
    shapes = {"embed.weight": (vocab, dim)}
    for i in range(layers):
        p = f"layers.{i}."
        shapes.update({p + "attn_norm.weight": (dim,), p + "attention.q_proj.weight": (heads * d_h, dim),
                       p + "attention.k_proj.weight": (kv_heads * d_h, dim),
                       p + "attention.v_proj.weight": (kv_heads * d_h, dim),
                       p + "attention.o_proj.weight": (dim, heads * d_h), p + "mlp_norm.weight": (dim,),
                       p + "gate_proj.weight": (hidden, dim), p + "up_proj.weight": (hidden, dim),
                       p + "down_proj.weight": (dim, hidden)})
    shapes.update({"norm.weight": (dim,), "lm_head.weight": (vocab, dim)})
    return shapes


@stated(ASSIGNMENT, "LlamaLM", "embed, layers (num_layers DecoderBlocks), norm, lm_head (dim -> vocab_size, no bias), "
        "and no other parameter", weight=0.5)
def lm_parameters(student, rng):
    for sizes, tie in (((40, 16, 2, 4, 2, 24), True), ((30, 12, 3, 3, 1, 20), False)):
        label = f"LlamaLM{sizes[:6]}, tie_embeddings={tie}"
        handle = student.call("LlamaLM", *sizes, tie_embeddings=tie, keep=True, _label=label)
        state = student.call(handle, method="state_dict", _label=label)
        found = {n: tuple(np.shape(v)) for n, v in state.items()} if isinstance(state, dict) else state
        expected = _lm_shapes(*sizes)
        if found != expected:
            missing = sorted(set(expected) - set(found)) if isinstance(found, dict) else []
            extra = sorted(set(found) - set(expected)) if isinstance(found, dict) else []
            shown = (f"missing {', '.join(missing) or 'nothing'}; not in the text: {', '.join(extra) or 'nothing'}"
                     if missing or extra else f"found {found}")
            raise CheckFailure(f"{label} should hold exactly the parameters {expected} (name: shape): {shown}")


def _parameter_id(student, model, name, label):
    parameter = student.call(model, name, method="get_parameter", keep=True, _label=f"{label}.{name}")
    return student.call(parameter, method="__hash__", _label=f"{label}.{name}")  # a tensor's hash is its id


@stated(ASSIGNMENT, "LlamaLM", "tie_embeddings=True: lm_head.weight is embed.weight, one nn.Parameter (a copy is not "
        "a tie); tie_embeddings=False: two", weight=0.5)
def lm_tie(student, rng):
    for tie in (True, False):
        label = f"LlamaLM(40, 16, 1, 4, 2, 24, tie_embeddings={tie})"
        model = student.call("LlamaLM", 40, 16, 1, 4, 2, 24, tie_embeddings=tie, keep=True, _label=label)
        one = _parameter_id(student, model, "lm_head.weight", label) == _parameter_id(student, model, "embed.weight",
                                                                                     label)
        if one != tie:
            raise CheckFailure(f"{label}: lm_head.weight {'is not' if tie else 'is'} embed.weight: "
                               + ("tie them: assign embed.weight to lm_head.weight (the same Parameter; "
                                  "nn.Parameter(self.embed.weight) or a copy makes a second one)" if tie else
                                  "untied, the head has its own weight"))


# ---- count_parameters: Llama 2 7B ----------------------------------------------------------------------

LLAMA_2_7B = dict(vocab_size=32000, dim=4096, num_layers=32, num_heads=32, num_kv_heads=32, hidden_dim=11008,
                  tie_embeddings=False)


@stated(ASSIGNMENT, "count_parameters", "Llama 2 7B's published configuration: 6,738,415,616 parameters, an int",
        weight=0.5)
def llama_2_7b(student, rng):
    got = student.call("count_parameters", dict(LLAMA_2_7B), _label=f"count_parameters({LLAMA_2_7B})")
    if not (isinstance(got, int) and not isinstance(got, bool) and got == 6_738_415_616):
        raise CheckFailure(f"count_parameters({LLAMA_2_7B}) returned {describe(got)}, expected the int "
                           "6,738,415,616: the embedding and the head (untied), and in each of the 32 blocks the "
                           "four projections, the three MLP matrices and the two norms, then the final norm")


# ---- cross_entropy: F.cross_entropy ---------------------------------------------------------------------

# what the text forbids, where each lives (nn.CrossEntropyLoss, nn.NLLLoss and nn.LogSoftmax call the first three;
# F.log_softmax calls Tensor.log_softmax, but its own name is met first); `sandbox.calls.Forbidden` runs it
LOSS_FORBIDDEN = {
    "functions": {"torch.nn.functional.cross_entropy": "F.cross_entropy (itself, or through nn.CrossEntropyLoss)",
                  "torch.nn.functional.nll_loss": "F.nll_loss (itself, or through nn.NLLLoss)",
                  "torch.nn.functional.log_softmax": "F.log_softmax (itself, or through nn.LogSoftmax)",
                  "torch.log_softmax": "torch.log_softmax",
                  "torch.Tensor.log_softmax": "Tensor.log_softmax (logits.log_softmax(...))"},
    "why": "write the loss yourself, by log-sum-exp: torch.logsumexp(logits, dim=-1) minus the target's logit "
           "(gather), averaged over the targets that are not ignore_index"}

def _loss_inputs(rng):
    import torch
    targets = torch.from_numpy(rng.integers(0, 9, size=(3, 4)))
    targets[0, 0] = targets[2, 3] = -100
    big = torch.from_numpy(rng.choice([-1e4, 1e4], size=(5, 9)))
    return [(tensor(rng, (3, 4, 9), scale=3.0), targets, -100),
            (tensor(rng, (5, 9), torch.float64), torch.from_numpy(rng.integers(0, 9, size=5)), 2),
            (big.float(), torch.from_numpy(rng.integers(0, 9, size=5)), -100),
            (big, torch.from_numpy(rng.integers(0, 9, size=5)), -100)]


@stated(ASSIGNMENT, "cross_entropy", "equals F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), "
        "ignore_index): (B, N, V), ignored targets, logits of +-1e4 (log-sum-exp), float64 kept; written without "
        "F.cross_entropy, F.nll_loss, F.log_softmax, torch.log_softmax or Tensor.log_softmax", weight=0.5)
def loss_is_torchs(student, rng):
    import torch
    import torch.nn.functional as F
    for logits, targets, ignore in _loss_inputs(rng):
        what = f"cross_entropy(logits {describe(logits)}, targets {describe(targets)}, ignore_index={ignore})"
        expected = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore)
        got = student.call("cross_entropy", logits, targets, ignore, _forbid=LOSS_FORBIDDEN)
        got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
        # logsumexp(logits) - logits[target] of float32 logits of 1e4 is off by their rounding, ~1e-3: two
        # roundings of the largest logit (measured: 3e-4 on 2 seeds of 40, where 1e-6 failed the reference)
        atol = max(1e-6, 2 * logits.abs().max().item() * torch.finfo(logits.dtype).eps)
        if not (isinstance(got, torch.Tensor) and got.dtype == logits.dtype and got.shape == ()
                and close_enough(got, expected, 1e-5, atol)):
            raise CheckFailure(f"{what} returned {describe(got)}, expected the {str(logits.dtype)[6:]} 0-dimensional "
                               f"tensor {expected.item():.8g} (F.cross_entropy's): the mean over the targets that are "
                               "not ignore_index of logsumexp(logits) - logits[target], in the logits' dtype")


@stated(ASSIGNMENT, "cross_entropy", "differentiable: its gradient with respect to the logits is F.cross_entropy's",
        weight=0.5)
def loss_gradient(student, rng):
    import torch
    import torch.nn.functional as F
    logits, targets = tensor(rng, (2, 5, 7), torch.float64), torch.from_numpy(rng.integers(0, 7, size=(2, 5)))
    targets[1, 2] = -100
    what = f"cross_entropy(logits {describe(logits)}, targets {describe(targets)}).backward()"
    leaf = student.call("torch", logits, method="clone", keep=True, _label="logits")
    student.call(leaf, True, method="requires_grad_", _label="logits")
    try:
        loss = student.call("cross_entropy", leaf, targets, keep=True, _label="cross_entropy(logits, targets)")
        student.call(loss, method="backward", _label=what)
        grad = student.call(leaf, "grad", method="__getattribute__", _label="logits.grad")
    except StudentError as error:
        raise CheckFailure(f"{error}: the loss must be differentiable (no .item(), .detach() or torch.no_grad() on "
                           "the way)") from None
    reference = logits.clone().requires_grad_(True)
    F.cross_entropy(reference.reshape(-1, 7), targets.reshape(-1)).backward()
    got = None if grad is None else torch.as_tensor(np.asarray(grad))
    # within float32's rounding (1.6e-8 at most over 500 seeds): a loss computed in float32 is charged
    # once, by the rule on its value's dtype; at 1e-9 it failed here too, on 93 % of seeds
    if got is None or not close_enough(got, reference.grad, 1e-6, 1e-7):
        raise CheckFailure(f"{what}: logits.grad is {describe(got)}, not F.cross_entropy's gradient "
                           f"({describe(reference.grad)}): softmax(logits) minus one at the target, over the number of "
                           "targets kept, and zero on the ignored rows")


# ---- clip_grad_norm_: torch.nn.utils.clip_grad_norm_ -----------------------------------------------------

def _linear_with_gradients(student, rng, state, x, label):
    """nn.Linear(4, 3) and nn.Linear(3, 2) in the student's process holding `state`'s values, after
    backward of (second(first(x)) * r).sum(): ([its four parameters as handles], their names)."""
    import torch
    layers = []
    for index, (n_in, n_out) in enumerate(((4, 3), (3, 2))):
        layer = student.call("nn", n_in, n_out, method="Linear", keep=True, _label=f"nn.Linear({n_in}, {n_out})")
        student.call(layer, {"weight": state[f"{index}.weight"], "bias": state[f"{index}.bias"]},
                     method="load_state_dict", _label=f"nn.Linear({n_in}, {n_out})")
        layers.append(layer)
    hidden = student.call(layers[0], x, keep=True, _label="first(x)")
    out = student.call(layers[1], hidden, keep=True, _label="second(first(x))")
    r = torch.from_numpy(state["r"])
    product = student.call(out, r, method="mul", keep=True, _label="second(first(x)) * r")
    student.call(student.call(product, method="sum", keep=True, _label="(...).sum()"), method="backward",
                 _label=f"{label}: the backward pass")
    names = ["0.weight", "0.bias", "1.weight", "1.bias"]
    return [student.call(layers[int(n[0])], n[2:], method="get_parameter", keep=True, _label=f"layer {n}")
            for n in names], names


# what the text forbids: PyTorch's clipping, and its two halves (torch.nn.utils.clip_grad_norm (deprecated) calls
# the first, under its module's name)
CLIP_FORBIDDEN = {
    "functions": {"torch.nn.utils.clip_grad_norm_": "torch.nn.utils.clip_grad_norm_",
                  "torch.nn.utils.clip_grad.clip_grad_norm_": "torch.nn.utils.clip_grad_norm_",
                  "torch.nn.utils.get_total_norm": "torch.nn.utils.get_total_norm",
                  "torch.nn.utils.clip_grads_with_norm_": "torch.nn.utils.clip_grads_with_norm_"},
    "why": "write the clipping yourself: the total norm sqrt(sum of each gradient's squared norm) "
           "(torch.linalg.vector_norm), then every gradient multiplied in place by max_norm / (norm + 1e-6) when "
           "that is below one"}


@stated(ASSIGNMENT, "cosine_lr", "clip_grad_norm_ equals torch.nn.utils.clip_grad_norm_: the total norm returned "
        "before clipping, every gradient scaled in place by max_norm / (norm + 1e-6) when the norm is larger, "
        "parameters without a gradient skipped; written without torch.nn.utils.clip_grad_norm_, get_total_norm or "
        "clip_grads_with_norm_")
def clip_is_torchs(student, rng):
    import torch
    for max_norm, scale in ((0.5, 1.0), (1e3, 1.0), (1.0, 0.01)):
        state = {f"{i}.{k}": tensor(rng, shape, scale=scale) for i, sizes in enumerate(((4, 3), (3, 2)))
                 for k, shape in (("weight", sizes[::-1]), ("bias", sizes[1:]))}
        x = tensor(rng, (5, 4))
        state["r"] = rng.normal(0, 1, (5, 2)).astype(np.float32)
        label = f"clip_grad_norm_(parameters, {max_norm})"
        handles, names = _linear_with_gradients(student, rng, state, x, label)
        # the grader's copy: the same two layers, the same backward, then torch's clipping
        first, second = torch.nn.Linear(4, 3), torch.nn.Linear(3, 2)
        first.load_state_dict({"weight": state["0.weight"], "bias": state["0.bias"]})
        second.load_state_dict({"weight": state["1.weight"], "bias": state["1.bias"]})
        (second(first(x)) * torch.from_numpy(state["r"])).sum().backward()
        mine = [first.weight, first.bias, second.weight, second.bias]
        # one parameter without a gradient, on both sides
        student.call(handles[1], "grad", None, method="__setattr__", _label="layer 0.bias.grad = None")
        mine[1].grad = None
        expected = torch.nn.utils.clip_grad_norm_(mine, max_norm)
        what = f"{label} with the gradients of two nn.Linear layers (0.bias without one)"
        got = student.call("clip_grad_norm_", handles, max_norm, _label=what, _forbid=CLIP_FORBIDDEN)
        got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor, float)) else got
        if not (isinstance(got, torch.Tensor) and got.shape == () and close_enough(got, expected, 1e-5, 1e-7)):
            raise CheckFailure(f"{what} returned {describe(got)}, expected the total norm before clipping, a "
                               f"0-dimensional tensor {expected.item():.6g} (torch.nn.utils.clip_grad_norm_'s)")
        for handle, name, parameter in zip(handles, names, mine):
            grad = student.call(handle, "grad", method="__getattribute__", _label=f"layer {name}.grad")
            if parameter.grad is None:
                if grad is not None:
                    raise CheckFailure(f"{what}: layer {name} had no gradient and has one afterwards: skip the "
                                       "parameters whose .grad is None")
                continue
            got_grad = None if grad is None else torch.as_tensor(np.asarray(grad))
            if got_grad is None or not close_enough(got_grad, parameter.grad, 1e-5, 1e-7):
                if got_grad is not None and got_grad.shape == parameter.grad.shape:
                    bad = ~torch.isclose(got_grad.double(), parameter.grad.double(), rtol=1e-5, atol=1e-7)
                    index = tuple(int(i) for i in torch.nonzero(bad)[0])
                    shown = (f"at index {list(index)} {got_grad[index].item():.6g}, expected "
                             f"{parameter.grad[index].item():.6g} ({int(bad.sum())} of {bad.numel()} entries differ)")
                else:
                    shown = f"{describe(got_grad)}, expected a tensor of shape {tuple(parameter.grad.shape)}"
                raise CheckFailure(f"{what}: the gradient of layer {name} afterwards is {shown} "
                                   "(torch.nn.utils.clip_grad_norm_'s): "
                                   + ("every gradient is scaled in place by max_norm / (norm + 1e-6)"
                                      if expected > max_norm else "a norm below max_norm leaves the gradients as "
                                      "they were"))


# ---- train: weight decay on the matrices only -------------------------------------------------------------
# One step from weights in which one feature of the model is silent: its embedding column and the rows of
# o_proj and down_proj that write it are zero, so it is zero everywhere in the residual stream. The weights that
# read it (that entry of every norm, that column of q_, k_, v_, gate_ and up_proj) then get an exact zero
# gradient, which moves no optimiser: only weight decay moves them. min_lr = max_lr: the step's learning rate is
# max_lr whatever the schedule does, so that a bug of the schedule or of the optimiser's other settings (the
# hidden checks' business) cannot fail this rule.

TRAIN_LM = (20, 16, 2, 4, 2, 24)  # vocab_size, dim, num_layers, num_heads, num_kv_heads, hidden_dim (tied)
READERS = ("attention.q_proj.weight", "attention.k_proj.weight", "attention.v_proj.weight", "gate_proj.weight",
           "up_proj.weight")


@stated(ASSIGNMENT, "train", "weight decay on the matrices only: one step of AdamW's decay, p <- p (1 - lr "
        "weight_decay), on the parameters of two or more dimensions, none on the norms' weights (seen on the "
        "weights that get no gradient)")
def decay_on_matrices(student, rng):
    import torch
    shapes = _lm_shapes(*TRAIN_LM)
    state = {n: (torch.from_numpy(rng.uniform(0.5, 1.5, s)).float() if len(s) == 1 else tensor(rng, s, scale=0.3))
             for n, s in shapes.items()}
    silent = int(rng.integers(0, TRAIN_LM[1]))
    state["embed.weight"][:, silent] = 0.0
    state["lm_head.weight"] = state["embed.weight"]  # tied
    for i in range(TRAIN_LM[2]):
        state[f"layers.{i}.attention.o_proj.weight"][silent] = 0.0
        state[f"layers.{i}.down_proj.weight"][silent] = 0.0
    data = torch.from_numpy(rng.integers(0, TRAIN_LM[0], size=40))
    lr, weight_decay, seed = 0.1, 0.5, int(rng.integers(0, 1000))
    label = f"LlamaLM{TRAIN_LM} holding the rule's weights (feature {silent} silent: zero everywhere)"
    model = student.call("LlamaLM", *TRAIN_LM, keep=True, _label=label)
    student.call(model, state, method="load_state_dict", _label=label)
    what = (f"train(model, data {describe(data)}, steps=1, batch_size=2, context=6, max_lr={lr}, min_lr={lr}, "
            f"weight_decay={weight_decay}, seed={seed}), model a {label}")
    student.call("train", model, data, 1, 2, 6, lr, min_lr=lr, weight_decay=weight_decay, seed=seed, _label=what)
    after = student.call(model, method="state_dict", _label=f"{what}: model.state_dict()")
    if not isinstance(after, dict):
        raise CheckFailure(f"{what}: model.state_dict() returned {describe(after)}, not a dict of tensors")
    silent_parameters = [(n, (slice(silent, silent + 1),)) for n in shapes if n.endswith("norm.weight")] + [
        (f"layers.{i}.{name}", (slice(None), silent)) for i in range(TRAIN_LM[2]) for name in READERS]
    for name, where in silent_parameters:
        before = state[name][where].double()
        matrix = len(shapes[name]) >= 2
        expected = before * (1 - lr * weight_decay) if matrix else before
        got = after.get(name)
        got = torch.as_tensor(np.asarray(got)).double() if isinstance(got, (np.ndarray, torch.Tensor)) else got
        if not (isinstance(got, torch.Tensor) and tuple(got.shape) == shapes[name]):
            raise CheckFailure(f"{what}: afterwards model.state_dict()[{name!r}] is {describe(got)}, expected a "
                               f"tensor of shape {shapes[name]}")
        got = got[where]
        close = np.isclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-7)
        if close.all():
            continue
        k = int(np.argmin(close))
        shown = f"{name}[{silent}]" if not matrix else f"{name}[{k}, {silent}]"
        told = (f"{shown} reads feature {silent}, which is zero everywhere, so its gradient is zero and only weight "
                f"decay can move it: it went from {before[k].item():.6g} to {got[k].item():.6g}, expected ")
        if matrix:
            raise CheckFailure(f"{what}: {told}{expected[k].item():.6g}, its value times 1 - lr * weight_decay = "
                               f"{1 - lr * weight_decay:g}: the parameters of two or more dimensions take "
                               "`weight_decay` in AdamW's own decay (its parameter group's \"weight_decay\"; Adam's "
                               "weight_decay, added to the gradient, is another thing)")
        raise CheckFailure(f"{what}: {told}it to stay {before[k].item():.6g}: the parameters of fewer than two "
                           "dimensions (the norms' weights) take weight decay 0, in a second parameter group whose "
                           "\"weight_decay\" is 0.0 (a group that does not say gets AdamW's default, 0.01)")


# ---- the device rule --------------------------------------------------------------------------------------
# count_parameters and train_flops_per_token take sizes; cosine_lr is a number; init_weights_ and
# clip_grad_norm_ change tensors where they are; train reads each loss with .item(), which a device
# without data cannot answer; lm_from_llama copies a model that lives on the CPU (its text says so).

def _device_cases():
    from .device import DEVICE_CHECK, Fresh, device_rule, on

    def tokens(rng, vocab, shape):
        import torch
        return torch.from_numpy(rng.integers(0, vocab, size=shape))

    def lm_cases(make, rng):
        import torch
        model, x = make("LlamaLM", 40, 16, 2, 4, 2, 24, scale=0.5), tokens(rng, 40, (2, 6))
        held = [Fresh("KVCache") for _ in range(2)]
        pad = torch.from_numpy(np.arange(6) < rng.integers(1, 7, size=2)[:, None])[:, None, None, :]
        return [[on(model, x, None, pad)], [on(model, x[:, :4], None, None, held), on(model, x[:, 4:], None, None, held)]]

    def loss_cases(make, rng):
        import torch
        targets = tokens(rng, 7, (2, 5))
        targets[0, 1] = -100
        return [[on("cross_entropy", tensor(rng, (2, 5, 7)), targets)],
                [on("cross_entropy", tensor(rng, (4, 7), torch.float64), tokens(rng, 7, (4,)))]]

    def filter_cases(make, rng):
        import torch
        # three close leaders, then a long flat tail, shuffled: transformers' order (top-k, then
        # top-p) keeps 3 of each row, the other order 4, whatever the draw, so that every grader
        # (each draws its own seed) judges the values alike
        row = torch.tensor([1.5, 1.45, 1.4, 0.0] + [-0.01 * i for i in range(1, 9)])
        led = torch.stack([row[torch.from_numpy(rng.permutation(12))] for _ in range(2)]) + tensor(rng, (2, 12), scale=1e-3)
        return [[on("filter_logits", led, 0.7, 4, 0.9)], [on("filter_logits", tensor(rng, (3, 9)))]]

    def generate_cases(make, rng):
        model = make("LlamaLM", 24, 16, 2, 4, 2, 24, scale=0.8)
        return [[on("generate", model, [tokens(rng, 24, (n,)) for n in (4, 2, 3)], 3)]]

    device_rule(ASSIGNMENT, "LlamaLM", lm_cases, DEVICE_CHECK + ", with a padding mask and caches too")
    device_rule(ASSIGNMENT, "cross_entropy", loss_cases)
    device_rule(ASSIGNMENT, "filter_logits", filter_cases)
    device_rule(ASSIGNMENT, "generate", generate_cases, DEVICE_CHECK + " (greedy)")


_device_cases()
