"""Chapter 4: the mistakes students make with heads, PyTorch's module and BERT's weights."""

_MHA_INIT = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
'''


def _mha(forward):
    return _MHA_INIT + "\n    def forward(self, query, key, value, mask=None):\n" + forward


WRONG = {
    "split_heads": {
        "reshape_without_transpose": '''
def split_heads(x, num_heads):
    *batch, n, d = x.shape
    return x.reshape(*batch, num_heads, n, d // num_heads)
''',
        "heads_interleaved": '''
def split_heads(x, num_heads):
    *batch, n, d = x.shape
    return x.reshape(*batch, n, d // num_heads, num_heads).permute(*range(len(batch)), -1, -3, -2)
''',
        "batch_of_one_only": '''
def split_heads(x, num_heads):
    b, n, d = x.shape
    return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)
''',
    },
    "merge_heads": {
        "reshape_without_transpose": '''
def merge_heads(x):
    *batch, h, n, d_h = x.shape
    return x.reshape(*batch, n, h * d_h)
''',
        "heads_interleaved": '''
def merge_heads(x):
    *batch, h, n, d_h = x.shape
    return x.permute(*range(len(batch)), -2, -1, -3).reshape(*batch, n, h * d_h)
''',
    },
    "MultiHeadAttention": {
        "scale_by_sqrt_D": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = attention(q * math.sqrt(q.shape[-1] / query.shape[-1]), k, v, mask)
        return self.out_proj(merge_heads(heads)), weights
'''),
        "no_out_proj": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = attention(q, k, v, mask)
        return merge_heads(heads), weights
'''),
        "out_proj_per_head": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = attention(q, k, v, mask)
        d_h = q.shape[-1]
        blocks = [h @ self.out_proj.weight[i * d_h:(i + 1) * d_h, i * d_h:(i + 1) * d_h].T
                  for i, h in enumerate(heads.unbind(-3))]
        out = torch.cat(blocks, dim=-1)
        return (out + self.out_proj.bias if self.out_proj.bias is not None else out), weights
'''),
        "weights_averaged_over_heads": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = attention(q, k, v, mask)
        return self.out_proj(merge_heads(heads)), weights.mean(dim=-3)
'''),
        "heads_without_transpose": _mha('''
        def heads(x):
            *b, n, d = x.shape
            return x.reshape(*b, self.num_heads, n, d // self.num_heads)
        out, weights = attention(heads(self.q_proj(query)), heads(self.k_proj(key)), heads(self.v_proj(value)), mask)
        return self.out_proj(merge_heads(out)), weights
'''),
        "keys_from_the_query": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(query), self.num_heads)
        v = split_heads(self.v_proj(query), self.num_heads)
        heads, weights = attention(q, k, v, mask)
        return self.out_proj(merge_heads(heads)), weights
'''),
        "mask_inverted": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = attention(q, k, v, None if mask is None else ~mask)
        return self.out_proj(merge_heads(heads)), weights
