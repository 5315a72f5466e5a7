"""Checks of chapter 9, "The whole model: a small Llama built, trained, checked and decoded" (PyTorch).

Each exercise runs with the reference versions of the exercises before it (`run_exercise`): the
initialisation, training and decoding are given the grader's `LlamaLM` (a stand-in whose every
forward the grader computes), the loader builds it, `train` calls the reference loss and schedule,
`generate` the reference `filter_logits`. `lm_from_llama` and greedy `generate` are compared with
`transformers`' own LlamaForCausalLM, which runs here, in the grader: the student's process receives
only its numbers (a state dict of tensors and nine sizes), through a stand-in object with the two
attributes the exercise allows.
"""
import functools
import math

import numpy as np
import torch

from .core import (Chapter, CheckFailure, Pair, call, describe, expect_close, expect_same, expect_true, model_pair,
                   plain, same, tensor)
from .known_good import use_with_probe
from ..sandbox.probes import GRADER_LLAMA, LLAMA_FOR_CAUSAL_LM

ASSIGNMENT = "09-language-model"
chapter = Chapter(ASSIGNMENT)
check, equals, stated_checks, device_checks = chapter.check, chapter.equals, chapter.stated_checks, chapter.device_checks
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}  # float32 sums over the features: the order of the additions shows

# vocab_size, dim, num_layers, num_heads, num_kv_heads, hidden_dim
LM = (40, 16, 2, 4, 2, 24)
UNTIED = (30, 12, 3, 3, 1, 20)


def tokens(rng, vocab, shape):
    return torch.from_numpy(rng.integers(0, vocab, size=shape))


def lm_pair(student, ref, sizes, rng, **options):
    return model_pair(student, ref, "LlamaLM", sizes, rng, **options)


def caches(student, ref, count):
    return [Pair(student.call("KVCache", keep=True, _label="KVCache()"), ref.KVCache(), "a KVCache")
            for _ in range(count)]


def span(start, stop):
    return f"{start}" if stop == start + 1 else f"{start} to {stop - 1}"


# ---- LlamaLM ----------------------------------------------------------------------------------

@check("LlamaLM", "the logits: lm_head(norm(blocks(embed(tokens)))), tied and untied, grouped and multi-query, batch "
       "dimensions, float64 (model.double())", weight=1.5)
def lm_logits(student, ref, rng):
    pair = lm_pair(student, ref, LM, rng)
    same(student, ref, pair, tokens(rng, LM[0], (2, 6)), **FLOAT32)
    same(student, ref, pair, tokens(rng, LM[0], (2, 3, 5)), **FLOAT32)
    pair = lm_pair(student, ref, UNTIED, rng, tie_embeddings=False)
    same(student, ref, pair, tokens(rng, UNTIED[0], (3, 5)), **FLOAT32)
    pair = lm_pair(student, ref, LM, rng, double=True)
    same(student, ref, pair, tokens(rng, LM[0], (2, 4)))


@check("LlamaLM", "positions (B, N) and a padding mask passed to every block, rope_base and eps passed on")
def lm_options(student, ref, rng):
    pair = lm_pair(student, ref, LM, rng)
    x = tokens(rng, LM[0], (3, 6))
    same(student, ref, pair, x, torch.from_numpy(rng.integers(0, 30, size=(3, 6))), **FLOAT32)
    pad = torch.from_numpy(np.arange(6) < rng.integers(1, 7, size=3)[:, None])[:, None, None, :]
    same(student, ref, pair, x, None, pad, **FLOAT32)
    pair = lm_pair(student, ref, LM, rng, rope_base=50.0, eps=0.5)
    same(student, ref, pair, x, **FLOAT32)


@check("LlamaLM", "with one KVCache per layer, a sequence fed in pieces (3 tokens, then 1, then 3) gives the logits "
       "of the whole sequence")
