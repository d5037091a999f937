"""The known mistakes of lesson 11's exercise 4, `dense_block` (SNAIL's gated causal dilated convolution), each with
the wrong answer that shows it.

`wrong(...)` is the block written with one thing changed (every default is the right choice); each registry entry's
`shows` is one such answer, and the check computes a mistake's output by running it (M.variants)."""
import torch
import torch.nn.functional as F

from ..core import Mistake, Mistakes
from .float64 import dtype_changed, dtype_mixed


def delayed(x, d):
    """x_(t−d) along the steps (B, T, C), zeros where t − d is outside 0..T−1 (d < 0: the future)."""
    T = x.shape[1]
    return F.pad(x, (0, 0, d, 0))[:, :T] if d >= 0 else F.pad(x, (0, 0, 0, -d))[:, -d:]


def _unzeroed(x, d):
    """A copy of x shifted by d whose first d steps were left as x."""
    past = x.clone()
    past[:, d:] = x[:, :-d]
    return past


def _conv1d(x, W, d, padding):
    """F.conv1d on (B, d_in, T) with the kernel of the taps (tap 0 meets x_(t−d)), padded `padding` = (left, right)."""
    kernel = torch.stack([W[1].T, W[0].T], dim=-1)                   # (filters, d_in, 2)
    return F.conv1d(F.pad(x.transpose(1, 2), padding), kernel, dilation=d).transpose(1, 2)


def wrong(past=delayed, present=True, taps=(0, 1), act_f=torch.tanh, act_g=torch.sigmoid, combine="product",
          gate_from_W_f=False, past_tap=None, new=None, out="x, new"):
    """SAGAN's dense block with one thing written wrong.

    past(x, d): x_(t−d) (None: no past tap); present: the tap on x_t used; taps: the indices of W applied to x_t and
    x_(t−d); act_f, act_g: the filter's and the gate's activations; combine: "product" or "sum"; gate_from_W_f: the
    gate made with W_f; past_tap(W_f, W_g): the past taps (W_f[1], W_g[1]) used instead; new(x, past, W_f, W_g, d):
    the new features written otherwise; out: what is returned ("x, new", "new", "new, x", "past, new", "dim 1")."""
    def dense_block(x, W_f, W_g, dilation):
        W_g_ = W_f if gate_from_W_f else W_g
        xp = None if past is None else past(x, dilation)                # (B, T, d_in)
        taps_past = (W_f[taps[1]], W_g_[taps[1]]) if past_tap is None else past_tap(W_f, W_g_)

        def conv(W, W_past):
            return (x @ W[taps[0]] if present else 0) + (xp @ W_past if xp is not None else 0)
        if new is not None:
            features = new(x, xp, W_f, W_g_, dilation)
        else:
            f, g = act_f(conv(W_f, taps_past[0])), act_g(conv(W_g_, taps_past[1]))
            features = f + g if combine == "sum" else f * g
        return {"x, new": lambda: torch.cat([x, features], -1), "new": lambda: features,
                "new, x": lambda: torch.cat([features, x], -1), "past, new": lambda: torch.cat([xp, features], -1),
                "dim 1": lambda: torch.cat([x, features], 1)}[out]()
    return dense_block


def _interleaved(x, past, W_f, W_g, d):
    """[x_t, x_(t−d)] times the taps stacked feature by feature (feature, tap), not tap by tap."""
    both = torch.cat([x, past], -1)                                     # (B, T, 2·d_in)
    stacked = [W.transpose(0, 1).reshape(2 * W.shape[1], -1) for W in (W_f, W_g)]
    return torch.tanh(both @ stacked[0]) * torch.sigmoid(both @ stacked[1])


def conv1d_block(padding, keep=None, concat=True, transpose=True):
    """The block written with F.conv1d: padding(d) = (left, right); keep(out, T): the steps kept."""
    def dense_block(x, W_f, W_g, dilation):
        T = x.shape[1]
        if not transpose:
            kernel = torch.stack([W_f[1].T, W_f[0].T], dim=-1)
            return F.conv1d(x, kernel, dilation=dilation)             # x (B, T, d_in) read as (B, T channels, d_in)
        new = torch.tanh(_conv1d(x, W_f, dilation, padding(dilation))) * torch.sigmoid(
            _conv1d(x, W_g, dilation, padding(dilation)))
        new = new if keep is None else keep(new, T)
        return torch.cat([x, new], -1) if concat else new
    return dense_block


