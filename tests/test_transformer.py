"""The reference Transformer: layers equal torch's, masks do what they promise, it learns a toy task."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.decoding import greedy_decode
from course_utils.masks import causal_mask, padding_mask
from course_utils.transformer import (
    DecoderLayer,
    EncoderLayer,
    PositionwiseFeedForward,
    Transformer,
    shift_tokens,
)

D, H, FF = 16, 4, 32


def copy_linear(ours, theirs):
    ours.weight.data.copy_(theirs.weight.data)
    ours.bias.data.copy_(theirs.bias.data)


def copy_norms(ours, theirs, n):
    for i in range(1, n + 1):
        getattr(ours, f"norm{i}").load_state_dict(getattr(theirs, f"norm{i}").state_dict())


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = EncoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first).eval()
    ours.self_attn.load_from_torch(ref.self_attn)
    copy_linear(ours.ff.linear1, ref.linear1)
    copy_linear(ours.ff.linear2, ref.linear2)
    copy_norms(ours, ref, 2)
    src = torch.tensor([[3, 4, 5, 6, 0], [3, 4, 0, 0, 0]])
    x = torch.randn(2, 5, D)
    with torch.no_grad():  # the torch module's own fast path in eval mode
        expected = ref(x, src_key_padding_mask=(src == 0))
        out = ours(x, padding_mask(src, 0))
    # torch's fast path puts zeros at padded positions; compare the real ones
    keep = src != 0
    torch.testing.assert_close(out[keep], expected[keep], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first)
    ours.self_attn.load_from_torch(ref.self_attn)
    ours.cross_attn.load_from_torch(ref.multihead_attn)
    copy_linear(ours.ff.linear1, ref.linear1)
    copy_linear(ours.ff.linear2, ref.linear2)
    copy_norms(ours, ref, 3)
    src = torch.tensor([[3, 4, 5, 6, 7, 8], [3, 4, 5, 0, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 5, 0, 0]])
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    expected = ref(x, memory, tgt_mask=~causal_mask(4), tgt_key_padding_mask=(tgt == 0),
                   memory_key_padding_mask=(src == 0))
    out = ours(x, memory, causal_mask(4) & padding_mask(tgt, 0), padding_mask(src, 0))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_feed_forward_is_position_wise():
    ff = PositionwiseFeedForward(D, FF).eval()
    x = torch.randn(2, 5, D)
    torch.testing.assert_close(ff(x)[:, 3], ff(x[:, 3:4])[:, 0])


def small_model(**kw):
    torch.manual_seed(0)
    args = dict(d_model=D, num_heads=H, num_layers=2, d_ff=FF, dropout=0.0, max_len=32)
    args.update(kw)
    return Transformer(11, 13, **args).eval()


def batch():
    src = torch.tensor([[4, 5, 6, 7, 8], [4, 9, 5, 0, 0]])
    tgt_in = torch.tensor([[1, 6, 7, 8], [1, 3, 0, 0]])
    return src, tgt_in


@pytest.mark.parametrize("norm_first", [False, True])
def test_shapes_and_forward_equals_encode_then_decode(norm_first):
    model = small_model(norm_first=norm_first)
    src, tgt_in = batch()
    logits = model(src, tgt_in)
    assert logits.shape == (2, 4, 13)
    memory = model.encode(src)
    assert memory.shape == (2, 5, D)
    torch.testing.assert_close(model.decode(tgt_in, memory, padding_mask(src, 0)), logits)


def test_decoder_is_causal_perturbing_future_tokens():
    model = small_model()
    src, tgt_in = batch()
    changed = tgt_in.clone()
    changed[0, 2:] = torch.tensor([9, 10])
    a, b = model(src, tgt_in), model(src, changed)
    torch.testing.assert_close(a[0, :2], b[0, :2])
    assert not torch.allclose(a[0, 2:], b[0, 2:])


def test_padding_does_not_change_real_positions():
    model = small_model()
    src, tgt_in = batch()
    longer_src = F.pad(src, (0, 3), value=0)        # more source padding
    longer_tgt = F.pad(tgt_in, (0, 2), value=0)     # more target padding
    a = model(src, tgt_in)
    b = model(longer_src, longer_tgt)
    torch.testing.assert_close(a, b[:, :4], atol=1e-5, rtol=1e-5)


def test_embeddings_tied_scaled_and_shared():
    model = small_model()
    assert model.generator.weight is model.tgt_embed.weight
    assert model.src_embed is not model.tgt_embed
    assert torch.all(model.tgt_embed.weight[0] == 0)  # pad row
    untied = small_model(tie_embeddings=False)
    assert untied.generator.weight is not untied.tgt_embed.weight
    torch.manual_seed(0)
    shared = Transformer(13, 13, d_model=D, num_heads=H, num_layers=1, d_ff=FF, share_src_tgt_embeddings=True)
    assert shared.src_embed is shared.tgt_embed is not None
    assert shared.generator.weight is shared.tgt_embed.weight
    with pytest.raises(ValueError, match="vocabulary"):
        Transformer(11, 13, d_model=D, num_heads=H, num_layers=1, share_src_tgt_embeddings=True)
    tokens = torch.tensor([[3]])
    x = model.embed(tokens, model.src_embed)
    torch.testing.assert_close(x[0, 0], model.src_embed.weight[3] * D ** 0.5 + model.pos.pe[0])


def test_separate_layer_counts():
    model = Transformer(11, 13, d_model=D, num_heads=H, num_layers=2, d_ff=FF, num_encoder_layers=3,
                        num_decoder_layers=1)
    assert len(model.encoder.layers) == 3 and len(model.decoder.layers) == 1


def test_attention_maps():
    model = small_model()
    src, tgt_in = batch()
    with pytest.raises(RuntimeError, match="store_attention"):
        model.attention_maps()
    fast = model(src, tgt_in)
    slow = model.store_attention(True)(src, tgt_in)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    maps = model.attention_maps()
    assert maps["encoder_self"].shape == (2, 2, H, 5, 5)
    assert maps["decoder_self"].shape == (2, 2, H, 4, 4)
    assert maps["decoder_cross"].shape == (2, 2, H, 4, 5)
    assert torch.all(maps["decoder_cross"][:, 1, :, :, 3:] == 0)              # source padding
    assert torch.all(maps["decoder_self"].triu(1) == 0)                       # causal
    torch.testing.assert_close(maps["encoder_self"].sum(-1), torch.ones(2, 2, H, 5))
    model.store_attention(False)
    with pytest.raises(RuntimeError):
        model.attention_maps()


def test_learns_copy_task_and_greedy_decodes():
    torch.manual_seed(0)
    V, BOS, EOS, T = 10, 1, 2, 5
    model = Transformer(V, V, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0, max_len=16)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        body = torch.randint(3, V, (32, T))
        src = body
        tgt = torch.cat([torch.full((32, 1), BOS), body, torch.full((32, 1), EOS)], 1)
        tgt_in, tgt_out = shift_tokens(tgt)
        loss = F.cross_entropy(model(src, tgt_in).transpose(1, 2), tgt_out, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    body = torch.randint(3, V, (16, T))
    hyp = greedy_decode(model, body, BOS, EOS, 0, max_len=T + 1)       # no <bos>; <eos> then <pad>
    assert hyp.shape[0] == 16 and hyp.shape[1] <= T + 1
    assert (hyp[:, :T] == body).float().mean() > 0.9
    assert model.training  # restored


def test_whole_model_equals_torch_transformer_with_copied_weights():
    """Pre-norm: the same layers and final norms as torch.nn.Transformer, same embeddings around it."""
    model = small_model(norm_first=True)
    with warnings.catch_warnings():  # torch notes that pre-norm layers cannot use nested tensors
        warnings.simplefilter("ignore", UserWarning)
        ref = nn.Transformer(D, H, 2, 2, FF, dropout=0.0, batch_first=True, norm_first=True).eval()
    for ours_stack, theirs_stack in ((model.encoder, ref.encoder), (model.decoder, ref.decoder)):
        for ours, theirs in zip(ours_stack.layers, theirs_stack.layers):
            ours.self_attn.load_from_torch(theirs.self_attn)
            if hasattr(theirs, "multihead_attn"):
                ours.cross_attn.load_from_torch(theirs.multihead_attn)
            copy_linear(ours.ff.linear1, theirs.linear1)
            copy_linear(ours.ff.linear2, theirs.linear2)
            copy_norms(ours, theirs, 3 if hasattr(theirs, "norm3") else 2)
        ours_stack.norm.load_state_dict(theirs_stack.norm.state_dict())
    src, tgt_in = batch()
    x = model.embed(src, model.src_embed)
    y = model.embed(tgt_in, model.tgt_embed)
    with torch.no_grad():
        s = ref(x, y, tgt_mask=~causal_mask(4), src_key_padding_mask=(src == 0),
                tgt_key_padding_mask=(tgt_in == 0), memory_key_padding_mask=(src == 0))
        expected = model.generator(s)
        logits = model(src, tgt_in)
    real = tgt_in != 0  # torch's fast path may leave padded query positions different
    torch.testing.assert_close(logits[real], expected[real], atol=1e-4, rtol=1e-4)


def test_trains_and_plots_under_cpu_bf16_autocast():
    model = small_model().train()
    src, tgt_in = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.float().transpose(1, 2), tgt_in, ignore_index=0)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval().store_attention(True)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(src, tgt_in)
        assert model.attention_maps()["decoder_cross"].shape == (2, 2, H, 4, 5)
        hyp = greedy_decode(model, src, 1, 2, 0, max_len=5)
    assert hyp.shape[0] == 2 and hyp.dtype == torch.long


def test_logits_at_chosen_positions_only():
    model = small_model()
    src, tgt_in = batch()
    keep = tgt_in != 0
    torch.testing.assert_close(model(src, tgt_in, positions=keep), model(src, tgt_in)[keep])
    assert model(src, tgt_in, positions=keep).shape == (int(keep.sum()), 13)