def lm_caches(student, ref, rng):
    pair = lm_pair(student, ref, UNTIED, rng, tie_embeddings=False)
    x = tokens(rng, UNTIED[0], (2, 7))
    with torch.no_grad():
        whole = pair.module(x)
    held = caches(student, ref, UNTIED[2])
    for start, stop in ((0, 3), (3, 4), (4, 7)):
        got = student.call(pair.handle, x[:, start:stop], None, None, [c.handle for c in held],
                           _label=f"{pair.label.removesuffix(', on ')} with caches holding {start} tokens")
        expect_same(got, plain(whole[:, start:stop]), f"{pair.label}tokens {describe(x)} fed in pieces through one "
                    f"KVCache per layer: logits {span(start, stop)}, against the whole sequence", **FLOAT32)


stated_checks("LlamaLM")  # parameters and the tie: autograder/stated/ch09_language_model.py


# ---- init_weights_ ----------------------------------------------------------------------------

INIT_LM = (256, 64, 2, 2, 1, 128)  # about 100,000 parameters, every tensor at least 2,048 numbers


def initialised(student, sizes, std, rng, **options):
    """The grader's LlamaLM(*sizes) with uniform(-2, 2) values in every parameter, then the student's
    init_weights_(model[, std]): (its state, the model, its label)."""
    shown = ", ".join([*map(repr, sizes), *(f"{k}={v!r}" for k, v in options.items())])
    label = f"init_weights_(model{'' if std is None else f', std={std}'}), model a LlamaLM({shown}) holding values from uniform(-2, 2)"
    model = student.call("LlamaLM", *sizes, keep=True, _label=f"LlamaLM({shown})", **options)
    names = student.call(model, method="state_dict", _label=f"LlamaLM({shown})")
    state = {n: torch.from_numpy(rng.uniform(-2, 2, tuple(np.shape(v)))).float() for n, v in names.items()}
    if options.get("tie_embeddings", True):
        state["lm_head.weight"] = state["embed.weight"]
    student.call(model, plain(state), method="load_state_dict", _label=f"LlamaLM({shown})")
    student.call("init_weights_", model, *([] if std is None else [std]), keep=True, _label=label)  # whatever it returns
    state = student.call(model, method="state_dict", _label=f"{label}: model.state_dict()")
    return {n: torch.as_tensor(np.asarray(v)).double() for n, v in state.items()}, model, label


def expect_normal(values, std, name, what):
    """Mean and standard deviation within six standard errors of N(0, std^2)'s (the standard deviation's
    relative error is about 1 / sqrt(2n))."""
    n = values.numel()
    mean, got_std = float(values.mean()), float(values.std())
    expect_true(abs(mean) < 6 * std / math.sqrt(n) and abs(got_std / std - 1) < 6 / math.sqrt(2 * n),
                f"{what}: {name} ({n:,} numbers) has mean {mean:.3g} and standard deviation {got_std:.4g}; expected "
                f"N(0, {std:.4g}^2): mean about 0, standard deviation {std:.4g} (within {6 / math.sqrt(2 * n):.1%})")


def expect_gaussian_shape(standardised, what):
    """Every drawn value divided by its standard deviation: about 68.3 % within one (a uniform: 57.7 %)."""
    within = float((standardised.abs() < 1).double().mean())
    expect_true(0.66 < within < 0.705, f"{what}: {within:.1%} of the drawn values are within one standard deviation "
                "of 0; a normal distribution has 68.3 % there (a uniform one 57.7 %): draw with normal_")


@check("init_weights_", "N(0, std^2) for the embedding and the linear weights, std / sqrt(2 num_layers) for o_proj "
       "and down_proj (normal: about 68 % within one standard deviation), norms at one: tied with the default std "
       "and untied with std=0.05", weight=1.5)
def init_statistics(student, ref, rng):
    for std, options in ((None, {}), (0.05, {"tie_embeddings": False})):
        state, _, label = initialised(student, INIT_LM, std, rng, **options)
        sigma = 0.02 if std is None else std
        residual = sigma / math.sqrt(2 * INIT_LM[2])
        drawn = []
        for name, values in state.items():
            if name.endswith("norm.weight"):
                expect_true(bool((values == 1).all()), f"{label}: {name} should be all ones, got values from "
                            f"{float(values.min()):.3g} to {float(values.max()):.3g}")
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                expect_normal(values, residual, name, label + " (a residual output: std / sqrt(2 * num_layers))")
                drawn.append(values.flatten() / residual)
            else:
                expect_normal(values, sigma, name, label)
                drawn.append(values.flatten() / sigma)
        expect_gaussian_shape(torch.cat(drawn), label)


