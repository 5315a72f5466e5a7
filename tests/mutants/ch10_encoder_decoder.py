"""Chapter 10: the classic mistakes of an encoder-decoder: the cross-attention's mask and cache, post-norm,
the embedding's scale and tie, the positions through a cache, the loader, label smoothing over padding, the
beam's length penalty and padding, the order of the patches."""

CROSS = '''
class CrossAttention(nn.Module):
    """Queries from the decoder's states x, keys and values from the encoder's output memory."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, memory, memory_mask=None, cache=None):
        """x (B, N, D), memory (B, S, D), memory_mask bool (B, S) True on the real source tokens -> (B, N, D)."""
        q = split_heads(self.q_proj(x), self.num_heads)
        if cache is not None and cache.length > 0:
            k, v = cache.k, cache.v
        else:
            k = split_heads(self.k_proj(memory), self.num_heads)
            v = split_heads(self.v_proj(memory), self.num_heads)
            if cache is not None:
                cache.append(k, v)
        mask = None if memory_mask is None else memory_mask[:, None, None, :]
        return self.out_proj(merge_heads(attention(q, k, v, mask)[0]))
'''


LAYERS = '''
class EncoderLayer(nn.Module):
    """Post-norm: x = norm(x + self-attention(x)), then x = norm(x + fc2(activation(fc1(x))))."""

    def __init__(self, dim, num_heads, ffn_dim, activation="relu", eps=1e-5):
        super().__init__()
        self.activation = activation
        self.self_attn = MultiHeadAttention(dim, num_heads)
        self.self_attn_norm = nn.LayerNorm(dim, eps=eps)
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.ffn_norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x, mask=None):
        """x (B, S, D), mask bool (B, S) True on the real tokens (None: all) -> (B, S, D)."""
        allowed = None if mask is None else mask[:, None, None, :]
        x = self.self_attn_norm(x + self.self_attn(x, allowed))
        return self.ffn_norm(x + self.fc2(ACTIVATIONS[self.activation](self.fc1(x))))


class DecoderLayer(nn.Module):
    """Post-norm: causal self-attention, cross-attention, feed-forward, each x = norm(x + sublayer(x))."""

    def __init__(self, dim, num_heads, ffn_dim, activation="relu", eps=1e-5):
        super().__init__()
        self.activation = activation
        self.self_attn = MultiHeadAttention(dim, num_heads)
        self.self_attn_norm = nn.LayerNorm(dim, eps=eps)
        self.cross_attn = CrossAttention(dim, num_heads)
        self.cross_attn_norm = nn.LayerNorm(dim, eps=eps)
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.ffn_norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x, memory, memory_mask=None, cache=None):
        """x (B, N, D), memory (B, S, D), memory_mask bool (B, S); cache None or (self KVCache, cross KVCache)."""
        self_cache, cross_cache = (None, None) if cache is None else cache
        past = 0 if self_cache is None else self_cache.length
        n = x.shape[-2]
        x = self.self_attn_norm(x + self.self_attn(x, causal_mask(n, past + n, device=x.device), self_cache))
        x = self.cross_attn_norm(x + self.cross_attn(x, memory, memory_mask, cross_cache))
        return self.ffn_norm(x + self.fc2(ACTIVATIONS[self.activation](self.fc1(x))))
'''


