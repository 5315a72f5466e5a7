"""Chapter 4's stated rules: MultiHeadAttention as nn.MultiheadAttention, the copies, the count."""
from ..sandbox.calls import StudentError
from .register import CheckFailure, stated
from .calling import describe, tensor, _pair, close_enough


# ---- chapter 4: MultiHeadAttention ------------------------------------------------------------

@stated("04-multi-head", "MultiHeadAttention", "the formula of the text: the same per-head weights and output as "
        "nn.MultiheadAttention holding the same parameters (out_proj applied once to the merged heads)")
def mha_as_torch(student, rng):
    """Three results compared, so the message says which step differs: the per-head weights, the
    merged heads (out_proj set to the identity) and the output."""
    import torch
    dim, heads, n_q, n_k = 12, 3, 5, 7
    draw = {name: tensor(rng, shape, scale=0.5) for name, shape in
            (("q", (dim, dim)), ("k", (dim, dim)), ("v", (dim, dim)), ("out", (dim, dim)),
             ("q_b", (dim,)), ("k_b", (dim,)), ("v_b", (dim,)), ("out_b", (dim,)))}
    query, key = tensor(rng, (2, n_q, dim)), tensor(rng, (2, n_k, dim))
    label = f"MultiHeadAttention({dim}, {heads}) with parameters the grader loaded into it"
    module = student.call("MultiHeadAttention", dim, heads, keep=True, _label=label)
    results = {}
    for case, out, out_b in (("merged heads", torch.eye(dim), torch.zeros(dim)), ("output", draw["out"], draw["out_b"])):
        state = {"q_proj.weight": draw["q"], "q_proj.bias": draw["q_b"], "k_proj.weight": draw["k"],
                 "k_proj.bias": draw["k_b"], "v_proj.weight": draw["v"], "v_proj.bias": draw["v_b"],
                 "out_proj.weight": out, "out_proj.bias": out_b}
        reference = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        reference.load_state_dict({"in_proj_weight": torch.cat([draw["q"], draw["k"], draw["v"]]),
                                   "in_proj_bias": torch.cat([draw["q_b"], draw["k_b"], draw["v_b"]]),
                                   "out_proj.weight": out, "out_proj.bias": out_b})
        student.call(module, state, method="load_state_dict")
        got = _pair(student.call(module, query, key, key, _label=label), f"{label}(query, key, key)")
        with torch.no_grad():
            expected = reference(query, key, key, average_attn_weights=False)
        results[case] = [close_enough(g, e, 1e-4, 1e-5) for g, e in zip(got, expected)]
    weights_ok = results["merged heads"][1] and results["output"][1]
    heads_ok, out_ok = results["merged heads"][0], results["output"][0]
    if weights_ok and heads_ok and out_ok:
        return
    said = ", ".join(f"the {what} {'match' if ok else 'differ'}" for what, ok in
                     (("per-head weights", weights_ok), ("merged heads (out_proj set to the identity)", heads_ok),
                      ("final outputs", out_ok)))
    hint = ("the weights returned: every head's, (B, H, Nq, Nk), not their mean" if heads_ok and out_ok else
            "the scores: q_proj and k_proj, split_heads, divided once by sqrt(d_h) where d_h = embed_dim / num_heads"
            if not weights_ok else "the values: v_proj, split_heads, weights @ v per head, merge_heads" if not heads_ok
            else "out_proj, applied once to the merged heads")
    raise CheckFailure(f"{label}, on query {describe(query)} and key = value {describe(key)}, against "
                       f"nn.MultiheadAttention({dim}, {heads}, batch_first=True) holding the same parameters: {said}. "
                       f"Look at {hint}")


def _torch_object(student, name, *args, _label, **kwargs):
    """`torch.nn.<name>(*args, **kwargs)` made in the student's process (a Handle)."""
    nn = student.call("torch", "nn", method="__getattribute__", keep=True, _label="torch.nn")
    made = student.call(nn, name, method="__getattribute__", keep=True, _label=f"nn.{name}")
    return student.call(made, *args, keep=True, _label=_label, **kwargs)


def _unchanged(student, module, x, change, label, what, hint, expected):
    """`module(x, x, x)` gives `expected`, the (out, weights) of the model it copies (so that a
    module that copies nothing does not pass), and the same after `change()`."""
    import torch
    before = _pair(student.call(module, x, x, x, _label=label), f"{label}(x, x, x)")
    if not all(close_enough(b, e, 1e-4, 1e-5) for b, e in zip(before, expected)):
        said = " and ".join(name for name, b, e in zip(("out", "the per-head weights"), before, expected)
                            if not close_enough(b, e, 1e-4, 1e-5))
        raise CheckFailure(f"{label}(x, x, x) for x {describe(x)}: {said} differ from the model's it was made from "
                           "(tolerance rtol=1e-4, atol=1e-5), so whether it is a copy is not judged: it must first "
                           "compute what the model computes")
    change()
    after = _pair(student.call(module, x, x, x, _label=label), f"{label}(x, x, x)")
    if not all(torch.equal(b, a) for b, a in zip(before, after)):
        raise CheckFailure(f"{label}(x, x, x) for x {describe(x)} changed after {what}: your module holds "
                           f"tensors of the model it was copied from, not copies of them. {hint}")