def parameter_id(student, model, name, label):
    parameter = student.call(model, name, method="get_parameter", keep=True, _label=f"{label}: model.{name}")
    return student.call(parameter, method="__hash__", _label=f"{label}: model.{name}")  # a tensor's hash is its id


@check("init_weights_", "a tied model stays tied: lm_head.weight is still embed.weight, the same Parameter",
       weight=0.5)
def init_keeps_tie(student, ref, rng):
    state, model, label = initialised(student, (64, 32, 2, 4, 2, 48), None, rng)
    # judged on an initialisation that happened: a function that does nothing leaves the tie too
    expect_normal(state["embed.weight"], 0.02, "embed.weight", label + " (the tie is judged on a model initialised)")
    expect_true(parameter_id(student, model, "lm_head.weight", label) == parameter_id(student, model, "embed.weight",
                                                                                     label),
                f"{label}: afterwards model.lm_head.weight is no longer model.embed.weight: change the parameters' "
                "values in place (p.normal_(...) under torch.no_grad()), do not assign new nn.Parameters")
    expect_true(torch.equal(state["lm_head.weight"], state["embed.weight"]),
                f"{label}: lm_head.weight and embed.weight differ afterwards")


# ---- count_parameters, train_flops_per_token ----------------------------------------------------

CONFIGS = [dict(vocab_size=40, dim=16, num_layers=2, num_heads=4, num_kv_heads=2, hidden_dim=24),
           dict(vocab_size=30, dim=12, num_layers=3, num_heads=3, num_kv_heads=1, hidden_dim=20, tie_embeddings=False),
           dict(vocab_size=100, dim=24, num_layers=1, num_heads=6, num_kv_heads=6, hidden_dim=40, tie_embeddings=True,
                rope_base=500000.0, eps=1e-5),
           dict(vocab_size=32000, dim=4096, num_layers=32, num_heads=32, num_kv_heads=32, hidden_dim=11008,
                tie_embeddings=False),                                                      # Llama 2 7B
           dict(vocab_size=32000, dim=8192, num_layers=80, num_heads=64, num_kv_heads=8, hidden_dim=28672,
                tie_embeddings=False),                                                      # Llama 2 70B
           dict(vocab_size=128256, dim=4096, num_layers=32, num_heads=32, num_kv_heads=8, hidden_dim=14336,
                tie_embeddings=False)]                                                      # Llama 3 8B


def expect_int(student, ref, target, *args):
    """The student's target(config, ...) is the reference's int; the message shows the whole config
    (`describe` shortens a dict of more than six items)."""
    shown = f"{target}({', '.join(repr(a) for a in args)})"
    got, expected = student.call(target, *args, _label=shown), getattr(ref, target)(*args)
    expect_true(type(got) is int and got == expected, f"{shown} returned {describe(got)}, expected the int {expected:,}")


@check("count_parameters", "an int: the parameters of LlamaLM(**config), tied and untied, grouped queries, and Llama 2 "
       "7B and 70B, Llama 3 8B")
def counts(student, ref, rng):
    for config in CONFIGS:
        expect_int(student, ref, "count_parameters", config)


@check("count_parameters", "count_parameters of small configurations equals the parameters of the model built, "
       "counted once", weight=0.5)
def count_built(student, ref, rng):
    for config in CONFIGS[:3]:
        with torch.random.fork_rng(devices=[]):
            built = sum(p.numel() for p in ref.LlamaLM(**config).parameters())
        got = student.call("count_parameters", config, _label=f"count_parameters({config!r})")
        expect_true(got == built, f"count_parameters({config!r}) returned {describe(got)}; LlamaLM(**config) has "
                    f"{built:,} parameters")


@check("count_parameters", "train_flops_per_token: an int, 6 N (non-embedding) + 6 num_layers context d_attn, tied "
       "and untied, several contexts")
