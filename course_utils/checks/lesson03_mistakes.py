"""Lesson 03's typical slips that its checks name beyond a listed value: the crashes of a slip (an index one past
the last position, W_a not transposed or split at the wrong column), named by their PyTorch message; the scores
of one sequence moved by another sequence's inputs (a repeat or a view that mixes the batch); the values of a
few slips (the two directions' features interleaved, the backward states reversed, another nonlinearity than
tanh, a softmax along another axis, attention read with the new decoder state); a mask reshaped to the scores'
shape, named by its crash; a context vector whose features mix (h reshaped instead of transposed)."""

import torch
import torch.nn.functional as F

from .core import ExerciseError
from .evaluation import Evaluation, call_naming  # noqa: F401 - lesson03's checks import it from here
from .inputs import randn

# --- bidirectional_states -------------------------------------------------------------------------------------

def index_errors(S):
    """An index equal to S, one past the last position: a sequence's last real token taken at `lengths`."""
    def past_the_end(match):
        if int(match[1]) == int(match[2]) == S:
            return ("an index is one past the last position (S, the longest sequence's length): a sequence of n "
                    "real tokens ends at position n - 1 (positions count from 0), so take the forward final state "
                    "at lengths - 1, h_fwd[torch.arange(B), lengths - 1]")
        return None
    return [(r"index (\d+) is out of bounds for dimension \d+ with size (\d+)", past_the_end)]


def reversed_within(x, lengths):
    """x (B, S, d) with each sequence's first `length` positions in reverse order (the padding left in place)."""
    out = x.clone()
    for b, n in enumerate(lengths.tolist()):
        out[b, :n] = x[b, :n].flip(0)
    return out


def h_mistakes(h_fwd, h_bwd, lengths):
    """The values of the slips that put the right states in the wrong places of h."""
    B, S, d = h_fwd.shape
    concatenate = "concatenate them along the features: torch.cat([h_fwd, h_bwd], dim=-1)"
    reversed_ = ("the backward states are reversed along the positions: h_bwd already holds the backward state of "
                 "position i at index i (it has read tokens n..i), so h_i = [h_fwd[:, i]; h_bwd[:, i]]: "
                 "concatenate h_bwd as it is, without flipping it")
    return {
        f"the features of the two directions are interleaved (stack on a new last axis, then reshape): h_i must "
        f"hold the d forward features first, then the d backward ones; {concatenate}":
            torch.stack([h_fwd, h_bwd], -1).reshape(B, S, 2 * d),
        f"the features of the two directions are interleaved, backward first (stack on a new last axis, then "
        f"reshape): h_i must hold the d forward features first, then the d backward ones; {concatenate}":
            torch.stack([h_bwd, h_fwd], -1).reshape(B, S, 2 * d),
        reversed_: torch.cat([h_fwd, h_bwd.flip(1)], -1),
        reversed_ + " (nor its real tokens)": torch.cat([h_fwd, reversed_within(h_bwd, lengths)], -1),
        "the forward states are reversed along the positions: h_fwd holds the forward state of position i at "
        "index i, concatenate it as it is, without flipping it": torch.cat([h_fwd.flip(1), h_bwd], -1),
    }


# --- additive_score -------------------------------------------------------------------------------------------

