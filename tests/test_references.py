"""The reference solutions agree with independent implementations, where one exists."""
import numpy as np
import pytest

from autograder import reference


def test_nadaraya_watson_equals_statsmodels_local_constant_kernel_regression():
    """statsmodels' KernelReg (local constant, Gaussian kernel, fixed bandwidth) is Nadaraya-Watson."""
    from statsmodels.nonparametric.kernel_regression import KernelReg
    ref = reference.load("06-nadaraya-watson")
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 50))
    y = 2 * np.sin(x) + x ** 0.8 + rng.normal(0, 0.5, 50)
    queries = np.linspace(-1, 6, 77)
    for h in (0.05, 0.3, 1.0, 4.0):
        theirs = KernelReg([y], [x], var_type="c", reg_type="lc", bw=[h], rng=0).fit([queries])[0]
        np.testing.assert_allclose(ref.nadaraya_watson(queries, x, y, bandwidth=h), theirs, rtol=0, atol=1e-10)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_engel_data_ships_inside_the_statsmodels_package():
    from statsmodels.datasets import engel
    data = engel.load_pandas().data
    assert data.shape == (235, 2) and list(data.columns) == ["income", "foodexp"]


# ---- chapter 8: positions and the Llama block, against `transformers` and PyTorch ------------

def test_rope_equals_transformers_apply_rotary_pos_emb_halves_convention():
    import torch
    from transformers.models.llama.modeling_llama import (LlamaConfig, LlamaRotaryEmbedding,
                                                          apply_rotary_pos_emb)
    ref = reference.load("08-transformer")
    for d_h, theta in ((8, 10000.0), (16, 500000.0)):
        config = LlamaConfig(hidden_size=4 * d_h, num_attention_heads=4, rope_theta=theta)
        q, k = torch.randn(2, 4, 9, d_h), torch.randn(2, 4, 9, d_h)
        positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [3, 4, 5, 6, 7, 8, 9, 10, 11]])
        cos, sin = LlamaRotaryEmbedding(config)(q, positions)
        theirs = apply_rotary_pos_emb(q, k, cos, sin)
        ours = (ref.apply_rope(q, positions[:, None], theta), ref.apply_rope(k, positions[:, None], theta))
        for mine, other in zip(ours, theirs):
            torch.testing.assert_close(mine, other, rtol=1e-5, atol=1e-5)


def test_alibi_equals_bloom_build_alibi_tensor():
    """BLOOM adds slope_h * j to row i; ours adds -slope_h * (i - j): the same up to a constant per
    row, which softmax ignores. Heads 1 to 20: powers of two and not."""
    import torch
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    ref = reference.load("08-transformer")
    n = 7
    for heads in range(1, 21):
        bloom = build_alibi_tensor(torch.ones(1, n, dtype=torch.long), heads, torch.float32)[:, 0]  # (H, n)
        ours = ref.alibi_bias(heads, n, n)
        torch.testing.assert_close(-ours[:, 1, 0], bloom[:, 1], rtol=1e-6, atol=0)  # the slopes
        torch.testing.assert_close(ours - ours[..., :1], (bloom - bloom[:, :1])[:, None, :].expand(heads, n, n),
                                   rtol=1e-5, atol=1e-6)


def test_grouped_query_attention_equals_sdpa_with_enable_gqa():
    import torch
    import torch.nn.functional as F
    ref = reference.load("08-transformer")
    torch.manual_seed(0)
    for heads, kv_heads in ((8, 2), (4, 1), (4, 4)):
        layer, x = ref.GroupedQueryAttention(32, heads, kv_heads).eval(), torch.randn(2, 6, 32)
        positions = torch.arange(6)
        q = ref.apply_rope(ref.split_heads(layer.q_proj(x), heads), positions)
        k = ref.apply_rope(ref.split_heads(layer.k_proj(x), kv_heads), positions)
        v = ref.split_heads(layer.v_proj(x), kv_heads)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        with torch.no_grad():
            torch.testing.assert_close(layer(x), layer.o_proj(ref.merge_heads(out)), rtol=1e-5, atol=1e-5)


def test_block_from_llama_equals_llama_decoder_layer_with_padding_and_a_cache():
    import torch
    from transformers.models.llama.modeling_llama import LlamaConfig, LlamaDecoderLayer, LlamaRotaryEmbedding
    ref = reference.load("08-transformer")
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, num_attention_heads=8, num_key_value_heads=2, intermediate_size=40,
                         rms_norm_eps=1e-5, rope_theta=500000.0, attn_implementation="eager")
    layer = LlamaDecoderLayer(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.5)
    block, x = ref.block_from_llama(layer), torch.randn(3, 7, 32)
    allowed = torch.ones(7, 7, dtype=torch.bool).tril() & (torch.arange(7) < torch.tensor([7, 4, 1])[:, None])[:, None, None, :]
    positions = torch.arange(7)[None]
    with torch.no_grad():
        theirs = layer(x, attention_mask=torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min),
                       position_ids=positions, position_embeddings=LlamaRotaryEmbedding(config)(x, positions))
        torch.testing.assert_close(block(x, mask=allowed[:, :, -1:, :]), theirs, rtol=1e-5, atol=1e-5)
        cache = ref.KVCache()
        pieces = torch.cat([block(x[:, :4], cache=cache), block(x[:, 4:5], cache=cache), block(x[:, 5:], cache=cache)], 1)
        causal = torch.ones(7, 7, dtype=torch.bool).tril().expand(3, 1, 7, 7)
        theirs = layer(x, attention_mask=torch.zeros(causal.shape).masked_fill(~causal, torch.finfo(torch.float32).min),
                       position_ids=positions, position_embeddings=LlamaRotaryEmbedding(config)(x, positions))
        torch.testing.assert_close(pieces, theirs, rtol=1e-5, atol=1e-5)