def flops(student, ref, rng):
    for config, context in zip(CONFIGS, (8, 16, 1, 4096, 4096, 8192)):
        expect_int(student, ref, "train_flops_per_token", config, context)


stated_checks("count_parameters")  # Llama 2 7B: autograder/stated/ch09_language_model.py


# ---- lm_from_llama ----------------------------------------------------------------------------

LLAMAS = ({"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 24, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
           "tie_word_embeddings": True},
          {"vocab_size": 30, "hidden_size": 12, "num_hidden_layers": 3, "num_attention_heads": 3,
           "num_key_value_heads": 1, "intermediate_size": 20, "rms_norm_eps": 0.25, "rope_theta": 50.0,
           "tie_word_embeddings": False})


@functools.cache
def llama_model(index):
    """(a LlamaForCausalLM of LLAMAS[index] with random weights, the sizes it is shown with): built here,
    once per grading process, from the classes `transformers` ships (nothing downloaded)."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as error:
        raise CheckFailure(f"the grader cannot import transformers' Llama ({error}): tell your instructor") from None
    config = LlamaConfig(**LLAMAS[index], attn_implementation="eager", bos_token_id=None, eos_token_id=None,
                         pad_token_id=None)
    with torch.random.fork_rng(devices=[]):  # in nbgrader's kernel, the student's code shares the global RNG
        torch.manual_seed(index)
        model = LlamaForCausalLM(config).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.5)  # the norms' weights too: a swapped norm must show
    sizes = {k: v for k, v in LLAMAS[index].items() if k != "rope_theta"}
    sizes["rope_parameters"] = {"rope_theta": config.rope_parameters["rope_theta"], "rope_type": "default"}
    return model, sizes


def llama_logits(model, x, attention_mask=None):
    with torch.no_grad():
        return model(x, attention_mask=attention_mask).logits


def llama_standin(student, index):
    """(the stand-in of LLAMAS[index]'s model in the student's process, the model, label)."""
    model, sizes = llama_model(index)
    use_with_probe(student, LLAMA_FOR_CAUSAL_LM)
    standin = student.call(LLAMA_FOR_CAUSAL_LM.name, plain(model.state_dict()), sizes, keep=True, _label="the model")
    return standin, model, f"lm_from_llama(model), model a LlamaForCausalLM of {sizes},"  # as transformers names it


def student_lm(student, index):
    standin, model, label = llama_standin(student, index)
    return student.call("lm_from_llama", standin, keep=True, _label=label), model, label


@check("lm_from_llama", "the LlamaForCausalLM's logits, to 1e-5, tied (grouped queries) and untied (multi-query, "
       "other eps and RoPE base)", weight=1.5)
def llama_outputs(student, ref, rng):
    for index in range(len(LLAMAS)):
        lm, model, label = student_lm(student, index)
        x = tokens(rng, LLAMAS[index]["vocab_size"], (2, 6))
        expect_same(student.call(lm, x, _label=label), plain(llama_logits(model, x)),
                    f"{label} on tokens {describe(x)}, against the model's logits", rtol=1e-5, atol=1e-5)


@check("lm_from_llama", "with right padding (the model's attention_mask, a mask (B, 1, 1, N) for yours): its logits "
       "at every position", weight=0.75)
def llama_padding(student, ref, rng):
    lm, model, label = student_lm(student, 0)
    x = tokens(rng, LLAMAS[0]["vocab_size"], (3, 6))
    real = torch.from_numpy(np.arange(6) < rng.integers(1, 7, size=3)[:, None])
    got = student.call(lm, x, None, real[:, None, None, :], _label=label)
    expect_same(got, plain(llama_logits(model, x, real.long())), f"{label} on tokens {describe(x)} with a padding mask "
                "(3, 1, 1, 6), against the model with the same attention_mask", rtol=1e-5, atol=1e-5)


@check("lm_from_llama", "fed through one KVCache per layer in pieces (4 tokens, then 1, then 2): the model's logits "
       "on the whole sequence", weight=0.75)
def llama_cache(student, ref, rng):
    lm, model, label = student_lm(student, 1)
    x = tokens(rng, LLAMAS[1]["vocab_size"], (2, 7))
    expected = llama_logits(model, x)
    held = [student.call("KVCache", keep=True, _label="KVCache()") for _ in range(LLAMAS[1]["num_hidden_layers"])]
    for start, stop in ((0, 4), (4, 5), (5, 7)):
        got = student.call(lm, x[:, start:stop], None, None, held, _label=f"{label} with caches holding {start} tokens")
        expect_same(got, plain(expected[:, start:stop]), f"{label} fed tokens {describe(x)} in pieces through one "
                    f"KVCache per layer: logits {span(start, stop)}, against the model on the whole sequence",
                    rtol=1e-5, atol=1e-5)


@check("lm_from_llama", "a copy: changing the model's tensors afterwards leaves your model's logits as they were",
       weight=0.5)
def llama_copied(student, ref, rng):
    standin, model, label = llama_standin(student, 1)
    lm = student.call("lm_from_llama", standin, keep=True, _label=label)
    x = tokens(rng, LLAMAS[1]["vocab_size"], (2, 4))
    before = student.call(lm, x, _label=label)  # judged against itself: whether they are right, other checks say
    state = student.call(standin, method="state_dict", keep=True, _label="model.state_dict()")
    for name in model.state_dict():
        tensor_ = student.call(state, name, method="__getitem__", keep=True, _label=f"model.state_dict()[{name!r}]")
        student.call(tensor_, method="zero_", _label=f"model.state_dict()[{name!r}].zero_()")
    expect_same(student.call(lm, x, _label=label), before, f"{label} on tokens {describe(x)}, after the model's "
                "tensors were set to zero, against your model's logits before: they changed, so your model holds "
                "the model's own tensors (nn.Parameter(t), t.data and t.detach() keep t's storage), not copies of "
                "them. Copy the values (load_state_dict, or p.copy_(t) under torch.no_grad())", rtol=1e-6, atol=1e-6)


# ---- cross_entropy ----------------------------------------------------------------------------

def loss_cases(rng):
    targets = tokens(rng, 7, (2, 5))
    targets[0, :2] = -100
    ignored = tokens(rng, 5, (6,))
    ignored[[1, 4]] = 3
    everything = torch.full((3,), -100)
    big = torch.from_numpy(rng.choice([-1e4, 1e4, 0.0], size=(4, 6)))
    return [call(tensor(rng, (2, 5, 7), scale=3.0), targets),
            call(tensor(rng, (6, 5), torch.float64), ignored, ignore_index=3),
            call(big.float(), tokens(rng, 6, (4,))),
            call(big, tokens(rng, 6, (4,))),
            call(tensor(rng, (3, 4)), everything)]


equals("cross_entropy", "the mean of log-sum-exp minus the target's logit over the targets kept: (B, N, V) and (N, V), "
       "ignore_index (the default -100 and another), logits of +-1e4, float64 kept, every target ignored (NaN)",
       "cross_entropy", loss_cases, weight=1.5, **FLOAT32)

stated_checks("cross_entropy")  # = F.cross_entropy, its gradient: autograder/stated/ch09_language_model.py


# ---- cosine_lr and clip_grad_norm_ ----------------------------------------------------------------

def schedule_cases(rng):
    return [call(step, 1e-3, 1e-4, 10, 100) for step in (0, 1, 5, 9, 10, 11, 37, 55, 99, 100, 101, 250)] + \
           [call(step, 3.0, 0.0, 0, 8) for step in (0, 3, 8, 9)] + [call(4, 6e-4, 6e-5, 4, 5)]


equals("cosine_lr", "cosine_lr: linear warm-up from 0, max_lr at warmup_steps, half a cosine down to min_lr at "
       "total_steps, then min_lr; no warm-up", "cosine_lr", schedule_cases, rtol=1e-12, atol=1e-15)

stated_checks("cosine_lr")  # clip_grad_norm_ = torch's: autograder/stated/ch09_language_model.py


# ---- train ------------------------------------------------------------------------------------

TRAIN_LM = (20, 16, 2, 4, 2, 24)


def trained(student, ref, rng, options, **kwargs):
    """The student's train on the grader's LlamaLM, and the recipe's on the same weights and data."""
    pair = lm_pair(student, ref, TRAIN_LM, rng, scale=1.0, **options)  # gradients above the clipping norm
    data = tokens(rng, TRAIN_LM[0], (80,))
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    label = f"train(model, data {describe(data)}, {shown}), model {pair.label.removesuffix(', on ')}"
    got = student.call("train", pair.handle, data, _label=label, **kwargs)
    module = pair.module.train()
    expected = ref.train(module, data, **kwargs)
    expect_true(isinstance(got, list) and all(type(v) is float for v in got),
                f"{label} should return a list of {kwargs['steps']} floats, got {describe(got)}")
    expect_close(np.asarray(got), np.asarray(expected), f"{label}: the losses", rtol=1e-4, atol=1e-6)
    state = student.call(pair.handle, method="state_dict", _label=f"{label}: model.state_dict()")
    for name, value in module.state_dict().items():
        expect_close(state.get(name), value.detach(), f"{label}: {name} after training", rtol=1e-4, atol=1e-6)


