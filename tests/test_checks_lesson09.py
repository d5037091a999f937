"""Lesson 09: every check passes the reference and names typical mistakes."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from course_utils import transformer as ref
from course_utils.checks import ExerciseError, lesson09
from course_utils.checks.lesson09_layers import decoder_output, encoder_output
from course_utils.masks import causal_mask, padding_mask
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def layer_class(base, forward):
    return type("Learner" + base.__name__, (base,), {"forward": forward})


@pytest.mark.parametrize("check, reference, stub", [
    (lesson09.feed_forward, lesson09.FeedForward, layer_class(lesson09.FeedForward, not_implemented)),
    (lesson09.encoder_layer, ref.EncoderLayer, layer_class(ref.EncoderLayer, not_implemented)),
    (lesson09.decoder_layer, ref.DecoderLayer, layer_class(ref.DecoderLayer, not_implemented)),
    (lesson09.transformer_forward, lambda model, src, tgt_in: model(src, tgt_in),
     lambda model, src, tgt_in: not_implemented(None)),
    (lesson09.transformer_forward, lesson09._forward, lambda *a: not_implemented(None)),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, stub, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(stub)


def ffn_mistake(kind):
    def forward(self, x):
        if kind == "F.dropout":  # F.dropout's training flag defaults to True: dropout stays on at evaluation
            return F.dropout(torch.relu(x @ self.W_1 + self.b_1), self.dropout.p) @ self.W_2 + self.b_2
        if kind == "mix":  # a reshape that mixes the sequence axis into the features
            B, T, d_model = x.shape
            return lesson09.FeedForward.forward(self, x.reshape(B, d_model, T).transpose(1, 2))
        params = dict(self.named_parameters())
        return lesson09._ffn(params, x, kind, self.dropout)
    return layer_class(lesson09.FeedForward, forward)


@pytest.mark.parametrize("kind, symptom", [
    ("ok", None),
    ("bias_after_relu", "b_1 is added after the ReLU"),
    ("residual", "adds the input x back"),
    ("GELU", "uses GELU instead of the formula's ReLU"),
    ("SiLU", "uses SiLU instead"),
    ("tanh", "uses tanh instead"),
    ("LeakyReLU", "uses LeakyReLU instead"),
    ("relu_twice", "after the second layer too"),
    ("no_relu", "ReLU is missing"),
    ("no_b_1", "b_1 is missing"),
    ("no_b_2", "b_2 is missing"),
    ("order", "wrong order"),
    ("W_1.T", "W_1 is transposed"),
    ("W_2.T", "W_2 is transposed"),
    ("both.T", "W_1 and W_2 are both transposed"),
    ("dropout_output", "dropout is applied to the output"),
    ("dropout_input", "dropout is applied to the input"),
    ("F.dropout", "active at evaluation"),
    ("mix", "ALONE"),
])
def test_feed_forward_mistakes(kind, symptom):
    outcome = lesson09.feed_forward.evaluate(ffn_mistake(kind))
    if symptom is None:
        assert outcome.passed, outcome.message
    else:
        assert outcome.status == "wrong" and symptom in outcome.message, outcome.message


def test_feed_forward_without_dropout_in_training_is_named():
    def forward(self, x):
        return torch.relu(x @ self.W_1 + self.b_1) @ self.W_2 + self.b_2
    with pytest.raises(ExerciseError, match="no dropout"):
        lesson09.feed_forward(layer_class(lesson09.FeedForward, forward))


def test_feed_forward_with_weights_multiplied_the_wrong_way_round_is_named():
    """F.linear with the (d_model, d_ff) matrices, where d_ff != d_model (right only where they are square): torch's
    crash is named."""
    def forward(self, x):
        if self.W_1.shape[0] == self.W_1.shape[1]:
            return lesson09.FeedForward.forward(self, x)
        return F.linear(self.dropout(torch.relu(F.linear(x, self.W_1, self.b_1))), self.W_2, self.b_2)
    named(lesson09.feed_forward, layer_class(lesson09.FeedForward, forward), r"matrix product has mismatched shapes")


def test_feed_forward_with_renamed_parameters_is_told_to_keep_init():
    class Renamed(lesson09.FeedForward):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.W1 = self.W_1
            del self.W_1
    with pytest.raises(ExerciseError, match="keep __init__ as given"):
        lesson09.feed_forward(Renamed)


def encoder_mistake(kinds="ok", mask=lambda m: m, **how):
    """A learner's encoder layer with a mistake: `kinds` (one for every block, or one per block), `mask` (what it does
    to the mask), `how` (norms, order: lesson09_layers.run_layer)."""
    def forward(self, x, mask_=None):
        norms = how.get("norms")
        extra = {**how, "norms": [getattr(self, n) for n in norms]} if norms else how
        return encoder_output(self, x, mask(mask_), self.norm_first, kinds=kinds, **extra)
    return layer_class(ref.EncoderLayer, forward)


def one(kind, block, n=2):
    """`kind` in block `block` only."""
    return ["ok"] * block + [kind] + ["ok"] * (n - block - 1)


@pytest.mark.parametrize("mistake, symptom", [
    (encoder_mistake("no_residual"), "residual connection is missing"),
    (encoder_mistake("swapped"), "post-norm"),
    (encoder_mistake(mask=lambda m: None), "padding mask is not passed"),
    (encoder_mistake("norm_residual"), "normalised x"),
    (encoder_mistake(norms=("norm1", "norm1")), "One LayerNorm|one LayerNorm"),
    (encoder_mistake(one("reads_y", 1)), "layer's INPUT"),
])
def test_encoder_layer_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson09.encoder_layer(mistake)


@pytest.mark.parametrize("mistake, symptom", [
    (encoder_mistake(one("norm_residual", 0)), r"residual around the self-attention starts from the normalised x"),
    (encoder_mistake(one("no_residual", 1)), r"residual connection around the feed-forward network is missing"),
    (encoder_mistake(one("no_norm", 1)), r"LayerNorm after the feed-forward network \(norm2\) is missing"
                                         r"|feed-forward network reads x without its LayerNorm norm2"),
    (encoder_mistake(one("no_norm", 0)), r"(LayerNorm after|reads x without its LayerNorm).*self-attention"
                                         r"|self-attention.*(LayerNorm after|reads x without its LayerNorm)"),
    (encoder_mistake("no_norm"), r"LayerNorms after the sub-layers are missing|read x without their LayerNorm"),
    (encoder_mistake(one("reads_input", 1)), r"feed-forward network reads the layer's INPUT"),
    (encoder_mistake(one("swapped", 1)), r"feed-forward network has the (pre|post)-norm placement"),
    (encoder_mistake(order=(1, 0)), r"feed-forward network runs before the self-attention"),
    (encoder_mistake(mask=lambda m: ~m), r"padding mask is inverted"),
    (encoder_mistake(one("drop_sum", 0)), r"dropout1 is applied to the residual sum"),
    (encoder_mistake("drop_sum"), r"dropout is applied to the residual sums"),
    (encoder_mistake("no_drop"), r"applies no dropout"),
    (encoder_mistake(one("no_drop", 1)), r"feed-forward network's output gets no dropout"),
    (encoder_mistake(one("drop_input", 0)), r"dropout1 is applied to the self-attention's input"),
    (encoder_mistake(one("norm_output", 0)), r"norm1 is applied to the self-attention's output, inside the residual"),
    (encoder_mistake(one("norm_output", 1)), r"norm2 is applied to the feed-forward network's output"),
    (encoder_mistake("norm_output"), r"LayerNorms are applied to the sub-layers' outputs, inside the residuals"),
    (encoder_mistake(order=(1, 0), norms=("norm2", "norm1")),
     r"feed-forward network runs before the self-attention .*the LayerNorms in their places"),
])
def test_encoder_layer_mistakes_are_named(mistake, symptom):
    named(lesson09.encoder_layer, mistake, symptom)


def test_encoder_layer_dropout_elsewhere_is_named():
    """Dropout twice on the attention's output: right at evaluation, not in training (no listed variant)."""
    def forward(self, x, mask=None):
        out = ref.EncoderLayer.forward(self, x, mask)
        return self.dropout1(out) if self.training else out
    named(lesson09.encoder_layer, layer_class(ref.EncoderLayer, forward), r"right at evaluation but not in training")


