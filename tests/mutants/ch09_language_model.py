"""Chapter 9: the classic mistakes of a whole model: the tie, the initialisation, the counts, the loader, the
loss, the schedule and clipping, the training recipe, the sampling filters and batched decoding."""

LLAMALM = '''
class LlamaLM(nn.Module):
    """Token embedding, num_layers DecoderBlocks, a final RMSNorm and the output head."""

    def __init__(self, vocab_size, dim, num_layers, num_heads, num_kv_heads, hidden_dim, rope_base=10000.0, eps=1e-6,
                 tie_embeddings=True):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(DecoderBlock(dim, num_heads, num_kv_heads, hidden_dim, rope_base, eps)
                                    for _ in range(num_layers))
        self.norm = RMSNorm(dim, eps)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        if tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(self, tokens, positions=None, mask=None, caches=None):
        """tokens (..., N) -> logits (..., N, vocab_size)."""
        x = self.embed(tokens)
        for index, layer in enumerate(self.layers):
            x = layer(x, positions, mask, None if caches is None else caches[index])
        return self.lm_head(self.norm(x))
'''


INIT_WEIGHTS = '''
def init_weights_(model, std=0.02):
    """In place: N(0, std^2) for the embedding and the linear weights, (std / sqrt(2 * num_layers))^2 for each
    block's o_proj and down_proj, ones for the norms."""
    residual_std = std / math.sqrt(2 * len(model.layers))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.fill_(1.0)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                parameter.normal_(0.0, residual_std)
            else:
                parameter.normal_(0.0, std)
'''


COUNT_PARAMETERS = '''
def count_parameters(config):
    """The number of parameters of LlamaLM(**config), an int, from the sizes alone."""
    dim, head_dim = config["dim"], config["dim"] // config["num_heads"]
    attention = dim * head_dim * (2 * config["num_heads"] + 2 * config["num_kv_heads"])
    mlp = 3 * dim * config["hidden_dim"]
    layer = attention + mlp + 2 * dim
    embeddings = config["vocab_size"] * dim * (1 if config.get("tie_embeddings", True) else 2)
    return embeddings + config["num_layers"] * layer + dim


def train_flops_per_token(config, context):
    """Kaplan et al.'s training FLOPs per token: 6 N + 6 num_layers context d_attn, an int."""
    embeddings = config["vocab_size"] * config["dim"] * (1 if config.get("tie_embeddings", True) else 2)
    non_embedding = count_parameters(config) - embeddings
    d_attn = config["num_heads"] * (config["dim"] // config["num_heads"])
    return 6 * non_embedding + 6 * config["num_layers"] * context * d_attn
'''


LM_FROM_LLAMA = '''
def lm_from_llama(model):
    """A LlamaLM with the sizes of model.config and the weights of model.state_dict()."""
    config = model.config
    lm = LlamaLM(config.vocab_size, config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                 config.num_key_value_heads, config.intermediate_size, config.rope_parameters["rope_theta"],
                 config.rms_norm_eps, config.tie_word_embeddings)
    renamed = {"model.embed_tokens.": "embed.", "model.norm.": "norm.", "lm_head.": "lm_head.", "model.layers.": "layers.",
               "input_layernorm.": "attn_norm.", "self_attn.": "attention.", "post_attention_layernorm.": "mlp_norm.",
               "mlp.": ""}
    state = {}
    for name, value in model.state_dict().items():
        for old, new in renamed.items():
            name = name.replace(old, new)
        state[name] = value
    lm.to(next(iter(state.values())).device)  # on the model's device, like its tensors
    lm.load_state_dict(state)
    return lm
'''


CROSS_ENTROPY = '''
def cross_entropy(logits, targets, ignore_index=-100):
    """The mean of -log softmax(logits)[target] over the targets that are not ignore_index."""
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    kept = targets != ignore_index
    picked = logits.gather(-1, torch.where(kept, targets, 0)[:, None])[:, 0]
    losses = torch.where(kept, torch.logsumexp(logits, dim=-1) - picked, 0.0)
    return losses.sum() / kept.sum()
'''


