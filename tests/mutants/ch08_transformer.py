"""Chapter 8: the classic mistakes with positions, grouped queries, caches and the Llama block."""


def _rope(pairs="halves", exponent="-2 * torch.arange(half, dtype=torch.float64, device=x.device) / x.shape[-1]"):
    if pairs == "halves":
        rotate = '''x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)'''
    else:  # the paper's neighbouring pairs (2i, 2i + 1)
        rotate = '''x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)'''
    return f'''
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = base ** ({exponent})
    angle = torch.as_tensor(positions).to(device=x.device, dtype=torch.float64)[..., None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    {rotate}
'''


def _gqa(positions="torch.arange(past, past + n, device=x.device)", causal=".to(x.device)", rotate_v="", after_cache="",
         group="k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)", rotate_k=True):
    key = ("apply_rope(split_heads(self.k_proj(x), self.num_kv_heads), positions, self.rope_base)" if rotate_k
           else "split_heads(self.k_proj(x), self.num_kv_heads)")
    return f'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.rope_base = num_heads, num_kv_heads, rope_base
        head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, embed_dim, bias=False)

    def forward(self, x, positions=None, mask=None, cache=None):
        n, past = x.shape[-2], 0 if cache is None else cache.length
        if positions is None:
            positions = {positions}
        elif positions.dim() > 1:
            positions = positions.unsqueeze(-2)
        q = apply_rope(split_heads(self.q_proj(x), self.num_heads), positions, self.rope_base)
        k = {key}
        v = split_heads(self.v_proj(x), self.num_kv_heads){rotate_v}
        if cache is not None:
            k, v = cache.append(k, v){after_cache}
        group = self.num_heads // self.num_kv_heads
        {group}
        allowed = causal_mask(n, k.shape[-2]){causal}
        if mask is not None:
            allowed = allowed & mask
        out, _ = attention(q, k, v, allowed)
        return self.o_proj(merge_heads(out))
'''


def _block(norm="x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
           mlp="F.silu(self.gate_proj(h)) * self.up_proj(h)"):
    return f'''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * ({norm})


class DecoderBlock(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, hidden_dim, rope_base=10000.0, eps=1e-6):
        super().__init__()
        self.attn_norm = RMSNorm(embed_dim, eps)
        self.attention = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, rope_base)
        self.mlp_norm = RMSNorm(embed_dim, eps)
        self.gate_proj = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.up_proj = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, embed_dim, bias=False)

    def forward(self, x, positions=None, mask=None, cache=None):
        x = x + self.attention(self.attn_norm(x), positions, mask, cache)
        h = self.mlp_norm(x)
        return x + self.down_proj({mlp})
'''


def _from_llama(sizes="config.rope_parameters[\"rope_theta\"], config.rms_norm_eps",
                renamed='{"input_layernorm.": "attn_norm.", "self_attn.": "attention.", '
                        '"post_attention_layernorm.": "mlp_norm.", "mlp.": ""}'):
    return f'''
def block_from_llama(layer):
    config = layer.self_attn.config
    block = DecoderBlock(config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
                         config.intermediate_size, {sizes})
    renamed = {renamed}
    state = {{}}
    for name, value in layer.state_dict().items():
        prefix = next(p for p in renamed if name.startswith(p))
        state[renamed[prefix] + name[len(prefix):]] = value
    block.load_state_dict(state)
    return block
'''


def _edit(source, old, new):
    """`source` with `old` (which must be there) replaced by `new`: one bug in a correct solution."""
    assert old in source, old
    return source.replace(old, new)


WRONG = {
    "sinusoidal_positions": {
        "sines_then_cosines": '''
def sinusoidal_positions(n, dim, base=10000.0):
    angle = torch.arange(n, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.cat([angle.sin(), angle.cos()], dim=-1).float()
''',
        "angles_in_float32": '''
def sinusoidal_positions(n, dim, base=10000.0):
    angle = torch.arange(n, dtype=torch.float32)[:, None] * base ** (-torch.arange(0, dim, 2) / dim)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)
''',
    },
    "apply_rope": {
        "interleaved_pairs": _rope(pairs="interleaved"),
        "theta_exponent_without_2": _rope(exponent="-torch.arange(half, dtype=torch.float64, device=x.device) / x.shape[-1]"),
        "angles_in_the_dtype_of_x": _edit(_rope(exponent="-2 * torch.arange(half, dtype=x.dtype, device=x.device) / x.shape[-1]"),
                                          "dtype=torch.float64)[..., None]", "dtype=x.dtype)[..., None]"),
        "rotates_x_in_place": _edit(_rope(), """x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)""", """x1, x2 = x[..., :half].clone(), x[..., half:].clone()
    x[..., :half] = x1 * cos - x2 * sin
    x[..., half:] = x2 * cos + x1 * sin
    return x"""),
    },
    "alibi_bias": {
        "slopes_for_power_of_two_only": '''