# weight_decay=0.0 in both: the decay and its groups are a stated rule's (autograder/stated/ch09_language_model.py),
# charged there alone (with a decay here, weight decay on the norms too failed these checks as well)

@check("train", "the recipe, a few steps: losses and final weights (AdamW betas (0.9, 0.95), warm-up and cosine "
       "schedule, clipping at 1.0, batches from the seeded generator), weight_decay=0", weight=1.5)
def train_recipe(student, ref, rng):
    trained(student, ref, rng, {}, steps=3, batch_size=3, context=6, max_lr=1e-2, warmup_steps=1, weight_decay=0.0)


@check("train", "min_lr, another seed, an untied model, weight_decay=0")
def train_options(student, ref, rng):
    trained(student, ref, rng, {"tie_embeddings": False}, steps=2, batch_size=2, context=5, max_lr=3e-2, min_lr=1e-2,
            weight_decay=0.0, seed=7)


stated_checks("train")  # weight decay on the matrices only: autograder/stated/ch09_language_model.py


# ---- filter_logits ----------------------------------------------------------------------------

def logits_cases(rng):
    ties = torch.from_numpy(np.round(rng.normal(0, 1, (3, 12)), 1)).float()
    ties[:, :4] = torch.tensor([3.0, 1.5, 1.5, 1.5])  # the 2nd to 4th largest tie (the rest is below 1.5)
    ties[:, 4:] = ties[:, 4:].clamp(max=1.0)
    return [call(tensor(rng, (2, 10), scale=2.0), temperature=0.7),
            call(ties, top_k=2), call(ties, top_k=5), call(ties, top_k=1), call(ties, top_k=50),
            call(tensor(rng, (4, 16), scale=2.0), top_p=0.8), call(tensor(rng, (2, 9)), top_p=0.0),
            call(tensor(rng, (2, 9)), top_p=1.0),
            call(tensor(rng, (2, 3, 20), scale=2.0), temperature=1.3, top_k=6, top_p=0.7),
            call(tensor(rng, (3, 15), torch.float64, scale=2.0), temperature=0.5, top_p=0.9)]