TRANSFORMER = '''
class Transformer(nn.Module):
    """The encoder-decoder: one embedding for the source, the target and the output head, scaled by sqrt(dim)."""

    def __init__(self, vocab_size, dim, num_layers, num_heads, ffn_dim, activation="relu", pad_id=1, eos_id=2,
                 eps=1e-5):
        super().__init__()
        self.pad_id, self.eos_id = pad_id, eos_id
        self.dim = dim
        self.embed = nn.Embedding(vocab_size, dim)
        self.encoder_layers = nn.ModuleList(EncoderLayer(dim, num_heads, ffn_dim, activation, eps)
                                            for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(dim, num_heads, ffn_dim, activation, eps)
                                            for _ in range(num_layers))
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight

    def encode(self, src, src_mask=None):
        """src int64 (B, S), src_mask bool (B, S) True on the real tokens (None: all) -> memory (B, S, dim)."""
        x = self.embed(src) * math.sqrt(self.dim)
        x = x + sinusoidal_positions(src.shape[-1], self.dim, device=src.device).to(x.dtype)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask=None, caches=None):
        """tgt int64 (B, T) -> logits (B, T, vocab_size); caches None or one (KVCache, KVCache) per decoder layer."""
        start = 0 if caches is None else caches[0][0].length
        x = self.embed(tgt) * math.sqrt(self.dim)
        x = x + sinusoidal_positions(tgt.shape[-1], self.dim, start, device=tgt.device).to(x.dtype)
        for index, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, src_mask, None if caches is None else caches[index])
        return self.lm_head(x)

    def forward(self, src, tgt, src_mask=None):
        """The logits (B, T, vocab_size) of the target tokens tgt given the source src."""
        return self.decode(tgt, self.encode(src, src_mask), src_mask)
'''


FROM_MARIAN = '''
def transformer_from_marian(model):
    """A Transformer with the sizes of model.config and the weights of model.state_dict()."""
    c = model.config
    net = Transformer(c.vocab_size, c.d_model, c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim,
                      c.activation_function, c.pad_token_id, c.eos_token_id)
    renamed = {"model.shared.": "embed.", "model.encoder.layers.": "encoder_layers.",
               "model.decoder.layers.": "decoder_layers.", "self_attn_layer_norm.": "self_attn_norm.",
               "encoder_attn_layer_norm.": "cross_attn_norm.", "encoder_attn.": "cross_attn.",
               "final_layer_norm.": "ffn_norm."}
    state = {}
    for name, value in model.state_dict().items():
        if "embed_tokens" in name or "embed_positions" in name or name == "final_logits_bias":
            continue
        for old, new in renamed.items():
            name = name.replace(old, new)
        state[name] = value
    net.load_state_dict(state)
    return net
'''


SMOOTHING = '''
def label_smoothed_cross_entropy(logits, targets, epsilon=0.1, ignore_index=-100):
    """(1 - epsilon) * cross-entropy + epsilon * the mean over the vocabulary of -log p, averaged over the kept
    targets."""
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    kept = targets != ignore_index
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    picked = log_probs.gather(-1, torch.where(kept, targets, 0)[:, None])[:, 0]
    losses = -(1 - epsilon) * picked - epsilon * log_probs.mean(dim=-1)
    return torch.where(kept, losses, 0.0).sum() / kept.sum()
'''


