"""Chapter 8's stated rules: RoPE, GQA, RMSNorm and the block, on the student's own modules."""
import math

import numpy as np

from ..sandbox.calls import StudentError
from .register import CheckFailure, stated
from .calling import (describe, tensor, close_enough, expect_unchanged, backward_gradients, expect_parameter_shapes,
                      parameter_shapes)


# ---- chapter 8: the caller's x, the gradients, RMSNorm as built -----------------------------------

@stated("08-transformer", "apply_rope", "returns a new tensor: the caller's x is left as it was (heads, float32 and "
        "float64)", weight=0.5, known=True)
def rope_leaves_x(student, rng, known):
    import torch
    for dtype in (torch.float32, torch.float64):
        x = known.given(f"x {str(dtype)[6:]}", lambda: tensor(rng, (2, 3, 5, 8), dtype))
        what = f"apply_rope(x {describe(x)}, positions {describe(torch.arange(5))})"
        got = expect_unchanged(student, "apply_rope", (x, torch.arange(5)), ("x", "positions"), what,
                                hint="return a new tensor (torch.cat of the rotated halves), not x with its halves "
                                "written over (x[..., :half] = ...)")
        _expect_formula(got, known.answer("apply_rope", x.double(), torch.arange(5)), what + " (whether it leaves x as it was is judged on a right "
                        "result)", 1e-4, 1e-5, "rotate feature i with feature i + d_h/2 by the angle position * "
                        "base^(-2i/d_h)", dtype=dtype)


GRADIENT_STEP = 1e-6  # central differences in float64: error about 1e-12 against the gradient's 1e-6 tolerance


def _expect_true_gradients(student, rng, class_name, init, x):
    """`class_name(*init).double()`, holding parameters drawn here: the gradient backward gives for
    (r * output).sum(), parameter by parameter, equals the derivative of the module's own forward
    along a random direction (central differences). No reference is needed: a detached path, or a
    parameter under torch.no_grad(), shows (a buffer where a parameter is stated: the parameters' rule)."""
    import torch
    label = f"{class_name}{init}.double()"
    made = student.call(class_name, *init, keep=True, _label=f"{class_name}{init}")
    module = student.call(made, method="double", keep=True, _label=label)
    state = _drawn(student, rng, module, label, torch.float64)
    names = list(state)
    r = tensor(rng, tuple(x.shape), torch.float64)
    what = f"{label} with parameters the grader loaded into it, on x {describe(x)}: (r * output).sum().backward()"
    out = student.call(module, x, keep=True, _label=label)
    loss = student.call(student.call(out, r, method="mul", keep=True, _label=f"{label}(x) * r"), method="sum",
                        keep=True, _label=f"({label}(x) * r).sum()")
    grads = backward_gradients(student, module, loss, names, label, what)
    for name in names:
        direction = tensor(rng, tuple(state[name].shape), torch.float64)
        values = []
        for sign in (1, -1):
            student.call(module, {**state, name: state[name] + sign * GRADIENT_STEP * direction}, method="load_state_dict")
            values.append(float((torch.as_tensor(np.asarray(student.call(module, x, _label=label))) * r).sum()))
        student.call(module, state, method="load_state_dict")
        numeric = (values[0] - values[1]) / (2 * GRADIENT_STEP)
        analytic = float((torch.as_tensor(np.asarray(grads[name])) * direction).sum())
        if not math.isclose(analytic, numeric, rel_tol=1e-5, abs_tol=1e-7):
            raise CheckFailure(f"{what}: the gradient of {name} is not the derivative of your forward (along a random "
                               f"direction: {analytic:.8g} by backward, {numeric:.8g} by moving {name} a little). A "
                               ".detach() or torch.no_grad() cuts a path on the way from it to the output")


@stated("08-transformer", "GroupedQueryAttention", "trainable: backward gives every parameter the gradient of forward "
        "(no torch.no_grad(), .detach() or .data on the way), in float64", weight=0.5)
def gqa_gradients(student, rng):
    import torch
    _expect_true_gradients(student, rng, "GroupedQueryAttention", (8, 4, 2), tensor(rng, (2, 4, 8), torch.float64))


@stated("08-transformer", "DecoderBlock", "trainable: backward gives every parameter of the block, the norms' weights "
        "included, the gradient of forward (no torch.no_grad(), .detach() or .data on the way), in float64", weight=0.5)
