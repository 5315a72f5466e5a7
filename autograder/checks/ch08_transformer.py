"""Checks of chapter 8, "Positions, and the transformer assembled" (PyTorch).

Each exercise runs with the reference versions of the exercises before it (`run_exercise`): the
attention's checks use the reference apply_rope, the block's the reference attention, the loader's
the reference block. The last exercise is compared with `transformers`' own LlamaDecoderLayer,
which runs here, in the grader: the student's process receives only its numbers (a state dict of
tensors and six sizes), through a stand-in object with the two attributes the exercise allows.
"""
import functools

import torch

from .core import (Chapter, CheckFailure, call, describe, expect_same, known_answers, module_pair, padding_mask,
                   plain, same, tensor)
from .known_good import use_with_probe
from ..sandbox.probes import LLAMA_LAYER
from ..stated.calling import expect_parameter_shapes

ASSIGNMENT = "08-transformer"
chapter = Chapter(ASSIGNMENT)
check, equals, stated_checks, device_checks = chapter.check, chapter.equals, chapter.stated_checks, chapter.device_checks
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}  # float32 sums over the features: the order of the additions shows


# ---- the answers the stated rules ask by name (autograder/stated/ch08_transformer.py), in float64 ----

def _sinusoidal_rows(ref, n, dim, rows):
    return ref.sinusoidal_positions(n, dim).double()[rows]


def _rope_neighbours(ref, x, positions, base=10000.0):
    """RoPE pairing features 2i and 2i + 1 (Meta's Llama code): a wrong convention, for a message."""
    angle = positions.double()[..., None] * base ** (-2 * torch.arange(x.shape[-1] // 2, dtype=torch.float64)
                                                     / x.shape[-1])
    x1, x2 = x[..., 0::2].double(), x[..., 1::2].double()
    return torch.stack([x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()], -1).flatten(-2)


def _gqa(ref, state, x, heads, kv_heads):
    module = ref.GroupedQueryAttention(x.shape[-1], heads, kv_heads).double()
    module.load_state_dict({name: value.double() for name, value in state.items()})
    return module(x.double())


def _gqa_keys(ref, k_weight, x, heads, kv_heads, rotated):
    """k_proj of x in the G key/value heads, (B, G, N, d_h), rotated at positions 0 ... N - 1 or not."""
    keys = ref.split_heads(torch.nn.functional.linear(x.double(), k_weight.double()), kv_heads)
    return ref.apply_rope(keys, torch.arange(x.shape[-2])) if rotated else keys


def _rms_norm(ref, x, weight):
    norm = ref.RMSNorm(x.shape[-1]).double()
    norm.weight.copy_(weight.double())
    return norm(x.double())


class _Given(torch.nn.Module):
    """An attention that returns the output it was given: the block judged with the student's own."""
    def __init__(self, output):
        super().__init__()
        self.output = output

    def forward(self, *args, **kwargs):
        return self.output


def _block(ref, state, x, attended, variant="text"):
    """The block's output on x with `attended` as its attention's output: the reference block's
    ("text"), or, for a message, SiLU on the up branch ("silu_on_up") or the norms' outputs added
    where their inputs are ("norm_added")."""
    x, attended, state = x.double(), attended.double(), {name: value.double() for name, value in state.items()}
    if variant == "text":
        block = ref.DecoderBlock(x.shape[-1], 1, 1, state["gate_proj.weight"].shape[0]).double()
        block.attention = _Given(attended)
        block.load_state_dict(state, strict=False)
        return block(x)
    norm = lambda x, w: w * x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)  # noqa: E731
    normed = norm(x, state["attn_norm.weight"])
    middle = (normed if variant == "norm_added" else x) + attended
    h = norm(middle, state["mlp_norm.weight"])
    gate = torch.nn.functional.linear(h, state["gate_proj.weight"])
    up = torch.nn.functional.linear(h, state["up_proj.weight"])
    mlp = torch.nn.functional.linear(gate * torch.nn.functional.silu(up) if variant == "silu_on_up"
                                     else torch.nn.functional.silu(gate) * up, state["down_proj.weight"])
    return (h if variant == "norm_added" else middle) + mlp


known_answers(ASSIGNMENT, sinusoidal_rows=_sinusoidal_rows, rope_neighbours=_rope_neighbours, gqa=_gqa,
              gqa_keys=_gqa_keys, rms_norm=_rms_norm, block=_block)


# ---- sinusoidal_positions ---------------------------------------------------------------------

equals("sinusoidal_positions", "float32 (n, dim): sin at even features, cos at odd ones, for several sizes",
       "sinusoidal_positions", lambda rng: [call(5, 8), call(1, 2), call(12, 16), call(7, 6)], atol=1e-5)

