"""Chapter 3: the mistakes students make with scores, masks and attention."""

WRONG = {
    "soft_lookup": {
        "multiplies_by_temperature": '''
def soft_lookup(query, keys, values, temperature):
    d2 = ((query.unsqueeze(-2) - keys) ** 2).sum(-1)
    w = torch.softmax(-d2 * temperature, dim=-1)
    return (w.unsqueeze(-1) * values).sum(-2)
''',
        "dot_product_similarity": '''
def soft_lookup(query, keys, values, temperature):
    s = (keys @ query.unsqueeze(-1)).squeeze(-1)
    w = torch.softmax(s / temperature, dim=-1)
    return (w.unsqueeze(-1) * values).sum(-2)
''',
        "distance_not_squared": '''
def soft_lookup(query, keys, values, temperature):
    d = (query.unsqueeze(-2) - keys).norm(dim=-1)
    w = torch.softmax(-d / temperature, dim=-1)
    return (w.unsqueeze(-1) * values).sum(-2)
''',
        "hard_lookup": '''
def soft_lookup(query, keys, values, temperature):
    d2 = ((query.unsqueeze(-2) - keys) ** 2).sum(-1)
    w = F.one_hot(d2.argmin(-1), d2.shape[-1]).to(values.dtype)
    return (w.unsqueeze(-1) * values).sum(-2)
''',
        "no_broadcasting": '''
def soft_lookup(query, keys, values, temperature):
    w = torch.softmax(-((keys - query) ** 2).sum(-1) / temperature, dim=-1)
    return w @ values
''',
    },
    "dot_product_scores": {
        "no_transpose": '''
def dot_product_scores(q, k):
    return q @ k
''',
        "keys_against_queries": '''
def dot_product_scores(q, k):
    return k @ q.transpose(-2, -1)
''',
        "bmm_needs_one_batch_dim": '''
def dot_product_scores(q, k):
    return torch.bmm(q, k.transpose(1, 2))
''',
        "always_float32": '''
def dot_product_scores(q, k):
    return (q @ k.transpose(-2, -1)).float()
''',
        "transposes_all_dims": '''
def dot_product_scores(q, k):
    return q @ k.T if k.dim() == 2 else q @ k.permute(*range(k.dim() - 1, -1, -1))
''',
    },
    "scaled_dot_product_scores": {
        "sqrt_of_number_of_keys": '''
def scaled_dot_product_scores(q, k):
    return dot_product_scores(q, k) / math.sqrt(k.shape[-2])
''',
        "divides_by_d_k": '''
def scaled_dot_product_scores(q, k):
    return dot_product_scores(q, k) / k.shape[-1]
''',
        "sqrt_of_number_of_queries": '''
def scaled_dot_product_scores(q, k):
    return dot_product_scores(q, k) / math.sqrt(q.shape[-2])
''',
        "multiplies_by_sqrt_d_k": '''
def scaled_dot_product_scores(q, k):
    return dot_product_scores(q, k) * math.sqrt(k.shape[-1])
''',
        "operator_precedence": '''
def scaled_dot_product_scores(q, k):
    return dot_product_scores(q, k) / k.shape[-1] ** 1/2
''',
        "d_k_from_size_1": '''
def scaled_dot_product_scores(q, k):
    return dot_product_scores(q, k) / math.sqrt(k.size(1))
''',
    },
    "GeneralScore": {
        "W_applied_to_queries": '''
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, q, k):
        return self.W(q) @ k.transpose(-2, -1)
''',
        "W_maps_queries_to_key_space": '''
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(query_dim, key_dim, bias=False)

    def forward(self, q, k):
        return self.W(q) @ k.transpose(-2, -1)
''',
        "forgets_W": '''
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, q, k):
        return q @ k.transpose(-2, -1)
''',
        "with_bias": '''
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim)

    def forward(self, q, k):
        return q @ self.W(k).transpose(-2, -1)
''',
        "raw_weight_transposed": '''
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, q, k):
        return q @ self.W.weight.T @ k.transpose(-2, -1)
''',
    },
    "AdditiveScore": {
        "missing_tanh": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        return self.v(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3)).squeeze(-1)
''',
        "tanh_before_the_sum": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        hidden = torch.tanh(self.W_q(q)).unsqueeze(-2) + torch.tanh(self.W_k(k)).unsqueeze(-3)
        return self.v(hidden).squeeze(-1)
''',
        "keys_by_queries": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        hidden = torch.tanh(self.W_q(q).unsqueeze(-3) + self.W_k(k).unsqueeze(-2))
        return self.v(hidden).squeeze(-1)
''',
        "keeps_last_axis": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        return self.v(torch.tanh(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3)))
''',
        "squeezes_every_axis_of_size_1": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        return self.v(torch.tanh(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))).squeeze()