COSINE_LR = '''
def cosine_lr(step, max_lr, min_lr, warmup_steps, total_steps):
    """Linear warm-up to max_lr, cosine decay to min_lr at total_steps, then min_lr."""
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    if step <= total_steps:
        progress = (step - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return min_lr


def clip_grad_norm_(parameters, max_norm):
    """Scale every gradient by max_norm / total norm when the total norm exceeds max_norm; returns
    the total norm before clipping."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.dtype))
    return total
'''


TRAIN = '''
def train(model, data, steps, batch_size, context, max_lr, min_lr=0.0, warmup_steps=0, weight_decay=0.1, seed=0):
    """The recipe of the text; returns the losses of the steps, floats."""
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": weight_decay},
                                   {"params": others, "weight_decay": 0.0}], lr=max_lr, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(step, max_lr, min_lr, warmup_steps, steps)
        starts = torch.randint(0, len(data) - context, (batch_size,), generator=generator)
        x = torch.stack([data[s:s + context] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + context + 1] for s in starts.tolist()])
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses
'''


FILTER_LOGITS = '''
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """logits / temperature, then what top-k and then top-p remove set to -inf (transformers' warpers)."""
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None:
        ascending, order = torch.sort(logits, dim=-1)
        removed = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        removed[..., -1] = False  # the most likely token is always kept
        logits = logits.masked_fill(removed.scatter(-1, order, removed), -math.inf)
    return logits
'''


GENERATE = '''
def generate(model, prompts, n_new, temperature=0.0, top_k=None, top_p=None, seed=None):
    """prompts: a list of int64 tensors (N_b,), one per row -> the new tokens, int64 (B, n_new)."""
    device = prompts[0].device
    longest = max(len(p) for p in prompts)
    pads = torch.tensor([longest - len(p) for p in prompts], device=device)
    tokens = torch.stack([torch.cat([torch.zeros(longest - len(p), dtype=torch.long, device=device), p])
                          for p in prompts])
    real = torch.arange(longest, device=device) >= pads[:, None]        # (B, longest): False on the padding
    positions = (torch.arange(longest, device=device) - pads[:, None]).clamp(min=0)
    caches = [KVCache() for _ in model.layers]
    generator = None if seed is None else torch.Generator(device).manual_seed(seed)
    new = []
    with torch.no_grad():
        logits = model(tokens, positions, real[:, None, None, :], caches)[:, -1]
        for step in range(n_new):
            if temperature == 0:
                chosen = logits.argmax(dim=-1, keepdim=True)
            else:
                probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)
                chosen = torch.multinomial(probs, 1, generator=generator)
            new.append(chosen)
            if step == n_new - 1:
                break
            real = torch.cat([real, torch.ones_like(chosen, dtype=torch.bool)], dim=1)
            positions = positions[:, -1:] + 1
            logits = model(chosen, positions, real[:, None, None, :], caches)[:, -1]
    return torch.cat(new, dim=1)
'''


def _edit(source, old, new):
    """`source` with `old` (which must be there) replaced by `new`: one bug in a correct solution."""
    assert old in source, old
    return source.replace(old, new)