DECODING = '''
def greedy_translate(model, src, max_new_tokens):
    """transformers' generate(num_beams=1, do_sample=False): (B, 1 + steps), the start token first."""
    tokens, mask = right_padded(src, model.pad_id)
    batch, device = tokens.shape[0], tokens.device
    out = torch.full((batch, 1), model.pad_id, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    caches = [(KVCache(), KVCache()) for _ in model.decoder_layers]
    with torch.no_grad():
        memory = model.encode(tokens, mask)
        for _ in range(max_new_tokens):
            logits = model.decode(out[:, -1:], memory, mask, caches)[:, -1].float()
            chosen = torch.where(done, model.pad_id, logits.argmax(dim=-1))
            out = torch.cat((out, chosen[:, None]), dim=1)
            done = done | (chosen == model.eos_id)
            if bool(done.all()):
                break
    return out


def beam_search(model, src, num_beams, max_new_tokens, length_penalty=1.0, early_stopping=False):
    """transformers' generate(num_beams=num_beams, do_sample=False, length_penalty=..., early_stopping=...)."""
    tokens, mask = right_padded(src, model.pad_id)
    batch, device, k = tokens.shape[0], tokens.device, num_beams
    max_length = 1 + max_new_tokens
    caches = [(KVCache(), KVCache()) for _ in model.decoder_layers]
    running = torch.full((batch, k, max_length), model.pad_id, dtype=torch.long, device=device)
    finished = running.clone()
    running_scores = torch.zeros((batch, k), device=device)
    running_scores[:, 1:] = -1e9
    finished_scores = torch.full((batch, k), -1e9, device=device)
    finished_lengths = torch.zeros((batch, k), dtype=torch.long, device=device)
    is_finished = torch.zeros((batch, k), dtype=torch.bool, device=device)
    improvable = torch.ones((batch, 1), dtype=torch.bool, device=device)
    first_k = torch.arange(2 * k, device=device) < k
    offsets = torch.arange(batch, device=device)[:, None] * k
    cur = 1
    with torch.no_grad():
        memory = model.encode(tokens, mask).repeat_interleave(k, dim=0)
        mask = mask.repeat_interleave(k, dim=0)
        while True:
            logits = model.decode(running[:, :, cur - 1].reshape(batch * k, 1), memory, mask, caches)[:, -1].float()
            vocab = logits.shape[-1]
            scores = (torch.log_softmax(logits, dim=-1).view(batch, k, vocab) + running_scores[:, :, None])
            top_scores, top_index = torch.topk(scores.reshape(batch, k * vocab), 2 * k)
            parents, chosen = top_index // vocab, top_index % vocab
            candidates = torch.take_along_dim(running, parents[:, :, None], dim=1)
            candidates[:, :, cur] = chosen
            hits = (chosen == model.eos_id) | (cur + 1 >= max_length)
            # the beams that go on: the best k candidates that did not finish
            going = top_scores + hits.float() * -1e9
            best = torch.topk(going, k)[1]
            running = torch.take_along_dim(candidates, best[:, :, None], dim=1)
            running_scores = torch.take_along_dim(going, best, dim=1)
            reorder = (torch.take_along_dim(parents, best, dim=1) + offsets).reshape(-1)
            # the hypotheses that finish: among the first k candidates, scored sum / length ** length_penalty
            just = hits & first_k
            ended = top_scores / (cur ** length_penalty)
            ended = ended + (is_finished.all(dim=-1, keepdim=True) & early_stopping).float() * -1e9
            ended = ended + (~improvable).float() * -1e9
            ended = ended + (~just).float() * -1e9
            merged_scores = torch.cat((finished_scores, ended), dim=1)
            keep = torch.topk(merged_scores, k)[1]
            finished = torch.take_along_dim(torch.cat((finished, candidates), dim=1), keep[:, :, None], dim=1)
            finished_scores = torch.take_along_dim(merged_scores, keep, dim=1)
            lengths = torch.cat((finished_lengths, torch.full_like(chosen, cur)), dim=1)
            finished_lengths = torch.take_along_dim(lengths, keep, dim=1)
            is_finished = torch.take_along_dim(torch.cat((is_finished, just), dim=1), keep, dim=1)
            for self_cache, cross_cache in caches:
                self_cache.reorder(reorder)
                cross_cache.reorder(reorder)
            cur += 1
            worst = torch.where(is_finished, finished_scores.min(dim=1, keepdim=True)[0], -1e9)
            improvable = improvable & (running_scores[:, :1] / ((cur - 1) ** length_penalty) > worst).any(
                dim=-1, keepdim=True)
            if not bool(improvable.any()) or (early_stopping and bool(is_finished.all())) or bool(hits.all()):
                break
    return finished[:, 0, :1 + int(finished_lengths[:, 0].max())]
'''