def test_encoder_layer_slip_in_one_sub_layer_is_located():
    """A slip no variant lists (the FFN's output doubled): the check says which sub-layer it needs."""
    def forward(self, x, mask=None):
        parts = SimpleNamespace(**{name: getattr(self, name) for name in (
            "self_attn", "norm1", "norm2", "dropout1", "dropout2")}, ff=lambda y: 2 * self.ff(y))
        return encoder_output(parts, x, mask, self.norm_first)
    named(lesson09.encoder_layer, layer_class(ref.EncoderLayer, forward),
          r"with the feed-forward network switched off .* agrees")


def test_encoder_layer_with_renamed_parameters_is_told_to_keep_init():
    class Renamed(ref.EncoderLayer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.attention = self.self_attn
            del self.self_attn
    with pytest.raises(ExerciseError, match="keep __init__ as given"):
        lesson09.encoder_layer(Renamed)


def decoder_mistake(kinds="ok", tgt=lambda m: m, memory_mask=lambda m: m, swap_masks=False, **how):
    """A learner's decoder layer with a mistake (see encoder_mistake; `tgt`, `memory_mask`: what it does to them;
    `swap_masks`: tgt_mask given to the cross-attention, memory_mask to the self-attention)."""
    def forward(self, x, memory, tgt_mask=None, memory_mask_=None):
        norms = how.get("norms")
        extra = {**how, "norms": [getattr(self, n) for n in norms]} if norms else how
        masks = (tgt(tgt_mask), memory_mask(memory_mask_))
        return decoder_output(self, x, memory, *(masks[::-1] if swap_masks else masks), self.norm_first,
                              kinds=kinds, **extra)
    return layer_class(ref.DecoderLayer, forward)


@pytest.mark.parametrize("mistake, symptom", [
    (decoder_mistake(cross="self_twice"), "keys and values from the decoder"),
    (decoder_mistake(tgt=lambda m: None), "causal mask is not applied"),
    (decoder_mistake(memory_mask=lambda m: None), "source padding mask"),
    (decoder_mistake("no_residual"), "residual connection is missing"),
    (decoder_mistake("swapped"), "post-norm"),
    (decoder_mistake("norm_residual"), "normalised x"),
    (decoder_mistake(norms=("norm1", "norm1", "norm1")), "one LayerNorm serves every sub-layer"),
    (decoder_mistake(order=(1, 0, 2)), "cross-attention runs before the masked self-attention"),
    (decoder_mistake(order=(0, 2, 1)), "feed-forward network runs before the cross-attention"),
    (decoder_mistake(order=(2, 0, 1)), "feed-forward network runs before the masked self-attention"),
    (decoder_mistake(tgt=lambda m: causal_mask(m.shape[-1])), "target padding is not masked"),
    (decoder_mistake(tgt=lambda m: ~m), "target mask is inverted"),
    (decoder_mistake(memory_mask=lambda m: ~m), "source padding mask is inverted"),
    (decoder_mistake(cross="memory_normed"), "memory goes through norm2"),
    (decoder_mistake(cross="self_attn"), "uses self_attn's weights"),
    (decoder_mistake(one("no_norm", 1, 3)), r"cross-attention reads x without its LayerNorm norm2"
                                            r"|LayerNorm after the cross-attention \(norm2\) is missing"),
    (decoder_mistake(one("no_residual", 1, 3)), "residual connection around the cross-attention is missing"),
    (decoder_mistake(one("reads_input", 1, 3)), "cross-attention reads the layer's INPUT"),
    (decoder_mistake(one("reads_input", 2, 3)), "feed-forward network reads the layer's INPUT"),
    (decoder_mistake(norms=("norm1", "norm2", "norm2")), "feed-forward network uses norm2 instead of its own norm3"),
    (decoder_mistake(one("drop_sum", 1, 3)), "dropout2 is applied to the residual sum"),
    (decoder_mistake(one("no_drop", 2, 3)), "feed-forward network's output gets no dropout"),
    (decoder_mistake(order=(1, 0, 2), norms=("norm2", "norm1", "norm3")),
     "cross-attention runs before the masked self-attention .*the LayerNorms in their places"),
    (decoder_mistake(one("norm_output", 1, 3)), "norm2 is applied to the cross-attention.s output, inside the"),
])
def test_decoder_layer_mistakes(mistake, symptom):
    named(lesson09.decoder_layer, mistake, symptom)


def decoder_with_cross(cross):
    """A decoder layer whose cross-attention is cross(self, y, memory, tgt_mask, memory_mask), right elsewhere."""
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        parts = SimpleNamespace(**{name: getattr(self, name) for name in (
            "self_attn", "norm1", "norm2", "norm3", "dropout1", "dropout2", "dropout3", "ff")})
        parts.cross_attn = lambda y, *_: cross(self, y, memory, tgt_mask, memory_mask)
        return decoder_output(parts, x, memory, tgt_mask, memory_mask, self.norm_first)
    return layer_class(ref.DecoderLayer, forward)


@pytest.mark.parametrize("mistake, symptom", [
    (decoder_with_cross(lambda self, y, m, t, mm: self.cross_attn(m, y, y, mm)),
     r"queries come from the memory and its keys and values from the decoder"),
    (decoder_with_cross(lambda self, y, m, t, mm: self.cross_attn(m, m, m, mm)),
     r"a tensor of the memory's length S=7 meets one of the decoder's length T=5"),
    (decoder_with_cross(lambda self, y, m, t, mm: self.cross_attn(y, m, m, t)), r"the cross-attention got tgt_mask"),
    (decoder_with_cross(lambda self, y, m, t, mm: self.cross_attn(y, y, y, mm)),
     r"attention over the decoder's 5 positions got memory_mask"),
    (decoder_mistake(swap_masks=True),
     r"attention over the decoder's 5 positions got memory_mask"),
])
def test_decoder_layer_crashes_are_named(mistake, symptom):
    """The queries, keys, values or masks mixed up: with S != T torch crashes, and the check names the mix-up."""
    named(lesson09.decoder_layer, mistake, symptom)


def test_decoder_layer_that_peeks_at_the_future_is_rejected():
    def peeks(self, x, memory, tgt_mask=None, memory_mask=None):  # mixes in the mean over all positions
        out = ref.DecoderLayer.forward(self, x, memory, tgt_mask, memory_mask)
        return out + 1e-3 * x.mean(dim=1, keepdim=True)
    with pytest.raises(ExerciseError, match="wrong values|causal"):
        lesson09.decoder_layer(layer_class(ref.DecoderLayer, peeks))


@pytest.mark.parametrize("kind, symptom", [
    ("no_scale", "not scaled"),
    ("no_pos", "positional encoding is missing"),
    ("no_causal", "sees the future"),
    ("no_src_mask", "source padding mask is missing"),
    ("no_tgt_pad", "target padding mask is missing"),
    ("no_memory_mask", "cross-attention gets no source padding mask"),
    ("d_model", "multiplied by d_model"),
    ("divided", "divided by sqrt"),
    ("pos_scaled", "positions are scaled too"),
    ("swapped_embed", "embeddings are swapped"),
    ("inverted_src", "source padding mask is inverted"),
    ("inverted_tgt_pad", "target padding mask is inverted"),
    ("or_masks", r"combined with \|"),
    ("causal-1", "hides the diagonal"),
    ("causal+1", "see the next one"),
    ("log_softmax", "returns log-probabilities"),
    ("softmax", "returns probabilities"),
    ("future", r"causal mask is inverted \(True above the diagonal"),
    ("future_and_self", r"causal mask is inverted \(True on and above the diagonal"),
    ("inverted_tgt", r"target mask is inverted \(True at the future and at the padding"),
    (("pad", 0, "both"), "padding masks use the pad id 0 instead of model.pad_id"),
    (("pad", 0, "src"), "source padding mask uses the pad id 0"),
    (("pad", 2, "tgt"), "target padding mask uses the pad id 2"),
])
def test_transformer_forward_mistakes(kind, symptom):
    named(lesson09.transformer_forward, lambda model, src, tgt_in: lesson09._forward(model, src, tgt_in, kind),
          symptom)


def test_transformer_forward_with_the_notebooks_pad_is_named():
    """The notebook's global PAD = 0 instead of model.pad_id (the check's model pads with another id)."""
    def forward(model, src, tgt_in):
        src_mask = padding_mask(src, 0)
        tgt_mask = causal_mask(tgt_in.size(1)) & padding_mask(tgt_in, 0)
        memory = model.encoder(model.embed(src, model.src_embed), src_mask)
        return model.generator(model.decoder(model.embed(tgt_in, model.tgt_embed), memory, tgt_mask, src_mask))
    named(lesson09.transformer_forward, forward, r"pad id 0 instead of model.pad_id")


def test_transformer_forward_wrong_shape():
    with pytest.raises(ExerciseError, match="shape"):
        lesson09.transformer_forward(lambda model, src, tgt_in: model(src, tgt_in)[:, -1])