def block_gradients(student, rng):
    import torch
    _expect_true_gradients(student, rng, "DecoderBlock", (8, 2, 1, 12), tensor(rng, (2, 3, 8), torch.float64))


@stated("08-transformer", "DecoderBlock", "RMSNorm(dim) as built: weight initialised to ones, eps 1e-6 by default "
        "(inputs of about 1e-3, where eps counts)", weight=0.5, known=True)
def rms_norm_as_built(student, rng, known):
    import torch
    for dtype in (torch.float32, torch.float64):
        x = known.given(f"x {str(dtype)[6:]}", lambda: tensor(rng, (3, 6), dtype, scale=1e-3))
        got = student.call("RMSNorm", 6, keep=True, _label="RMSNorm(6)")
        got = torch.as_tensor(np.asarray(student.call(got, x, _label="RMSNorm(6)")))
        expected = known.answer("rms_norm", x, torch.ones(6))  # as built: weight ones, eps 1e-6
        if got.dtype != dtype or not close_enough(got, expected, 1e-5 if dtype == torch.float32 else 1e-9, 0.0):
            said = _norm_evidence(got, x.double(), expected) if got.shape == x.shape else ""
            raise CheckFailure(f"RMSNorm(6), as built, on x {describe(x)}: got {describe(got)}"
                               + (f" ({got.flatten()[:3].tolist()} ...)" if got.shape == x.shape else "")
                               + f", expected x / sqrt(mean(x^2) + 1e-6) ({expected.flatten()[:3].tolist()} ...), "
                               f"{str(dtype)[6:]}" + (f": {said}" if said else ""))


def _norm_evidence(got, x, expected):
    """What RMSNorm(6)'s output on x (about 1e-3) shows, or "": a mean subtracted, another eps, a
    weight other than ones. Each is said only where the output fits it."""
    import torch
    got = got.double()
    centred = x - x.mean(dim=-1, keepdim=True)
    if any(close_enough(got, centred / torch.sqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps), 1e-4, 0.0)
           for eps in (1e-6, 1e-5, 1e-8, 0.0)):
        return "it subtracts each row's mean first (LayerNorm does; RMSNorm divides x by sqrt(mean(x^2) + eps) alone)"
    if bool((got == 0).all()):
        return "it returns zeros: weight starts at ones (torch.ones(dim))"
    if bool((got != 0).all()):  # with weight ones: got = x / sqrt(mean(x^2) + eps), so eps is (x / got)^2 - mean(x^2)
        eps = (x / got).pow(2) - x.pow(2).mean(dim=-1, keepdim=True)
        if float(eps.max() - eps.min()) <= 1e-3 * float(eps.abs().max()) + 1e-12 and abs(float(eps.mean()) - 1e-6) > 1e-8:
            return f"it fits an eps of {float(eps.mean()):.3g} (x / sqrt(mean(x^2) + eps)): eps defaults to 1e-6"
        weight = got / expected  # with eps right: the same factor down every column
        if bool(torch.allclose(weight, weight[:1].expand_as(weight), rtol=1e-3, atol=1e-6)):
            return (f"it is the right result times {[round(w, 4) for w in weight[0].tolist()]}, feature by feature: "
                    "weight starts at ones (torch.ones(dim))")
    return ""


# ---- chapter 8: the rules of the text, on the student's own modules -------------------------------

@stated("08-transformer", "apply_rope", "relative: the scores of rotated queries and keys are unchanged when every "
        "position shifts by the same amount", weight=0.5, known=True)
def rope_relative(student, rng, known):
    import torch
    n, d_h = 6, 8
    q, k = known.given("q, k", lambda: (tensor(rng, (n, d_h), torch.float64), tensor(rng, (n, d_h), torch.float64)))
    scores = []
    for shift in (0, 13):
        positions = torch.arange(n) + shift
        rotated_q, rotated_k = (torch.as_tensor(np.asarray(student.call("apply_rope", x, positions))) for x in (q, k))
        for x, rotated in ((q, rotated_q), (k, rotated_k)):  # each a rotation, as the text defines it
            _expect_formula(rotated, known.answer("apply_rope", x, positions), f"apply_rope(x {describe(x)}, positions "
                            f"{describe(positions)})", 1e-5, 1e-6, "whether the scores are relative is judged on "
                            "right rotations: feature i with feature i + d_h/2, by position * base^(-2i/d_h)",
                            dtype=torch.float64)
        scores.append(rotated_q @ rotated_k.T)
    if not torch.allclose(scores[0], scores[1], atol=1e-9):
        raise CheckFailure("apply_rope: q_m . k_n changes when both positions m and n are shifted by 13 (largest change "
                           f"{(scores[0] - scores[1]).abs().max():.2e}): rotate each pair by position * theta_i, the "
                           "same angle for the query and the key at one position")


