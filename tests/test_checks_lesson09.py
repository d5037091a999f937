"""Lesson 09: every check passes the reference and names typical mistakes."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import transformer as ref
from course_utils.checks import ExerciseError, lesson09
from tests.checking import not_implemented, prints_not_implemented

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
    ("relu_twice", "after the second layer too"),
    ("no_relu", "ReLU is missing"),
    ("no_b_1", "b_1 is missing"),
    ("no_b_2", "b_2 is missing"),
    ("order", "wrong order"),
    ("W_1.T", "W_1 is transposed"),
    ("W_2.T", "W_2 is transposed"),
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


def test_feed_forward_with_renamed_parameters_is_told_to_keep_init():
    class Renamed(lesson09.FeedForward):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.W1 = self.W_1
            del self.W_1
    with pytest.raises(ExerciseError, match="keep __init__ as given"):
        lesson09.feed_forward(Renamed)


def encoder_mistake(kind=None, use_mask=True):
    def forward(self, x, mask=None):
        return lesson09._encoder_layer(self, x, mask, self.norm_first, kind or "ok", use_mask)
    return layer_class(ref.EncoderLayer, forward)


@pytest.mark.parametrize("mistake, symptom", [
    (encoder_mistake("no_residual"), "residual connection is missing"),
    (encoder_mistake("swapped"), "post-norm"),
    (encoder_mistake(use_mask=False), "padding mask is not passed"),
    (encoder_mistake("norm_residual"), "normalised x"),
    (encoder_mistake("one_norm"), "One LayerNorm|one LayerNorm"),
    (encoder_mistake("stale"), "layer's INPUT"),
])
def test_encoder_layer_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson09.encoder_layer(mistake)


def test_encoder_layer_with_renamed_parameters_is_told_to_keep_init():
    class Renamed(ref.EncoderLayer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.attention = self.self_attn
            del self.self_attn
    with pytest.raises(ExerciseError, match="keep __init__ as given"):
        lesson09.encoder_layer(Renamed)


def decoder_mistake(kind):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return lesson09._decoder_layer(self, x, memory, tgt_mask, memory_mask, self.norm_first, kind)
    return layer_class(ref.DecoderLayer, forward)


@pytest.mark.parametrize("kind, symptom", [
    ("self_twice", "keys and values from the decoder"),
    ("no_causal", "causal mask is not applied"),
    ("no_memory_mask", "source padding mask"),
    ("no_residual", "residual connection is missing"),
    ("swapped", "post-norm"),
    ("norm_residual", "normalised x"),
    ("one_norm", "one LayerNorm serves every sub-layer"),
    ("order", "comes before the masked self-attention"),
])
def test_decoder_layer_mistakes(kind, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson09.decoder_layer(decoder_mistake(kind))


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
])
def test_transformer_forward_mistakes(kind, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson09.transformer_forward(lambda model, src, tgt_in: lesson09._forward(model, src, tgt_in, kind))


def test_transformer_forward_wrong_shape():
    with pytest.raises(ExerciseError, match="shape"):
        lesson09.transformer_forward(lambda model, src, tgt_in: model(src, tgt_in)[:, -1])
