"""Chapter 10's stated rules: the parameters of the layers and of the model, the tie, the label-smoothed
loss as PyTorch computes it (written without F.cross_entropy), and the device rule of the exercises on
tensors."""
import numpy as np

from .register import CheckFailure, stated
from .calling import StudentError, describe, tensor, close_enough, expect_parameter_shapes

ASSIGNMENT = "10-encoder-decoder"


def _attention_shapes(prefix, dim):
    return {f"{prefix}.{p}.{k}": (dim, dim) if k == "weight" else (dim,)
            for p in ("q_proj", "k_proj", "v_proj", "out_proj") for k in ("weight", "bias")}


def _layer_shapes(prefix, dim, ffn, decoder):
    shapes = {**_attention_shapes(prefix + "self_attn", dim),
              prefix + "fc1.weight": (ffn, dim), prefix + "fc1.bias": (ffn,), prefix + "fc2.weight": (dim, ffn),
              prefix + "fc2.bias": (dim,)}
    norms = ("self_attn_norm", "cross_attn_norm", "ffn_norm") if decoder else ("self_attn_norm", "ffn_norm")
    for norm in norms:
        shapes.update({f"{prefix}{norm}.weight": (dim,), f"{prefix}{norm}.bias": (dim,)})
    if decoder:
        shapes.update(_attention_shapes(prefix + "cross_attn", dim))
    return shapes


def _model_shapes(vocab, dim, layers, heads, ffn):
    shapes = {"embed.weight": (vocab, dim), "lm_head.weight": (vocab, dim)}
    for i in range(layers):
        shapes.update(_layer_shapes(f"encoder_layers.{i}.", dim, ffn, False))
        shapes.update(_layer_shapes(f"decoder_layers.{i}.", dim, ffn, True))
    return shapes


def _made_with_parameters(student, label, target, args, expected):
    """`target(*args)`, made in the student's process, holds exactly the parameters `expected` (its buffers are
    its own); returns its handle."""
    handle = student.call(target, *args, keep=True, _label=label)
    expect_parameter_shapes(student, handle, label, expected)
    return handle


@stated(ASSIGNMENT, "CrossAttention", "q_proj, k_proj, v_proj, out_proj: nn.Linear(embed_dim, embed_dim) with bias, "
        "and no other parameter", weight=0.5)
def cross_parameters(student, rng):
    shapes = {name.removeprefix("."): shape for name, shape in _attention_shapes("", 16).items()}
    _made_with_parameters(student, "CrossAttention(16, 4)", "CrossAttention", (16, 4), shapes)


@stated(ASSIGNMENT, "EncoderLayer", "EncoderLayer: self_attn, self_attn_norm, fc1, fc2, ffn_norm; DecoderLayer: also "
        "cross_attn and cross_attn_norm; no other parameter", weight=0.5)
def layer_parameters(student, rng):
    for name, decoder in (("EncoderLayer", False), ("DecoderLayer", True)):
        _made_with_parameters(student, f"{name}(16, 4, 24)", name, (16, 4, 24), _layer_shapes("", 16, 24, decoder))


@stated(ASSIGNMENT, "Transformer", "embed, encoder_layers, decoder_layers (num_layers each), lm_head (dim -> "
        "vocab_size, no bias) whose weight is embed.weight, one nn.Parameter; no other parameter", weight=0.5)
def model_parameters(student, rng):
    label = "Transformer(30, 16, 2, 4, 24)"
    handle = _made_with_parameters(student, label, "Transformer", (30, 16, 2, 4, 24), _model_shapes(30, 16, 2, 4, 24))
    ids = []
    for name in ("lm_head.weight", "embed.weight"):
        parameter = student.call(handle, name, method="get_parameter", keep=True, _label=f"{label}.{name}")
        ids.append(student.call(parameter, method="__hash__", _label=f"{label}.{name}"))  # a tensor's hash is its id
    if ids[0] != ids[1]:
        raise CheckFailure(f"{label}: lm_head.weight is not embed.weight: tie them, assign embed.weight to "
                           "lm_head.weight (the same Parameter; nn.Parameter(self.embed.weight) or a copy makes a "
                           "second one)")


# ---- label_smoothed_cross_entropy: F.cross_entropy(..., label_smoothing=epsilon) ---------------------------