equals("sinusoidal_positions", "another base", "sinusoidal_positions",
       lambda rng: [call(6, 8, base=100.0), call(4, 4, base=2.0)], atol=1e-5)

stated_checks("sinusoidal_positions")  # 4,096 positions, angles in float64: autograder/stated/ch08_transformer.py


# ---- apply_rope -------------------------------------------------------------------------------

def rope_cases(rng):
    h, n, d_h = 3, int(rng.integers(3, 8)), 2 * int(rng.integers(2, 6))
    positions = torch.from_numpy(rng.integers(0, 40, size=(2, 1, n)))
    return [call(tensor(rng, (2, h, n, d_h)), torch.arange(n)),
            call(tensor(rng, (n, d_h)), torch.arange(n) + 5),
            call(tensor(rng, (2, h, n, d_h), torch.float64), positions),
            call(tensor(rng, (2, n, d_h)), torch.arange(n), base=500000.0)]


equals("apply_rope", "the halves convention (feature i with i + d_h/2), angle position * base^(-2i/d_h): heads "
       "(B, H, N, d_h), no batch, positions (B, 1, N), float64 kept, another base", "apply_rope", rope_cases, **FLOAT32)

stated_checks("apply_rope")  # the caller's x left as it was, scores relative, long contexts: autograder/stated/ch08_transformer.py


# ---- alibi_bias -------------------------------------------------------------------------------

equals("alibi_bias", "a power-of-two head count (1, 2, 8, 16 heads), n_q = n_k and n_q < n_k (bottom-right)",
       "alibi_bias", lambda rng: [call(8, 5, 5), call(2, 3, 7), call(16, 1, 4), call(1, 4, 4)])

equals("alibi_bias", "a head count that is not a power of two (6, 12, 20 heads): the slopes of the next smaller "
       "power of two, then every other slope of twice as many heads", "alibi_bias",
       lambda rng: [call(6, 4, 4), call(12, 3, 5), call(20, 2, 2)])


# ---- GroupedQueryAttention --------------------------------------------------------------------

def gqa_pair(student, ref, dim, heads, kv_heads, rng, double=False, **kwargs):
    return module_pair(student, ref, "GroupedQueryAttention", dim, heads, kv_heads, *kwargs.values(), rng=rng,
                       double=double)


@check("GroupedQueryAttention", "grouped (H=4, G=2), multi-query (G=1) and multi-head (G=H) outputs: query head h "
       "uses key/value head h // (H/G)", weight=1.5)
def gqa_outputs(student, ref, rng):
    for heads, kv_heads, batch in ((4, 2, (2,)), (6, 2, ()), (4, 1, (2,)), (3, 3, (1, 2))):
        pair = gqa_pair(student, ref, heads * 4, heads, kv_heads, rng)
        same(student, ref, pair, tensor(rng, batch + (5, heads * 4)), **FLOAT32)


@check("GroupedQueryAttention", "rope_base, given positions (N,) and (B, N), a padding mask with an empty "
       "sequence (zero output), float64 (module.double())")
def gqa_options(student, ref, rng):
    pair = gqa_pair(student, ref, 16, 4, 2, rng, rope_base=100.0)
    x = tensor(rng, (2, 5, 16))
    same(student, ref, pair, x, **FLOAT32)
    pair = gqa_pair(student, ref, 16, 4, 2, rng)
    same(student, ref, pair, x, torch.arange(5) * 3, **FLOAT32)
    same(student, ref, pair, x, torch.from_numpy(rng.integers(0, 30, size=(2, 5))), **FLOAT32)
    same(student, ref, pair, tensor(rng, (3, 5, 16)), None, padding_mask(rng, (3, 1, 1, 5), empty_rows=1),
         nan_hint="a query with no allowed key gets a zero output (combine the masks and call the given attention)",
         **FLOAT32)
    pair = gqa_pair(student, ref, 12, 6, 3, rng, double=True)
    same(student, ref, pair, tensor(rng, (2, 4, 12), torch.float64))


stated_checks("GroupedQueryAttention")  # parameters, a cache fed in pieces, true gradients: autograder/stated/ch08_transformer.py


def span(start, stop):
    return f"{start}" if stop == start + 1 else f"{start} to {stop - 1}"


# ---- kv_cache_bytes ---------------------------------------------------------------------------

def cache_cases(rng):
    return [call(32, 32, 128, 4096), call(80, 8, 128, 4096), call(2, 1, 4, 3),
            call(32, 8, 128, 1000, batch=16), call(24, 4, 64, 2048, batch=3, bytes_per_number=4),
            call(12, 12, 64, 512, bytes_per_number=1)]