WRONG = {
    "LlamaLM": {
        "head_not_tied": _edit(LLAMALM, "            self.lm_head.weight = self.embed.weight\n",
                               "            self.lm_head.weight = nn.Parameter(self.embed.weight.detach().clone())\n"),
        "no_final_norm": _edit(LLAMALM, "return self.lm_head(self.norm(x))", "return self.lm_head(x)"),
        "caches_not_passed": _edit(LLAMALM, "x = layer(x, positions, mask, None if caches is None else caches[index])",
                                   "x = layer(x, positions, mask)"),
        "positions_not_passed": _edit(LLAMALM, "x = layer(x, positions, mask, None if caches is None else caches[index])",
                                      "x = layer(x, mask=mask, cache=None if caches is None else caches[index])"),
    },
    "init_weights_": {
        "residual_outputs_not_scaled": _edit(INIT_WEIGHTS, "residual_std = std / math.sqrt(2 * len(model.layers))",
                                             "residual_std = std"),
        "scaled_by_num_layers": _edit(INIT_WEIGHTS, "residual_std = std / math.sqrt(2 * len(model.layers))",
                                      "residual_std = std / math.sqrt(len(model.layers))"),
        "norms_left_as_they_were": _edit(INIT_WEIGHTS, "                parameter.fill_(1.0)\n", "                pass\n"),
        "uniform_of_that_std": _edit(INIT_WEIGHTS, """            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                parameter.normal_(0.0, residual_std)
            else:
                parameter.normal_(0.0, std)""", """            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                parameter.uniform_(-residual_std * 3 ** 0.5, residual_std * 3 ** 0.5)
            else:
                parameter.uniform_(-std * 3 ** 0.5, std * 3 ** 0.5)"""),
        "head_given_a_new_parameter": INIT_WEIGHTS.rstrip("\n") + """
    model.lm_head.weight = nn.Parameter(torch.randn_like(model.lm_head.weight) * std)
""",
    },
    "count_parameters": {
        "kv_heads_as_many_as_query_heads": _edit(COUNT_PARAMETERS, '2 * config["num_heads"] + 2 * config["num_kv_heads"]',
                                                 '4 * config["num_heads"]'),
        "tied_head_counted": _edit(COUNT_PARAMETERS, '''    embeddings = config["vocab_size"] * dim * (1 if config.get("tie_embeddings", True) else 2)
    return''', '''    embeddings = 2 * config["vocab_size"] * dim
    return'''),
        "flops_of_every_parameter": _edit(COUNT_PARAMETERS, "non_embedding = count_parameters(config) - embeddings",
                                          "non_embedding = count_parameters(config)"),
    },
    "lm_from_llama": {
        "tie_word_embeddings_ignored": _edit(LM_FROM_LLAMA, "config.rms_norm_eps, config.tie_word_embeddings)",
                                             "config.rms_norm_eps)"),
        "default_eps_and_rope_base": _edit(LM_FROM_LLAMA, 'config.rope_parameters["rope_theta"],\n                 config.rms_norm_eps,',
                                           '10000.0,\n                 1e-6,'),
        "parameters_share_the_models_tensors": _edit(LM_FROM_LLAMA, "    lm.load_state_dict(state)\n", """    for name, value in state.items():  # nn.Parameter(value) keeps value's storage: no copy
        module_name, _, attribute = name.rpartition(".")
        setattr(lm.get_submodule(module_name), attribute, nn.Parameter(value))
"""),
    },
    "cross_entropy": {
        "sum_not_mean": _edit(CROSS_ENTROPY, "return losses.sum() / kept.sum()", "return losses.sum()"),
        "mean_over_ignored_too": _edit(CROSS_ENTROPY, "return losses.sum() / kept.sum()", "return losses.mean()"),
        "softmax_without_its_maximum": _edit(CROSS_ENTROPY, "torch.logsumexp(logits, dim=-1)",
                                             "torch.log(torch.exp(logits).sum(dim=-1))"),
        "in_float32": _edit(CROSS_ENTROPY, "logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)",
                            "logits, targets = logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1)"),
        # the right values, by the functions the text forbids (issue 37 §9): only the stated rule that names them fails
        "pytorchs_cross_entropy": """
def cross_entropy(logits, targets, ignore_index=-100):
    \"\"\"PyTorch's own loss, on the flattened positions.\"\"\"
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index)
""",
        "log_softmax_method": """
def cross_entropy(logits, targets, ignore_index=-100):
    \"\"\"log_softmax as a method, then the target's entry of the rows kept.\"\"\"
    log_probs = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)
    targets = targets.reshape(-1)
    kept = targets != ignore_index
    picked = log_probs.gather(-1, torch.where(kept, targets, 0)[:, None])[:, 0]
    return -torch.where(kept, picked, 0.0).sum() / kept.sum()
""",
    },
    "cosine_lr": {
        "warm_up_one_step_ahead": _edit(COSINE_LR, "return max_lr * step / warmup_steps",
                                        "return max_lr * (step + 1) / warmup_steps"),
        "decays_to_zero": _edit(COSINE_LR, "return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)",
                                "return 0.5 * (1 + math.cos(math.pi * progress)) * max_lr"),
        "clips_each_gradient_alone": _edit(COSINE_LR, """    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.dtype))""", """    for g in grads:
        g.mul_(torch.clamp(max_norm / (torch.linalg.vector_norm(g) + 1e-6), max=1.0))"""),
        "returns_the_norm_after_clipping": _edit(COSINE_LR, "        g.mul_(scale.to(g.dtype))\n    return total",
                                                 "        g.mul_(scale.to(g.dtype))\n    return total * scale"),
        "pytorchs_clipping": _edit(COSINE_LR, """    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.dtype))
    return total""", """    return torch.nn.utils.clip_grad_norm_(parameters, max_norm)"""),
    },
    "train": {
        "weight_decay_on_the_norms_too": _edit(TRAIN, """    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": weight_decay},
                                   {"params": others, "weight_decay": 0.0}], lr=max_lr, betas=(0.9, 0.95))""",
                                               """    optimizer = torch.optim.AdamW(model.parameters(), lr=max_lr, betas=(0.9, 0.95), weight_decay=weight_decay)"""),
        # the norms' group without its "weight_decay": AdamW's default, 0.01, decays them, whatever weight_decay says
        "norms_group_without_its_decay": _edit(TRAIN, """{"params": others, "weight_decay": 0.0}""", """{"params": others}"""),
        "adams_default_betas": _edit(TRAIN, "lr=max_lr, betas=(0.9, 0.95))", "lr=max_lr)"),
        "no_clipping": _edit(TRAIN, "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", ""),
        "gradients_never_zeroed": _edit(TRAIN, "        optimizer.zero_grad()\n", ""),
        "schedule_one_step_ahead": _edit(TRAIN, "cosine_lr(step, max_lr", "cosine_lr(step + 1, max_lr"),
    },
    "filter_logits": {
        "top_p_before_top_k": _edit(_edit(FILTER_LOGITS, """    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
""", ""), "    return logits", """    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    return logits"""),
        "exactly_k_kept": _edit(FILTER_LOGITS, """        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)""", """        top = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).indices
        kept = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, top, True)
        logits = logits.masked_fill(~kept, -math.inf)"""),
        "top_p_may_remove_everything": _edit(FILTER_LOGITS, "        removed[..., -1] = False  # the most likely token is always kept\n", ""),
        "temperature_last": _edit(_edit(FILTER_LOGITS, "    logits = logits / temperature\n", ""),
                                  "    return logits", "    return logits / temperature"),
    },
    "generate": {
        "right_padding": _edit(GENERATE, """    tokens = torch.stack([torch.cat([torch.zeros(longest - len(p), dtype=torch.long, device=device), p])
                          for p in prompts])""", """    tokens = torch.stack([torch.cat([p, torch.zeros(longest - len(p), dtype=torch.long, device=device)])
                          for p in prompts])"""),
        "no_padding_mask": _edit(_edit(GENERATE, "logits = model(tokens, positions, real[:, None, None, :], caches)[:, -1]",
                                       "logits = model(tokens, positions, None, caches)[:, -1]"),
                                 "logits = model(chosen, positions, real[:, None, None, :], caches)[:, -1]",
                                 "logits = model(chosen, positions, None, caches)[:, -1]"),
        "sampled_without_top_k_and_top_p": _edit(GENERATE, "filter_logits(logits, temperature, top_k, top_p)",
                                                 "logits / temperature"),
        "whole_sequence_each_step_without_caches": _edit(GENERATE, """            positions = positions[:, -1:] + 1
            logits = model(chosen, positions, real[:, None, None, :], caches)[:, -1]""", """            positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)
            tokens = torch.cat([tokens, chosen], dim=1)
            logits = model(tokens, positions, real[:, None, None, :])[:, -1]"""),
        # positions made on the CPU are no device bug here: the given model's RoPE moves them (as_tensor)
        "padding_made_on_the_cpu": _edit(GENERATE, "torch.zeros(longest - len(p), dtype=torch.long, device=device)",
                                         "torch.zeros(longest - len(p), dtype=torch.long)"),
    },
}