def matmul_errors(d_s, d_h, d_a):
    """W_a multiplied without its transpose; W_a split into blocks at d_h instead of d_s."""
    def named(match):
        rows1, cols1, rows2, cols2 = (int(n) for n in match.groups())
        if (cols1, rows2, cols2) == (d_s + d_h, d_a, d_s + d_h):
            return ("W_a is not transposed: W_a has shape (d_a, d_s + d_h) and multiplies the column [s; h_i] "
                    "from the left; with every [s; h_i] a row of s_h (B, T, d_s + d_h), that is s_h @ W_a.T")
        if d_s != d_h and cols2 == d_a and {cols1, rows2} == {d_s, d_h}:
            return ("W_a is split at the wrong column: W_a [s; h_i] = W_a[:, :d_s] s + W_a[:, d_s:] h_i, its "
                    "first d_s columns multiply s (d_s = s.shape[-1]) and the other d_h columns multiply h_i")
        return None
    return [(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", named)]


NONLINEARITIES = {"relu": torch.relu, "leaky_relu": F.leaky_relu, "sigmoid": torch.sigmoid, "gelu": F.gelu,
                  "silu": F.silu, "elu": F.elu, "softplus": F.softplus, "softsign": F.softsign,
                  "hardtanh": F.hardtanh}


def other_nonlinearities(pre, v_a):
    """The score with another activation than tanh on pre = W_a [s; h_i] (B, T, d_a), for each usual one."""
    return {f"the nonlinearity is {name} instead of tanh: e_i = v_a^T tanh(W_a [s; h_i]), use torch.tanh":
            f(pre) @ v_a for name, f in NONLINEARITIES.items()}


def mixes_sequences(ev: Evaluation, answer, s, h, W_a, v_a):
    """A symptom when the scores of one sequence change with another sequence's s or h (or None)."""
    if s.shape[0] < 2:
        return None
    s_moved, h_moved = s.clone(), h.clone()
    s_moved[-1] += 1.0                                      # only the last sequence's s (or h) changes
    h_moved[-1] += 1.0
    try:
        e = ev.call(answer, s, h, W_a, v_a)
        for name, args in (("s", (s_moved, h)), ("h", (s, h_moved))):
            moved = ev.call(answer, *args, W_a, v_a)
            if not torch.allclose(torch.as_tensor(moved)[:-1], torch.as_tensor(e)[:-1], atol=1e-5):
                how = ("s is repeated so that the rows of the batch mix (e.g. s.repeat(T, 1).view(B, T, d_s) puts "
                       "the B states one after another T times); give each sequence its own state at every "
                       "position, s[:, None, :].expand(B, T, d_s)") if name == "s" else (
                       "a reshape or view mixes the sequences of the batch; keep h as (B, T, d_h) and work on its "
                       "last axis")
                return f"the scores of one sequence change when another sequence's {name} changes: {how}"
    except (ExerciseError, RuntimeError, TypeError, ValueError):
        return None
    return None


# --- masked_softmax -------------------------------------------------------------------------------------------

OVERFLOW = ("the weights are NaN or inf for large scores (around 100): exp overflows in float32 above about 88; "
            "subtract each row's maximum before exp (softmax(e) = softmax(e - max e)), or use torch.softmax")
UNDERFLOW = ("a row's weights are all 0 for very negative scores (around -120): exp underflows to 0 in float32; "
             "subtract each row's maximum before exp (softmax(e) = softmax(e - max e)), or use torch.softmax")


def other_axes(scores, mask):
    """The masked softmax taken along an axis other than the last, for each such axis."""
    low = torch.finfo(scores.dtype).min
    return {f"softmax over axis {k} instead of the last one: normalise over the source positions, dim=-1 "
            f"(for scores of more than 2 axes, dim={k} is not the last)":
            torch.softmax(scores.masked_fill(~mask, low), dim=k) * mask for k in range(scores.dim() - 1)}


def mask_shape_errors(shape, mask_shape):
    """A broadcastable mask (fewer or size-1 axes) reshaped, viewed or used as a boolean index of the scores."""
    if tuple(shape) == tuple(mask_shape):
        return []
    size = 1
    for n in mask_shape:
        size *= n
    message = (f"the mask has shape {tuple(mask_shape)}, broadcastable to the scores' {tuple(shape)} but not the "
               "same shape: do not reshape or view it to the scores' shape, nor index the scores with it; use "
               "operations that broadcast, scores.masked_fill(~mask, ...) or torch.where(mask, ...) (or "
               "mask.expand_as(scores))")
    shape_text = ", ".join(str(n) for n in shape)

    def reshaped(match):
        return message if match[1] == shape_text and int(match[2]) == size else None
    return [(r"shape '\[([\d, ]+)\]' is invalid for input of size (\d+)", reshaped),
            (r"The shape of the mask \[[\d, ]+\] at index \d+ does not match the shape of the indexed tensor",
             message)]


def large_scores(g, shape):
    """Scores around +100 in the first rows (exp overflows) and around -120 in the last (exp underflows)."""
    scores = randn(g, *shape, scale=3.0)
    scores[..., : shape[-2] - 1, :] += 100.0
    scores[..., shape[-2] - 1, :] -= 120.0
    return scores


# --- context_vector -------------------------------------------------------------------------------------------

def mixes_features(ev: Evaluation, answer, weights, h):
    """A symptom when changing feature 0 of h changes the other features of c (or None)."""
    h_moved = h.clone()
    h_moved[..., 0] += 1.0
    try:
        c, moved = (torch.as_tensor(ev.call(answer, weights, x)) for x in (h, h_moved))
        if c.shape != moved.shape or c.shape[-1] != h.shape[-1] or torch.allclose(moved[..., 1:], c[..., 1:],
                                                                                    atol=1e-5):
            return None
    except (ExerciseError, RuntimeError, TypeError, ValueError):
        return None
    return ("c's features are mixed: changing feature 0 of h changes the other features of c (h reshaped or viewed "
            "to (B, d_h, T) instead of transposed? reshape keeps the memory order and scrambles positions and "
            "features); use h.transpose(1, 2) @ weights[..., None], or (weights[:, None, :] @ h)[:, 0]")


# --- attention_decoder_step -----------------------------------------------------------------------------------

LUONG = ("attention is read with the NEW state s_t (after the GRU, Luong's order): Bahdanau's decoder reads it with "
         "the previous state, c_t, alpha_t = decoder.attention(s_prev, h, mask), BEFORE the GRU, and uses that one "
         "c_t in the GRU input and in the output layer; return that alpha_t")