equals("kv_cache_bytes", "an int: keys and values, every layer, for Llama-2-7B and -70B at 4,096 tokens and other "
       "sizes, batches and bytes per number", "kv_cache_bytes", cache_cases)


# ---- RMSNorm and DecoderBlock -----------------------------------------------------------------

@check("DecoderBlock", "RMSNorm(dim, eps): one parameter, weight; w * x / sqrt(mean(x^2) + eps), no mean subtracted, "
       "float64 kept", weight=1.5)
def rms_norm(student, ref, rng):
    expect_parameter_shapes(student, student.call("RMSNorm", 6, keep=True), "RMSNorm(6)", {"weight": (6,)})
    pair = module_pair(student, ref, "RMSNorm", 6, rng=rng)
    same(student, ref, pair, tensor(rng, (2, 3, 6)) + 1.5, **FLOAT32)
    pair = module_pair(student, ref, "RMSNorm", 5, 0.1, rng=rng, double=True)
    same(student, ref, pair, tensor(rng, (4, 5), torch.float64, scale=0.2))


BLOCK = (16, 4, 2, 24)  # embed_dim, num_heads, num_kv_heads, hidden_dim


@check("DecoderBlock", "the outputs: pre-norm residuals, SiLU on the gate branch; positions, rope_base and eps "
       "passed on (the default eps on inputs of about 1e-3, where it counts), a padding mask, float64 "
       "(module.double())", weight=1.5)
def block_outputs(student, ref, rng):
    pair = module_pair(student, ref, "DecoderBlock", *BLOCK, rng=rng, scale=0.5)
    same(student, ref, pair, tensor(rng, (2, 5, 16)), **FLOAT32)
    same(student, ref, pair, tensor(rng, (2, 5, 16), scale=1e-3), **FLOAT32)
    same(student, ref, pair, tensor(rng, (2, 5, 16)), torch.from_numpy(rng.integers(0, 30, size=(2, 5))), **FLOAT32)
    same(student, ref, pair, tensor(rng, (3, 5, 16)), None, padding_mask(rng, (3, 1, 1, 5)), **FLOAT32)
    pair = module_pair(student, ref, "DecoderBlock", 12, 3, 1, 20, 50.0, 0.5, rng=rng, scale=0.5)
    same(student, ref, pair, tensor(rng, (2, 4, 12), scale=0.3), **FLOAT32)
    pair = module_pair(student, ref, "DecoderBlock", *BLOCK, rng=rng, scale=0.5, double=True)
    same(student, ref, pair, tensor(rng, (2, 4, 16), torch.float64))


stated_checks("DecoderBlock")  # parameters, a cache fed in pieces, RMSNorm as built, true gradients: autograder/stated/ch08_transformer.py


# ---- block_from_llama -------------------------------------------------------------------------

CONFIGS = ({"hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24,
            "rms_norm_eps": 1e-5, "rope_theta": 500000.0},
           {"hidden_size": 12, "num_attention_heads": 3, "num_key_value_heads": 1, "intermediate_size": 20,
            "rms_norm_eps": 0.25, "rope_theta": 50.0})


@functools.cache
def llama_layer(index):
    """(a LlamaDecoderLayer of CONFIGS[index] with random weights, its rotary embedding, the sizes it is shown
    with): built here, once per grading process, from the classes `transformers` ships (nothing downloaded)."""
    from transformers.models.llama.modeling_llama import LlamaConfig, LlamaDecoderLayer, LlamaRotaryEmbedding
    config = LlamaConfig(**CONFIGS[index], attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):  # in nbgrader's kernel, the student's code shares the global RNG
        torch.manual_seed(index)
        layer = LlamaDecoderLayer(config, layer_idx=0).eval()
        with torch.no_grad():
            for p in layer.parameters():
                p.normal_(0.0, 0.5)  # the norms' weights too: a swapped norm must show
    sizes = {k: v for k, v in CONFIGS[index].items() if k != "rope_theta"}
    sizes["rope_parameters"] = {"rope_theta": config.rope_parameters["rope_theta"], "rope_type": "default"}
    return layer, LlamaRotaryEmbedding(config), sizes


def llama_output(layer, rotary, x, allowed):
    """The layer's own forward on x (B, N, D), allowed a bool (B, 1, N, N) mask (causal included)."""
    n = x.shape[-2]
    positions = torch.arange(n)[None]
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    with torch.no_grad():
        return layer(x, attention_mask=additive, position_ids=positions, position_embeddings=rotary(x, positions))


def student_block(student, index):
    """The student's block_from_llama(stand-in of CONFIGS[index]'s layer): (a Handle, the layer, its rotary, label)."""
    standin, layer, rotary, label = llama_standin(student, index)
    return student.call("block_from_llama", standin, keep=True, _label=label), layer, rotary, label