''',
        "with_biases": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim)
        self.W_k = nn.Linear(key_dim, hidden_dim)
        self.v = nn.Linear(hidden_dim, 1)

    def forward(self, q, k):
        return self.v(torch.tanh(self.W_q(q).unsqueeze(-2) + self.W_k(k).unsqueeze(-3))).squeeze(-1)
''',
    },
    "masked_softmax": {
        "inverted_polarity": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(w, nan=0.0)
''',
        "large_negative_fill": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, -1e9)
    return torch.softmax(scores, dim=-1)
''',
        "nan_for_empty_rows": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    return torch.softmax(scores, dim=-1)
''',
        "additive_mask": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores + (~mask) * -1e9
    return torch.softmax(scores, dim=-1)
''',
        "multiplies_after_softmax": '''
def masked_softmax(scores, mask=None):
    w = torch.softmax(scores, dim=-1)
    return w if mask is None else w * mask
''',
        "mask_none_not_handled": '''
def masked_softmax(scores, mask=None):
    scores = torch.where(mask, scores, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(w, nan=0.0)
''',
        "softmax_over_queries": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    w = torch.softmax(scores, dim=1 if scores.dim() > 2 else -1)
    return torch.nan_to_num(w, nan=0.0)
''',
    },
    "attention": {
        "multiplies_masked_values": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k), mask)
    return weights @ v, weights
''',
        "ignores_score_fn": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(scaled_dot_product_scores(q, k), mask)
    if mask is not None:
        seen = torch.broadcast_to(mask, weights.shape).any(dim=-2).unsqueeze(-1)
        v = torch.where(seen, v, 0.0)
    return weights @ v, weights
''',
        "ignores_mask": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k))
    return weights @ v, weights
''',
        "own_softmax_with_additive_mask": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    scores = score_fn(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
''',
        "scales_twice": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k) / math.sqrt(k.shape[-1]), mask)
    if mask is not None:
        seen = torch.broadcast_to(mask, weights.shape).any(dim=-2).unsqueeze(-1)
        v = torch.where(seen, v, 0.0)
    return weights @ v, weights
''',
        "zeroes_values_with_transposed_mask": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k), mask)
    if mask is not None:
        v = v.masked_fill(~mask.transpose(-2, -1), 0.0)
    return weights @ v, weights
''',
        "returns_output_only": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k), mask)
    return torch.nan_to_num(weights @ v)
''',
    },
}

ALTERNATIVE = {
    "soft_lookup": '''
def soft_lookup(query, keys, values, temperature):
    diff = query[..., None, :] - keys
    logits = -torch.einsum("...nd,...nd->...n", diff, diff) / temperature
    logits = logits - logits.amax(dim=-1, keepdim=True)
    w = logits.exp()
    w = w / w.sum(dim=-1, keepdim=True)
    return torch.einsum("...n,...nd->...d", w, values)
''',
    "dot_product_scores": '''
def dot_product_scores(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k)
''',
    "scaled_dot_product_scores": '''
def scaled_dot_product_scores(q, k):
    return (q / k.shape[-1] ** 0.5) @ k.mT
''',
    "GeneralScore": '''
class GeneralScore(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, q, k):
        # q W k^T, written with the raw weight (query_dim, key_dim)
        return torch.einsum("...id,de,...je->...ij", q, self.W.weight, k)
''',
    "AdditiveScore": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q, k):
        a, b = self.W_q(q), self.W_k(k)
        hidden = torch.tanh(a[..., :, None, :] + b[..., None, :, :])
        return (hidden * self.v.weight[0]).sum(-1)
''',
    "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    mask = torch.broadcast_to(mask, torch.broadcast_shapes(mask.shape, scores.shape))
    scores = torch.broadcast_to(scores, mask.shape)
    safe = torch.where(mask, scores, torch.zeros_like(scores))
    top = torch.where(mask, safe, torch.full_like(safe, -torch.inf)).amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.where(mask, torch.exp(safe - top), torch.zeros_like(safe))
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(e))
''',
    "attention": '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k), mask)
    if mask is None:
        return weights @ v, weights
    # the most careful version: every (query, key) pair selects its own value
    allowed = torch.broadcast_to(mask, weights.shape).unsqueeze(-1)          # (..., Nq, Nk, 1)
    terms = torch.where(allowed, weights.unsqueeze(-1) * v.unsqueeze(-3), torch.zeros((), dtype=v.dtype))
    return terms.sum(dim=-2), weights
''',
}

# A tensor made on the CPU: right on CPU inputs, each loses the device check's points only.
WRONG["masked_softmax"]["cpu_zeros"] = '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    nothing_allowed = (scores == float("-inf")).all(dim=-1, keepdim=True)
    return torch.where(nothing_allowed, torch.zeros(weights.shape, dtype=weights.dtype), weights)
'''
WRONG["attention"]["cpu_zero_values"] = '''
def attention(q, k, v, mask=None, score_fn=scaled_dot_product_scores):
    weights = masked_softmax(score_fn(q, k), mask)
    if mask is not None:
        seen = torch.broadcast_to(mask, weights.shape).any(dim=-2).unsqueeze(-1)
        v = torch.where(seen, v, torch.zeros(v.shape, dtype=v.dtype))
    return weights @ v, weights
'''