def alibi_bias(num_heads, n_q, n_k):
    slopes = [2 ** (-8 * (h + 1) / num_heads) for h in range(num_heads)]
    distance = torch.arange(n_q)[:, None] + (n_k - n_q) - torch.arange(n_k)[None, :]
    return -torch.tensor(slopes)[:, None, None] * distance
''',
    },
    "GroupedQueryAttention": {
        "repeat_not_repeat_interleave":
            _gqa(group="k, v = k.repeat(*[1] * (k.dim() - 3), group, 1, 1), v.repeat(*[1] * (v.dim() - 3), group, 1, 1)"),
        "values_rotated_too": _gqa(rotate_v="\n        v = apply_rope(v, positions, self.rope_base)"),
        "positions_not_offset_by_the_cache": _gqa(positions="torch.arange(n, device=x.device)"),
        "causal_mask_left_on_the_cpu": _gqa(causal=""),
        "keys_rotated_after_caching":
            _gqa(rotate_k=False, after_cache="\n        k = apply_rope(k, positions, self.rope_base)"),
        "cache_rotated_after_append": _edit(_edit(_gqa(), """        k = apply_rope(split_heads(self.k_proj(x), self.num_kv_heads), positions, self.rope_base)""",
                                                  """        k = split_heads(self.k_proj(x), self.num_kv_heads)
        if cache is None:
            k = apply_rope(k, positions, self.rope_base)"""), """            k, v = cache.append(k, v)""",
                                            """            k, v = cache.append(k, v)  # StreamingLLM's order: the keys cached un-rotated
            k = apply_rope(k, torch.arange(k.shape[-2], device=x.device), self.rope_base)"""),
        "rotations_under_no_grad": _edit(_gqa(), """        q = apply_rope(split_heads(self.q_proj(x), self.num_heads), positions, self.rope_base)
        k = apply_rope(split_heads(self.k_proj(x), self.num_kv_heads), positions, self.rope_base)""",
                                         """        q, k = split_heads(self.q_proj(x), self.num_heads), split_heads(self.k_proj(x), self.num_kv_heads)
        with torch.no_grad():  # the rotation has no parameters to learn
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)"""),
    },
    "kv_cache_bytes": {
        "keys_only": '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, tokens, batch=1, bytes_per_number=2):
    return num_layers * num_kv_heads * head_dim * tokens * batch * bytes_per_number
''',
    },
    "DecoderBlock": {
        "rms_norm_subtracts_the_mean": _block(norm="(x - x.mean(dim=-1, keepdim=True)) * torch.rsqrt("
                                                   "x.var(dim=-1, unbiased=False, keepdim=True) + self.eps)"),
        "silu_on_the_up_branch": _block(mlp="self.gate_proj(h) * F.silu(self.up_proj(h))"),
        "default_eps_1e_5": _block().replace("eps=1e-6", "eps=1e-5"),
        "norm_weight_starts_at_zero": _edit(_block(), "torch.ones(dim)", "torch.zeros(dim)"),
        "norm_weight_a_buffer": _edit(_block(), "self.weight = nn.Parameter(torch.ones(dim))",
                                      'self.register_buffer("weight", torch.ones(dim))'),
        "rms_detached": _block(norm="x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps).detach()"),
        "positions_not_passed_on": _edit(_block(), "self.attention(self.attn_norm(x), positions, mask, cache)",
                                         "self.attention(self.attn_norm(x), mask=mask, cache=cache)"),
    },
    "block_from_llama": {
        "default_eps_and_rope_base": _from_llama(sizes="10000.0"),
        "norms_swapped": _from_llama(renamed='{"input_layernorm.": "mlp_norm.", "self_attn.": "attention.", '
                                             '"post_attention_layernorm.": "attn_norm.", "mlp.": ""}'),
        "parameters_share_the_layers_tensors": _edit(_from_llama(), "    block.load_state_dict(state)\n", """    for name, value in state.items():  # nn.Parameter(value) keeps value's storage: no copy
        module_name, _, attribute = name.rpartition(".")
        setattr(block.get_submodule(module_name), attribute, nn.Parameter(value))
"""),
    },
}

