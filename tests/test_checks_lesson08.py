"""Lesson 08: every check passes the reference and names typical mistakes."""
import math

import numpy as np
import pytest
import torch

from course_utils import attention as ref
from course_utils.checks import ExerciseError, lesson08
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def make_mha(scale="d_head", split="ok", merge="ok", out_proj=True, dim=-1, use_mask=True, store=True,
             same_projection=False, invert=False):
    class MHA(lesson08.ReferenceMultiHeadAttention):     # the same layers; a forward with the mistake
        def forward(self, query, key, value, mask=None):
            B, h = query.size(0), self.num_heads
            q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
            if same_projection:
                k, v = self.w_q(key), self.w_q(value)
            if split == "ok":
                q, k, v = (ref.split_heads(t, h) for t in (q, k, v))
            else:
                q, k, v = (t.reshape(B, h, t.size(1), self.d_head) for t in (q, k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt({"d_head": self.d_head, "d_model": h * self.d_head,
                                                          "T_k": k.size(-2), "none": 1}[scale])
            if mask is not None and invert:  # the course's attention: a row with no key left gets zeros
                weights = ref.attention_weights(q, k, ~mask)
            elif mask is not None and use_mask:
                scores = scores.masked_fill(~mask, float("-inf"))
                weights = scores.softmax(dim)
            else:
                weights = scores.softmax(dim)
            if store:
                self.attn_weights = weights
            out = weights @ v
            out = ref.merge_heads(out) if merge == "ok" else out.reshape(B, -1, h * self.d_head)
            return self.w_o(out) if out_proj else out
    return MHA


Reference = lesson08.ReferenceMultiHeadAttention


class NotImplementedMHA(Reference):
    def forward(self, query, key, value, mask=None):
        raise NotImplementedError()


@pytest.mark.parametrize("check, reference, stub", [
    (lesson08.split_heads, ref.split_heads, not_implemented),
    (lesson08.merge_heads, ref.merge_heads, not_implemented),
    (lesson08.multi_head_attention, Reference, NotImplementedMHA),
    (lesson08.multi_head_attention, make_mha(), NotImplementedMHA),
    (lesson08.positional_encoding, ref.sinusoidal_positional_encoding, not_implemented),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, stub, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(stub)


@pytest.mark.parametrize("mistake, symptom", [
    (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "cut across positions"),
    (lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2), "CONTIGUOUS"),
    (lambda x, h: x.view(x.size(0), x.size(1), h, -1), "transpose"),
    (lambda x, h: x.view(x.size(0), x.size(1), h, -1).permute(0, 2, 3, 1), "transposed"),
])
def test_split_heads_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson08.split_heads(mistake)


@pytest.mark.parametrize("mistake, symptom", [
    (lambda x: x.reshape(x.size(0), x.size(2), -1), "merged in the wrong order"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.size(0), x.size(2), -1), "interleaved"),
    (lambda x: x.transpose(1, 2), "reshape it"),
    (lambda x: x.reshape(x.size(0), -1, x.size(-1)), "stacked along time"),
])
def test_merge_heads_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson08.merge_heads(mistake)


@pytest.mark.parametrize("kwargs, symptom", [
    (dict(scale="d_model"), "sqrt\\(d_model\\)"),
    (dict(scale="none"), "missing scale"),
    (dict(split="view"), "split wrongly"),
    (dict(merge="reshape"), "merged in the wrong order"),
    (dict(out_proj=False), "W_O is missing"),
    (dict(dim=-2), "wrong axis"),
    (dict(use_mask=False), "mask is ignored"),
    (dict(store=False), "attn_weights"),
    (dict(scale="T_k"), r"sqrt\(T_k\)"),
    (dict(same_projection=True), "projected with w_q"),
    (dict(invert=True), "mask is inverted"),
])
def test_multi_head_attention_mistakes(kwargs, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson08.multi_head_attention(make_mha(**kwargs))


def test_multi_head_attention_needs_the_given_layers():
    class Renamed(Reference):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads)
            self.query_proj = self.w_q
            del self.w_q
    with pytest.raises(ExerciseError, match="w_q"):
        lesson08.multi_head_attention(Renamed)


@pytest.mark.parametrize("form, symptom", [
    ("concat", "interleaved"), ("swapped", "swapped"), ("i", "instead of 2i"), ("times", "multiplied"),
    ("from_one", "start at 1"), ("column", r"\(2i\+1\)/d_model"),
])
def test_positional_encoding_mistakes(form, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson08.positional_encoding(lambda max_len, d_model: lesson08._pe(max_len, d_model, form).float())


def test_merge_heads_is_checked_on_its_own(capsys):
    """In the lesson, split_heads and merge_heads have a cell and a check each, and the merge_heads check
    never uses the learner's split_heads: with split_heads wrong, merge_heads still gets its verdict."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "08_multihead_positional.ipynb")
                    .read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    split_check = next(s for s in code if "check.split_heads(" in s)
    merge_check = next(s for s in code if "check.merge_heads(" in s)
    assert split_check != merge_check, "split_heads and merge_heads must be checked in separate cells"
    assert not any("def split_heads" in s and "def merge_heads" in s for s in code), \
        "split_heads and merge_heads must be written in separate cells"
    namespace = {"check": lesson08, "split_heads": lambda x, h: x.reshape(x.size(0), h, x.size(1), -1),
                 "merge_heads": ref.merge_heads}               # a wrong split_heads, a right merge_heads
    with pytest.raises(ExerciseError, match="cut across positions"):
        exec(split_check, namespace)
    capsys.readouterr()
    exec(merge_check, namespace)
    assert "✔" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------
# The families of mistakes named by planted variants, crash patterns and the rearranged-values test
# ---------------------------------------------------------------------------------------------------------------
NOTEBOOK_D_MODEL, NOTEBOOK_NUM_HEADS = 12, 3          # the notebook's running example, read by mistake


def split_float(x, h):
    B, T, d_model = x.shape
    return x.view(B, T, h, d_model / h).transpose(1, 2)


def split_notebook_sizes(x, h):
    B, T, _ = x.shape
    return x.view(B, T, h, NOTEBOOK_D_MODEL // h).transpose(1, 2)


def split_chunks_float(x, h):
    d_head = x.size(-1) / h
    return torch.stack([x[..., int(i * d_head):int((i + 1) * d_head)] for i in range(h)], dim=1)[:, :, :, :d_head]


@pytest.mark.parametrize("mistake, symptom", [
    (lambda x, h: x.transpose(1, 2).reshape(x.size(0), h, x.size(1), -1), r"transposed to \(B, d_model, T\) before"),
    (split_float, "a size is a float.*d_model // num_heads"),
    (split_chunks_float, "a size is a float"),
    (split_notebook_sizes, "does not fit the tensor.*from x itself.*notebook's variables"),
    (lambda x, h: ref.split_heads(x, h).flip(2), "holds the numbers of x, but in the wrong places"),
    (lambda x, h: ref.split_heads(x, h)[..., torch.arange(x.size(-1) // h).roll(1)],
     "holds the numbers of x, but in the wrong places"),
])
def test_split_heads_named_families(mistake, symptom):
    named(lesson08.split_heads, mistake, symptom)


def merge_notebook_heads(x):
    B, _, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, NOTEBOOK_NUM_HEADS * d_head)


@pytest.mark.parametrize("mistake, symptom", [
    (lambda x: x.transpose(1, 2).view(x.size(0), x.size(2), -1), "`.view` cannot merge.*reshape"),
    (lambda x: x.transpose(-1, -2).reshape(x.size(0), x.size(2), -1), r"last two axes \(T, d_head\) are transposed"),
    (merge_notebook_heads, "does not fit the tensor.*from x itself.*notebook's variables"),
    (lambda x: ref.merge_heads(x).flip(1), "holds the numbers of x, but in the wrong places"),
    (lambda x: x.transpose(1, 2).reshape(x.size(0), x.size(2), x.size(3), x.size(1)).transpose(-1, -2)
     .reshape(x.size(0), x.size(2), -1), "holds the numbers of x, but in the wrong places"),
])
def test_merge_heads_named_families(mistake, symptom):
    named(lesson08.merge_heads, mistake, symptom)


def make_role_mha(k_w="w_k", v_w="w_v", k_from="key", v_from="value"):
    """A layer or an input in another's role: the keys (values) projected with `k_w` (`v_w`) from `k_from`
    (`v_from`)."""
    class MHA(Reference):
        def forward(self, query, key, value, mask=None):
            inputs = {"query": query, "key": key, "value": value}
            q = ref.split_heads(self.w_q(query), self.num_heads)
            k = ref.split_heads(getattr(self, k_w)(inputs[k_from]), self.num_heads)
            v = ref.split_heads(getattr(self, v_w)(inputs[v_from]), self.num_heads)
            out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
            return self.w_o(ref.merge_heads(out))
    return MHA


@pytest.mark.parametrize("kwargs, symptom", [
    (dict(v_w="w_k"), "values are projected with w_k"),
    (dict(v_w="w_q"), "values are projected with w_q"),
    (dict(k_w="w_q"), "keys are projected with w_q"),
    (dict(k_w="w_v"), "keys are projected with w_v"),
    (dict(k_from="query"), "keys are computed from the query"),
    (dict(v_from="query"), "values are computed from the query"),
    (dict(k_from="query", v_from="query"), "keys and values are computed from the query"),
    (dict(v_from="key"), "values are computed from the key"),
    (dict(k_from="value"), "keys are computed from the value"),
])
def test_multi_head_attention_roles_named(kwargs, symptom):
    named(lesson08.multi_head_attention, make_role_mha(**kwargs), symptom)


class KeysFromQueryWhenLonger(Reference):
    """The keys from the query whenever the lengths differ: the course's attention raises on k and v."""

    def forward(self, query, key, value, mask=None):
        source = query if key.size(1) != query.size(1) else key
        q, k, v = (ref.split_heads(w(t), self.num_heads) for w, t in ((self.w_q, query), (self.w_k, source),
                                                                      (self.w_v, value)))
        out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref.merge_heads(out))


class OneHead(Reference):
    def forward(self, query, key, value, mask=None):
        out, self.attn_weights = ref.scaled_dot_product_attention(self.w_q(query), self.w_k(key), self.w_v(value),
                                                                  mask, need_weights=True)
        return self.w_o(out)


class DHeadHeads(Reference):
    def forward(self, query, key, value, mask=None):
        q, k, v = (ref.split_heads(w(t), self.d_head) for w, t in ((self.w_q, query), (self.w_k, key),
                                                                   (self.w_v, value)))
        out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref.merge_heads(out))


class ScaledTwice(Reference):
    def forward(self, query, key, value, mask=None):
        q = ref.split_heads(self.w_q(query), self.num_heads) / math.sqrt(self.d_head)
        k, v = (ref.split_heads(w(t), self.num_heads) for w, t in ((self.w_k, key), (self.w_v, value)))
        out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref.merge_heads(out))