PATCHES = '''
def patch_embed(images, patch):
    """images (B, C, H, W) -> (B, (H/patch) (W/patch), C patch patch): the patches row by row, each flattened
    channel first (C, patch, patch), as the weight of ViT's strided convolution is laid out."""
    b, c, h, w = images.shape
    grid = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return grid.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // patch) * (w // patch), c * patch * patch)


def vit_encoder_from_hf(model):
    """A module whose forward(images) gives model(images).last_hidden_state, built from model.config and
    model.state_dict()."""
    class Layer(nn.Module):
        """Pre-norm: x + attention(norm1(x)), then x + fc2(gelu(fc1(norm2(x))))."""

        def __init__(self, dim, num_heads, ffn_dim, eps):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(dim, eps=eps), MultiHeadAttention(dim, num_heads)
            self.norm2, self.fc1 = nn.LayerNorm(dim, eps=eps), nn.Linear(dim, ffn_dim)
            self.fc2 = nn.Linear(ffn_dim, dim)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class Encoder(nn.Module):
        """A linear map of the flattened patches, a class token, learned positions, the layers, a final norm."""

        def __init__(self, c):
            super().__init__()
            self.patch, dim = c.patch_size, c.hidden_size
            self.proj = nn.Linear(c.num_channels * c.patch_size ** 2, dim)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.positions = nn.Parameter(torch.zeros(1, (c.image_size // c.patch_size) ** 2 + 1, dim))
            self.layers = nn.ModuleList(Layer(dim, c.num_attention_heads, c.intermediate_size, c.layer_norm_eps)
                                        for _ in range(c.num_hidden_layers))
            self.norm = nn.LayerNorm(dim, eps=c.layer_norm_eps)

        def forward(self, images):
            x = self.proj(patch_embed(images, self.patch))
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.positions
            for layer in self.layers:
                x = layer(x)
            return self.norm(x)

    encoder = Encoder(model.config)
    state = model.state_dict()
    weights = {"proj.weight": state["embeddings.patch_embeddings.projection.weight"].flatten(1),
               "proj.bias": state["embeddings.patch_embeddings.projection.bias"],
               "cls_token": state["embeddings.cls_token"], "positions": state["embeddings.position_embeddings"],
               "norm.weight": state["layernorm.weight"], "norm.bias": state["layernorm.bias"]}
    renamed = {"layernorm_before": "norm1", "attention.q_proj": "attn.q_proj", "attention.k_proj": "attn.k_proj",
               "attention.v_proj": "attn.v_proj", "attention.o_proj": "attn.out_proj", "layernorm_after": "norm2",
               "mlp.fc1": "fc1", "mlp.fc2": "fc2"}
    for i in range(model.config.num_hidden_layers):
        for old, new in renamed.items():
            for kind in ("weight", "bias"):
                weights[f"layers.{i}.{new}.{kind}"] = state[f"layers.{i}.{old}.{kind}"]
    encoder.load_state_dict(weights)  # copies
    return encoder
'''

def _edit(source, old, new):
    """`source` with `old` (which must be there) replaced by `new`: one bug in a correct solution."""
    assert old in source, old
    return source.replace(old, new)


