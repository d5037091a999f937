"""Lesson 08, exercise 2: multi-head attention.

    MyMultiHeadAttention(d_model, num_heads): layers w_q, w_k, w_v, w_o (nn.Linear(d_model, d_model), given);
    forward(query (B, T_q, d_model), key (B, T_k, d_model), value (B, T_k, d_model), mask=None) -> (B, T_q, d_model),
    each head's weights (B, num_heads, T_q, T_k) kept on self.attn_weights; mask bool, True = may attend.

The check builds the class, gives its four layers the weights of a torch.nn.MultiheadAttention(batch_first=True) and
compares the output and the kept weights with torch's, on self-attention, cross-attention (T_k = T_q first, so that
keys or values computed from the query give an output to name, then T_k != T_q), a padding mask and a causal mask.
It names the registered slips (multi_head_mistakes.py) by the output they give, and the crashes of a float size, a
view of a transposed tensor, sizes that do not fit and keys and values of different lengths.
"""
import torch
import torch.nn as nn

from ... import attention as ref
from ... import masks
from ..core import exercise, expect, expect_distribution, expect_shape, single_threaded
from ..evaluation import Evaluation
from .crashes import naming_crashes
from .heads import x_of
from .multi_head_mistakes import VALUES, Given, M, residual, wrong


class ReferenceMultiHeadAttention(Given):
    """The answer to the exercise, written with the course's tested functions (the notebook's layers)."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (ref.split_heads(w(t), self.num_heads) for w, t in ((self.w_q, query), (self.w_k, key),
                                                                      (self.w_v, value)))
        out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref.merge_heads(out))


class _EinsumHeads(Given):
    """A right answer written another way: the heads as an axis of einsum, (B, T, h, d_head), fully masked queries
    zeroed."""

    def forward(self, query, key, value, mask=None):
        b, t_q, d = query.shape
        q = self.w_q(query).view(b, t_q, self.num_heads, self.d_head)
        k = self.w_k(key).view(b, key.size(1), self.num_heads, self.d_head)
        v = self.w_v(value).view(b, key.size(1), self.num_heads, self.d_head)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.d_head ** -0.5
        if mask is not None:
            mask = torch.broadcast_to(mask, scores.shape)
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            self.attn_weights = scores.softmax(dim=-1) * mask.any(dim=-1, keepdim=True)
        else:
            self.attn_weights = scores.softmax(dim=-1)
        return self.w_o(torch.einsum("bhqk,bkhd->bqhd", self.attn_weights, v).reshape(b, t_q, d))


_FromRawWeights = wrong()     # a right answer written another way: F.linear on the layers' weights, the scores out


def _copy_weights(module, theirs):
    """Give the learner's four layers torch's weights (torch keeps W_q, W_k, W_v stacked in in_proj)."""
    W_q, W_k, W_v = theirs.in_proj_weight.detach().chunk(3)
    b_q, b_k, b_v = theirs.in_proj_bias.detach().chunk(3)
    for name, W, b in (("w_q", W_q, b_q), ("w_k", W_k, b_k), ("w_v", W_v, b_v),
                       ("w_o", theirs.out_proj.weight.detach(), theirs.out_proj.bias.detach())):
        layer = getattr(module, name, None)
        expect(layer is not None, M.layers_changed.at(what=f"your module has no self.{name}"))
        expect(isinstance(layer, nn.Linear) and tuple(layer.weight.shape) == tuple(W.shape)
               and layer.bias is not None, M.layers_changed.at(what=f"self.{name} is not nn.Linear(d_model, d_model)"))
        with torch.no_grad():
            layer.weight.copy_(W)
            layer.bias.copy_(b)


def _run(theirs, args):
    """pick for M.variants: the wrong answer's module (built with the check's sizes), with torch's weights, on
    `args` (query, key, value, mask)."""
    def run(module):
        _copy_weights(module, theirs)
        with torch.no_grad():
            return module.eval()(*args)
    return run


def _masks(mask_kind, T_q, T_k):
    """(the course's mask or None, the same for torch.nn.MultiheadAttention as keyword arguments)."""
    if mask_kind == "padding":
        tokens = torch.tensor([[1] * T_k, [1] * (T_k - 3) + [0] * 3])
        return masks.padding_mask(tokens, 0), {"key_padding_mask": tokens == 0}
    if mask_kind == "causal":
        return masks.causal_mask(T_q), {"attn_mask": ~masks.causal_mask(T_q)}
    return None, {}


@exercise("multi-head attention", name="MyMultiHeadAttention", reference=ReferenceMultiHeadAttention, mistakes=M,
          right=[_EinsumHeads, _FromRawWeights])
@single_threaded
@naming_crashes(M)
def multi_head_attention(ev: Evaluation, cls):
    """cls(d_model, num_heads) with layers w_q, w_k, w_v, w_o; forward(query, key, value, mask=None)
    -> (B, T_q, d_model), keeping self.attn_weights (B, num_heads, T_q, T_k)."""
    tests = 0
    # cross-attention: T_k = T_q first (the keys computed from the query then give an output to name), values
    # apart from the keys (a value projected from `key` shows)
    cases = [(24, 4, "self", None, 5), (12, 3, "cross", None, 5), (12, 3, "cross", "padding", 7),
             (16, 2, "self", "causal", 5)]
    for seed, (d_model, h, kind, mask_kind, T_k) in enumerate(cases):
        torch.manual_seed(seed)
        theirs = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
        module = ev.call(cls, d_model, h)
        expect(isinstance(module, nn.Module), M.not_module)
        _copy_weights(module, theirs)
        module.eval()
        x = x_of(ev, seed, 2, 5, d_model)
        query, key, value = (x, x, x) if kind == "self" else (x, x_of(ev, seed + 10, 2, T_k, d_model),
                                                               x_of(ev, seed + 20, 2, T_k, d_model))
        T_q = query.size(1)
        mask, torch_masks = _masks(mask_kind, T_q, T_k)
        args = (query, key, value) if mask is None else (query, key, value, mask)
        with torch.no_grad():
            expected, expected_weights = theirs(query, key, value, average_attn_weights=False, **torch_masks)
            out = ev.call(module, *args)
        expect_shape(out, (2, T_q, d_model), "the output")
        run = _run(theirs, (query, key, value, mask))
        mistakes = {(m.at(d_head=d_model // h, h=h) if m is M.heads_of_d_head else m): o
                    for m, o in M.variants(VALUES, d_model, h, pick=run).items()}
        for name in ("query", "key", "value"):     # (in self-attention the three are one: the first is named)
            try:
                mistakes[M.residual.at(input=name)] = run(residual(name)(d_model, h))
            except RuntimeError:                   # (the key and the value are longer than the output)
                pass
        ev.expect_close(out, expected, f"the output ({kind}-attention, d_model={d_model}, num_heads={h}"
                        f"{', ' + mask_kind + ' mask' if mask_kind else ''}) compared with torch.nn.MultiheadAttention",
                        mistakes=mistakes)
        stored = getattr(module, "attn_weights", None)
        expect(stored is not None, M.no_attn_weights)
        expect_shape(stored, (2, h, T_q, T_k), "self.attn_weights")
        expect_distribution(stored, "self.attn_weights")
        ev.expect_close(stored, expected_weights, "self.attn_weights compared with torch's per-head weights")
        tests += 1
    return tests
