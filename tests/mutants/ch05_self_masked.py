"""Chapter 5: the mistakes students make with masks, causal layers, positions, training loops and caches."""

_LAYER_INIT = '''
class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, cache=None):
        q = split_heads(self.q_proj(x), self.num_heads)
        k = split_heads(self.k_proj(x), self.num_heads)
        v = split_heads(self.v_proj(x), self.num_heads)
'''

_LM_INIT = '''
class TinyLM(nn.Module):
    def __init__(self, vocab_size, embed_dim=64, num_heads=4, num_layers=2, context=128):
        super().__init__()
        self.context = context
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(context, embed_dim)
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, vocab_size)

    def forward(self, tokens, caches=None):
'''


def _train(loss_line="loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))",
           draw="torch.randint(0, len(data) - n, (batch_size,), generator=generator)",
           update="optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()",
           optimizer="optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n    "):
    return f'''
def train_lm(model, data, steps, batch_size=16, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    {optimizer}n = model.context
    losses = []
    for _ in range(steps):
        starts = {draw}
        windows = torch.stack([data[s:s + n + 1] for s in starts.tolist()])
        logits = model(windows[:, :-1])
        {loss_line}
        {update}
        losses.append(loss.item())
    return losses
'''


def _generate(step, choose="logits.argmax(dim=-1, keepdim=True)"):
    return f'''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    caches = [KVCache() for _ in model.blocks] if use_cache else None
    tokens, fed, chosen_from = prompt, prompt, []
    with torch.no_grad():
        for _ in range(n_new):
            {step}
            if generator is None:
                new = {choose}
            else:
                new = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            tokens, fed = torch.cat([tokens, new], dim=1), new
            chosen_from.append(logits)
    return tokens, torch.stack(chosen_from, dim=1)
'''


WRONG = {
    "causal_mask": {
        "aligned_top_left": '''
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril()
''',
        "triu_instead_of_tril": '''
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).triu(diagonal=n_k - n_q)
''',
        "cannot_see_itself": '''
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q - 1)
''',
        "float_mask": '''
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k).tril(diagonal=n_k - n_q)
''',
    },
    "padding_mask": {
        "masks_queries": '''
def padding_mask(lengths, n):
    lengths = torch.as_tensor(lengths)
    return (torch.arange(n) < lengths[:, None])[:, None, :, None]
''',
        "one_too_many": '''
def padding_mask(lengths, n):
    lengths = torch.as_tensor(lengths)
    return (torch.arange(n) <= lengths[:, None])[:, None, None, :]
''',
        "shape_b_n": '''
def padding_mask(lengths, n):
    return torch.arange(n) < torch.as_tensor(lengths)[:, None]
''',
    },
    "sliding_window_mask": {
        "window_plus_one_keys": '''
def sliding_window_mask(n, window, causal=True):
    distance = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    if causal:
        return (distance >= 0) & (distance <= window)
    return distance.abs() <= window
''',
        "always_causal": '''
def sliding_window_mask(n, window, causal=True):
    distance = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return (distance >= 0) & (distance < window)
''',
        "window_is_total_width": '''
def sliding_window_mask(n, window, causal=True):
    distance = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    if causal:
        return (distance >= 0) & (distance < window)
    return distance.abs() <= window // 2
''',
        "causal_looks_ahead": '''
def sliding_window_mask(n, window, causal=True):
    distance = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return distance.abs() < window
''',
    },
    "graph_mask": {
        "no_self_loops": '''
def graph_mask(adjacency):
    return torch.as_tensor(adjacency) != 0
''',
        "symmetrised": '''
def graph_mask(adjacency):
    a = torch.as_tensor(adjacency) != 0
    return a | a.transpose(-2, -1) | torch.eye(a.shape[-1], dtype=torch.bool)
''',
        "no_batch_dimensions": '''
def graph_mask(adjacency):
    a = (torch.as_tensor(adjacency) != 0).clone()
    a.fill_diagonal_(True)
    return a
''',
        "keeps_the_dtype": '''
def graph_mask(adjacency):
    a = torch.as_tensor(adjacency)
    return ((a != 0) | torch.eye(a.shape[-1], dtype=torch.bool)).to(a.dtype)
''',
    },
    "CausalSelfAttention": {
        "triu_mask": _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        n_q, n_k = q.shape[-2], k.shape[-2]
        out, _ = attention(q, k, v, torch.ones(n_q, n_k, dtype=torch.bool).triu(diagonal=n_k - n_q))
        return self.out_proj(merge_heads(out))
''',
        "no_mask": _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        out, _ = attention(q, k, v)
        return self.out_proj(merge_heads(out))
''',
        "sdpa_is_causal_top_left": _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        return self.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
''',
        "cache_not_used": _LAYER_INIT + '''
        out, _ = attention(q, k, v, causal_mask(q.shape[-2], k.shape[-2]))
        return self.out_proj(merge_heads(out))
''',
        "no_out_proj": _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        out, _ = attention(q, k, v, causal_mask(q.shape[-2], k.shape[-2]))
        return merge_heads(out)
''',
        "always_float32": _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        out, _ = attention(q, k, v, causal_mask(q.shape[-2], k.shape[-2]))
        return self.out_proj(merge_heads(out)).float()
''',
    },
    "TinyLM": {
        "cache_forgets_positions": _LM_INIT + '''
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(tokens.shape[-1]))
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.head(self.norm(x))
''',
        "one_cache_for_all_blocks": _LM_INIT + '''
        start = caches[0].length if caches else 0
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(start, start + tokens.shape[-1]))
        for block in self.blocks:
            x = block(x, caches[0] if caches else None)
        return self.head(self.norm(x))