WRONG = {
    "CrossAttention": {
        "memory_mask_dropped": _edit(CROSS, "mask = None if memory_mask is None else memory_mask[:, None, None, :]",
                                     "mask = None"),
        "causal_cross_attention": _edit(CROSS, "mask = None if memory_mask is None else memory_mask[:, None, None, :]",
                                        "mask = causal_mask(q.shape[-2], k.shape[-2], device=x.device)\n"
                                        "        if memory_mask is not None:\n"
                                        "            mask = mask & memory_mask[:, None, None, :]"),
        "memory_projected_every_step": _edit(CROSS, "if cache is not None and cache.length > 0:",
                                             "if False:"),
        "no_biases": _edit(_edit(_edit(_edit(CROSS, "nn.Linear(embed_dim, embed_dim)\n        self.k_proj",
                                             "nn.Linear(embed_dim, embed_dim, bias=False)\n        self.k_proj"),
                                       "self.k_proj = nn.Linear(embed_dim, embed_dim)", "self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)"),
                                 "self.v_proj = nn.Linear(embed_dim, embed_dim)", "self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)"),
                           "self.out_proj = nn.Linear(embed_dim, embed_dim)", "self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)"),
    },
    "EncoderLayer": {
        "pre_norm": _edit(_edit(LAYERS, "x = self.self_attn_norm(x + self.self_attn(x, allowed))",
                                "x = x + self.self_attn(self.self_attn_norm(x), allowed)"),
                          "return self.ffn_norm(x + self.fc2(ACTIVATIONS[self.activation](self.fc1(x))))\n\n\n",
                          "return x + self.fc2(ACTIVATIONS[self.activation](self.fc1(self.ffn_norm(x))))\n\n\n"),
        "decoder_not_causal": _edit(LAYERS, "causal_mask(n, past + n, device=x.device)", "None"),
        "causal_aligned_top_left": _edit(LAYERS, "causal_mask(n, past + n, device=x.device)",
                                         "torch.ones(n, past + n, dtype=torch.bool, device=x.device).tril()"),
        "activation_ignored": LAYERS.replace("ACTIVATIONS[self.activation]", "F.relu"),
    },
    "Transformer": {
        "embeddings_not_scaled": TRANSFORMER.replace("self.embed(src) * math.sqrt(self.dim)", "self.embed(src)")
                                            .replace("self.embed(tgt) * math.sqrt(self.dim)", "self.embed(tgt)"),
        "embeddings_scaled_twice": TRANSFORMER.replace("self.embed(src) * math.sqrt(self.dim)", "self.embed(src) * self.dim")
                                              .replace("self.embed(tgt) * math.sqrt(self.dim)", "self.embed(tgt) * self.dim"),
        "head_not_tied": _edit(TRANSFORMER, "        self.lm_head.weight = self.embed.weight\n",
                               "        self.lm_head.weight = nn.Parameter(self.embed.weight.detach().clone())\n"),
        "positions_restarted_per_step": _edit(TRANSFORMER, "start = 0 if caches is None else caches[0][0].length",
                                              "start = 0"),
    },
    "transformer_from_marian": {
        "norms_swapped": _edit(FROM_MARIAN, '"encoder_attn_layer_norm.": "cross_attn_norm.", ',
                               '"encoder_attn_layer_norm.": "ffn_norm.", "final_layer_norm.": "cross_attn_norm.", '),
        "activation_ignored": _edit(FROM_MARIAN, "c.activation_function, c.pad_token_id", '"relu", c.pad_token_id'),
        "shares_the_models_tensors": _edit(FROM_MARIAN, "    net.load_state_dict(state)\n", """    for name, value in state.items():  # nn.Parameter(value) keeps value's storage: no copy
        module_name, _, attribute = name.rpartition(".")
        setattr(net.get_submodule(module_name), attribute, nn.Parameter(value))
    net.lm_head.weight = net.embed.weight
"""),
    },
    "label_smoothed_cross_entropy": {
        "smoothing_over_ignored_targets": _edit(SMOOTHING, "return torch.where(kept, losses, 0.0).sum() / kept.sum()",
                                                "smooth = -epsilon * log_probs.mean(dim=-1)\n"
                                                "    return (torch.where(kept, losses, 0.0).sum() + torch.where(kept, 0.0, smooth).sum()) / kept.sum()"),
        "mean_over_every_target": _edit(SMOOTHING, "return torch.where(kept, losses, 0.0).sum() / kept.sum()",
                                        "return torch.where(kept, losses, 0.0).mean()"),
        "epsilon_spread_over_the_others": _edit(SMOOTHING, "losses = -(1 - epsilon) * picked - epsilon * log_probs.mean(dim=-1)",
                                                "others = (log_probs.sum(dim=-1) - picked) / (log_probs.shape[-1] - 1)\n"
                                                "    losses = -(1 - epsilon) * picked - epsilon * others"),
        "uses_f_cross_entropy": '''
def label_smoothed_cross_entropy(logits, targets, epsilon=0.1, ignore_index=-100):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), label_smoothing=epsilon,
                           ignore_index=ignore_index)
''',
    },
    "greedy_translate": {
        "length_penalty_off_by_one": _edit(DECODING, "ended = top_scores / (cur ** length_penalty)",
                                           "ended = top_scores / ((cur + 1) ** length_penalty)"),
        "finished_beams_not_padded": _edit(DECODING, "return finished[:, 0, :1 + int(finished_lengths[:, 0].max())]",
                                           "best = finished[:, 0, :1 + int(finished_lengths[:, 0].max())]\n"
                                           "    return torch.where(best == model.pad_id, model.eos_id, best)"),
        "greedy_not_padded_after_eos": _edit(DECODING, "chosen = torch.where(done, model.pad_id, logits.argmax(dim=-1))",
                                             "chosen = logits.argmax(dim=-1)"),
    },
    "patch_embed": {
        "patch_order_transposed": _edit(PATCHES, "grid.permute(0, 2, 4, 1, 3, 5)", "grid.permute(0, 4, 2, 1, 3, 5)"),
        "channels_last_in_a_patch": _edit(PATCHES, "grid.permute(0, 2, 4, 1, 3, 5)", "grid.permute(0, 2, 4, 3, 5, 1)"),
    },
}


