"""Checks of chapter 10, "The encoder-decoder" (PyTorch).

Each exercise runs with the reference versions of the exercises before it (`run_exercise`): the layers
are given the grader's CrossAttention, the model its layers, decoding the grader's Transformer (a
stand-in whose every forward, encode and decode the grader computes). `transformer_from_marian`,
`beam_search` and `vit_encoder_from_hf` are compared with `transformers`' own MarianMTModel (its
logits and its `generate`) and ViTModel, which run here, in the grader: the student's process
receives only their numbers (a state dict of tensors and the sizes), through a stand-in object with
the two attributes the exercises allow.
"""
import functools

import numpy as np
import torch

from .core import (Chapter, CheckFailure, Pair, call, describe, expect_same, expect_true, model_pair, module_pair,
                   plain, same, tensor)
from .known_good import use_with_probe
from ..sandbox.probes import MARIAN_MT_MODEL, VIT_MODEL

ASSIGNMENT = "10-encoder-decoder"
chapter = Chapter(ASSIGNMENT)
check, equals, stated_checks, device_checks = chapter.check, chapter.equals, chapter.stated_checks, chapter.device_checks
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}


def tokens(rng, vocab, shape):
    return torch.from_numpy(rng.integers(0, vocab, size=shape))


def padding(rng, batch, n, shortest=1):
    """bool (batch, n), True on each row's first tokens (at least `shortest`; row 0 whole)."""
    lengths = rng.integers(shortest, n + 1, size=batch)
    lengths[0] = n
    return torch.from_numpy(np.arange(n) < lengths[:, None])


def fresh_caches(student, ref, count, pairs=True):
    def one():
        return Pair(student.call("KVCache", keep=True, _label="KVCache()"), ref.KVCache(), "a KVCache")
    return [(one(), one()) if pairs else one() for _ in range(count)]


# ---- CrossAttention ---------------------------------------------------------------------------

@check("CrossAttention", "attention of the target's states over the memory: other sizes, a batch of one, float64",
       weight=1.0)
def cross_values(student, ref, rng):
    pair = module_pair(student, ref, "CrossAttention", 16, 4, rng=rng)
    same(student, ref, pair, tensor(rng, (2, 3, 16)), tensor(rng, (2, 6, 16)), **FLOAT32)
    same(student, ref, pair, tensor(rng, (1, 5, 16)), tensor(rng, (1, 2, 16)), **FLOAT32)
    pair = module_pair(student, ref, "CrossAttention", 12, 3, rng=rng, double=True)
    same(student, ref, pair, tensor(rng, (2, 4, 12), torch.float64), tensor(rng, (2, 7, 12), torch.float64))


@check("CrossAttention", "the source's padding mask (B, S): every real source token seen, no padding, at every "
       "target position (no causal mask)", weight=1.0)
def cross_mask(student, ref, rng):
    pair = module_pair(student, ref, "CrossAttention", 16, 4, rng=rng)
    for n, s in ((4, 6), (6, 3)):
        x, memory = tensor(rng, (3, n, 16)), tensor(rng, (3, s, 16))
        same(student, ref, pair, x, memory, padding(rng, 3, s), **FLOAT32)


@check("CrossAttention", "the static cache: filled with the memory's keys and values on the first call, then used as "
       "it is, memory not projected again (other values passed as memory)", weight=1.0)