''',
        "no_final_norm": _LM_INIT + '''
        start = caches[0].length if caches else 0
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(start, start + tokens.shape[-1]))
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.head(x)
''',
        "no_positions": _LM_INIT + '''
        x = self.token_embedding(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.head(self.norm(x))
''',
    },
    "train_lm": {
        "targets_not_shifted": _train(
            loss_line="loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, :-1].reshape(-1))"),
        "gradients_never_zeroed": _train(update="loss.backward()\n        optimizer.step()"),
        "global_random_generator": _train(draw="torch.randint(0, len(data) - n, (batch_size,))"),
        "generator_reseeded_every_step": _train(
            draw="torch.randint(0, len(data) - n, (batch_size,), generator=torch.Generator().manual_seed(seed))"),
        "new_optimiser_every_step": _train(
            optimizer="", update="optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n        "
                                 "optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()"),
    },
    "generate": {
        "cache_fed_the_whole_sequence": _generate("logits = (model(tokens, caches) if use_cache else model(tokens))[:, -1]"),
        "cache_never_used": _generate("logits = model(tokens)[:, -1]"),
        "logits_of_the_first_position": _generate(
            "logits = (model(fed, caches) if use_cache else model(tokens))[:, 0] if not use_cache "
            "else model(fed, caches)[:, -1]"),
        "argmin": _generate("logits = (model(fed, caches) if use_cache else model(tokens))[:, -1]",
                            choose="logits.argmin(dim=-1, keepdim=True)"),
        # a hostile one: it spots the grader's probe and feeds it what it counts, without a cache
        "fools_the_probe": '''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    probed = "Probe" in type(model).__name__
    tokens, chosen_from = prompt, []
    with torch.no_grad():
        for step in range(n_new):
            fed = tokens if (step == 0 or not probed) else tokens[:, -1:]
            logits = model(fed)[:, -1]
            if generator is None:
                new = logits.argmax(dim=-1, keepdim=True)
            else:
                new = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            tokens = torch.cat([tokens, new], dim=1)
            chosen_from.append(logits)
    return tokens, torch.stack(chosen_from, dim=1)
''',
        "unseeded_sampling": '''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    caches = [KVCache() for _ in model.blocks] if use_cache else None
    tokens, fed, chosen_from = prompt, prompt, []
    with torch.no_grad():
        for _ in range(n_new):
            logits = (model(fed, caches) if use_cache else model(tokens))[:, -1]
            if seed is None:
                new = logits.argmax(dim=-1, keepdim=True)
            else:
                new = torch.multinomial(torch.softmax(logits, dim=-1), 1)
            tokens, fed = torch.cat([tokens, new], dim=1), new
            chosen_from.append(logits)
    return tokens, torch.stack(chosen_from, dim=1)
''',
    },
}

ALTERNATIVE = {
    "causal_mask": '''
def causal_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    query_position = torch.arange(n_k - n_q, n_k).unsqueeze(1)
    return torch.arange(n_k).unsqueeze(0) <= query_position
''',
    "padding_mask": '''
def padding_mask(lengths, n):
    lengths = torch.as_tensor(lengths)
    positions = torch.ones(len(lengths), n, dtype=torch.long, device=lengths.device).cumsum(-1) - 1
    return (positions < lengths.unsqueeze(-1)).view(len(lengths), 1, 1, n)
''',
    "sliding_window_mask": '''
def sliding_window_mask(n, window, causal=True):
    full = torch.ones(n, n, dtype=torch.bool)
    band = full.tril(window - 1) & full.triu(-(window - 1))
    return band & full.tril() if causal else band
''',
    "graph_mask": '''
def graph_mask(adjacency):
    a = torch.as_tensor(adjacency).bool()
    return a.logical_or(torch.eye(a.size(-1), dtype=torch.bool, device=a.device).expand_as(a))
''',
    "CausalSelfAttention": '''
class CausalSelfAttention(nn.Module):
    """nanoGPT's way: the causal mask made once, up to a largest length, kept as a (persistent) buffer."""
    MAX_TOKENS = 256

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.h = num_heads
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(embed_dim, embed_dim))
        self.register_buffer("bias", torch.ones(self.MAX_TOKENS, self.MAX_TOKENS, dtype=torch.bool).tril())

    def forward(self, x, cache=None):
        q, k, v = (split_heads(proj(x), self.h) for proj in (self.q_proj, self.k_proj, self.v_proj))
        if cache:
            k, v = cache.append(k, v)
        elif cache is not None:
            k, v = cache.append(k, v)
        n_q, n_k = q.size(-2), k.size(-2)
        mask = self.bias[n_k - n_q:n_k, :n_k]  # the last n_q rows: bottom-right, as causal_mask
        return self.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))