# ---- chapter 10: the encoder-decoder, against `transformers` and PyTorch -------------------------

def _marian(vocab=30, dim=16, layers=2, heads=4, ffn=24, activation="swish", seed=0):
    import torch
    from transformers import MarianConfig, MarianMTModel
    config = MarianConfig(vocab_size=vocab, d_model=dim, encoder_layers=layers, decoder_layers=layers,
                          encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
                          decoder_ffn_dim=ffn, activation_function=activation, scale_embedding=True,
                          pad_token_id=vocab - 1, eos_token_id=0, decoder_start_token_id=vocab - 1,
                          forced_eos_token_id=None, max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:
                p.normal_(0.0, 0.5)
    return model


@pytest.mark.parametrize("activation", ["relu", "swish"])
def test_transformer_from_marian_equals_marian_mt_model_on_padded_sources(activation):
    import torch
    ref = reference.load("10-encoder-decoder")
    model = _marian(activation=activation)
    ours = ref.transformer_from_marian(model).eval()
    pad = model.config.pad_token_id
    src = torch.randint(0, pad, (3, 9))
    src[1, 6:], src[2, 3:] = pad, pad
    mask = src != pad
    tgt = torch.cat([torch.full((3, 1), pad), torch.randint(0, pad, (3, 7))], dim=1)
    with torch.no_grad():
        theirs = model(input_ids=src, attention_mask=mask.long(), decoder_input_ids=tgt).logits
        mine = ours.decode(tgt, ours.encode(src, mask), mask)
    torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("num_beams, length_penalty", [(1, 1.0), (3, 1.0), (4, 0.6)])
def test_greedy_and_beam_search_equal_marian_generate_token_for_token(num_beams, length_penalty):
    import torch
    ref = reference.load("10-encoder-decoder")
    model = _marian(seed=1)
    ours = ref.transformer_from_marian(model).eval()
    pad = model.config.pad_token_id
    src = [torch.randint(1, pad, (n,)) for n in (7, 3, 5)]
    tokens, mask = ref.right_padded(src, pad)
    with torch.no_grad():
        theirs = model.generate(input_ids=tokens, attention_mask=mask.long(), num_beams=num_beams, do_sample=False,
                                max_new_tokens=8, length_penalty=length_penalty, early_stopping=False)
    if num_beams == 1:
        mine = ref.greedy_translate(ours, src, 8)
    else:
        mine = ref.beam_search(ours, src, num_beams, 8, length_penalty=length_penalty)
    assert mine.tolist() == theirs.tolist()


def test_label_smoothed_cross_entropy_equals_pytorchs_label_smoothing():
    import torch
    import torch.nn.functional as F
    ref = reference.load("10-encoder-decoder")
    logits, targets = torch.randn(4, 6, 11), torch.randint(0, 11, (4, 6))
    targets[0, 3:], targets[2, :2] = -100, -100
    for epsilon in (0.0, 0.1, 0.3):
        theirs = F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1), label_smoothing=epsilon, ignore_index=-100)
        torch.testing.assert_close(ref.label_smoothed_cross_entropy(logits, targets, epsilon, -100), theirs)


def test_patch_embed_then_a_linear_map_equals_a_strided_convolution():
    import torch
    ref = reference.load("10-encoder-decoder")
    conv = torch.nn.Conv2d(3, 8, kernel_size=4, stride=4)
    images = torch.randn(2, 3, 8, 12)
    theirs = conv(images).flatten(2).transpose(1, 2)                 # (B, N, D), patches row by row
    mine = ref.patch_embed(images, 4) @ conv.weight.flatten(1).T + conv.bias
    torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_vit_encoder_from_hf_equals_vit_model():
    import torch
    from transformers import ViTConfig, ViTModel
    ref = reference.load("10-encoder-decoder")
    torch.manual_seed(0)
    model = ViTModel(ViTConfig(hidden_size=24, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
                               image_size=16, patch_size=4, num_channels=3), add_pooling_layer=False).eval()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        theirs = model(pixel_values=images).last_hidden_state
        mine = ref.vit_encoder_from_hf(model)(images)
    torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