# what the text forbids (nn.CrossEntropyLoss and nn.NLLLoss call the first two); `sandbox.calls.Forbidden` runs it
SMOOTHING_FORBIDDEN = {
    "functions": {"torch.nn.functional.cross_entropy": "F.cross_entropy (itself, or through nn.CrossEntropyLoss)",
                  "torch.nn.functional.nll_loss": "F.nll_loss (itself, or through nn.NLLLoss)"},
    "why": "write the loss yourself: log p = logits - torch.logsumexp(logits, dim=-1, keepdim=True), then "
           "-(1 - epsilon) log p[target] - epsilon * mean(log p), averaged over the targets that are not ignore_index"}


def _smoothing_inputs(rng):
    import torch
    targets = torch.from_numpy(rng.integers(0, 9, size=(3, 4)))
    targets[0, 0] = targets[2, 3] = -100
    big = torch.from_numpy(rng.choice([-1e4, 1e4], size=(5, 9)))
    return [(tensor(rng, (3, 4, 9), scale=3.0), targets, 0.1, -100),
            (tensor(rng, (5, 9), torch.float64), torch.from_numpy(rng.integers(0, 9, size=5)), 0.25, 2),
            (tensor(rng, (4, 7)), torch.from_numpy(rng.integers(0, 7, size=4)), 0.0, -100),
            (big, torch.from_numpy(rng.integers(0, 9, size=5)), 0.1, -100)]


@stated(ASSIGNMENT, "label_smoothed_cross_entropy", "equals F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), "
        "label_smoothing=epsilon, ignore_index): (B, N, V), ignored targets, epsilon 0, logits of +-1e4, float64 kept; "
        "written without F.cross_entropy or F.nll_loss", weight=0.5)
def smoothing_is_torchs(student, rng):
    import torch
    import torch.nn.functional as F
    for logits, targets, epsilon, ignore in _smoothing_inputs(rng):
        what = (f"label_smoothed_cross_entropy(logits {describe(logits)}, targets {describe(targets)}, {epsilon}, "
                f"ignore_index={ignore})")
        expected = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), label_smoothing=epsilon,
                                   ignore_index=ignore)
        got = student.call("label_smoothed_cross_entropy", logits, targets, epsilon, ignore, _label=what,
                           _forbid=SMOOTHING_FORBIDDEN)
        got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
        atol = max(1e-6, 2 * logits.abs().max().item() * torch.finfo(logits.dtype).eps)
        if not (isinstance(got, torch.Tensor) and got.dtype == logits.dtype and got.shape == ()
                and close_enough(got, expected, 1e-5, atol)):
            raise CheckFailure(f"{what} returned {describe(got)}, expected the {str(logits.dtype)[6:]} 0-dimensional "
                               f"tensor {expected.item():.8g} (F.cross_entropy's with label_smoothing): the mean over "
                               "the targets that are not ignore_index of -(1 - epsilon) log p[target] - epsilon "
                               "mean(log p), in the logits' dtype")


@stated(ASSIGNMENT, "label_smoothed_cross_entropy", "differentiable: its gradient with respect to the logits is "
        "F.cross_entropy's with label_smoothing", weight=0.5)
def smoothing_gradient(student, rng):
    import torch
    import torch.nn.functional as F
    logits, targets = tensor(rng, (2, 5, 7), torch.float64), torch.from_numpy(rng.integers(0, 7, size=(2, 5)))
    targets[1, 2] = -100
    what = f"label_smoothed_cross_entropy(logits {describe(logits)}, targets {describe(targets)}, 0.2).backward()"
    leaf = student.call("torch", logits, method="clone", keep=True, _label="logits")
    student.call(leaf, True, method="requires_grad_", _label="logits")
    try:
        loss = student.call("label_smoothed_cross_entropy", leaf, targets, 0.2, keep=True,
                            _label="label_smoothed_cross_entropy(logits, targets, 0.2)")
        student.call(loss, method="backward", _label=what)
        grad = student.call(leaf, "grad", method="__getattribute__", _label="logits.grad")
    except StudentError as error:
        raise CheckFailure(f"{error}: the loss must be differentiable (no .item(), .detach() or torch.no_grad() on "
                           "the way)") from None
    reference = logits.clone().requires_grad_(True)
    F.cross_entropy(reference.reshape(-1, 7), targets.reshape(-1), label_smoothing=0.2).backward()
    got = None if grad is None else torch.as_tensor(np.asarray(grad))
    if got is None or not close_enough(got, reference.grad, 1e-6, 1e-7):
        raise CheckFailure(f"{what}: logits.grad is {describe(got)}, not F.cross_entropy's gradient with "
                           f"label_smoothing=0.2 ({describe(reference.grad)}): softmax(logits) minus the smoothed "
                           "target distribution, over the number of targets kept, and zero on the ignored rows")