''',
    "TinyLM": '''
class TinyLM(nn.Module):
    def __init__(self, vocab_size, embed_dim=64, num_heads=4, num_layers=2, context=128):
        super().__init__()
        self.context = context
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(context, embed_dim)
        self.blocks = nn.ModuleList(Block(embed_dim, num_heads) for _ in range(num_layers))
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, vocab_size)
        self.register_buffer("positions", torch.arange(context))  # persistent: a buffer beside the parameters

    def forward(self, tokens, caches=None):
        caches = caches or [None] * len(self.blocks)
        seen = 0 if caches[0] is None or caches[0].k is None else caches[0].k.shape[-2]
        x = self.token_embedding(tokens) + self.position_embedding(self.positions[seen:seen + tokens.shape[1]])
        for block, cache in zip(self.blocks, caches):
            x = block(x, cache)
        return self.head(self.norm(x))
''',
    "train_lm": '''
def train_lm(model, data, steps, batch_size=16, lr=3e-3, seed=0):
    g = torch.Generator()
    g.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    offsets = torch.arange(model.context + 1)
    history = []
    for step in range(steps):
        idx = torch.randint(0, len(data) - model.context, (batch_size,), generator=g)[:, None] + offsets
        x, y = data[idx[:, :-1]], data[idx[:, 1:]]
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        history.append(float(loss))
    return history
''',
    "generate": '''
@torch.no_grad()
def generate(model, prompt, n_new, use_cache=True, seed=None):
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    caches = [KVCache() for _ in model.blocks] if use_cache else None
    out, steps = prompt.clone(), []
    logits = model(prompt, caches)[:, -1] if use_cache else None
    for i in range(n_new):
        if not use_cache:
            logits = model(out)[:, -1]
        probs = logits.softmax(-1)
        nxt = probs.argmax(-1, keepdim=True) if g is None else torch.multinomial(probs, 1, generator=g)
        steps.append(logits)
        out = torch.cat((out, nxt), dim=1)
        if use_cache and i < n_new - 1:
            logits = model(nxt, caches)[:, -1]
    return out, torch.stack(steps, 1)