def cross_cache(student, ref, rng):
    pair = module_pair(student, ref, "CrossAttention", 16, 4, rng=rng)
    x, memory, real = tensor(rng, (2, 4, 16)), tensor(rng, (2, 5, 16)), padding(rng, 2, 5)
    with torch.no_grad():
        whole = pair.module(x, memory, real)
    cache = student.call("KVCache", keep=True, _label="KVCache()")
    label = pair.label.removesuffix(", on ")
    got = student.call(pair.handle, x[:, :1], memory, real, cache, _label=f"{label} with an empty KVCache")
    expect_same(got, plain(whole[:, :1]), f"{label}: the first step (x[:, :1]) with an empty cache", **FLOAT32)
    length = student.call(cache, "length", method="__getattribute__", _label="the cache's length")
    expect_true(length == 5, f"{label}: after the first call with an empty cache, cache.length is {describe(length)}: "
                "it should hold the memory's 5 keys and values")
    for start, stop in ((1, 2), (2, 4)):
        other = tensor(rng, (2, 5, 16))
        got = student.call(pair.handle, x[:, start:stop], other, real, cache, _label=f"{label} with a filled cache")
        expect_same(got, plain(whole[:, start:stop]), f"{label}: x[:, {start}:{stop}] with the cache filled by the "
                    "first call and other values passed as memory: the output of the cached keys and values (memory "
                    "is not projected again)", **FLOAT32)


stated_checks("CrossAttention")


# ---- EncoderLayer and DecoderLayer ----------------------------------------------------------------

@check("EncoderLayer", "EncoderLayer, post-norm: norm(x + self_attn(x)), norm(x + ffn(x)); a padding mask; relu, "
       "gelu and swish; eps; float64", weight=1.0)
def encoder_values(student, ref, rng):
    for activation, eps in (("relu", 1e-5), ("gelu", 1e-5), ("swish", 0.5)):
        pair = module_pair(student, ref, "EncoderLayer", 16, 4, 24, activation, eps, rng=rng)
        same(student, ref, pair, tensor(rng, (3, 5, 16)), padding(rng, 3, 5), **FLOAT32)
    same(student, ref, pair, tensor(rng, (2, 4, 16)), **FLOAT32)
    pair = module_pair(student, ref, "EncoderLayer", 12, 3, 20, "relu", rng=rng, double=True)
    same(student, ref, pair, tensor(rng, (2, 6, 12), torch.float64), padding(rng, 2, 6))


@check("EncoderLayer", "DecoderLayer, post-norm: causal self-attention, cross-attention with the source's padding "
       "mask, feed-forward, each norm(x + sublayer(x)); activations; float64", weight=1.0)
def decoder_values(student, ref, rng):
    for activation in ("relu", "swish"):
        pair = module_pair(student, ref, "DecoderLayer", 16, 4, 24, activation, rng=rng)
        same(student, ref, pair, tensor(rng, (3, 5, 16)), tensor(rng, (3, 6, 16)), padding(rng, 3, 6), **FLOAT32)
    pair = module_pair(student, ref, "DecoderLayer", 12, 3, 20, "gelu", 0.25, rng=rng, double=True)
    same(student, ref, pair, tensor(rng, (2, 3, 12), torch.float64), tensor(rng, (2, 4, 12), torch.float64))


@check("EncoderLayer", "DecoderLayer through (self KVCache, cross KVCache): the target fed in pieces (1, 2, then 1 "
       "positions) gives the outputs of the whole target", weight=1.0)
def decoder_cache(student, ref, rng):
    pair = module_pair(student, ref, "DecoderLayer", 16, 4, 24, rng=rng)
    x, memory, real = tensor(rng, (2, 4, 16)), tensor(rng, (2, 5, 16)), padding(rng, 2, 5)
    with torch.no_grad():
        whole = pair.module(x, memory, real)
    held = tuple(student.call("KVCache", keep=True, _label="KVCache()") for _ in range(2))
    label = pair.label.removesuffix(", on ")
    for start, stop in ((0, 1), (1, 3), (3, 4)):
        got = student.call(pair.handle, x[:, start:stop], memory, real, held, _label=f"{label} with caches")
        expect_same(got, plain(whole[:, start:stop]), f"{label}: x[:, {start}:{stop}] through (KVCache(), KVCache()), "
                    "against the whole target at once", **FLOAT32)


stated_checks("EncoderLayer")


# ---- Transformer --------------------------------------------------------------------------------

def transformer_pair(student, ref, sizes, rng, **options):
    return model_pair(student, ref, "Transformer", sizes, rng, **options)