equals("filter_logits", "temperature, then top-k (ties with the k-th kept), then top-p (cumulative probability <= "
       "1 - top_p removed, the largest kept), batch dimensions, float64", "filter_logits", logits_cases, weight=1.5,
       rtol=1e-6, atol=1e-6)


@check("filter_logits", "equal to transformers' TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, "
       "applied in that order", weight=0.5)
def filter_warpers(student, ref, rng):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
    for temperature, top_k, top_p in ((0.8, 5, 0.9), (1.5, 3, None), (1.0, None, 0.5)):
        logits = tensor(rng, (3, 24), scale=2.0)
        expected = TemperatureLogitsWarper(temperature)(None, logits)
        if top_k is not None:
            expected = TopKLogitsWarper(top_k)(None, expected)
        if top_p is not None:
            expected = TopPLogitsWarper(top_p)(None, expected)
        got = student.call("filter_logits", logits, temperature, top_k, top_p)
        expect_close(got, expected, f"filter_logits(logits {describe(logits)}, {temperature}, {top_k}, {top_p}), "
                     "against transformers' warpers", rtol=1e-6, atol=1e-6)


# ---- generate ---------------------------------------------------------------------------------

GEN_LM = (24, 16, 2, 4, 2, 24)


def prompts(rng, vocab, lengths):
    return [tokens(rng, vocab, (n,)) for n in lengths]


