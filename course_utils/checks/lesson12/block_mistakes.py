"""Exercise 2's known mistakes (the decoder block): `block_variant(layer, x, mask, kind)` is the output of a block
with one typical mistake, from the reference block's own modules; each registry entry's wrong answer is the class
`wrong_block(kind)` whose forward is that variant, so that the mistake is written once."""
import torch
import torch.nn as nn

from ...gpt import GPTBlock
from ..core import Mistake, Mistakes
from .modules import MasksOnce, leak, not_module, renamed


def block_variant(layer, x, mask, kind):
    """A GPT block's output, from the reference block's modules, with the mistake `kind` planted."""
    n1, n2, ff = layer.norm1, layer.norm2, layer.ff
    d1, d2 = layer.dropout1, layer.dropout2
    m = {"no_mask": None, "sees_next": torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril(1),
         "inverted": ~mask}.get(kind, mask)

    def attn(y):
        return layer.attn(y, m)
    if kind == "one_norm":
        n2 = n1
    if kind == "norms_swapped":
        n1, n2 = n2, n1
    if kind in ("no_dropout", "no_dropout1"):
        d1 = nn.Identity()
    if kind in ("no_dropout", "no_dropout2"):
        d2 = nn.Identity()
    if kind == "unpacked":                   # out, weights = attention(...): the batch's first two rows
        x = x + d1(attn(n1(x))[0])
        return x + d2(ff(n2(x)))
    if kind in ("parallel", "ff_on_attn"):   # the FFN reads the block's input, or the attention's output alone
        a = d1(attn(n1(x)))
        return x + a + d2(ff(n2(x if kind == "parallel" else a)))
    if kind == "norm_residual_attn":
        y = n1(x)
        x = y + d1(attn(y))
        return x + d2(ff(n2(x)))
    if kind == "post_norm":
        x = n1(x + d1(attn(x)))
        return n2(x + d2(ff(x)))
    if kind == "no_residual":
        return d2(ff(n2(d1(attn(n1(x))))))
    if kind == "no_residual_attn":
        x = d1(attn(n1(x)))
        return x + d2(ff(n2(x)))
    if kind == "no_residual_ff":
        x = x + d1(attn(n1(x)))
        return d2(ff(n2(x)))
    if kind == "norm_residual":
        y = n1(x)
        x = y + d1(attn(y))
        y = n2(x)
        return y + d2(ff(y))
    if kind == "stale":
        y = n1(x)
        x = x + d1(attn(y))
        return x + d2(ff(y))
    if kind == "norm2_residual":             # x = norm2(x): the second residual adds to the normalised x
        x = n2(x + d1(attn(n1(x))))
        return x + d2(ff(x))
    if kind == "post_norm_ff":               # the second sub-layer post-norm, the first pre-norm
        x = x + d1(attn(n1(x)))
        return n2(x + d2(ff(x)))
    if kind == "norm_after_attn":            # the first LayerNorm on the attention's output, inside the residual
        x = x + n1(d1(attn(x)))
        return x + d2(ff(n2(x)))
    if kind == "norm_after":
        x = x + d1(n1(attn(x)))
        return x + d2(n2(ff(x)))
    if kind == "ff_first":
        x = x + d2(ff(n2(x)))
        return x + d1(attn(n1(x)))
    if kind == "kv_raw":                     # queries from LN(x), keys and values from x itself
        y = n1(x)
        x = x + d1(layer.attn.attend(*_kv_raw(layer.attn, y, x), mask))
        return x + d2(ff(n2(x)))
    if kind in ("attn_no_norm", "ff_no_norm"):
        x = x + d1(attn(x if kind == "attn_no_norm" else n1(x)))
        return x + d2(ff(x if kind == "ff_no_norm" else n2(x)))
    if kind in ("dropout_sum", "dropout_sum_attn", "dropout_sum_ff"):   # dropout over the residual sum
        x = d1(x + attn(n1(x))) if kind != "dropout_sum_ff" else x + d1(attn(n1(x)))
        return d2(x + ff(n2(x))) if kind != "dropout_sum_attn" else x + d2(ff(n2(x)))
    x = x + d1(attn(n1(x)))
    return x + d2(ff(n2(x)))


def _kv_raw(attn, y, x):
    """A GPT attention's q from y, k and v from x (each split into heads, rotated as in forward)."""
    positions = torch.arange(x.size(1))
    q, _, _ = attn.project(y, positions)
    _, k, v = attn.project(x, positions)
    return q, k, v