MODEL = (30, 16, 2, 4, 24)


@check("Transformer", "forward: the logits of the target given the source, embeddings scaled by sqrt(dim), sinusoidal "
       "positions, the source's padding mask; relu and swish; float64", weight=1.5)
def model_logits(student, ref, rng):
    pair = transformer_pair(student, ref, MODEL, rng)
    same(student, ref, pair, tokens(rng, 30, (3, 6)), tokens(rng, 30, (3, 5)), padding(rng, 3, 6), **FLOAT32)
    pair = transformer_pair(student, ref, (25, 12, 1, 3, 20), rng, activation="swish", eps=0.1)
    same(student, ref, pair, tokens(rng, 25, (2, 4)), tokens(rng, 25, (2, 7)), **FLOAT32)
    pair = transformer_pair(student, ref, MODEL, rng, double=True)
    same(student, ref, pair, tokens(rng, 30, (2, 5)), tokens(rng, 30, (2, 3)), padding(rng, 2, 5))


@check("Transformer", "encode: the memory (B, S, dim), with and without a padding mask")
def model_encode(student, ref, rng):
    pair = transformer_pair(student, ref, MODEL, rng)
    src = tokens(rng, 30, (3, 7))
    for mask in (padding(rng, 3, 7), None):
        got = student.call(pair.handle, src, mask, method="encode", _label=pair.label.removesuffix(", on "))
        with torch.no_grad():
            expected = pair.module.encode(src, mask)
        expect_same(got, plain(expected), f"{pair.label.removesuffix(', on ')}: encode(src {describe(src)}, "
                    f"{describe(mask)})", **FLOAT32)


@check("Transformer", "decode through one (KVCache, KVCache) pair per layer, one token at a time then two: the "
       "positions continue after the cached ones, the logits of the whole target", weight=1.5)
def model_caches(student, ref, rng):
    pair = transformer_pair(student, ref, MODEL, rng)
    src, tgt, real = tokens(rng, 30, (2, 5)), tokens(rng, 30, (2, 5)), padding(rng, 2, 5)
    with torch.no_grad():
        memory = pair.module.encode(src, real)
        whole = pair.module.decode(tgt, memory, real)
    held = [tuple(student.call("KVCache", keep=True, _label="KVCache()") for _ in range(2)) for _ in range(MODEL[2])]
    label = pair.label.removesuffix(", on ")
    for start, stop in ((0, 1), (1, 2), (2, 3), (3, 5)):
        got = student.call(pair.handle, tgt[:, start:stop], memory, real, held, method="decode",
                           _label=f"{label}.decode with caches")
        expect_same(got, plain(whole[:, start:stop]), f"{label}: decode(tgt[:, {start}:{stop}], memory, src_mask, "
                    "caches) against the whole target decoded at once", **FLOAT32)


stated_checks("Transformer")


# ---- transformer_from_marian --------------------------------------------------------------------

MARIANS = ({"vocab_size": 40, "d_model": 16, "layers": 2, "heads": 4, "ffn": 24, "activation_function": "relu"},
           {"vocab_size": 28, "d_model": 12, "layers": 3, "heads": 3, "ffn": 20, "activation_function": "swish"},
           {"vocab_size": 24, "d_model": 16, "layers": 2, "heads": 4, "ffn": 24, "activation_function": "swish"})