'''),
        "mask_as_large_negative": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        weights = torch.softmax(scores, dim=-1)
        return self.out_proj(merge_heads(weights @ v)), weights
'''),
    },
    "mha_from_torch": {
        "key_padding_polarity_ignored": '''
def mha_from_torch(m):
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None)
    with torch.no_grad():
        for proj, w in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
            proj.weight.copy_(w)
        mine.out_proj.weight.copy_(m.out_proj.weight)
        if m.in_proj_bias is not None:
            for proj, b in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            mine.out_proj.bias.copy_(m.out_proj.bias)
    forward = mine.forward
    mine.forward = lambda q, k, v, mask=None: forward(q, k, v, None if mask is None else ~mask)
    return mine.to(m.in_proj_weight.dtype)
''',
        "biases_dropped": '''
def mha_from_torch(m):
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None).to(m.in_proj_weight.dtype)
    with torch.no_grad():
        for proj, w in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
            proj.weight.copy_(w)
            if proj.bias is not None:
                proj.bias.zero_()
        mine.out_proj.weight.copy_(m.out_proj.weight)
        if mine.out_proj.bias is not None:
            mine.out_proj.bias.zero_()
    return mine
''',
        "in_proj_rows_in_wrong_order": '''
def mha_from_torch(m):
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None).to(m.in_proj_weight.dtype)
    with torch.no_grad():
        for proj, w in zip((mine.k_proj, mine.q_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
            proj.weight.copy_(w)
        mine.out_proj.weight.copy_(m.out_proj.weight)
        if m.in_proj_bias is not None:
            for proj, b in zip((mine.k_proj, mine.q_proj, mine.v_proj), m.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            mine.out_proj.bias.copy_(m.out_proj.bias)
    return mine
''',
        "weights_transposed": '''
def mha_from_torch(m):
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None).to(m.in_proj_weight.dtype)
    with torch.no_grad():
        for proj, w in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
            proj.weight.copy_(w.T)
        mine.out_proj.weight.copy_(m.out_proj.weight.T)
        if m.in_proj_bias is not None:
            for proj, b in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            mine.out_proj.bias.copy_(m.out_proj.bias)
    return mine
''',
        "float32_always": '''
def mha_from_torch(m):
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None)
    with torch.no_grad():
        for proj, w in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
            proj.weight.copy_(w)
        mine.out_proj.weight.copy_(m.out_proj.weight)
        if m.in_proj_bias is not None:
            for proj, b in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            mine.out_proj.bias.copy_(m.out_proj.bias)
    return mine
''',
    },
    "count_parameters": {
        "no_out_proj": '''
def count_parameters(embed_dim, num_heads, bias=True):
    return 3 * embed_dim * embed_dim + (3 * embed_dim if bias else 0)
''',
        "per_head_projections": '''
def count_parameters(embed_dim, num_heads, bias=True):
    d_h = embed_dim // num_heads
    return 4 * embed_dim * d_h + (4 * embed_dim if bias else 0)
''',
        "bias_ignored": '''
def count_parameters(embed_dim, num_heads, bias=True):
    return 4 * embed_dim * embed_dim + 4 * embed_dim
''',
        "float_result": '''
def count_parameters(embed_dim, num_heads, bias=True):
    return 4.0 * embed_dim ** 2 + (4.0 * embed_dim if bias else 0.0)
''',
    },
    "bert_padding_mask": {
        "polarity_inverted": '''
def bert_padding_mask(attention_mask):
    return (attention_mask == 0)[:, None, None, :]
''',
        "one_axis_missing": '''
def bert_padding_mask(attention_mask):
    return attention_mask.bool()[:, None, :]
''',
        "integers_not_bool": '''
def bert_padding_mask(attention_mask):
    return attention_mask[:, None, None, :]
''',
    },
    "mha_from_bert": {
        "query_and_key_swapped": '''
def mha_from_bert(state, num_heads):
    dim = state["self.query.weight"].shape[0]
    mine = MultiHeadAttention(dim, num_heads).to(state["self.query.weight"].dtype)
    names = {"q_proj": "self.key", "k_proj": "self.query", "v_proj": "self.value", "out_proj": "output.dense"}
    mine.load_state_dict({f"{a}.{p}": state[f"{b}.{p}"] for a, b in names.items() for p in ("weight", "bias")})
    return mine
''',
        "layer_norm_as_output": '''
def mha_from_bert(state, num_heads):
    dim = state["self.query.weight"].shape[0]
    mine = MultiHeadAttention(dim, num_heads).to(state["self.query.weight"].dtype)
    with torch.no_grad():
        for ours, theirs in (("q_proj", "self.query"), ("k_proj", "self.key"), ("v_proj", "self.value")):
            getattr(mine, ours).weight.copy_(state[theirs + ".weight"])
            getattr(mine, ours).bias.copy_(state[theirs + ".bias"])
        mine.out_proj.weight.copy_(torch.diag(state["output.LayerNorm.weight"]))
        mine.out_proj.bias.copy_(state["output.LayerNorm.bias"])
    return mine
''',
        "biases_left_out": '''
def mha_from_bert(state, num_heads):
    dim = state["self.query.weight"].shape[0]
    mine = MultiHeadAttention(dim, num_heads, bias=False).to(state["self.query.weight"].dtype)
    with torch.no_grad():
        for ours, theirs in (("q_proj", "self.query"), ("k_proj", "self.key"), ("v_proj", "self.value"),
                             ("out_proj", "output.dense")):
            getattr(mine, ours).weight.copy_(state[theirs + ".weight"])
    return mine
''',
        "wrong_number_of_heads": '''
def mha_from_bert(state, num_heads):
    dim = state["self.query.weight"].shape[0]
    mine = MultiHeadAttention(dim, 1).to(state["self.query.weight"].dtype)
    names = {"q_proj": "self.query", "k_proj": "self.key", "v_proj": "self.value", "out_proj": "output.dense"}
    mine.load_state_dict({f"{a}.{p}": state[f"{b}.{p}"] for a, b in names.items() for p in ("weight", "bias")})
    return mine
''',
    },
}

ALTERNATIVE = {
    "split_heads": '''
def split_heads(x, num_heads):
    d_h = x.shape[-1] // num_heads
    return torch.stack(x.split(d_h, dim=-1), dim=-3)
''',
    "merge_heads": '''
def merge_heads(x):
    return torch.cat(x.unbind(dim=-3), dim=-1)
''',
    "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.h = num_heads
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(embed_dim, embed_dim, bias=bias))

    def forward(self, query, key, value, mask=None):
        # one head at a time, each with its own slice of the projections
        d_h = query.shape[-1] // self.h
        if mask is not None:  # one mask per head: (..., H, Nq, Nk)
            mask = mask.expand(torch.broadcast_shapes(mask.shape, (*query.shape[:-2], self.h, query.shape[-2], key.shape[-2])))
        outs, weights = [], []
        for i in range(self.h):
            rows = slice(i * d_h, (i + 1) * d_h)
            def project(proj, x):
                b = proj.bias[rows] if proj.bias is not None else None
                return F.linear(x, proj.weight[rows], b)
            head_mask = None if mask is None else mask[..., i, :, :]
            out, w = attention(project(self.q_proj, query), project(self.k_proj, key), project(self.v_proj, value), head_mask)
            outs.append(out)
            weights.append(w)
        return self.out_proj(torch.cat(outs, dim=-1)), torch.stack(weights, dim=-3)