ALTERNATIVE = {
    "LlamaLM": '''
class LlamaLM(nn.Module):
    """The head's weight made first, the embedding's tied to it; a loop over zip(layers, caches)."""

    def __init__(self, vocab_size, dim, num_layers, num_heads, num_kv_heads, hidden_dim, rope_base=10000.0, eps=1e-6,
                 tie_embeddings=True):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(DecoderBlock(dim, num_heads, num_kv_heads, hidden_dim, rope_base=rope_base, eps=eps))
        self.norm = RMSNorm(dim, eps=eps)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        if tie_embeddings:
            self.embed.weight = self.lm_head.weight

    def forward(self, tokens, positions=None, mask=None, caches=None):
        h = self.embed(tokens)
        for layer, cache in zip(self.layers, caches if caches is not None else [None] * len(self.layers)):
            h = layer(h, positions=positions, mask=mask, cache=cache)
        return F.linear(self.norm(h), self.lm_head.weight)
''',
    "init_weights_": '''
def init_weights_(model, std=0.02):
    """nn.init by name, the residual projections picked by their module's name."""
    layers = len(model.layers)
    for name, p in model.named_parameters():
        module = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
        if "norm" in module:
            nn.init.ones_(p)
        elif module in ("o_proj", "down_proj"):
            nn.init.normal_(p, mean=0.0, std=std / (2 * layers) ** 0.5)
        else:
            nn.init.normal_(p, mean=0.0, std=std)
    return model
''',
    "count_parameters": '''
def count_parameters(config):
    v, d, layers = config["vocab_size"], config["dim"], config["num_layers"]
    h, g, f = config["num_heads"], config["num_kv_heads"], config["hidden_dim"]
    d_h = d // h
    per_block = [d, d * h * d_h, d * g * d_h, d * g * d_h, h * d_h * d, d, f * d, f * d, d * f]
    head = 0 if config.get("tie_embeddings", True) else v * d
    return int(v * d + layers * sum(per_block) + d + head)


def train_flops_per_token(config, context):
    tied = config.get("tie_embeddings", True)
    n = count_parameters(config) - config["vocab_size"] * config["dim"] * (1 if tied else 2)
    return int(6 * (n + config["num_layers"] * context * (config["dim"] // config["num_heads"]) * config["num_heads"]))
''',
    "lm_from_llama": '''
import re


def lm_from_llama(model):
    c = model.config
    lm = LlamaLM(vocab_size=c.vocab_size, dim=c.hidden_size, num_layers=c.num_hidden_layers,
                 num_heads=c.num_attention_heads, num_kv_heads=c.num_key_value_heads, hidden_dim=c.intermediate_size,
                 rope_base=c.rope_parameters["rope_theta"], eps=c.rms_norm_eps, tie_embeddings=c.tie_word_embeddings)
    rules = [(r"^model\\.embed_tokens\\.", "embed."), (r"^model\\.norm\\.", "norm."), (r"^model\\.layers\\.", "layers."),
             (r"\\.input_layernorm\\.", ".attn_norm."), (r"\\.post_attention_layernorm\\.", ".mlp_norm."),
             (r"\\.self_attn\\.", ".attention."), (r"\\.mlp\\.", ".")]
    with torch.no_grad():
        for name, value in model.state_dict().items():
            for pattern, new in rules:
                name = re.sub(pattern, new, name)
            lm.get_parameter(name).copy_(value)
    return lm
''',
    "cross_entropy": '''
def cross_entropy(logits, targets, ignore_index=-100):
    """log_softmax by hand: logits minus their log-sum-exp, the kept targets' entries summed."""
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    kept = targets != ignore_index
    picked = log_probs.gather(-1, (targets * kept).unsqueeze(-1)).squeeze(-1)
    return -torch.where(kept, picked, torch.zeros_like(picked)).sum() / kept.sum().to(logits.dtype)
''',
    "cosine_lr": '''
def cosine_lr(step, max_lr, min_lr, warmup_steps, total_steps):
    if step > total_steps:
        return min_lr
    if step >= warmup_steps:
        fraction = (step - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + (max_lr - min_lr) * (math.cos(math.pi * fraction) + 1) / 2
    return step / warmup_steps * max_lr


def clip_grad_norm_(parameters, max_norm):
    grads = [p.grad for p in list(parameters) if p.grad is not None]
    total = torch.cat([g.flatten() for g in grads]).pow(2).sum().sqrt()
    coefficient = max_norm / (total + 1e-6)
    if_larger = torch.where(coefficient < 1, coefficient, torch.ones_like(coefficient))
    for g in grads:
        g.mul_(if_larger)
    return total
''',
    "train": '''
def train(model, data, steps, batch_size, context, max_lr, min_lr=0.0, warmup_steps=0, weight_decay=0.1, seed=0):
    """Batches by index arithmetic; groups from named parameters."""
    groups = [{"params": [], "weight_decay": weight_decay}, {"params": [], "weight_decay": 0.0}]
    for _, p in model.named_parameters():
        groups[0 if p.ndim > 1 else 1]["params"].append(p)
    optimizer = torch.optim.AdamW(groups, lr=max_lr, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(context)
    losses = []
    for step in range(steps):
        lr = cosine_lr(step, max_lr, min_lr, warmup_steps, steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(data) - context, (batch_size,), generator=generator)
        x, y = data[starts[:, None] + offsets], data[starts[:, None] + offsets + 1]
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses
''',
    "filter_logits": '''
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """torch.where throughout; top-p's sort ascending as transformers does."""
    scaled = logits / temperature
    neg_inf = torch.full_like(scaled, -math.inf)
    if top_k is not None:
        k = min(top_k, scaled.shape[-1])
        threshold = scaled.sort(dim=-1, descending=True).values[..., k - 1:k]
        scaled = torch.where(scaled >= threshold, scaled, neg_inf)
    if top_p is not None:
        values, indices = scaled.sort(dim=-1)
        cumulative = torch.softmax(values, dim=-1).cumsum(dim=-1)
        drop = cumulative <= 1 - top_p
        drop[..., -1:] = False
        drop_in_place = torch.zeros_like(drop).scatter(-1, indices, drop)
        scaled = torch.where(drop_in_place, neg_inf, scaled)
    return scaled
''',
    "generate": '''
def generate(model, prompts, n_new, temperature=0.0, top_k=None, top_p=None, seed=None):
    """Positions from the mask's running count, as transformers computes them; every new token is
    fed, the last one too (its logits go unused: the text allows it)."""
    device = prompts[0].device
    width = max(p.shape[0] for p in prompts)
    tokens = torch.zeros(len(prompts), width, dtype=torch.long, device=device)
    mask = torch.zeros(len(prompts), width, dtype=torch.bool, device=device)
    for row, p in enumerate(prompts):
        tokens[row, width - p.shape[0]:] = p
        mask[row, width - p.shape[0]:] = True
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    caches = [KVCache() for _ in range(len(model.layers))]
    generator = torch.Generator(device).manual_seed(seed) if seed is not None else None
    out = torch.zeros(len(prompts), n_new, dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(tokens, positions, mask[:, None, None, :], caches)[:, -1, :]
        for step in range(n_new):
            if temperature == 0:
                token = logits.argmax(dim=-1)
            else:
                probs = F.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)
                token = torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
            out[:, step] = token
            positions = positions[:, -1:] + 1
            mask = torch.cat([mask, torch.ones(len(prompts), 1, dtype=torch.bool, device=device)], dim=1)
            logits = model(token[:, None], positions, mask[:, None, None, :], caches)[:, -1, :]
    return out
''',
}