@functools.cache
def marian_model(index, scale=0.5):
    """(a MarianMTModel of MARIANS[index] with random weights, the sizes it is shown with): built here, once per
    grading process, from the classes `transformers` ships (nothing downloaded)."""
    try:
        import transformers
        from transformers import MarianConfig, MarianMTModel
    except ImportError as error:
        raise CheckFailure(f"the grader cannot import transformers' Marian ({error}): tell your instructor") from None
    transformers.logging.set_verbosity_error()
    m = MARIANS[index]
    vocab = m["vocab_size"]
    config = MarianConfig(vocab_size=vocab, d_model=m["d_model"], encoder_layers=m["layers"], decoder_layers=m["layers"],
                          encoder_attention_heads=m["heads"], decoder_attention_heads=m["heads"],
                          encoder_ffn_dim=m["ffn"], decoder_ffn_dim=m["ffn"],
                          activation_function=m["activation_function"], scale_embedding=True, pad_token_id=vocab - 1,
                          eos_token_id=0, decoder_start_token_id=vocab - 1, forced_eos_token_id=None,
                          max_position_embeddings=64, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10 + index)
        model = MarianMTModel(config).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "embed_positions" not in name:
                    p.normal_(0.0, scale)  # the norms' weights too: a swapped norm must show
    sizes = {k: getattr(config, k) for k in ("vocab_size", "d_model", "encoder_layers", "decoder_layers",
                                             "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
                                             "decoder_ffn_dim", "activation_function", "pad_token_id", "eos_token_id",
                                             "decoder_start_token_id", "scale_embedding")}
    return model, sizes


def marian_state(model):
    return {n: t.detach().clone() for n, t in model.state_dict().items()}


def student_marian(student, index):
    model, sizes = marian_model(index)
    use_with_probe(student, MARIAN_MT_MODEL)
    standin = student.call(MARIAN_MT_MODEL.name, plain(marian_state(model)), sizes, keep=True, _label="the model")
    label = f"transformer_from_marian(model), model a MarianMTModel of {sizes},"
    return student.call("transformer_from_marian", standin, keep=True, _label=label), model, label


def marian_batch(rng, model, batch, length):
    pad = model.config.pad_token_id
    real = padding(rng, batch, length)
    src = torch.where(real, tokens(rng, pad, (batch, length)), pad)
    tgt = tokens(rng, pad, (batch, 5))
    tgt[:, 0] = model.config.decoder_start_token_id
    return src, real, tgt


@check("transformer_from_marian", "the MarianMTModel's logits to 1e-5, sources padded on the right (its "
       "attention_mask, your src_mask): relu and swish, other sizes", weight=1.5)