class ViewAfterTranspose(Reference):
    def forward(self, query, key, value, mask=None):
        q, k, v = (ref.split_heads(w(t), self.num_heads) for w, t in ((self.w_q, query), (self.w_k, key),
                                                                      (self.w_v, value)))
        out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(out.transpose(1, 2).view(query.size(0), query.size(1), -1))


class ResidualOfQuery(Reference):
    def forward(self, query, key, value, mask=None):
        return query + super().forward(query, key, value, mask)


class ResidualOfValue(Reference):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        return out + value if value.shape == out.shape else out + query


@pytest.mark.parametrize("cls, symptom", [
    (ResidualOfQuery, "residual connection is added: the output is `query`"),
    (ResidualOfValue, "residual connection is added"),
    (KeysFromQueryWhenLonger, "keys and the values have different lengths.*self.w_k\\(key\\)"),
    (OneHead, "heads are never split"),
    (DHeadHeads, "split into d_head = \\d+ heads of num_heads = \\d+ features"),
    (ScaledTwice, "scaled twice"),
    (make_mha(split="view", merge="reshape"), "split and merged with reshapes alone"),
    (ViewAfterTranspose, "`.view` cannot merge"),
])
def test_multi_head_attention_named_families(cls, symptom):
    named(lesson08.multi_head_attention, cls, symptom)