def generated(student, ref, rng, pair, lengths, n_new, **options):
    batch = prompts(rng, GEN_LM[0], lengths)
    shown = "".join(f", {k}={v!r}" for k, v in options.items())
    got = student.call("generate", pair.handle, batch, n_new, **options)
    expected = ref.generate(pair.module, batch, n_new, **options)
    expect_same(got, plain(expected), f"generate({pair.label.removesuffix(', on ')}, prompts of lengths {lengths}, "
                f"{n_new}{shown})")


@check("generate", "greedy: left padding, the padding mask, per-row positions, the caches: the reference's tokens "
       "(each prompt's tokens alone)")
def greedy(student, ref, rng):
    pair = lm_pair(student, ref, GEN_LM, rng, scale=0.8)
    generated(student, ref, rng, pair, [5, 2, 3], 5)
    generated(student, ref, rng, pair, [3], 3)


@check("generate", "greedy = transformers' generate(do_sample=False) for a LlamaForCausalLM's weights, token for "
       "token, prompts of different lengths")
def greedy_transformers(student, ref, rng):
    model, _ = llama_model(1)
    state = ref.lm_from_llama(model).state_dict()
    label = "a LlamaLM holding a LlamaForCausalLM's weights"
    handle = student.call("LlamaLM", *module_sizes(LLAMAS[1]), keep=True, _label=label)
    student.call(handle, plain(state), method="load_state_dict", _label=label)
    lengths = [4, 1, 6]
    batch = prompts(rng, LLAMAS[1]["vocab_size"], lengths)
    got = student.call("generate", handle, batch, 4, _label=f"generate({label}, prompts of lengths {lengths}, 4)")
    ids = torch.stack([torch.cat([torch.zeros(6 - len(p), dtype=torch.long), p]) for p in batch])
    mask = torch.stack([torch.arange(6) >= 6 - len(p) for p in batch]).long()
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False)[:, 6:]
    expect_same(got, plain(expected), f"generate({label}, prompts of lengths {lengths}, 4), against the model's own "
                "generate(input_ids left-padded, attention_mask, max_new_tokens=4, do_sample=False)")


def module_sizes(config):
    return (config["vocab_size"], config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["intermediate_size"], config["rope_theta"], config["rms_norm_eps"],
            config["tie_word_embeddings"])


@check("generate", "sampled with a seed (torch.multinomial of softmax(filter_logits(...)) with the seed's generator): "
       "the reference's tokens; seed=0 samples too", weight=0.75)
def sampled(student, ref, rng):
    pair = lm_pair(student, ref, GEN_LM, rng, scale=0.8)
    generated(student, ref, rng, pair, [4, 2, 5], 6, temperature=0.9, top_k=4, top_p=0.6, seed=11)
    generated(student, ref, rng, pair, [3, 1], 3, temperature=1.5, seed=0)