def _drawn(student, rng, module, label, dtype=None, scale=0.5, known=None):
    """Random values for `module`'s parameters, loaded into it: {name: value}. Its buffers are its own
    (register_buffer: an inv_freq, a mask) and are left as they are. With `known`, the values are
    the rule's input "state" (in `check`, the one its known answers were recorded with, for the
    parameters the module has as the reference has them: its parameters decide, as at grading)."""
    shapes = parameter_shapes(student, module, label)

    def draw():
        return {name: tensor(rng, shape, dtype, scale=scale) for name, shape in shapes.items()}
    state = known.given("state", draw) if known else draw()
    state = {name: state[name] if name in state and tuple(state[name].shape) == tuple(shape)
             else tensor(rng, shape, dtype, scale=scale) for name, shape in shapes.items()}
    student.call(module, state, method="load_state_dict")
    return state


def _expect_state(student, class_name, init, expected):
    """`class_name(*init)` holds exactly the parameters `expected` ({name: shape}), as the text lists
    them; buffers (register_buffer, persistent or not) are its own business."""
    label = f"{class_name}{init}"
    expect_parameter_shapes(student, student.call(class_name, *init, keep=True, _label=label), label, expected)


def _attention_shapes(dim, heads, kv_heads, prefix=""):
    d_h = dim // heads
    return {f"{prefix}q_proj.weight": (heads * d_h, dim), f"{prefix}k_proj.weight": (kv_heads * d_h, dim),
            f"{prefix}v_proj.weight": (kv_heads * d_h, dim), f"{prefix}o_proj.weight": (dim, heads * d_h)}


@stated("08-transformer", "GroupedQueryAttention", "q_proj (D, H*d_h), k_proj and v_proj (D, G*d_h), o_proj: no "
        "biases, no other parameter", weight=0.5)
def gqa_parameters(student, rng):
    for dim, heads, kv_heads in ((16, 4, 2), (12, 3, 1)):
        _expect_state(student, "GroupedQueryAttention", (dim, heads, kv_heads), _attention_shapes(dim, heads, kv_heads))


@stated("08-transformer", "DecoderBlock", "attn_norm, attention, mlp_norm, gate_proj, up_proj, down_proj, and no "
        "other parameter", weight=0.5)
def block_parameters(student, rng):
    for dim, heads, kv_heads, hidden in ((16, 4, 2, 24), (12, 3, 1, 20)):
        _expect_state(student, "DecoderBlock", (dim, heads, kv_heads, hidden),
                      {"attn_norm.weight": (dim,), **_attention_shapes(dim, heads, kv_heads, "attention."),
                       "mlp_norm.weight": (dim,), "gate_proj.weight": (hidden, dim), "up_proj.weight": (hidden, dim),
                       "down_proj.weight": (dim, hidden)})


