"""The known mistakes of lesson 11's exercise 1, `self_attention_2d` (SAGAN's attention over the pixels), each with
the wrong answer that shows it.

`wrong(...)` is the attention written with one step changed (every default is the right step); each registry entry's
`shows` is one such answer, and the check computes a mistake's weights or output by running it (M.variants)."""
import math

import torch

from ...vision import conv1x1
from ..core import Mistake, Mistakes
from ..torch_errors import BMM, MATMUL, RESHAPE
from . import attention_slips as slips
from .float64 import dtype_changed, dtype_mixed


def _pixels(y):
    """(B, c, H, W) -> (B, N, c), one row per pixel, numbered row by row (j = r·W + c)."""
    return y.flatten(2).transpose(1, 2)


def _image(read, B, H, W):
    """(B, N, c) -> (B, c, H, W)."""
    return read.transpose(1, 2).reshape(B, -1, H, W)


def _softmax(scores, sizes):
    return torch.softmax(scores, dim=-1)


def wrong(pixels=_pixels, queries="g", keys="f", values="h", divisor=lambda s: math.sqrt(s["d_key"]), keys_T=None,
          weights=_softmax, returned=None, read=None, image=_image, output=None, detach=False):
    """SAGAN's attention with one step written wrong.

    pixels(y): (B, c, H, W) -> (B, N, c); queries, keys, values: the matrix each is made with ("f", "g", "h", or "x":
    x itself); divisor(sizes): what q·k is divided by (sizes: d_key, C_bar, N, C); keys_T(k): kᵀ; weights(scores,
    sizes): the weights; returned(weights): the weights returned; read(weights, v, scores): the read-out (B, N, c);
    image(read, B, H, W): back to a map; output(map, x, W_v): o; detach: the weights cut from the graph."""
    def attention(x, W_f, W_g, W_h, W_v):
        B, C, H, W = x.shape
        matrix = {"f": W_f, "g": W_g, "h": W_h}
        q, k, v = (pixels(x if m == "x" else conv1x1(x, matrix[m])) for m in (queries, keys, values))
        sizes = dict(d_key=W_f.shape[0], C_bar=W_h.shape[0], N=H * W, C=C)
        scores = q @ (k.transpose(1, 2) if keys_T is None else keys_T(k)) / divisor(sizes)     # (B, N, N)
        w = weights(scores, sizes)
        mixing = w.detach() if detach else w
        r = mixing @ v if read is None else read(mixing, v, scores)                             # (B, N, c)
        o = image(r, B, H, W)
        return (conv1x1(o, W_v) if output is None else output(o, x, W_v)), (w if returned is None else returned(w))
    return attention


def _column_major(y):
    """(B, c, H, W) -> (B, N, c) with the pixels numbered column by column (j = c·H + r)."""
    return y.transpose(2, 3).flatten(2).transpose(1, 2)


def _straight(y):
    """(B, c, H, W) reshaped straight to (B, N, c), without moving the channels last."""
    return y.reshape(y.shape[0], -1, y.shape[1])


def _as_is(o, x, W_v):
    return o


def _float32(x, W_f, W_g, W_h, W_v):
    """The right attention, computed in float32 whatever the inputs' dtype."""
    return wrong()(*(t.float() for t in (x, W_f, W_g, W_h, W_v)))