@stated("04-multi-head", "mha_from_torch", "a copy: loading new parameters into m afterwards does not change the "
        "module mha_from_torch(m) returned")
def from_torch_copies(student, rng):
    import torch
    dim, heads = 6, 2
    label = f"nn.MultiheadAttention({dim}, {heads}, batch_first=True)"
    m = _torch_object(student, "MultiheadAttention", dim, heads, batch_first=True, _label=label)
    shapes = {"in_proj_weight": (3 * dim, dim), "in_proj_bias": (3 * dim,), "out_proj.weight": (dim, dim),
              "out_proj.bias": (dim,)}
    first, second = ({n: tensor(rng, s, scale=0.5) for n, s in shapes.items()} for _ in range(2))
    student.call(m, first, method="load_state_dict")
    mine = student.call("mha_from_torch", m, keep=True, _label=f"mha_from_torch(m = {label})")
    x = tensor(rng, (2, 4, dim))
    model = torch.nn.MultiheadAttention(dim, heads, batch_first=True)  # m as it was, here
    model.load_state_dict(first)
    with torch.no_grad():
        expected = model(x, x, x, average_attn_weights=False)
    _unchanged(student, mine, x, lambda: student.call(m, second, method="load_state_dict"),
               f"mha_from_torch(m = {label})", "m.load_state_dict(new parameters)",
               "Copy the values (load_state_dict, or proj.weight.copy_(w) under torch.no_grad()): nn.Parameter(w), "
               "w.detach() and .data keep the storage of w, a view of m's in_proj_weight", expected)


@stated("04-multi-head", "mha_from_bert", "a copy: changing the model the state came from does not change the "
        "module mha_from_bert(state, num_heads) returned")
def from_bert_copies(student, rng):
    import torch
    dim, heads = 8, 2
    linear = lambda: _torch_object(student, "Linear", dim, dim, _label=f"nn.Linear({dim}, {dim})")  # noqa: E731
    attention = _torch_object(student, "ModuleDict", [
        ("self", _torch_object(student, "ModuleDict", [("query", linear()), ("key", linear()), ("value", linear())],
                               _label="nn.ModuleDict")),
        ("output", _torch_object(student, "ModuleDict", [("dense", linear()), ("LayerNorm", _torch_object(
            student, "LayerNorm", dim, _label=f"nn.LayerNorm({dim})"))], _label="nn.ModuleDict"))],
        _label="a BERT attention block")
    names = [f"{layer}.{p}" for layer in ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm")
             for p in ("weight", "bias")]
    draw = lambda: {n: tensor(rng, (dim, dim) if n.endswith("weight") and "Norm" not in n else (dim,), scale=0.5)  # noqa: E731
                    for n in names}
    first = draw()
    student.call(attention, first, method="load_state_dict")
    state = student.call(attention, method="state_dict", keep=True, _label="a BERT block's attention.state_dict()")
    mine = student.call("mha_from_bert", state, heads, keep=True, _label=f"mha_from_bert(a BERT block's state, {heads})")
    x = tensor(rng, (2, 4, dim))
    model = torch.nn.MultiheadAttention(dim, heads, batch_first=True)  # the block's attention, as the text defines it
    model.load_state_dict({"in_proj_weight": torch.cat([first[f"self.{n}.weight"] for n in ("query", "key", "value")]),
                           "in_proj_bias": torch.cat([first[f"self.{n}.bias"] for n in ("query", "key", "value")]),
                           "out_proj.weight": first["output.dense.weight"],
                           "out_proj.bias": first["output.dense.bias"]})
    with torch.no_grad():
        expected = model(x, x, x, average_attn_weights=False)
    _unchanged(student, mine, x, lambda: student.call(attention, draw(), method="load_state_dict"),
               f"mha_from_bert(a BERT block's state, {heads})", "new parameters were loaded into the BERT block",
               "Copy the values (load_state_dict, or weight.copy_(state[name]) under torch.no_grad()): "
               "nn.Parameter(state[name]) and .data = state[name] keep the model's storage (a state_dict()'s tensors "
               "are the model's own)", expected)


@stated("04-multi-head", "count_parameters", "from the formula: count_parameters(10**9, 8) is the right int (a "
        "module of 4·10¹⁸ parameters cannot be built)")
def count_from_formula(student, rng):
    try:
        got = student.call("count_parameters", 10**9, 8)
    except StudentError as error:
        raise CheckFailure(f"{error}: count the parameters from the formula; the module would need 16 million TB") from None
    if not (isinstance(got, int) and not isinstance(got, bool)):
        raise CheckFailure(f"count_parameters(1000000000, 8) should be an int, got {describe(got)}")
    dim = 10**9
    expected = 4 * (dim * dim + dim)  # q_proj, k_proj, v_proj and out_proj: nn.Linear(D, D) with a bias each
    if got != expected:
        raise CheckFailure(f"count_parameters(1000000000, 8) should be {expected} (four nn.Linear(D, D), each D·D "
                           f"weights and D biases), got {got}")