def _fed_in_pieces(student, rng, known, class_name, init, x, pieces, hint, whole):
    """`class_name(*init)`, holding parameters drawn here, fed x in `pieces` through one KVCache, gives
    what the same module gives for x fed whole: the rule of the text, on the student's own module.
    Judged on a module whose output on x fed whole is right, `whole(module, state, x, label)` (the
    known answer): a module that returns x, or zeros, gives the same in pieces too."""
    import torch
    label = f"{class_name}{init} with parameters the grader loaded into it"
    module = student.call(class_name, *init, keep=True, _label=label)
    state = _drawn(student, rng, module, label, known=known)
    expected = student.call(module, x, _label=label)
    right = whole(module, state, x, label)
    expected = torch.as_tensor(np.asarray(expected)) if isinstance(expected, (np.ndarray, torch.Tensor)) else expected
    if not (isinstance(expected, torch.Tensor) and close_enough(expected, right, 1e-4, 1e-5)):
        shown = (f"largest difference {(expected - right).abs().max():.3g}" if isinstance(expected, torch.Tensor)
                 and expected.shape == right.shape else f"{describe(expected)}, expected shape {tuple(right.shape)}")
        raise CheckFailure(f"{label}, on x {describe(x)} fed whole without a cache: not the text's formula on the "
                           f"module's parameters ({shown}; tolerance rtol=1e-4, atol=1e-5); feeding x in "
                           "pieces through a KVCache is judged on a module whose whole output is right")
    cache = student.call("KVCache", keep=True, _label="KVCache()")
    for start, stop in pieces:
        got = student.call(module, x[:, start:stop], cache=cache, _label=f"{label} with a KVCache holding {start} tokens")
        got = torch.as_tensor(np.asarray(got))
        want = expected[:, start:stop]
        if not close_enough(got, want, 1e-4, 1e-5):
            shown = (f"largest difference {(got - want).abs().max():.3g}" if got.shape == want.shape
                     else f"shape {tuple(got.shape)}, expected {tuple(want.shape)}")
            outputs = f"{start}" if stop == start + 1 else f"{start} to {stop - 1}"
            raise CheckFailure(f"{label}, fed x {describe(x)} in pieces through one KVCache: outputs {outputs} differ "
                               f"from your module's on x fed whole ({shown}; tolerance rtol=1e-4, atol=1e-5): {hint}")


@stated("08-transformer", "GroupedQueryAttention", "with a KVCache: a sequence fed in pieces (3 tokens, then 1, then 2) "
        "gives the outputs of the whole sequence fed without a cache (keys rotated before they are cached, positions "
        "continue after the cached tokens)", weight=1.5, known=True)
def gqa_cache(student, rng, known):
    _fed_in_pieces(student, rng, known, "GroupedQueryAttention", (16, 4, 2),
                   known.given("x", lambda: tensor(rng, (2, 6, 16))), ((0, 3), (3, 4), (4, 6)),
                   "the new tokens are at positions L, ..., L + N - 1; rotate the new keys at those positions, then "
                   "append them", lambda module, state, x, label: _gqa_answer(known, state, x, 4, 2, label))


@stated("08-transformer", "GroupedQueryAttention", "keys rotated before they are cached: after each call with a "
        "KVCache (3 tokens, then 2), cache.k holds k_proj of every token so far, in the G key/value heads, each rotated "
        "once, at its own position", weight=0.5, known=True)
def gqa_caches_rotated_keys(student, rng, known):
    import torch
    dim, heads, kv_heads = 16, 4, 2
    label = f"GroupedQueryAttention{(dim, heads, kv_heads)} with parameters the grader loaded into it"
    module = student.call("GroupedQueryAttention", dim, heads, kv_heads, keep=True, _label=label)
    state = _drawn(student, rng, module, label, known=known)
    if "k_proj.weight" not in state:
        raise CheckFailure(f"{label}: its parameters lack k_proj.weight")
    x = known.given("x", lambda: tensor(rng, (2, 5, dim)))
    # the keys of the text, from the module's own k_proj: (B, G, N, d_h), rotated at positions 0 ... N - 1
    keys = known.answer("gqa_keys", state["k_proj.weight"], x, heads, kv_heads, rotated=False)
    expected = known.answer("gqa_keys", state["k_proj.weight"], x, heads, kv_heads, rotated=True)
    cache = student.call("KVCache", keep=True, _label="KVCache()")
    for start, stop in ((0, 3), (3, 5)):
        student.call(module, x[:, start:stop], cache=cache, _label=f"{label} with a KVCache holding {start} tokens")
        got = student.call(cache, "k", method="__getattribute__", _label="cache.k")
        what = (f"{label}, fed tokens 0 to {stop - 1} of x {describe(x)} through one KVCache (3 tokens, then 2): "
                f"cache.k")
        plain = keys[..., :stop, :]
        unrotated = (isinstance(got, (np.ndarray, torch.Tensor)) and tuple(np.shape(got)) == tuple(plain.shape)
                     and close_enough(torch.as_tensor(np.asarray(got)), plain, 1e-4, 1e-5))
        _expect_formula(got, expected[..., :stop, :], what, 1e-4, 1e-5, (
            "it holds the keys as k_proj gives them, un-rotated: rotate the new keys at positions L, ..., L + N - 1, "
            "then append them (rotating the whole cache after appending gives the same outputs, from another cache)"
            if unrotated else "it holds each key as attention uses it, (B, G, N, d_h), rotated once at its own position"))