_SCORES = "each query pixel's scores"
M = Mistakes(
    # --- the weights (B, N, N) ---
    Mistake("scaled_after_softmax", "the weights are divided by √d_key AFTER the softmax, so a row sums to 1/√d_key: "
            "the scores are scaled before it", hint="torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d_key), dim=-1)",
            shows=wrong(divisor=lambda s: 1.0, weights=lambda e, s: torch.softmax(e, -1) / math.sqrt(s["d_key"]))),
    Mistake("weights_transposed", "the weights are transposed: row j must be query pixel j's distribution over the "
            "keys i", hint="return the weights as the softmax gives them, (B, N_query, N_key)",
            shows=wrong(returned=lambda w: w.transpose(1, 2))),
    slips.softmax_over_queries(shows=wrong(weights=lambda e, s: torch.softmax(e, dim=1))),
    slips.softmax_batch(shows=wrong(weights=lambda e, s: torch.softmax(e, dim=0))),
    Mistake("queries_keys_swapped", "queries and keys are swapped: the queries are g(x) = W_g x and the keys f(x) = "
            "W_f x", hint="k from W_f, q from W_g; scores = q @ k.transpose(1, 2)", shows=wrong(queries="f", keys="g")),
    Mistake("queries_from_W_f", "the queries and the keys are both made with W_f: the queries are g(x) = W_g x",
            hint="q = conv1x1(x, W_g)", shows=wrong(queries="f")),
    Mistake("keys_from_W_g", "the queries and the keys are both made with W_g: the keys are f(x) = W_f x",
            hint="k = conv1x1(x, W_f)", shows=wrong(keys="g")),
    slips.by_max(shows=wrong(weights=lambda e, s: slips.divided_by_max(e))),
    Mistake("scale_multiplied", "the scores are MULTIPLIED by √d_key, where they must be divided by it",
            hint="q @ k.transpose(1, 2) / math.sqrt(d_key)", shows=wrong(divisor=lambda s: 1 / math.sqrt(s["d_key"]))),
    Mistake("diagonal_masked", "the diagonal is masked: a pixel may attend to itself too (self-attention over all N "
            "pixels, no mask)", shows=wrong(weights=lambda e, s: torch.softmax(
                e.masked_fill(torch.eye(e.shape[-1], dtype=torch.bool), float("-inf")), -1))),
    Mistake("softmax_over_all_pairs", "one softmax runs over all N·N pairs of an image: it runs over " + _SCORES
            + " (a row), so that every row sums to 1", hint="torch.softmax(scores, dim=-1)",
            shows=wrong(weights=lambda e, s: torch.softmax(e.flatten(1), -1).view_as(e))),
    Mistake("max_over_queries", "the softmax's stabilising maximum is taken over the queries (down a column), not over "
            + _SCORES + ": one number per row leaves the softmax unchanged, one per column does not",
            hint="scores - scores.amax(dim=-1, keepdim=True)",
            shows=wrong(weights=lambda e, s: torch.exp(e - e.amax(1, keepdim=True)) / torch.exp(
                e - e.amax(1, keepdim=True)).sum(-1, keepdim=True))),
    Mistake("exp_not_normalised", "the weights are exp(scores), not normalised: they are divided by their sum over "
            "the keys (the softmax)", hint="torch.softmax(scores, dim=-1)",
            shows=wrong(weights=lambda e, s: torch.exp(e))),
    Mistake("scores_as_weights", "the weights are the scores themselves: the weights are their softmax over the keys",
            hint="torch.softmax(scores, dim=-1)", shows=wrong(weights=lambda e, s: e)),
    slips.no_scale(shows=wrong(divisor=lambda s: 1.0)),
    Mistake("pixels_column_major", "the pixels are numbered column by column (pixel (r, c) as j = c·H + r, as after "
            "swapping H and W before flattening): they are numbered row by row, j = r·W + c",
            hint="y.flatten(2).transpose(1, 2) on the (B, C̄, H, W) map as it is", shows=wrong(pixels=_column_major)),
    Mistake("pixels_scrambled", "the pixels' vectors are scrambled: the (B, C̄, H, W) map was reshaped straight to "
            "(B, N, C̄), which cuts each channel's N values into rows instead of gathering the channels of one pixel",
            hint="flatten the pixels first, (B, C̄, N), then transpose to (B, N, C̄): y.flatten(2).transpose(1, 2)",
            shows=wrong(pixels=_straight)),
    slips.scale_by("scale_by_C_bar", "C̄", "the channels of a value", shows=wrong(divisor=lambda s: math.sqrt(
        s["C_bar"]))),
    slips.scale_by("scale_by_N", "N", "the number of pixels", shows=wrong(divisor=lambda s: math.sqrt(s["N"]))),
    slips.scale_by("scale_by_C", "C", "the channels of x", shows=wrong(divisor=lambda s: math.sqrt(s["C"]))),
    slips.scale_by_d_key(shows=wrong(divisor=lambda s: s["d_key"])),
    Mistake("scale_precedence", "the scores are divided by d_key/2, not by √d_key: a power binds before a division, "
            "so d_key to the power 1, divided by 2, is what was computed", hint="d_key ** 0.5, or math.sqrt(d_key)",
            shows=wrong(divisor=lambda s: s["d_key"] ** 1 / 2)),
    Mistake("scale_from_C", "the scores are divided by √(C/8), worked out from x's channels: the scale is √d_key, the "
            "width the keys have (W_f's rows)", hint="math.sqrt(k.size(-1)), or W_f.shape[0]",
            shows=wrong(divisor=lambda s: math.sqrt(s["C"] // 8))),
    # --- o (B, C, H, W), the weights right ---
    Mistake("read_with_scores", "o mixes the values with the SCORES: the read-out mixes them with the weights, after "
            "the softmax", hint="read = weights @ v", shows=wrong(read=lambda w, v, scores: scores @ v)),
    Mistake("no_output_map", "o has C̄ channels, not C: the output map W_v is missing (SAGAN's final form maps the "
            "read-out back to C channels)", hint="o = conv1x1(read, W_v)", shows=wrong(output=_as_is)),
    Mistake("read_scrambled", "o has the right shape but its values are scrambled: the read-out (B, N, C̄) was "
            "reshaped to (B, C̄, H, W) without moving the channels in front first",
            hint="read.transpose(1, 2).reshape(B, -1, H, W), then W_v",
            shows=wrong(image=lambda r, B, H, W: r.reshape(B, -1, H, W))),
    Mistake("pixels_first", "o is still (B, N, C), pixels first: it is a map, (B, C, H, W)",
            hint="transpose to (B, C, N), then reshape to (B, C, H, W)",
            shows=wrong(image=lambda r, B, H, W: r, output=lambda o, x, W_v: o @ W_v.T)),
    Mistake("pixels_first_no_map", "o is still the read-out (B, N, C̄): it goes back to a map (B, C̄, H, W), then W_v "
            "maps it to C channels", hint="read.transpose(1, 2).reshape(B, -1, H, W), then conv1x1(·, W_v)",
            shows=wrong(image=lambda r, B, H, W: r, output=_as_is)),
    Mistake("read_transposed_weights", "o mixes the values with the transposed weights: pixel j's read-out sums its "
            "OWN row of weights times the values", hint="read = weights @ v",
            shows=wrong(read=lambda w, v, scores: w.transpose(1, 2) @ v)),
    Mistake("values_are_x", "o mixes x itself, not the values: the values are h(x) = W_h x, and W_v maps their "
            "mixture back to C channels", hint="v = conv1x1(x, W_h)", shows=wrong(values="x", output=_as_is)),
    Mistake("read_sides_swapped", "o has the read-out's pixels in the wrong places: the (B, C̄, N) read-out splits into "
            "H rows then W columns, not W then H", hint="reshape(B, -1, H, W)",
            shows=wrong(image=lambda r, B, H, W: r.transpose(1, 2).reshape(B, -1, W, H).transpose(2, 3))),
    Mistake("o_sides_swapped", "o has shape (B, C, W, H), its two sides swapped: the read-out splits into H rows then "
            "W columns (only a square map forgives the other order)", hint="reshape(B, -1, H, W)",
            shows=wrong(image=lambda r, B, H, W: r.transpose(1, 2).reshape(B, -1, W, H))),
    Mistake("o_includes_x", "o includes x: the attention's output is W_v's read-out alone; the residual x + γ·o is the "
            "block's (exercise 2)", hint="return conv1x1(read, W_v), weights",
            shows=wrong(output=lambda o, x, W_v: x + conv1x1(o, W_v))),
    # --- crashes ---
    Mistake("values_from_W_f", "W_v got a read-out of {d_key} channels, not C̄ = {C_bar}: the values are made with "
            "W_h (W_f and W_g make the keys and the queries)", hint="v = conv1x1(x, W_h)", shows=wrong(values="f")),
    Mistake("weight_transposed", "a weight matrix is transposed: a 1×1 convolution takes its matrix as given, (C_out, "
            "C_in): W_f, W_g are (d_key, C), W_h is (C̄, C), W_v is (C, C̄)", hint="conv1x1(x, W_f), with no .T",
            shows=wrong(output=lambda o, x, W_v: conv1x1(o, W_v.T))),
    Mistake("conv_shapes", "a 1×1 convolution got a matrix of shape {got} for a map of {channels} channels: each takes "
            "(C_out, C_in) with C_in the map's channels; x has C, the read-out C̄; W_f, W_g are (d_key, C), W_h (C̄, "
            "C), W_v (C, C̄)", hint="conv1x1(x, W_f), conv1x1(x, W_g), conv1x1(x, W_h), then conv1x1(read, W_v)",
            shows=wrong(output=lambda o, x, W_v: conv1x1(x, W_v))),
    Mistake("read_reshaped_with_C", "the read-out was reshaped with C = {C} channels: it has C̄ = {C_bar} per pixel, "
            "so it becomes (B, C̄, H, W), then W_v maps C̄ to C", hint="read.transpose(1, 2).reshape(B, -1, H, W)",
            shows=lambda x, *W: wrong(image=lambda r, B, H, w: r.transpose(1, 2).reshape(B, x.shape[1], H, w))(
                x, *W)),
    slips.k_T_3d(shows=wrong(keys_T=lambda k: k.T)),
    Mistake("product_shapes", "a matrix product's shapes do not fit: the scores are q kᵀ over the pixels, (B, N, "
            "d_key) times (B, d_key, N), and the read-out is the weights times v (B, N, C̄)",
            hint="q, k, v as y.flatten(2).transpose(1, 2); scores = q @ k.transpose(1, 2)",
            shows=wrong(keys_T=lambda k: k)),
    dtype_mixed(shows=wrong(weights=lambda e, s: torch.softmax(e, -1, dtype=torch.float32))),
    # --- float64 and gradients ---
    dtype_changed(shows=_float32),
    Mistake("grad_cut", "no gradient reaches {names} through o: the weights left the graph, so training could not "
            "learn the keys and queries", hint="no .detach(), torch.no_grad(), .item() or NumPy between the scores "
            "and the read-out", shows=wrong(detach=True)),
)
WEIGHTS = [M[key] for key in ("scaled_after_softmax", "weights_transposed", "softmax_over_queries", "softmax_batch",
                              "queries_keys_swapped", "queries_from_W_f", "keys_from_W_g", "by_max", "scale_multiplied",
                              "diagonal_masked", "softmax_over_all_pairs", "max_over_queries", "exp_not_normalised",
                              "scores_as_weights", "no_scale", "pixels_column_major", "pixels_scrambled",
                              "scale_by_C_bar", "scale_by_N", "scale_by_C", "scale_by_d_key", "scale_precedence",
                              "scale_from_C")]
OUTPUTS = [M[key] for key in ("read_with_scores", "no_output_map", "read_scrambled", "pixels_first",
                              "pixels_first_no_map", "read_transposed_weights", "values_are_x", "read_sides_swapped",
                              "o_sides_swapped", "o_includes_x")]


def crashes(B, C, d_key, C_bar):
    """The crashes of the typical slips, named (for crashes.call), on x with C channels, d_key, C̄."""
    def conv(match):
        channels, rows, cols = int(match["channels"]), int(match["rows"]), int(match["cols"])
        if channels == d_key != C_bar and (rows, cols) == (C, C_bar):
            return M.values_from_W_f.at(d_key=d_key, C_bar=C_bar)
        if rows == channels and (rows, cols) != (C, C_bar):
            return M.weight_transposed                      # a (C_in, C_out) matrix: the transpose of one that fits
        return M.conv_shapes.at(got=(rows, cols), channels=channels)

    def reshape(match):
        shape = [int(s) for s in match["shape"].split(",") if s.strip()]
        return M.read_reshaped_with_C.at(C=C, C_bar=C_bar) if len(shape) == 4 and shape[1] == C != C_bar else None
    return [
        slips.transposed_batch(B, d_key, M),
        (CONV1X1, conv),
        (RESHAPE, reshape),
        (BMM, M.product_shapes),
        (MATMUL, M.product_shapes),
    ]


# the course's conv1x1 (course_utils/vision.py) on a matrix that does not fit x's channels
CONV1X1 = r"W should have shape \(C_out, (?P<channels>\d+)\) for x with \d+ channels, got shape \((?P<rows>\d+), " \
          r"(?P<cols>\d+)\)"