def marian_logits(student, ref, rng):
    for index in (0, 1):
        net, model, label = student_marian(student, index)
        src, real, tgt = marian_batch(rng, model, 3, 6)
        with torch.no_grad():
            expected = model(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
        got = student.call(net, src, tgt, real, _label=label)
        expect_same(got, plain(expected), f"{label} on src {describe(src)} with src_mask {describe(real)} and tgt "
                    f"{describe(tgt)}, against the model's logits", rtol=1e-5, atol=1e-5)


@check("transformer_from_marian", "through the caches, one target token at a time: the MarianMTModel's logits",
       weight=1.0)
def marian_steps(student, ref, rng):
    net, model, label = student_marian(student, 1)
    src, real, tgt = marian_batch(rng, model, 2, 5)
    with torch.no_grad():
        expected = model(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
    memory = student.call(net, src, real, method="encode", keep=True, _label=label)
    held = [tuple(student.call("KVCache", keep=True, _label="KVCache()") for _ in range(2))
            for _ in range(MARIANS[1]["layers"])]
    for step in range(tgt.shape[1]):
        got = student.call(net, tgt[:, step:step + 1], memory, real, held, method="decode", _label=label)
        expect_same(got, plain(expected[:, step:step + 1]), f"{label} decoding tgt {describe(tgt)} one token at a "
                    f"time through the caches: step {step}, against the model's logits", rtol=1e-5, atol=1e-5)


@check("transformer_from_marian", "a copy: changing the model's tensors afterwards leaves your model's logits as "
       "they were", weight=0.5)
def marian_copied(student, ref, rng):
    model, sizes = marian_model(2)
    use_with_probe(student, MARIAN_MT_MODEL)
    standin = student.call(MARIAN_MT_MODEL.name, plain(marian_state(model)), sizes, keep=True, _label="the model")
    label = f"transformer_from_marian(model), model a MarianMTModel of {sizes},"
    net = student.call("transformer_from_marian", standin, keep=True, _label=label)
    src, real, tgt = marian_batch(rng, model, 2, 4)
    before = student.call(net, src, tgt, real, _label=label)
    with torch.no_grad():
        expected = model(input_ids=src, attention_mask=real.long(), decoder_input_ids=tgt).logits
    expect_same(before, plain(expected), f"{label} on src {describe(src)}, against the model's logits", rtol=1e-5,
                atol=1e-5)
    state = student.call(standin, method="state_dict", keep=True, _label="model.state_dict()")
    for name in model.state_dict():
        tensor_ = student.call(state, name, method="__getitem__", keep=True, _label=f"model.state_dict()[{name!r}]")
        student.call(tensor_, method="zero_", _label=f"model.state_dict()[{name!r}].zero_()")
    expect_same(student.call(net, src, tgt, real, _label=label), before, f"{label} after the model's tensors were set "
                "to zero, against your model's logits before: they changed, so your model holds the model's own "
                "tensors, not copies. Copy the values (load_state_dict, or p.copy_(t) under torch.no_grad())",
                rtol=1e-6, atol=1e-6)


# ---- label_smoothed_cross_entropy -------------------------------------------------------------------

def smoothing_cases(rng):
    targets = tokens(rng, 7, (2, 5))
    targets[0, :2] = -100
    ignored = tokens(rng, 5, (6,))
    ignored[[1, 4]] = 3
    big = torch.from_numpy(rng.choice([-1e4, 1e4, 0.0], size=(4, 6)))
    return [call(tensor(rng, (2, 5, 7), scale=3.0), targets, 0.1),
            call(tensor(rng, (2, 5, 7), scale=3.0), targets),
            call(tensor(rng, (6, 5), torch.float64), ignored, 0.3, ignore_index=3),
            call(tensor(rng, (4, 9)), tokens(rng, 9, (4,)), 0.0),
            call(big, tokens(rng, 6, (4,)), 0.2),
            call(tensor(rng, (3, 4)), torch.full((3,), -100), 0.1)]


equals("label_smoothed_cross_entropy", "(1 - epsilon) cross-entropy + epsilon mean(-log p), averaged over the kept "
       "targets only: (B, N, V) and (N, V), the default epsilon, another ignore_index, epsilon 0, logits of +-1e4, "
       "float64 kept, every target ignored (NaN)", "label_smoothed_cross_entropy", smoothing_cases, weight=1.5,
       **FLOAT32)

stated_checks("label_smoothed_cross_entropy")


# ---- greedy_translate and beam_search ----------------------------------------------------------------

# vocab_size, dim, num_layers, num_heads, ffn_dim (pad 9, eos 0): a small vocabulary, so that rows end early
DECODER = (10, 16, 2, 4, 24)


def decoding_pair(student, ref, rng, scale):
    """A Transformer(*DECODER) on both sides whose rows end at different steps: an embedding of std `scale`, the
    other matrices of std 0.6 and the norms near the identity (with every weight of one std, each row repeats one
    token, the same for every source)."""
    with torch.random.fork_rng(devices=[]):
        module = ref.Transformer(*DECODER, pad_id=9, eos_id=0)
    state = {}
    for name, p in module.state_dict().items():
        if name.endswith("norm.weight"):
            state[name] = 1.0 + tensor(rng, tuple(p.shape), scale=0.12)
        else:
            state[name] = tensor(rng, tuple(p.shape), scale=0.12 if "norm" in name else
                                 scale if name in ("embed.weight", "lm_head.weight") else 0.6)
    state["lm_head.weight"] = state["embed.weight"]
    module.load_state_dict(state)
    label = f"Transformer{DECODER[:5]} with pad_id=9, eos_id=0"
    handle = student.call("Transformer", *DECODER, pad_id=9, eos_id=0, keep=True, _label=label)
    student.call(handle, plain(state), method="load_state_dict", _label=label)
    return Pair(handle, module.eval(), label + " with parameters the grader loaded into it, on ")


def sources(rng, vocab, lengths):
    return [tokens(rng, vocab - 1, (n,)) for n in lengths]


def decoded(student, ref, pair, batch, target, *args):
    got = student.call(target, pair.handle, batch, *args)
    expected = getattr(ref, target)(pair.module, batch, *args)
    lengths = [len(s) for s in batch]
    expect_same(got, plain(expected), f"{target}({pair.label.removesuffix(' with parameters the grader loaded into it, on ')}"
                f", sources of lengths {lengths}, {', '.join(map(repr, args))})")


@check("greedy_translate", "greedy_translate: argmax at each step, pad_id after a row's eos_id, stopped when every "
       "row has ended or after max_new_tokens: the reference's tokens", weight=1.0)
def greedy(student, ref, rng):
    for scale in (0.3, 0.3, 0.25):
        pair = decoding_pair(student, ref, rng, scale)
        decoded(student, ref, pair, sources(rng, 10, [5, 2, 7, 3]), "greedy_translate", 8)
    decoded(student, ref, pair, sources(rng, 10, [4]), "greedy_translate", 3)


@check("greedy_translate", "beam_search: the reference's tokens, num_beams 2 to 4, length_penalty 1, 0.6 and 2, "
       "early_stopping False and True, sources of different lengths", weight=2.0)
def beams(student, ref, rng):
    for scale, (k, n, lp, es) in zip((0.3, 0.3, 0.25, 0.3), ((3, 8, 1.0, False), (4, 10, 0.6, False),
                                                          (2, 7, 2.0, True), (3, 9, 1.0, True))):
        pair = decoding_pair(student, ref, rng, scale)
        decoded(student, ref, pair, sources(rng, 10, [5, 2, 7]), "beam_search", k, n, lp, es)


def marian_sources(model, batch):
    pad = model.config.pad_token_id
    longest = max(len(s) for s in batch)
    ids = torch.stack([torch.cat([s, torch.full((longest - len(s),), pad)]) for s in batch])
    mask = torch.stack([torch.arange(longest) < len(s) for s in batch]).long()
    return ids, mask


@check("greedy_translate", "equal to a MarianMTModel's own generate(num_beams=..., do_sample=False, length_penalty, "
       "early_stopping), token for token, greedy and beams, its weights in a Transformer", weight=1.5)
def marian_generate(student, ref, rng):
    model, sizes = marian_model(2)
    state = ref.transformer_from_marian(model).state_dict()
    shown = (sizes["vocab_size"], sizes["d_model"], sizes["encoder_layers"], sizes["encoder_attention_heads"],
             sizes["encoder_ffn_dim"], sizes["activation_function"], sizes["pad_token_id"], sizes["eos_token_id"])
    label = "a Transformer holding a MarianMTModel's weights"
    handle = student.call("Transformer", *shown, keep=True, _label=label)
    student.call(handle, plain(state), method="load_state_dict", _label=label)
    batch = sources(rng, sizes["vocab_size"], [5, 2, 7, 3])
    ids, mask = marian_sources(model, batch)
    for k, n, lp, es in ((1, 8, 1.0, False), (3, 8, 1.0, False), (4, 10, 0.6, True)):
        with torch.no_grad():
            expected = model.generate(input_ids=ids, attention_mask=mask, num_beams=k, do_sample=False,
                                      max_new_tokens=n, length_penalty=lp, early_stopping=es)
        target = "greedy_translate" if k == 1 else "beam_search"
        args = (n,) if k == 1 else (k, n, lp, es)
        what = f"{target}({label}, sources of lengths {[len(s) for s in batch]}, {', '.join(map(repr, args))})"
        got = student.call(target, handle, batch, *args, _label=what)
        expect_same(got, plain(expected), f"{what}, against the model's own generate(num_beams={k}, do_sample=False, "
                    f"max_new_tokens={n}, length_penalty={lp}, early_stopping={es})")


# ---- patch_embed and vit_encoder_from_hf -------------------------------------------------------------

def patch_cases(rng):
    return [call(tensor(rng, (2, 3, 8, 12)), 4), call(tensor(rng, (1, 1, 6, 6)), 2),
            call(tensor(rng, (3, 2, 4, 4), torch.float64), 4), call(tensor(rng, (2, 3, 6, 9)), 3)]


equals("patch_embed", "patch_embed: the patches row by row, each flattened channel first (C, P, P); non-square "
       "images, one patch, float64", "patch_embed", patch_cases, rtol=0, atol=0)


@check("patch_embed", "a linear map of patch_embed's patches is ViT's strided convolution (its weight reshaped)",
       weight=0.5)
def patch_conv(student, ref, rng):
    for channels, size, patch in ((3, (8, 12), 4), (2, (6, 6), 3)):
        conv = torch.nn.Conv2d(channels, 5, kernel_size=patch, stride=patch).double()
        with torch.no_grad():
            conv.weight.copy_(tensor(rng, tuple(conv.weight.shape), torch.float64))
            images = tensor(rng, (2, channels, *size), torch.float64)
            expected = conv(images).flatten(2).transpose(1, 2)
        got = student.call("patch_embed", images, patch)
        got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
        expect_true(isinstance(got, torch.Tensor) and got.shape == (2, expected.shape[1], channels * patch * patch),
                    f"patch_embed(images {describe(images)}, {patch}) returned {describe(got)}")
        mapped = got @ conv.weight.detach().reshape(5, -1).T + conv.bias.detach()
        expect_same(plain(mapped), plain(expected), f"patch_embed(images {describe(images)}, {patch}) @ "
                    "conv.weight.reshape(D, -1).T + conv.bias, against conv(images).flatten(2).transpose(1, 2)",
                    rtol=1e-9, atol=1e-9)


VITS = ({"image_size": 8, "patch_size": 4, "num_channels": 3, "hidden_size": 16, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 24, "layer_norm_eps": 1e-12},
        {"image_size": 12, "patch_size": 3, "num_channels": 1, "hidden_size": 12, "num_hidden_layers": 1,
         "num_attention_heads": 3, "intermediate_size": 20, "layer_norm_eps": 1e-5})


@functools.cache
def vit_model(index):
    try:
        from transformers import ViTConfig, ViTModel
    except ImportError as error:
        raise CheckFailure(f"the grader cannot import transformers' ViT ({error}): tell your instructor") from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(20 + index)
        model = ViTModel(ViTConfig(**VITS[index], attn_implementation="eager")).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.5)
    return model


@check("patch_embed", "vit_encoder_from_hf: the ViTModel's last_hidden_state to 1e-5, two configurations (the class "
       "token, the learned positions, pre-norm layers, the final norm)", weight=1.5)
def vit_outputs(student, ref, rng):
    use_with_probe(student, VIT_MODEL)
    for index, sizes in enumerate(VITS):
        model = vit_model(index)
        state = {n: t.detach().clone() for n, t in model.state_dict().items()}
        standin = student.call(VIT_MODEL.name, plain(state), dict(sizes), keep=True, _label="the model")
        label = f"vit_encoder_from_hf(model), model a ViTModel of {sizes},"
        encoder = student.call("vit_encoder_from_hf", standin, keep=True, _label=label)
        images = tensor(rng, (2, sizes["num_channels"], sizes["image_size"], sizes["image_size"]))
        with torch.no_grad():
            expected = model(images).last_hidden_state
        expect_same(student.call(encoder, images, _label=label), plain(expected),
                    f"{label} on images {describe(images)}, against the model's last_hidden_state", rtol=1e-5,
                    atol=1e-5)


# ---- every exercise on another device -------------------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/ch10_encoder_decoder.py), and `check` runs them;
# here, what the same calls must give on the CPU, against the reference.

device_checks(options={"CrossAttention": FLOAT32, "EncoderLayer": FLOAT32, "Transformer": FLOAT32,
                       "label_smoothed_cross_entropy": FLOAT32})
