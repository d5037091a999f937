"""The course's masks as FlexAttention's `mask_mod` and `score_mod` (lesson 13), each equal to the course's own mask.

    mask_mod = causal                            True where query q_idx may see key kv_idx (b, h, q_idx, kv_idx)
    padding(lengths)                             keys past each sequence's length hidden (lessons 07-10)
    sliding_window(window)                       the causal window of `window` keys, the query itself included
                                                 (lessons 07 and 13; lesson 15's local layers: local_layer)
    sinks_and_window(sinks, window)              lesson 14's streaming cache: the first `sinks` positions, the last
                                                 `window` before the query, and the query
    documents(doc_ids)                           documents packed in one sequence: causal inside each document
    causal_score                                 the causal mask as a score_mod (scores -> -inf): no tile skipped
    dense(mask_mod, B, H, T)                     the (B, H, T, T) bool mask a mask_mod describes
    COURSE_MASKS                                 name -> (mask_mod, the same mask from the course's own functions)
    out, lse = flex(q, k, v, mask_mod, block=16) flex_attention in eager mode (on a CPU: the unfused formula)
    computed_tiles(block_mask)                   (full, partial) tiles the block mask lets a kernel compute
    tile_grid(mask_mod, T, block)                (T/block, T/block): SKIP, PARTIAL or FULL per tile (one sequence)
    with_sink(out, lse, sink)                    gpt-oss's learned sink (lesson 15) from FlexAttention's L

FlexAttention (torch.nn.attention.flex_attention, PyTorch 2.5+) takes attention's pattern as two small functions
of the indices instead of a T x T tensor: `mask_mod(b, h, q_idx, kv_idx) -> bool` says which pairs exist, and
`create_block_mask` evaluates it once per tile to find the tiles with no visible pair (skipped, as this lesson's
causal kernel skips the tiles above the diagonal) and those where every pair is visible (no mask needed);
`score_mod(score, b, h, q_idx, kv_idx) -> score` changes each score (a bias, a soft cap, -inf) but cannot skip a tile.
Under `torch.compile` the two are fused into one Triton kernel; called without it (eager mode), FlexAttention
computes the formula with the whole T x T scores, slowly but exactly: that is what these functions are tested in.
"""
import warnings

import torch

from .attention_sinks import keep_sinks_and_window
from .local_attention import local_causal_mask
from .masks import causal_mask, padding_mask, sliding_window_mask

__all__ = ["causal", "padding", "sliding_window", "local_layer", "sinks_and_window", "documents", "causal_score",
           "dense", "COURSE_MASKS", "flex", "block_mask", "computed_tiles", "tile_grid", "with_sink"]


def causal(b, h, q_idx, kv_idx):
    """Query t sees keys j <= t (course_utils.masks.causal_mask)."""
    return kv_idx <= q_idx


def padding(lengths):
    """Keys at positions >= lengths[b] hidden (course_utils.masks.padding_mask of right-padded sequences)."""
    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx < lengths[b]
    return mask_mod


def sliding_window(window):
    """Query t sees keys t - window + 1 .. t: `window` keys, itself included (sliding_window_mask(T, window - 1);
    Hugging Face's `sliding_window` counts the same way; Mistral's paper and FlashAttention's window_size=(W, 0)
    count W positions back, W + 1 keys)."""
    if window < 1:
        raise ValueError(f"window must be >= 1 (the query sees itself), got {window}")

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window)
    return mask_mod


local_layer = sliding_window          # lesson 15's local layer: course_utils.local_attention.local_causal_mask


def sinks_and_window(sinks, window):
    """Lesson 14's cache as a mask: query t sees keys j < sinks, the `window` keys before it, and itself."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & ((kv_idx < sinks) | (q_idx - kv_idx <= window))
    return mask_mod


def documents(doc_ids):
    """doc_ids (B, T): the document of each position of a packed sequence; query t sees keys j <= t of its own."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (doc_ids[b, q_idx] == doc_ids[b, kv_idx]) & (kv_idx <= q_idx)
    return mask_mod


def causal_score(score, b, h, q_idx, kv_idx):
    """The causal mask as a score_mod: every tile is computed, the hidden scores set to -inf."""
    return torch.where(kv_idx <= q_idx, score, torch.full_like(score, float("-inf")))