def _float32_past(x, d):
    """x_(t−d) built in torch.zeros: float32 whatever x's dtype."""
    past = torch.zeros(x.shape)
    past[:, d:] = x[:, :-d].float()
    return past


def _sliced_past(x, d):
    """d zeros then x[:, :T − d]: right for d < T; for d > T, T − d counts from the end."""
    return torch.cat([x.new_zeros(x.shape[0], d, x.shape[2]), x[:, :x.shape[1] - d]], 1)


_TAPS = "W[0] multiplies the present x_t and W[1] the past x_(t−d)"
_PAD = "F.pad(x, (0, 0, d, 0))[:, :T]"
_NEW = "the new features are tanh(filter) ⊙ σ(gate)"
_OFF = ("the past tap is off by one: step t is mixed with x_(t−d{sign}1), not x_(t−d); the delay is exactly d steps, d "
        "zeros on the left")
M = Mistakes(
    # --- the values ---
    Mistake("dilation_ignored", "the dilation is ignored: step t is mixed with x_(t−1), not x_(t−d)", hint=_PAD,
            shows=wrong(past=lambda x, d: delayed(x, 1))),
    Mistake("past_is_x", "the delayed sequence is x itself, not x_(t−d): after padding d zeros on the left, the FIRST "
            "T steps are the delayed sequence; the last T are x again", hint=_PAD,
            shows=wrong(past=lambda x, d: F.pad(x, (0, 0, d, 0))[:, -x.shape[1]:])),
    Mistake("first_steps_not_zeroed", "the first d steps of x_(t−d) are x_t itself, not 0: a copy of x shifted by d "
            "keeps x_t at steps 0..d−1, where x_(t−d) lies before the start and is 0",
            hint="past[:, :d] = 0 too, or " + _PAD, shows=wrong(past=_unzeroed)),
    Mistake("delay_short", _OFF.format(sign="+"), hint=_PAD, shows=wrong(past=lambda x, d: delayed(x, d - 1))),
    Mistake("delay_long", _OFF.format(sign="−"), hint=_PAD, shows=wrong(past=lambda x, d: delayed(x, d + 1))),
    Mistake("taps_swapped", "the kernel's two taps are swapped: " + _TAPS,
            hint="x @ W[0] + x_past @ W[1]; with F.conv1d (tap 0 meets the older input) the kernel is "
            "torch.stack([W[1].T, W[0].T], -1)", shows=wrong(taps=(1, 0))),
    Mistake("activations_swapped", "tanh and σ are swapped (or W_f and W_g): the filter W_f goes through tanh, the "
            "gate W_g through σ", shows=wrong(act_f=torch.sigmoid, act_g=torch.tanh)),
    Mistake("no_gate", "the gate is missing: " + _NEW + ", elementwise", shows=wrong(act_g=lambda z: 1.0)),
    Mistake("gate_tanh", "the gate goes through tanh: the gate W_g goes through σ (values in 0..1, how much of the "
            "filter passes)", shows=wrong(act_g=torch.tanh)),
    Mistake("filter_sigmoid", "the filter goes through σ: the filter W_f goes through tanh (values in −1..1)",
            shows=wrong(act_f=torch.sigmoid)),
    Mistake("filter_relu", "the filter goes through ReLU: WaveNet's gate is tanh(filter) ⊙ σ(gate)",
            shows=wrong(act_f=torch.relu)),
    Mistake("added", "tanh(filter) and σ(gate) are added: the gate MULTIPLIES the filter, elementwise (⊙)",
            shows=wrong(combine="sum")),
    Mistake("no_present", "the present step is missing: each convolution is W^(0) x_t + W^(1) x_(t−d), both taps",
            shows=wrong(present=False)),
    Mistake("no_past", "the past step is missing: each convolution is W^(0) x_t + W^(1) x_(t−d), both taps",
            shows=wrong(past=None)),
    Mistake("no_concat", "the output is the new features alone: it is [x, new features] side by side on the last "
            "axis, (B, T, d_in + filters)", hint="torch.cat([x, new], dim=-1)", shows=wrong(out="new")),
    Mistake("concat_order", "x and the new features are concatenated in the wrong order: x first",
            hint="torch.cat([x, new], dim=-1)", shows=wrong(out="new, x")),
    Mistake("concat_past", "the block's output starts with the delayed x_(t−d): it starts with x itself",
            hint="torch.cat([x, new], dim=-1)", shows=wrong(out="past, new")),
    Mistake("gate_from_W_f", "the gate uses W_f: the gate's convolution has weights of its own, σ(W_g^(0) x_t + "
            "W_g^(1) x_(t−d))", shows=wrong(gate_from_W_f=True)),
    Mistake("one_tap", "one tap serves both steps, W[0] (on x_t and on x_(t−d)): " + _TAPS, shows=wrong(taps=(0, 0))),
    Mistake("tanh_outside", "tanh wraps the product, tanh(filter ⊙ σ(gate)): " + _NEW + ", tanh on the filter alone",
            shows=wrong(new=lambda x, p, W_f, W_g, d: torch.tanh(
                (x @ W_f[0] + p @ W_f[1]) * torch.sigmoid(x @ W_g[0] + p @ W_g[1])))),
    Mistake("sigmoid_sign", "the hand-written σ is σ(−z): σ(z) = 1 / (1 + exp(−z))", hint="torch.sigmoid(z)",
            shows=wrong(act_g=lambda z: torch.sigmoid(-z))),
    Mistake("zeroed_not_shifted", "the delayed sequence is x itself with its first d steps zeroed: x_(t−d) is x "
            "SHIFTED by d steps", hint="x_past[:, d:] = x[:, :-d], or " + _PAD,
            shows=wrong(past=lambda x, d: torch.cat([torch.zeros_like(x[:, :d]), x[:, d:]], 1))),
    Mistake("gate_raw", "σ is missing on the gate: " + _NEW + "; the gate is raw here", shows=wrong(act_g=lambda z: z)),
    Mistake("filter_raw", "tanh is missing on the filter: " + _NEW + " (a GLU computes filter ⊙ σ(gate), without the "
            "tanh)", shows=wrong(act_f=lambda z: z)),
    Mistake("gate_past_from_W_f", "the gate's past tap uses W_f[1]: the gate is σ(x_t W_g[0] + x_(t−d) W_g[1]), all "
            "from W_g", shows=wrong(past_tap=lambda W_f, W_g: (W_f[1], W_f[1]))),
    Mistake("filter_past_from_W_g", "the filter's past tap uses W_g[1]: the filter is tanh(x_t W_f[0] + x_(t−d) "
            "W_f[1]), all from W_f", shows=wrong(past_tap=lambda W_f, W_g: (W_g[1], W_g[1]))),
    Mistake("taps_interleaved", "the stacked taps are interleaved: their rows go feature by feature (x_t's feature 0, "
            "x_(t−d)'s feature 0, ...), so they no longer line up with [x_t, x_(t−d)] side by side; rows 0..d_in−1 are "
            "for x_t, the next d_in for x_(t−d)", hint="torch.cat([W[0], W[1]], dim=0) (W.reshape(2 * d_in, filters)), "
            "not W.transpose(0, 1).reshape(...)", shows=wrong(new=_interleaved)),
    Mistake("past_from_first", "the delayed sequence comes from the first sequence of the batch for every sequence: "
            "x_(t−d) is built from all of x, (B, T, d_in)", hint=_PAD,
            shows=wrong(past=lambda x, d: delayed(x[:1], d).expand_as(x))),
    Mistake("past_from_batch", "x_(t−d) is taken from another sequence of the batch, d sequences before: the delay "
            "runs along the steps (axis 1), not the batch", hint="F.pad lists the last axis first: " + _PAD,
            shows=wrong(past=lambda x, d: F.pad(x, (0, 0, 0, 0, d, 0))[:x.shape[0]])),
    # --- the future, the steps ---
    Mistake("pad_right", "the block looks into the future: step t is mixed with x_(t+d), not x_(t−d): the d zeros are "
            "padded on the right; they go on the LEFT", hint="F.pad(x, (0, 0, d, 0)) for x of shape (B, T, C)",
            shows=wrong(past=lambda x, d: delayed(x, -d))),
    Mistake("roll", "the block looks into the future: rolling x by d steps wraps the last d steps round to the start, "
            "so steps 0..d−1 see the end of the sequence; d zeros go on the left instead", hint=_PAD,
            shows=wrong(past=lambda x, d: torch.roll(x, d, dims=1))),
    Mistake("future_leak", "the output at step {s} changed when only the inputs after step {t} changed: the block "
            "looks into the future; step t mixes x_t with x_(t−d), zero when t < d, and nothing later",
            hint="pad d zeros on the LEFT only (not on the right, not on both sides)",
            shows=conv1d_block(lambda d: (d, d), keep=lambda out, T: out[:, -T:])),
    Mistake("shifted_features", "x_(t−d) is x shifted along the FEATURES, not the steps: the d zeros went in front of "
            "the features and the last ones were cut off", hint="F.pad lists the LAST axis first: F.pad(x, (d, 0)) "
            "pads the features; " + _PAD + " pads the steps",
            shows=wrong(past=lambda x, d: F.pad(x, (d, 0))[..., :x.shape[-1]])),
    Mistake("steps_dropped", "the output has {steps} steps, not T = {T}: every step t keeps its output, with x_(t−d) "
            "zero when t < d (d = {d} zeros on the left give that; a convolution without them drops d steps)",
            hint=_PAD, shows=conv1d_block(lambda d: (0, 0), concat=False)),
    Mistake("steps_added", "the output has {steps} steps, not T = {T}: one output per input step (d = {d} zeros on the "
            "left only; padding on both sides adds steps)", hint=_PAD,
            shows=conv1d_block(lambda d: (d, d), concat=False)),
    # --- crashes ---
    Mistake("concat_axis", "x and the new features are concatenated along axis {axis}: they go side by side along the "
            "LAST axis (the features); batch and steps stay as they are", hint="torch.cat([x, new], dim=-1)",
            shows=wrong(out="dim 1")),
    Mistake("concat_steps", "x and the new features could not be put side by side: they have different numbers of "
            "steps; the convolution keeps all T steps, with d = {d} zeros on the left (and only there)", hint=_PAD,
            shows=conv1d_block(lambda d: (0, 0))),
    Mistake("past_not_cut", "x_(t−d) has T + d = {Td} steps, x has T = {T}: after padding d = {d} zeros on the left, "
            "the first T steps are the delayed sequence", hint=_PAD,
            shows=wrong(past=lambda x, d: F.pad(x, (0, 0, d, 0)))),
    Mistake("padded_features", "x_(t−d) has d_in + d = {width} features instead of {d_in}: the padding went on the "
            "features, the last axis", hint="F.pad lists the last axis first: " + _PAD,
            shows=wrong(past=lambda x, d: F.pad(x, (d, 0)))),
    Mistake("taps_transposed", "a tap is used transposed: W[0] and W[1] are (d_in, filters) and multiply x_t and "
            "x_(t−d) of d_in features as they are", hint="x @ W[0], with no .T (nn.Linear's habit)",
            shows=wrong(past_tap=lambda W_f, W_g: (W_f[1].T, W_g[1].T))),
    Mistake("product_shapes", "a matrix product's shapes do not fit: each convolution is x_t W[0] + x_(t−d) W[1], with "
            "x_t and x_(t−d) of shape (B, T, d_in) and W[0], W[1] of shape (d_in, filters)",
            shows=wrong(new=lambda x, p, W_f, W_g, d: torch.tanh(x.transpose(1, 2) @ W_f[0]))),
    Mistake("conv1d_layout", "F.conv1d takes x as (B, channels, T): x (B, T, d_in) goes in transposed, and its output "
            "comes back as (B, T, filters)", hint="F.conv1d(x.transpose(1, 2), ...).transpose(1, 2)",
            shows=conv1d_block(lambda d: (d, 0), transpose=False)),
    # --- float64, a long dilation ---
    dtype_mixed(shows=wrong(past=_float32_past)),
    dtype_changed(shows=lambda x, W_f, W_g, d: wrong()(x.float(), W_f.float(), W_g.float(), d)),
    Mistake("long_dilation", "with a dilation d = {d} ≥ T = {T} (SNAIL's deepest dense blocks on short sequences), "
            "x_(t−d) is 0 at every step and your block {what}: the delayed sequence must work for any d",
            hint=_PAD + " (x[:, :T - d] counts from the end when d > T)", shows=wrong(past=_sliced_past)),
)
VALUES = [M[key] for key in (
    "dilation_ignored", "past_is_x", "first_steps_not_zeroed", "delay_short", "delay_long", "taps_swapped",
    "activations_swapped", "no_gate", "gate_tanh", "filter_sigmoid", "filter_relu", "added", "no_present", "no_past",
    "no_concat", "concat_order", "concat_past", "gate_from_W_f", "one_tap", "tanh_outside", "sigmoid_sign",
    "zeroed_not_shifted", "gate_raw", "filter_raw", "gate_past_from_W_f", "filter_past_from_W_g", "taps_interleaved",
    "past_from_first", "past_from_batch")]
FUTURE = [M.pad_right, M.roll]