def pe_exp_log_no_minus(max_len, d_model):
    """float32, with exp and log: the angles pos * 10000^(2i/d) reach 10^5, and their rounding with them."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div_term), torch.cos(pos * div_term)
    return pe


def pe_floor_division(max_len, d_model):
    """`2 * i // d_model` is 0 for every i: every pair has the frequency 1."""
    i = torch.arange(d_model // 2)
    angle = torch.arange(max_len)[:, None] / 10000.0 ** (2 * i // d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


def pe_one_frequency(max_len, d_model):
    """Another frequency, but one for every pair (an exponent that does not depend on i)."""
    angle = torch.arange(max_len, dtype=torch.float32)[:, None].repeat(1, d_model // 2) / 10000.0 ** 0.5
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)


def pe_numpy(max_len, d_model):
    return ref.sinusoidal_positional_encoding(max_len, d_model).double().numpy()


@pytest.mark.parametrize("answer, symptom", [
    (lambda max_len, d_model: lesson08._pe(max_len, d_model, "double").float(), "exponent is doubled"),
    (pe_exp_log_no_minus, "position is multiplied by 10000"),
    (pe_floor_division, "every pair of columns \\(2i, 2i\\+1\\) has the same frequency"),
    (pe_one_frequency, "every pair of columns \\(2i, 2i\\+1\\) has the same frequency"),
    (lambda max_len, d_model: ref.sinusoidal_positional_encoding(max_len, d_model).double(),
     "returned float64: return a float32 torch tensor"),
    (pe_numpy, "returned a numpy.ndarray: return a float32 torch tensor"),
    (lambda max_len, d_model: ref.sinusoidal_positional_encoding(max_len, d_model).numpy().astype(np.float32),
     "returned a numpy.ndarray"),
    (lambda max_len, d_model: torch.zeros(max_len, d_model / 2).repeat(1, 2), "a size is a float"),
])
def test_positional_encoding_named_families(answer, symptom):
    named(lesson08.positional_encoding, answer, symptom)