def dense(mask_mod, B, H, T):
    """The (B, H, T, T) bool mask that `mask_mod` describes, evaluated at every pair (what FlexAttention avoids)."""
    b, h, q, kv = torch.meshgrid(torch.arange(B), torch.arange(H), torch.arange(T), torch.arange(T), indexing="ij")
    return mask_mod(b, h, q, kv)


def _streaming_mask(T, sinks, window):
    """Lesson 14's cache, query by query: the positions keep_sinks_and_window keeps of those before t, and t."""
    keep = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        before = torch.arange(t, dtype=torch.float32)[:, None]
        kept, _ = keep_sinks_and_window(before, before, sinks, window)
        keep[t, kept[:, 0].long()] = True
        keep[t, t] = True
    return keep


def _course_masks(B=2, T=40, window=8, sinks=2):
    lengths = torch.tensor([T, T - 13])
    tokens = torch.where(torch.arange(T)[None, :] < lengths[:, None], 1, 0)           # right-padded with id 0
    doc_ids = torch.tensor([[0] * 12 + [1] * 20 + [2] * (T - 32), [0] * 25 + [1] * (T - 25)])
    return {
        "causal": (causal, causal_mask(T)),
        "padding": (padding(lengths), padding_mask(tokens, 0)),
        "sliding window": (sliding_window(window), sliding_window_mask(T, window - 1)),
        "local layer (lesson 15)": (local_layer(window), local_causal_mask(T, window)),
        "sinks + window (lesson 14)": (sinks_and_window(sinks, window), _streaming_mask(T, sinks, window)),
        "packed documents": (documents(doc_ids),
                             causal_mask(T) & (doc_ids[:, :, None] == doc_ids[:, None, :])[:, None]),
    }


COURSE_MASKS = _course_masks()        # B = 2, T = 40: the shapes the lesson and the tests use


def block_mask(mask_mod, B, H, T, block=16):
    """FlexAttention's BlockMask of `mask_mod` on a CPU, with tiles of block x block."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(mask_mod, B, H, T, T, device="cpu", BLOCK_SIZE=block)


def flex(q, k, v, mask_mod=None, score_mod=None, block=16):
    """(out, lse) of flex_attention in eager mode (the warning that eager mode is unfused silenced: on a CPU this
    lesson wants its exact values, not its speed). q, k, v (B, H, T, d)."""
    from torch.nn.attention import flex_attention as fa

    B, H, T = q.shape[0], q.shape[1], q.shape[-2]
    mask = None if mask_mod is None else block_mask(mask_mod, B, H, T, block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(fa, "AuxRequest"):
            out, aux = fa.flex_attention(q, k, v, score_mod=score_mod, block_mask=mask,
                                         return_aux=fa.AuxRequest(lse=True))
            return out, aux.lse
        return fa.flex_attention(q, k, v, score_mod=score_mod, block_mask=mask, return_lse=True)


def computed_tiles(mask):
    """(full, partial): the tiles a BlockMask lets a kernel compute, summed over batch and heads; full tiles need no
    element-wise mask, partial ones do (efficient_attention.block_pattern's FULL and PARTIAL)."""
    full = int(mask.full_kv_num_blocks.sum()) if mask.full_kv_num_blocks is not None else 0
    return full, int(mask.kv_num_blocks.sum())


def tile_grid(mask_mod, T, block=16, b=0, h=0):
    """(ceil(T/block), ceil(T/block)) ints, efficient_attention's SKIP (0) / PARTIAL (1) / FULL (2) per tile of sequence
    b, head h: the tiles with no visible pair, some, all (positions past T count as hidden, as FlexAttention counts)."""
    n = -(-T // block)
    visible = torch.zeros(n * block, n * block, dtype=torch.bool)
    visible[:T, :T] = dense(mask_mod, b + 1, h + 1, T)[b, h]
    tiles = visible.view(n, block, n, block).permute(0, 2, 1, 3).reshape(n, n, -1)
    return torch.where(tiles.all(-1), 2, torch.where(tiles.any(-1), 1, 0))


def with_sink(out, lse, sink):
    """gpt-oss's learned sink (course_utils.local_attention.attention_with_sink): one logit s_h per head in the
    softmax's denominator scales each output by e^L / (e^L + e^s) = sigmoid(L - s_h). out (B, H, T, d), lse
    (B, H, T), sink (H,)."""
    return out * torch.sigmoid(lse - sink.view(1, -1, 1).to(lse.dtype))[..., None]