def llama_standin(student, index):
    """(the stand-in of CONFIGS[index]'s layer in the student's process, the layer, its rotary, label)."""
    try:
        layer, rotary, sizes = llama_layer(index)
    except ImportError as error:
        raise CheckFailure(f"the grader cannot import transformers' Llama ({error}): tell your instructor") from None
    use_with_probe(student, LLAMA_LAYER)
    standin = student.call(LLAMA_LAYER.name, plain(layer.state_dict()), sizes, keep=True, _label="the layer")
    label = f"block_from_llama(layer), layer a LlamaDecoderLayer of {sizes},"  # its config as transformers names it
    return standin, layer, rotary, label


def causal(batch, n):
    return torch.ones(n, n, dtype=torch.bool).tril().expand(batch, 1, n, n)


@check("block_from_llama", "the LlamaDecoderLayer's outputs, to 1e-5, for two configurations (grouped and "
       "multi-query, other eps and RoPE bases)", weight=1.5)
def llama_outputs(student, ref, rng):
    for index in range(len(CONFIGS)):
        block, layer, rotary, label = student_block(student, index)
        x = tensor(rng, (2, 6, CONFIGS[index]["hidden_size"]))
        got = student.call(block, x, _label=label)
        expect_same(got, plain(llama_output(layer, rotary, x, causal(2, 6))), f"{label} on x {describe(x)}, "
                    "against the layer with its causal mask", rtol=1e-5, atol=1e-5)


@check("block_from_llama", "with right padding: the layer's outputs at every position", weight=0.75)
def llama_padding(student, ref, rng):
    block, layer, rotary, label = student_block(student, 0)
    x, pad = tensor(rng, (3, 6, 16)), padding_mask(rng, (3, 1, 1, 6))
    got = student.call(block, x, None, pad, _label=label)
    expect_same(got, plain(llama_output(layer, rotary, x, causal(3, 6) & pad)), f"{label} on x {describe(x)} and a "
                "padding mask (3, 1, 1, 6), against the layer with the same mask and its causal one",
                rtol=1e-5, atol=1e-5)


@check("block_from_llama", "fed through a KVCache in pieces (4 tokens, then 1, then 2): the layer's outputs on the "
       "whole sequence", weight=0.75)
def llama_cache(student, ref, rng):
    block, layer, rotary, label = student_block(student, 1)
    x = tensor(rng, (2, 7, 12))
    expected = llama_output(layer, rotary, x, causal(2, 7))
    cache = student.call("KVCache", keep=True)
    for start, stop in ((0, 4), (4, 5), (5, 7)):
        got = student.call(block, x[:, start:stop], cache=cache, _label=f"{label} with a KVCache holding {start} tokens")
        expect_same(got, plain(expected[:, start:stop]), f"{label} fed x {describe(x)} in pieces through one KVCache: "
                    f"outputs {span(start, stop)}, against the layer on the whole sequence", rtol=1e-5, atol=1e-5)


@check("block_from_llama", "a copy: changing the layer's tensors afterwards leaves the block's outputs as they were",
       weight=0.5)
def llama_copied(student, ref, rng):
    standin, layer, rotary, label = llama_standin(student, 0)
    block = student.call("block_from_llama", standin, keep=True, _label=label)
    x = tensor(rng, (2, 4, 16))
    expected = llama_output(layer, rotary, x, causal(2, 4))
    expect_same(student.call(block, x, _label=label), plain(expected), f"{label} on x {describe(x)}, before the "
                "layer's tensors change (whether the block holds copies is judged on a block whose outputs are right)",
                rtol=1e-5, atol=1e-5)
    state = student.call(standin, method="state_dict", keep=True, _label="layer.state_dict()")
    for name in layer.state_dict():
        tensor_ = student.call(state, name, method="__getitem__", keep=True, _label=f"layer.state_dict()[{name!r}]")
        student.call(tensor_, method="zero_", _label=f"layer.state_dict()[{name!r}].zero_()")
    got = student.call(block, x, _label=label)
    expect_same(got, plain(expected), f"{label} on x {describe(x)}, after the layer's tensors were set to zero: your "
                "block holds the layer's own tensors (nn.Parameter(t), t.data and t.detach() keep t's storage), not "
                "copies of them. Copy the values (load_state_dict, or p.copy_(t) under torch.no_grad())",
                rtol=1e-5, atol=1e-5)


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/device.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.

device_checks(options={"apply_rope": FLOAT32, "GroupedQueryAttention": FLOAT32, "DecoderBlock": FLOAT32})