''',
}

# A tensor made on the CPU: right on CPU inputs, each loses the device check's points only.
WRONG["padding_mask"]["rows_read_on_the_cpu"] = '''
def padding_mask(lengths, n):
    rows = [torch.cat([torch.ones(int(l), dtype=torch.bool), torch.zeros(n - int(l), dtype=torch.bool)])
            for l in lengths]
    return torch.stack(rows).view(len(rows), 1, 1, n)
'''
WRONG["padding_mask"]["cpu_positions"] = '''
def padding_mask(lengths, n):
    lengths = torch.as_tensor(lengths)
    return (torch.arange(n) < lengths[:, None])[:, None, None, :]
'''
WRONG["CausalSelfAttention"]["cpu_causal_mask"] = _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        out, _ = attention(q, k, v, causal_mask(q.shape[-2], k.shape[-2]))
        return self.out_proj(merge_heads(out))
'''
WRONG["TinyLM"]["cpu_positions"] = _LM_INIT + '''
        start = caches[0].length if caches else 0
        positions = torch.arange(start, start + tokens.shape[-1])
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.head(self.norm(x))
'''

# Issue 24 §1: inputs and properties the checks did not vary. Each kept full marks before its check.
# Negative weights are edges too ("a nonzero entry"); the checks' weights were all positive.
WRONG["graph_mask"]["positive_entries_only"] = '''
def graph_mask(adjacency):
    a = torch.as_tensor(adjacency)
    return (a > 0) | torch.eye(a.shape[-1], dtype=torch.bool, device=a.device)
'''
# torch.as_tensor returns the caller's tensor: the self-loops are written into the caller's graph.
WRONG["graph_mask"]["self_loops_written_into_the_input"] = '''
def graph_mask(adjacency):
    a = torch.as_tensor(adjacency)
    a.diagonal(dim1=-2, dim2=-1).fill_(1)
    return a != 0
'''
# The mask needs no gradient, but the attention under no_grad cuts q_proj, k_proj and v_proj off.
WRONG["CausalSelfAttention"]["attention_under_no_grad"] = _LAYER_INIT + '''
        if cache is not None:
            k, v = cache.append(k, v)
        with torch.no_grad():
            out, _ = attention(q, k, v, causal_mask(q.shape[-2], k.shape[-2]).to(x.device))
        return self.out_proj(merge_heads(out))
'''
# The position vectors read through .data: the logits are right, position_embedding never learns.
WRONG["TinyLM"]["positions_through_data"] = _LM_INIT + '''
        start = caches[0].length if caches else 0
        x = self.token_embedding(tokens) + self.position_embedding.weight.data[start:start + tokens.shape[-1]]
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.head(self.norm(x))
'''
# `if seed:`: seed 0, the default, leaves the generator unseeded.
WRONG["train_lm"]["seed_zero_ignored"] = _train().replace(
    "generator = torch.Generator().manual_seed(seed)",
    "generator = torch.Generator()\n    if seed:\n        generator.manual_seed(seed)")
# Adam instead of AdamW: without the decoupled weight decay the first losses differ by less than 1e-4.
WRONG["train_lm"]["seed_ignored"] = _train().replace(
    "generator = torch.Generator().manual_seed(seed)", "generator = torch.Generator().manual_seed(0)  # the default's windows")
WRONG["train_lm"]["adam_not_adamw"] = _train(optimizer="optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n    ")
# `if seed` again: seed 0 decodes greedily instead of sampling.
WRONG["generate"]["seed_zero_is_greedy"] = _generate(
    "logits = (model(fed, caches) if use_cache else model(tokens))[:, -1]").replace(
    "generator = None if seed is None else", "generator = None if not seed else")
# No torch.no_grad(): the same tokens and logits, with a graph recorded at every step.
WRONG["generate"]["gradients_recorded"] = '''
def generate(model, prompt, n_new, use_cache=True, seed=None):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    caches = [KVCache() for _ in model.blocks] if use_cache else None
    tokens, fed, chosen_from = prompt, prompt, []
    for _ in range(n_new):
        logits = (model(fed, caches) if use_cache else model(tokens))[:, -1]
        if generator is None:
            new = logits.argmax(dim=-1, keepdim=True)
        else:
            new = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
        tokens, fed = torch.cat([tokens, new], dim=1), new
        chosen_from.append(logits)
    return tokens, torch.stack(chosen_from, dim=1)
'''