''',
    "mha_from_torch": '''
def mha_from_torch(m):
    state = {}
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        d = m.embed_dim
        state[name + ".weight"] = m.in_proj_weight[i * d:(i + 1) * d]
        if m.in_proj_bias is not None:
            state[name + ".bias"] = m.in_proj_bias[i * d:(i + 1) * d]
    state.update({"out_proj." + k: v for k, v in m.out_proj.state_dict().items()})
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=m.in_proj_bias is not None)
    mine = mine.to(device=m.out_proj.weight.device, dtype=m.out_proj.weight.dtype)
    mine.load_state_dict({k: v.detach() for k, v in state.items()})
    return mine
''',
    "count_parameters": '''
def count_parameters(embed_dim, num_heads, bias=True):
    per_linear = embed_dim * embed_dim + (embed_dim if bias else 0)
    return int(4 * per_linear)
''',
    "bert_padding_mask": '''
def bert_padding_mask(attention_mask):
    return attention_mask.gt(0).unsqueeze(1).unsqueeze(1)
''',
    "mha_from_bert": '''
def mha_from_bert(state, num_heads):
    weight = state["self.query.weight"]
    mine = MultiHeadAttention(weight.shape[1], num_heads).to(weight)
    with torch.no_grad():
        for ours, theirs in zip((mine.q_proj, mine.k_proj, mine.v_proj, mine.out_proj),
                                ("self.query", "self.key", "self.value", "output.dense")):
            ours.weight.copy_(state[theirs + ".weight"])
            ours.bias.copy_(state[theirs + ".bias"])
    return mine
''',
}

# A module built on the CPU: right on CPU inputs, each loses the device check's points only.
WRONG["mha_from_torch"]["module_on_the_cpu"] = '''
def mha_from_torch(m):
    bias = m.in_proj_bias is not None
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=bias).to(m.in_proj_weight.dtype)
    with torch.no_grad():
        for proj, weight in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
            proj.weight.copy_(weight)
        mine.out_proj.weight.copy_(m.out_proj.weight)
        if bias:
            for proj, b in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            mine.out_proj.bias.copy_(m.out_proj.bias)
    return mine
'''
WRONG["mha_from_bert"]["module_on_the_cpu"] = '''
def mha_from_bert(state, num_heads):
    dim = state["self.query.weight"].shape[0]
    mine = MultiHeadAttention(dim, num_heads).to(state["self.query.weight"].dtype)
    names = {"q_proj": "self.query", "k_proj": "self.key", "v_proj": "self.value", "out_proj": "output.dense"}
    mine.load_state_dict({f"{ours}.{p}": state[f"{theirs}.{p}"] for ours, theirs in names.items() for p in ("weight", "bias")})
    return mine
'''

# Issue 24 §1: inputs and properties the checks did not vary. Each kept full marks before its check.
# The copy shares storage with m (nn.Parameter of a view): loading new weights into m changes it.
WRONG["mha_from_torch"]["shares_storage_with_m"] = '''
def mha_from_torch(m):
    bias = m.in_proj_bias is not None
    weight = m.in_proj_weight
    mine = MultiHeadAttention(m.embed_dim, m.num_heads, bias=bias).to(device=weight.device, dtype=weight.dtype)
    for proj, w in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_weight.chunk(3)):
        proj.weight = nn.Parameter(w.detach())
    mine.out_proj.weight = nn.Parameter(m.out_proj.weight.detach())
    if bias:
        for proj, b in zip((mine.q_proj, mine.k_proj, mine.v_proj), m.in_proj_bias.chunk(3)):
            proj.bias = nn.Parameter(b.detach())
        mine.out_proj.bias = nn.Parameter(m.out_proj.bias.detach())
    return mine
'''
# The module holds the state's own tensors: changing the model the state came from changes it.
WRONG["mha_from_bert"]["shares_storage_with_the_state"] = '''
def mha_from_bert(state, num_heads):
    weight = state["self.query.weight"]
    mine = MultiHeadAttention(weight.shape[0], num_heads).to(device=weight.device, dtype=weight.dtype)
    for ours, theirs in (("q_proj", "self.query"), ("k_proj", "self.key"), ("v_proj", "self.value"),
                         ("out_proj", "output.dense")):
        getattr(mine, ours).weight = nn.Parameter(state[theirs + ".weight"])
        getattr(mine, ours).bias = nn.Parameter(state[theirs + ".bias"])
    return mine
'''
# Builds the module and counts, which the text rules out: right on every size that can be built.
WRONG["count_parameters"]["builds_the_module"] = '''
def count_parameters(embed_dim, num_heads, bias=True):
    return sum(p.numel() for p in MultiHeadAttention(embed_dim, num_heads, bias=bias).parameters())
'''