ALTERNATIVE = {
    "CrossAttention": '''
class CrossAttention(nn.Module):
    """einsum over the heads; the mask applied by masked_fill of the weights' logits; the cache read first."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.heads, self.d_h = num_heads, embed_dim // num_heads
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(embed_dim, embed_dim))

    def forward(self, x, memory, memory_mask=None, cache=None):
        b, n, _ = x.shape
        if cache is None or cache.k is None:
            s = memory.shape[1]
            k = self.k_proj(memory).view(b, s, self.heads, self.d_h)
            v = self.v_proj(memory).view(b, s, self.heads, self.d_h)
            if cache is not None:
                cache.k, cache.v = k.transpose(1, 2), v.transpose(1, 2)
        else:
            k, v = cache.k.transpose(1, 2), cache.v.transpose(1, 2)
        q = self.q_proj(x).view(b, n, self.heads, self.d_h)
        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.d_h ** 0.5
        if memory_mask is not None:
            logits = logits.masked_fill(~memory_mask.view(b, 1, 1, -1), float("-inf"))
        weights = torch.nan_to_num(logits.softmax(dim=-1))
        return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, n, -1))
''',
    "EncoderLayer": '''
def _feed_forward(layer, x):
    return layer.fc2(ACTIVATIONS[layer.kind](layer.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, dim, num_heads, ffn_dim, activation="relu", eps=1e-5):
        super().__init__()
        self.kind = activation
        self.self_attn, self.self_attn_norm = MultiHeadAttention(dim, num_heads), nn.LayerNorm(dim, eps)
        self.fc1, self.fc2, self.ffn_norm = nn.Linear(dim, ffn_dim), nn.Linear(ffn_dim, dim), nn.LayerNorm(dim, eps)

    def forward(self, x, mask=None):
        keys = None if mask is None else mask.unsqueeze(1).unsqueeze(1)
        h = self.self_attn(x, mask=keys)
        x = self.self_attn_norm(h + x)
        return self.ffn_norm(_feed_forward(self, x) + x)


class DecoderLayer(nn.Module):
    def __init__(self, dim, num_heads, ffn_dim, activation="relu", eps=1e-5):
        super().__init__()
        self.kind = activation
        self.self_attn, self.self_attn_norm = MultiHeadAttention(dim, num_heads), nn.LayerNorm(dim, eps)
        self.cross_attn, self.cross_attn_norm = CrossAttention(dim, num_heads), nn.LayerNorm(dim, eps)
        self.fc1, self.fc2, self.ffn_norm = nn.Linear(dim, ffn_dim), nn.Linear(ffn_dim, dim), nn.LayerNorm(dim, eps)

    def forward(self, x, memory, memory_mask=None, cache=None):
        caches = cache if cache is not None else (None, None)
        n = x.shape[1]
        total = n + (caches[0].length if caches[0] is not None else 0)
        seen = torch.ones(n, total, dtype=torch.bool, device=x.device).tril(diagonal=total - n)
        x = self.self_attn_norm(self.self_attn(x, seen, caches[0]) + x)
        x = self.cross_attn_norm(self.cross_attn(x, memory, memory_mask, caches[1]) + x)
        return self.ffn_norm(_feed_forward(self, x) + x)
''',
    "Transformer": '''
class Transformer(nn.Module):
    """The head made first and the embedding tied to it; the positions added by a helper."""

    def __init__(self, vocab_size, dim, num_layers, num_heads, ffn_dim, activation="relu", pad_id=1, eos_id=2,
                 eps=1e-5):
        super().__init__()
        self.pad_id, self.eos_id = pad_id, eos_id
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.embed = nn.Embedding(vocab_size, dim)
        self.embed.weight = self.lm_head.weight
        self.encoder_layers = nn.ModuleList([EncoderLayer(dim, num_heads, ffn_dim, activation, eps)
                                             for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(dim, num_heads, ffn_dim, activation, eps)
                                             for _ in range(num_layers)])

    def _embedded(self, ids, start=0):
        width = self.embed.weight.shape[1]
        table = sinusoidal_positions(ids.shape[1], width, start, device=ids.device)
        return self.embed(ids) * width ** 0.5 + table.to(self.embed.weight.dtype)

    def encode(self, src, src_mask=None):
        h = self._embedded(src)
        for layer in self.encoder_layers:
            h = layer(h, src_mask)
        return h

    def decode(self, tgt, memory, src_mask=None, caches=None):
        h = self._embedded(tgt, caches[0][0].length if caches else 0)
        for i, layer in enumerate(self.decoder_layers):
            h = layer(h, memory, src_mask, caches[i] if caches else None)
        return self.lm_head(h)

    def forward(self, src, tgt, src_mask=None):
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, src_mask)
''',
    "transformer_from_marian": '''
def transformer_from_marian(model):
    """Each tensor copied by hand, layer by layer."""
    c, state = model.config, model.state_dict()
    net = Transformer(c.vocab_size, c.d_model, c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim,
                      activation=c.activation_function, pad_id=c.pad_token_id, eos_id=c.eos_token_id)
    pairs = {"embed.weight": "model.shared.weight"}
    for side, count in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
        parts = {"self_attn": "self_attn", "self_attn_norm": "self_attn_layer_norm", "fc1": "fc1", "fc2": "fc2",
                 "ffn_norm": "final_layer_norm"}
        if side == "decoder":
            parts.update({"cross_attn": "encoder_attn", "cross_attn_norm": "encoder_attn_layer_norm"})
        for i in range(count):
            for mine, theirs in parts.items():
                subs = ("q_proj.", "k_proj.", "v_proj.", "out_proj.") if mine.endswith("attn") else ("",)
                for sub in subs:
                    for kind in ("weight", "bias"):
                        pairs[f"{side}_layers.{i}.{mine}.{sub}{kind}"] = f"model.{side}.layers.{i}.{theirs}.{sub}{kind}"
    with torch.no_grad():
        for mine, theirs in pairs.items():
            net.get_parameter(mine).copy_(state[theirs])
    return net
''',
    "label_smoothed_cross_entropy": '''
def label_smoothed_cross_entropy(logits, targets, epsilon=0.1, ignore_index=-100):
    """The smoothed target distribution, dotted with log_softmax, over the kept rows."""
    vocab = logits.shape[-1]
    flat, labels = logits.reshape(-1, vocab), targets.reshape(-1)
    keep = labels.ne(ignore_index)
    log_p = torch.log_softmax(flat, dim=-1)
    smoothed = torch.full_like(log_p, epsilon / vocab)
    smoothed = smoothed.scatter_add(1, labels.clamp(min=0).unsqueeze(1),
                                    torch.full_like(log_p[:, :1], 1.0 - epsilon))
    per_row = -(smoothed * log_p).sum(dim=-1) * keep
    return per_row.sum() / keep.sum()
''',
    "greedy_translate": _edit(_edit(DECODING, """            chosen = torch.where(done, model.pad_id, logits.argmax(dim=-1))
            out = torch.cat((out, chosen[:, None]), dim=1)
            done = done | (chosen == model.eos_id)
            if bool(done.all()):
                break""", """            chosen = logits.argmax(dim=-1).masked_fill(done, model.pad_id)
            done = done.logical_or(chosen.eq(model.eos_id))
            out = torch.cat((out, chosen.unsqueeze(1)), dim=1)
            if done.all().item():
                break"""), "    return finished[:, 0, :1 + int(finished_lengths[:, 0].max())]",
                              "    longest = finished_lengths[:, 0].max().item()\n    return finished[:, 0, :longest + 1]"),
    "patch_embed": _edit(PATCHES, """    b, c, h, w = images.shape
    grid = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return grid.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // patch) * (w // patch), c * patch * patch)""",
                         "    return F.unfold(images, kernel_size=patch, stride=patch).transpose(1, 2)"),
}