# ---- the device rule --------------------------------------------------------------------------------------
# transformer_from_marian and vit_encoder_from_hf copy a model that lives on the CPU (their texts say so).

def _device_cases():
    from .device import DEVICE_CHECK, Fresh, device_rule, on

    def tokens(rng, vocab, shape):
        import torch
        return torch.from_numpy(rng.integers(0, vocab, size=shape))

    def padding(rng, batch, n):
        import torch
        return torch.from_numpy(np.arange(n) < rng.integers(1, n + 1, size=batch)[:, None])

    def cross_cases(make, rng):
        module, x, memory, cache = make("CrossAttention", 16, 4), tensor(rng, (2, 3, 16)), tensor(rng, (2, 5, 16)), \
            Fresh("KVCache")
        real = padding(rng, 2, 5)
        return [[on(module, x, memory, real)], [on(module, x[:, :1], memory, real, cache),
                                               on(module, x[:, 1:], memory, real, cache)]]

    def layer_cases(make, rng):
        encoder, decoder = make("EncoderLayer", 16, 4, 24), make("DecoderLayer", 16, 4, 24, scale=0.5)
        x, memory, real = tensor(rng, (2, 4, 16)), tensor(rng, (2, 5, 16)), padding(rng, 2, 5)
        held = (Fresh("KVCache"), Fresh("KVCache"))
        return [[on(encoder, memory, real)], [on(decoder, x, memory, real)],
                [on(decoder, x[:, :2], memory, real, held), on(decoder, x[:, 2:], memory, real, held)]]

    def model_cases(make, rng):
        model = make("Transformer", 30, 16, 2, 4, 24, scale=0.5)
        src, tgt, real = tokens(rng, 30, (2, 5)), tokens(rng, 30, (2, 4)), padding(rng, 2, 5)
        return [[on(model, src, tgt, real)]]

    def smoothing_cases(make, rng):
        import torch
        targets = tokens(rng, 7, (2, 5))
        targets[0, 1] = -100
        return [[on("label_smoothed_cross_entropy", tensor(rng, (2, 5, 7)), targets, 0.1)],
                [on("label_smoothed_cross_entropy", tensor(rng, (4, 7), torch.float64), tokens(rng, 7, (4,)), 0.2)]]

    def decoding_cases(make, rng):
        model = make("Transformer", 20, 16, 1, 4, 24, "relu", 19, 0, scale=0.5)
        sources = [tokens(rng, 19, (n,)) for n in (4, 2, 3)]
        return [[on("greedy_translate", model, sources, 4)], [on("beam_search", model, sources, 2, 4)]]

    def patch_cases(make, rng):
        return [[on("patch_embed", tensor(rng, (2, 3, 8, 12)), 4)], [on("patch_embed", tensor(rng, (1, 1, 6, 6)), 3)]]

    device_rule(ASSIGNMENT, "CrossAttention", cross_cases, DEVICE_CHECK + ", with a padding mask and a cache too")
    device_rule(ASSIGNMENT, "EncoderLayer", layer_cases, DEVICE_CHECK + " (both layers, the decoder's caches too)")
    device_rule(ASSIGNMENT, "Transformer", model_cases, DEVICE_CHECK + ", with a padding mask")
    device_rule(ASSIGNMENT, "label_smoothed_cross_entropy", smoothing_cases)
    device_rule(ASSIGNMENT, "greedy_translate", decoding_cases, DEVICE_CHECK + " (greedy, and beam search)")
    device_rule(ASSIGNMENT, "patch_embed", patch_cases)


_device_cases()