def wrong_block(kind):
    """The block class whose forward has the mistake `kind` (the course's GPTBlock's modules, so the learner's
    __init__ and parameter names)."""
    return type(f"Block_{kind}", (GPTBlock,), {"forward": lambda self, x, mask: block_variant(self, x, mask, kind)})


class _Probed(GPTBlock):
    """Slips no registered variant gives: the probes say in which half they are."""
    kind = ""

    def forward(self, x, mask):
        y = self.norm1(x)
        if self.kind == "raw_queries":                      # queries from x, keys and values from LayerNorm(x)
            q, _, _ = self.attn.project(x, torch.arange(x.size(1)))
            _, k, v = self.attn.project(y, torch.arange(x.size(1)))
            x = x + self.dropout1(self.attn.attend(q, k, v, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = x + self.dropout1(self.attn(y, mask))
        return x + self.dropout2(self.ff(self.norm2(y)))    # "ffn_reads_input_norm": LN2 of LN1 of the input


def _probed(kind):
    return type(f"Probed_{kind}", (_Probed,), {"kind": kind})


class _MasksOnce(MasksOnce, GPTBlock):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, self.masked_now(mask)))
        return x + self.dropout2(self.ff(self.norm2(x)))


class _Renamed(GPTBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__(d_model, num_heads, d_ff, dropout)
        self.ln_1 = self.norm1
        del self.norm1


class _AttnGivenMask(GPTBlock):
    """The course's MultiHeadAttention called as self-attention of a GPT layer, attn(y, mask)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        from ...attention import MultiHeadAttention

        super().__init__(d_model, num_heads, d_ff, dropout)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)

    def forward(self, x, mask):
        x = x + self.dropout1(self.attn(self.norm1(x), mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


def _variant(kind, says, hint=""):
    return Mistake(kind, says, hint=hint, shows=wrong_block(kind))


_PRE = "x + Dropout(Sublayer(LayerNorm(x)))"
_RESIDUAL = f"each sub-layer's output is added to its input, {_PRE}"
_ATTN = "y = self.norm1(x); x = x + self.dropout1(self.attn(y, y, y, mask))"
_FF = "x = x + self.dropout2(self.ff(self.norm2(x)))"
_UPDATED = ("reads the UPDATED x, after the attention's residual: x + Dropout(Attn(...)), then "
            "x + Dropout(FFN(LayerNorm2(x)))")
TRAINING_ONLY = ("no_dropout", "no_dropout1", "no_dropout2", "dropout_sum", "dropout_sum_attn", "dropout_sum_ff")

M = Mistakes(
    _variant("post_norm", "this is the post-norm layer of lesson 09's paper, LayerNorm(x + Sublayer(x)); a GPT is "
             f"pre-norm, {_PRE}: the LayerNorm normalises the sub-layer's input", _ATTN),
    _variant("no_residual", f"the residual connections are missing, around both sub-layers: {_RESIDUAL}", _ATTN),
    _variant("no_residual_attn", f"the residual connection around the attention is missing: {_RESIDUAL}", _ATTN),
    _variant("no_residual_ff", f"the residual connection around the feed-forward network is missing: {_RESIDUAL}",
             _FF),
    _variant("no_mask", "the mask is not passed to the attention: position t must see positions ≤ t only",
             "self.attn(y, y, y, mask)"),
    _variant("sees_next", "the attention's mask lets position t see position t+1: use the mask the block is given "
             "(the causal mask, True on and below the diagonal only)", "self.attn(y, y, y, mask)"),
    _variant("one_norm", "one LayerNorm serves both sub-layers: norm1 goes before the attention, norm2 before the "
             "feed-forward network (each has a gain and a bias of its own)", "self.ff(self.norm2(x))"),
    _variant("norm_residual", "the residuals start from the normalised x: LayerNorm(x) feeds only the sub-layer, "
             "whose output is added to the ORIGINAL x", "y = self.norm1(x); x = x + self.dropout1(self.attn(y, y, y, "
             "mask))"),
    _variant("norms_swapped", "norm1 and norm2 are swapped: norm1 normalises the attention's input, norm2 the "
             "feed-forward network's"),
    _variant("norm_residual_attn", "the attention's residual starts from the normalised x: LayerNorm1(x) feeds only "
             "the attention, whose output is added to the ORIGINAL x", _ATTN),
    _variant("inverted", "the mask is inverted: True means MAY attend (the causal mask you are given is True on and "
             "below the diagonal); the attention takes the mask itself", "self.attn(y, y, y, mask), not ~mask"),
    _variant("no_dropout1", "dropout1 is not applied to the attention's output before it is added",
             "x = x + self.dropout1(attention output)"),
    _variant("no_dropout2", "dropout2 is not applied to the feed-forward network's output before it is added", _FF),
    _variant("unpacked", "the attention's output was unpacked as (out, weights): the course's MultiHeadAttention "
             "returns ONE tensor (B, T, d_model) (torch's nn.MultiheadAttention returns a pair), so the unpacking "
             "takes the batch's first two rows", "out = self.attn(y, y, y, mask)"),
    _variant("parallel", "the two sub-layers run side by side on the block's input, where the feed-forward "
             "network " + _UPDATED, _FF),
    _variant("ff_on_attn", "the feed-forward network reads the attention's output alone, where it " + _UPDATED, _FF),
    _variant("stale", "the feed-forward network reads LayerNorm1 of the block's INPUT (the normalised copy made "
             "before the attention): it normalises the UPDATED x, with norm2", _FF),
    _variant("norm2_residual", "x is replaced by its normalised copy before the feed-forward half: the second "
             "residual adds to the UN-normalised x", "y = self.norm2(x); x = x + self.dropout2(self.ff(y))"),
    _variant("post_norm_ff", "the feed-forward half is post-norm, LayerNorm(x + FFN(x)): in a pre-norm block it is "
             "x + Dropout(FFN(LayerNorm2(x))), like the attention half", _FF),
    _variant("norm_after_attn", "the first LayerNorm is applied to the attention's OUTPUT, x + LN(Attn(x)): in a "
             "pre-norm block it normalises the attention's INPUT, x + Dropout(Attn(LN(x)))", _ATTN),
    _variant("norm_after", "the LayerNorms are applied to the sub-layers' OUTPUTS: in a pre-norm block they "
             f"normalise the sub-layers' inputs, {_PRE}", _ATTN),
    _variant("ff_first", "the feed-forward network comes before the attention: the attention comes first (with "
             "norm1), then the feed-forward network (with norm2)"),
    _variant("kv_raw", "the keys and values come from x, the queries from LayerNorm(x): self-attention takes the "
             "SAME normalised y as query, key and value", "self.attn(y, y, y, mask)"),
    _variant("attn_no_norm", "the attention reads x without its LayerNorm: x + Dropout(Attn(LayerNorm1(x)))", _ATTN),
    _variant("ff_no_norm", "the feed-forward network reads x without its LayerNorm: x + Dropout(FFN(LayerNorm2(x)))",
             _FF),
    _variant("no_dropout", "dropout1 and dropout2 are not applied: in training they drop features of each "
             "sub-layer's output before it is added", _ATTN + "; " + _FF),
    _variant("dropout_sum", "the dropout is applied to the sum x + Sublayer(...): it drops features of the "
             "sub-layer's output only, so that the residual path is never dropped", _ATTN),
    _variant("dropout_sum_attn", "dropout1 is applied to the sum x + Attn(...): it drops features of the "
             "attention's output only, so that the residual path is never dropped", _ATTN),
    _variant("dropout_sum_ff", "dropout2 is applied to the sum x + FFN(...): it drops features of the feed-forward "
             "output only, so that the residual path is never dropped", _FF),
    not_module(),
    renamed(shows=_Renamed),
    Mistake("attn_takes_qkv", "the course's MultiHeadAttention takes query, key and value (lesson 09): "
            "self-attention passes the normalised x as all three", hint="self.attn(y, y, y, mask)",
            shows=_AttnGivenMask),
    Mistake("slip_in_ff_half", "the attention half of your block is right (with the feed-forward network switched "
            "off, your block and the course's agree): the slip is in the feed-forward half, "
            "x + Dropout2(FFN(LayerNorm2(x))), with x the output of the attention half",
            shows=_probed("ffn_reads_input_norm")),
    Mistake("slip_in_attention_half", "the feed-forward half of your block is right (with the attention switched "
            "off, your block and the course's agree): the slip is in the attention half, "
            "x + Dropout1(Attn(LayerNorm1(x)))", shows=_probed("raw_queries")),
    leak(shows=_MasksOnce),
)
VALUE_KEYS = [m.key for m in M if m.shows is not None and m.shows.__name__ == f"Block_{m.key}"]