class GraderLlama:
    """The grader's side of `_GraderLlama`: its LlamaLM, one list of caches per list the student
    passes, and every call's number of tokens, counted here where the student cannot reach. Bounded:
    the batch, the tokens, the calls and the caches kept (a student cannot make the grader work or
    keep more than a correct `generate` needs, many times over)."""
    MAX_BATCH, MAX_TOKENS, MAX_CALLS, MAX_CACHES = 8, 16, 32, 4

    shared = ("fed", "cache_lists")  # what the check reads back from the reference worker (`sandbox/answers.py`)

    def __init__(self, ref, module):
        self.ref, self.module, self.caches, self.fed, self.cache_lists = ref, module, {}, [], 0

    def __call__(self, tokens, positions, mask, cache_ids):
        expect_true(isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.shape[0] <= self.MAX_BATCH
                    and tokens.shape[1] <= self.MAX_TOKENS and not tokens.is_floating_point(),
                    f"the model was fed {describe(tokens)}: expected token ids of shape (batch, n), batch <= "
                    f"{self.MAX_BATCH}, n <= {self.MAX_TOKENS}")
        batch, n = tokens.shape
        # shapes, not only sizes: a (512, 1, 1, 1, 1) mask broadcasts every score tensor 512 times
        expect_true(positions is None or (isinstance(positions, torch.Tensor) and not positions.is_floating_point()
                                          and tuple(positions.shape) in ((batch, n), (1, n), (n,))),
                    f"the model was given positions {describe(positions)}: expected None or ({batch}, {n}) integers")
        expect_true(mask is None or (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() == 4
                                     and mask.shape[0] in (1, batch) and mask.shape[1] == 1 and mask.shape[2] in (1, n)
                                     and mask.shape[3] <= self.MAX_TOKENS * (self.MAX_CALLS + 1)),
                    f"the model was given mask {describe(mask)}: expected None or a boolean ({batch}, 1, 1, L)")
        expect_true(cache_ids is None or (isinstance(cache_ids, list) and len(cache_ids) == len(self.module.layers)),
                    f"the model was given {describe(cache_ids)} as caches: expected one KVCache per layer")
        expect_true(len(self.fed) < self.MAX_CALLS, f"the model was called more than {self.MAX_CALLS} times")
        self.fed.append(int(tokens.shape[-1]))
        with torch.no_grad():
            if cache_ids is None:
                return self.module(tokens, positions, mask)
            key = tuple(cache_ids)
            expect_true(key in self.caches or len(self.caches) < self.MAX_CACHES,
                        f"the model was given more than {self.MAX_CACHES} different lists of caches")
            caches = self.caches.setdefault(key, [self.ref.KVCache() for _ in self.module.layers])
            self.cache_lists = len(self.caches)
            return self.module(tokens, positions, mask, caches)


@check("generate", "the caches used: the model is fed the whole padded prompt once, then one token per call",
       weight=0.5)
def cache_used(student, ref, rng):
    use_with_probe(student, GRADER_LLAMA)
    with torch.random.fork_rng(devices=[]):
        module = ref.LlamaLM(*GEN_LM).eval()
    module.load_state_dict({n: tensor(rng, tuple(p.shape), scale=0.8) for n, p in module.state_dict().items()})
    model = GraderLlama(ref, module)
    student.process.callbacks[GRADER_LLAMA.question] = model
    batch = prompts(rng, GEN_LM[0], [4, 2])
    try:
        probe = student.call(GRADER_LLAMA.name, GEN_LM[2], keep=True, _label="the model")
        got = student.call("generate", probe, batch, 5, _label="generate(model, prompts of lengths [4, 2], 5)")
    finally:
        student.process.callbacks.pop(GRADER_LLAMA.question)
    fed = model.fed
    expect_true(fed[:1] == [4] and all(n == 1 for n in fed[1:]) and 4 <= len(fed) - 1 <= 5 and model.cache_lists == 1,
                f"generate(model, prompts of lengths [4, 2], 5) fed the model {describe(fed)} tokens per call"
                f"{'' if model.cache_lists <= 1 else f', with {model.cache_lists} different lists of caches'}; with "
                "one list of caches it should feed the padded prompt once (4 tokens), then only the one new token "
                "each call: [4, 1, 1, 1, 1]")
    expect_same(got, plain(ref.generate(module, batch, 5)), "generate(model, prompts of lengths [4, 2], 5)")


# ---- every exercise on another device -----------------------------------------------------------
# The device rule and its cases are stated (autograder/stated/ch09_language_model.py), and `check`
# runs them; here, what the same calls must give on the CPU, against the reference.

device_checks(options={"LlamaLM": FLOAT32, "cross_entropy": FLOAT32, "filter_logits": {"rtol": 1e-6, "atol": 1e-6}})