def _gqa_answer(known, state, x, heads, kv_heads, label):
    """GroupedQueryAttention's output on x, as the text defines it, from the module's parameters."""
    needed = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight")
    if any(name not in state for name in needed):
        raise CheckFailure(f"{label}: its parameters lack {', '.join(n for n in needed if n not in state)}")
    return known.answer("gqa", {name: state[name] for name in needed}, x, heads, kv_heads)


@stated("08-transformer", "DecoderBlock", "with a KVCache: 2 tokens, then 3, give the outputs of the whole sequence fed "
        "without a cache", weight=0.5, known=True)
def block_cache(student, rng, known):
    # x of about 10: the norms' outputs do not change with x's scale but eps's share does, 100 times
    # smaller; eps, judged by the RMSNorm rule, then cannot fail this rule for some seeds and not others
    _fed_in_pieces(student, rng, known, "DecoderBlock", (16, 4, 2, 24),
                   known.given("x", lambda: tensor(rng, (2, 5, 16), scale=10.0)), ((0, 2), (2, 5)),
                   "pass the cache to the attention",
                   lambda module, state, x, label: _block_answers(student, known, module, state, x, label)["text"])


# ---- chapter 8: angles in float64, as the texts say -------------------------------------------------

def _rope_angles(x, positions, base=10000.0):
    """(..., N, d_h/2): position * base^(-2i/d_h), in float64."""
    import torch
    return positions.double()[..., None] * base ** (-2 * torch.arange(x.shape[-1] // 2, dtype=torch.float64) / x.shape[-1])


def _expect_formula(got, expected, what, rtol, atol, hint, dtype=None):
    """`got` is `expected` (float64, from the text's formula) in `dtype` (float32 unless given). `hint`:
    what to say when the values differ, or a function of the student's tensor that says it ("" for
    nothing): a cause is named only where the values show it."""
    import torch
    dtype = dtype or torch.float32
    got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
    if not isinstance(got, torch.Tensor):
        raise CheckFailure(f"{what}: expected a {str(dtype)[6:]} tensor of shape {tuple(expected.shape)}, got "
                           f"{describe(got)}")
    if got.dtype != dtype or got.shape != expected.shape:
        raise CheckFailure(f"{what}: expected {str(dtype)[6:]} {tuple(expected.shape)}, got {got.dtype} "
                           f"{tuple(got.shape)}")
    if not close_enough(got, expected, rtol, atol):
        bad = ~torch.isclose(got.double(), expected, rtol=rtol, atol=atol)
        index = tuple(int(i) for i in torch.nonzero(bad)[0])
        said = hint(got) if callable(hint) else hint
        raise CheckFailure(f"{what}: value at index {list(index)} is {got[index].item():.9g}, expected "
                           f"{expected[index].item():.9g} ({int(bad.sum())} of {bad.numel()} entries differ; tolerance "
                           f"rtol={rtol:g}, atol={atol:g})" + (f": {said}" if said else ""))


def _within_float32_angles(got, expected, angle, sensitivity):
    """Whether `got` differs from `expected` only as much as angles rounded to float32 would move it:
    each difference within `sensitivity` (how far an output moves per radian) * |angle| * 2^-20 (a
    few roundings of the angle; the course's float32 versions stay under 2^-23) + 2e-6 (the output's
    own rounding). A wrong convention or frequency is off by far more (order 1)."""
    bound = sensitivity * angle.abs() * 2.0 ** -20 + 2e-6
    return bool(((got.double() - expected).abs() <= bound).all())


# Measured with the course's float32 versions (issue 30): position * frequency at 4,096 positions is
# off by up to 2e-5 (sinusoidal_positions(4096, 8)); at positions up to 100,000, by up to 1e-3 (RoPE).
@stated("08-transformer", "sinusoidal_positions", "a long sequence, 4,096 positions or a few more: angles computed in "
        "float64 (in float32, position * frequency is off by up to 2e-5 there)", weight=0.5, known=True)
def sinusoidal_long(student, rng, known):
    import torch
    n, dim = known.given("n", lambda: 4096 + int(rng.integers(0, 64))), 8
    # the rows checked: the last 512 positions (where float32 angles are off the most), every 16th before
    rows = torch.cat([torch.arange(0, n - 512, 16), torch.arange(n - 512, n)])
    expected = known.answer("sinusoidal_rows", n, dim, rows)
    what = f"sinusoidal_positions({n}, {dim})"
    got = student.call("sinusoidal_positions", n, dim)
    got = torch.as_tensor(np.asarray(got)) if isinstance(got, (np.ndarray, torch.Tensor)) else got
    if not isinstance(got, torch.Tensor) or got.dtype != torch.float32 or tuple(got.shape) != (n, dim):
        raise CheckFailure(f"{what}: expected a float32 tensor of shape {(n, dim)}, got {describe(got)}")
    # each feature's angle at the rows checked, |position * base^(-2i/dim)|: how far float32 angles move it
    angle = rows.double()[:, None] * 10000.0 ** (-(torch.arange(dim) // 2 * 2).double() / dim)
    sines_first = torch.cat([expected[:, 0::2], expected[:, 1::2]], dim=-1)

    def hint(seen):
        if _within_float32_angles(seen, expected, angle, 1.0):
            return ("the differences grow with the position as float32 angles' do: compute position * base^(-2i/dim) "
                    "in float64 (torch.arange(n, dtype=torch.float64)), and convert to float32 only at the end")
        if close_enough(seen, sines_first, 1e-3, 1e-3):
            return ("all the sines come first, then all the cosines: the text interleaves them, sin at even features, "
                    "cos at odd ones")
        return ""
    seen = got[rows]
    if not close_enough(seen, expected, 1e-5, 1e-5):
        bad = ~torch.isclose(seen.double(), expected, rtol=1e-5, atol=1e-5)
        row, feature = (int(i) for i in torch.nonzero(bad)[0])
        said = hint(seen)
        raise CheckFailure(f"{what}: value at index {[int(rows[row]), feature]} is {seen[row, feature].item():.9g}, "
                           f"expected {expected[row, feature].item():.9g} ({int(bad.sum())} of {bad.numel()} entries "
                           f"differ among the {len(rows)} positions checked; tolerance rtol=1e-05, atol=1e-05)"
                           + (f": {said}" if said else ""))


@stated("08-transformer", "apply_rope", "float32 x at positions up to 100,000 (a long context): angles computed in "
        "float64, then cos and sin converted", weight=0.5, known=True)
def rope_long(student, rng, known):
    import torch
    x, positions = known.given("x, positions", lambda: (tensor(rng, (2, 6, 16)),
                                                       torch.from_numpy(rng.integers(0, 100_000, size=6))))
    expected, half = known.answer("apply_rope", x.double(), positions), x.shape[-1] // 2
    neighbours = known.answer("rope_neighbours", x.double(), positions)  # Meta's pairs, for the evidence
    angle = _rope_angles(x, positions).repeat(1, 2)
    moved = (x[..., :half].abs() + x[..., half:].abs()).double().repeat(1, 1, 2)  # |d out / d angle| <= |x1| + |x2|

    def hint(got):
        if _within_float32_angles(got, expected, angle, moved):
            return ("the differences are what float32 angles give (off by up to 1e-3 at these positions): compute "
                    "position * theta_i in float64, then convert cos and sin to x's dtype")
        if close_enough(got, neighbours, 1e-2, 1e-2):
            return ("it pairs neighbouring features (2i, 2i + 1), as Meta's Llama code does; the text's convention "
                    "(GPT-NeoX's, and transformers') rotates feature i with feature i + d_h/2")
        return ""
    _expect_formula(student.call("apply_rope", x, positions), expected,
                    f"apply_rope(x {describe(x)}, positions {describe(positions)})", 1e-4, 1e-5, hint)


BLOCK_NAMES = ("attn_norm.weight", "mlp_norm.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def _expect_block_names(state, label):
    if any(name not in state for name in BLOCK_NAMES):
        raise CheckFailure(f"{label}: its parameters lack {', '.join(n for n in BLOCK_NAMES if n not in state)}")


def _block_answers(student, known, block, state, x, label):
    """{variant: the block's output on x}, from the block's own parameters (`state`) and its own
    attention, which the student's process runs on attn_norm(x): "text", as the text defines it,
    and, for the evidence of a message, "silu_on_up" (SiLU on the up branch) and "norm_added" (the
    norms' outputs added where their inputs are). In `check`, known only where the student's
    attention gives the reference's output."""
    import torch
    from .known import Unknown
    _expect_block_names(state, label)
    normed = known.answer("rms_norm", x, state["attn_norm.weight"])
    attention = student.call(block, "attention", method="get_submodule", keep=True, _label=f"{label}.attention")
    attended = torch.as_tensor(np.asarray(student.call(attention, normed.to(x.dtype), _label=f"{label}.attention")))
    parameters = {name: state[name] for name in BLOCK_NAMES}
    try:
        return {variant: known.answer("block", parameters, x, attended, variant=variant)
                for variant in ("text", "silu_on_up", "norm_added")}
    except Unknown:
        raise Unknown(f"{label}, on x {describe(x)}: `check` knows the block's output only where its attention gives "
                      "the right output, and your block's attention gives another on attn_norm(x) (the rules of "
                      "GroupedQueryAttention say what differs; `grade` judges the block with your own attention)"
                      ) from None


def _block_evidence(student, known, block, state, x, got, label, answers):
    """What the block's output shows, or "": its norm not the text's RMSNorm, SiLU on the up branch, or
    the norms' outputs added to the sub-layers' (each said only where the output fits it)."""
    import torch
    try:
        attn_norm = student.call(block, "attn_norm", method="get_submodule", keep=True, _label=f"{label}.attn_norm")
        normed = torch.as_tensor(np.asarray(student.call(attn_norm, x, _label=f"{label}.attn_norm")))
    except StudentError:
        normed = None
    if isinstance(normed, torch.Tensor) and not close_enough(normed, known.answer("rms_norm", x, state["attn_norm.weight"]),
                                                       1e-4, 1e-5):
        return ("its attn_norm, on x, is not weight * x / sqrt(mean(x^2) + eps): the block is judged with the norm "
                "the text defines (the RMSNorm checks say what differs)")
    for variant, said in (("silu_on_up", "it applies SiLU to the up branch: down(SiLU(gate(h)) * up(h)), SiLU on the "
                                         "gate branch"),
                          ("norm_added", "it adds each norm's output to its sub-layer's: pre-norm adds the sub-layer's "
                                         "output to the norm's input, x + attention(attn_norm(x))")):
        if close_enough(got, answers[variant], 1e-4, 1e-5):
            return said
    return ""


@stated("08-transformer", "DecoderBlock", "the formula of the text, on the block's own parameters and attention: "
        "x + attention(attn_norm(x)), then that plus down(SiLU(gate(h)) * up(h)) with h its mlp_norm", weight=0.5,
        known=True)
def block_formula(student, rng, known):
    import torch
    dim, heads, kv_heads, hidden = 8, 2, 1, 12
    label = f"DecoderBlock{(dim, heads, kv_heads, hidden)} with parameters the grader loaded into it"
    block = student.call("DecoderBlock", dim, heads, kv_heads, hidden, keep=True, _label=label)
    state = _drawn(student, rng, block, label, known=known)
    _expect_block_names(state, label)
    x = known.given("x", lambda: tensor(rng, (2, 4, dim), scale=10.0))  # eps's share 100 times smaller, as in block_cache
    answers = _block_answers(student, known, block, state, x, label)
    expected = answers["text"]
    got = torch.as_tensor(np.asarray(student.call(block, x, _label=label)))
    if not close_enough(got, expected, 1e-4, 1e-5):
        shown = (f"largest difference {(got - expected).abs().max():.3g}" if got.shape == expected.shape
                 else f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
        said = _block_evidence(student, known, block, state, x, got, label, answers) if got.shape == expected.shape else ""
        raise CheckFailure(f"{label}, on x {describe(x)}: not x + attention(attn_norm(x)), then that plus "
                           f"down(SiLU(gate(h)) * up(h)) with h its mlp_norm, on the block's own parameters and "
                           f"attention ({shown}; tolerance rtol=1e-4, atol=1e-5)" + (f": {said}" if said else ""))