ALTERNATIVE = {
    "sinusoidal_positions": '''
def sinusoidal_positions(n, dim, base=10000.0):
    pe = torch.empty(n, dim, dtype=torch.float64)
    position = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    for i in range(dim // 2):
        pe[:, 2 * i] = torch.sin(position[:, 0] / base ** (2 * i / dim))
        pe[:, 2 * i + 1] = torch.cos(position[:, 0] / base ** (2 * i / dim))
    return pe.to(torch.float32)
''',
    "apply_rope": '''
def apply_rope(x, positions, base=10000.0):
    """RoPE with complex numbers: pair (x_i, x_{i + d/2}) is x_i + i x_{i + d/2}, rotated by e^{i p theta}."""
    half = x.shape[-1] // 2
    theta = 1.0 / base ** (torch.arange(0, x.shape[-1], 2, dtype=torch.float64, device=x.device) / x.shape[-1])
    angle = torch.as_tensor(positions).to(device=x.device, dtype=torch.float64).unsqueeze(-1) * theta
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)
''',
    "alibi_bias": '''
def alibi_bias(num_heads, n_q, n_k):
    def geometric(n):
        start = 2 ** (-8 / n)
        return [start ** (h + 1) for h in range(n)]
    power = 1
    while power * 2 <= num_heads:
        power *= 2
    slopes = geometric(power) + geometric(2 * power)[0::2][:num_heads - power]
    i = torch.arange(n_k - n_q, n_k).view(-1, 1)
    j = torch.arange(n_k).view(1, -1)
    return (torch.tensor(slopes, dtype=torch.float32).view(-1, 1, 1) * (j - i)).float()
''',
    "GroupedQueryAttention": '''
class GroupedQueryAttention(nn.Module):
    """Grouped heads kept apart in an einsum: no copy of the keys and values per query head. RoPE's
    frequencies made once, a persistent buffer `inv_freq` (in float64, as the angles are)."""

    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.h, self.g, self.base = num_heads, num_kv_heads, rope_base
        self.d = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, num_heads * self.d, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(num_heads * self.d, embed_dim, bias=False)
        self.register_buffer("inv_freq", rope_base ** (-torch.arange(0, self.d, 2, dtype=torch.float64) / self.d))

    def rotate(self, x, pos):
        angle = pos.to(device=x.device, dtype=torch.float64)[..., None] * self.inv_freq.double()
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, x, positions=None, mask=None, cache=None):
        *batch, n, _ = x.shape
        past = cache.length if cache is not None else 0
        pos = torch.arange(past, past + n, device=x.device) if positions is None else positions
        pos = pos.unsqueeze(-2) if pos.dim() > 1 else pos
        q = self.rotate(self.q_proj(x).view(*batch, n, self.h, self.d).transpose(-2, -3), pos)
        k = self.rotate(self.k_proj(x).view(*batch, n, self.g, self.d).transpose(-2, -3), pos)
        v = self.v_proj(x).view(*batch, n, self.g, self.d).transpose(-2, -3)
        if cache is not None:
            k, v = cache.append(k, v)
        q = q.unflatten(-3, (self.g, self.h // self.g))                 # (..., G, H/G, N, d)
        scores = torch.einsum("...gmqd,...gkd->...gmqk", q, k).flatten(-4, -3) / math.sqrt(self.d)
        allowed = causal_mask(n, k.shape[-2]).to(x.device)
        allowed = allowed if mask is None else allowed & mask
        weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1).nan_to_num(0.0)
        out = torch.einsum("...gmqk,...gkd->...gmqd", weights.unflatten(-3, (self.g, self.h // self.g)), v)
        return self.o_proj(out.flatten(-4, -3).transpose(-2, -3).reshape(*batch, n, self.h * self.d))
''',
    "kv_cache_bytes": '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, tokens, batch=1, bytes_per_number=2):
    per_token = num_kv_heads * head_dim * bytes_per_number      # one layer's keys, or its values
    return int(per_token * 2 * num_layers * tokens * batch)
''',
    "DecoderBlock": '''
class RMSNorm(nn.Module):
    """eps kept as a non-persistent buffer: a tensor that follows the module, outside its state_dict."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.register_buffer("eps", torch.tensor(eps, dtype=torch.float64), persistent=False)
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


class DecoderBlock(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, hidden_dim, rope_base=10000.0, eps=1e-6):
        super().__init__()
        self.attn_norm = RMSNorm(embed_dim, eps)
        self.attention = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, rope_base=rope_base)
        self.mlp_norm = RMSNorm(embed_dim, eps=eps)
        self.gate_proj = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.up_proj = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, embed_dim, bias=False)

    def forward(self, x, positions=None, mask=None, cache=None):
        h = x + self.attention(self.attn_norm(x), positions=positions, mask=mask, cache=cache)
        gate, up = self.gate_proj(self.mlp_norm(h)), self.up_proj(self.mlp_norm(h))
        return h + self.down_proj(gate * torch.sigmoid(gate) * up)
''',
    "block_from_llama": '''
def block_from_llama(layer):
    c = layer.self_attn.config
    block = DecoderBlock(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size,
                         rope_base=c.rope_parameters["rope_theta"], eps=c.rms_norm_eps)
    state = layer.state_dict()
    with torch.no_grad():
        block.attn_norm.weight.copy_(state["input_layernorm.weight"])
        block.mlp_norm.weight.copy_(state["post_attention_layernorm.weight"])
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(block.attention, name).weight.copy_(state[f"self_attn.{name}.weight"])
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(block, name).weight.copy_(state[f"mlp.{name}.weight"])
    return block
''',
}
