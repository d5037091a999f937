"""Lesson 08, exercise 3: the sinusoidal positional encoding, interleaved as in the paper.

    positional_encoding(max_len, d_model) -> (max_len, d_model) float32 torch tensor,
        PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))

The check draws no random input: it compares the encoding for (10, 8), (50, 16) and (3, 4) with the course's, in
float64, and names each registered slip by the encoding it gives, also where the learner's float32 rounding of large
angles (up to 10^5 when the position is multiplied) moves the values a little; then that the result is a float32
torch tensor.
"""
import functools

import numpy as np
import torch

from ... import attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, single_threaded, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained
from .crashes import float_size, naming_crashes


def _pe(max_len, d_model, form="ok", angles=False):
    """The encoding (float64) with the slip `form` (or none); with `angles`, the angle of every entry instead (its
    float32 rounding error grows with it)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None] + (1 if form == "from_one" else 0)   # (max_len, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)                                             # (d_model/2,)
    exponent = {"i": i / d_model, "double": 4 * i / d_model, "floor": 0 * i}.get(form, 2 * i / d_model)
    angle = pos * 10000.0 ** exponent if form == "times" else pos / 10000.0 ** exponent             # (max_len, d/2)
    if angles:
        first, second = angle, angle
    elif form == "column":  # every column j uses the exponent j / d_model: the cosines get (2i+1)/d_model
        first, second = torch.sin(angle), torch.cos(pos / 10000.0 ** ((2 * i + 1) / d_model))
    else:
        first, second = (torch.cos(angle), torch.sin(angle)) if form == "swapped" else (torch.sin(angle),
                                                                                        torch.cos(angle))
    if form == "concat":
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).reshape(max_len, d_model)


def _wrong(form):
    """The learner's slip `form`: the encoding in float32."""
    def positional_encoding(max_len, d_model):
        return _pe(max_len, d_model, form).float()
    return positional_encoding


FORMS = {"halves": "concat", "sin_cos_swapped": "swapped", "exponent_i": "i", "exponent_doubled": "double",
         "multiplied": "times", "from_one": "from_one", "column_exponent": "column", "same_frequency": "floor"}
_RETURNS = "it returns a float32 torch tensor, PyTorch's default dtype and that of the embeddings it is added to"
M = Mistakes(
    Mistake("halves", "sin and cos are in halves (all sines, then all cosines): this exercise wants the paper's "
            "interleaved form, sin in the even columns 2i and cos in the odd columns 2i+1",
            hint="pe[:, 0::2] = sin(angle); pe[:, 1::2] = cos(angle)", shows=_wrong("concat")),
    Mistake("sin_cos_swapped", "sin and cos are swapped: sin goes to the even columns 2i, cos to the odd columns 2i+1",
            shows=_wrong("swapped")),
    Mistake("exponent_i", "the exponent uses i instead of 2i: the frequency of columns 2i and 2i+1 is "
            "1 / 10000^(2i/d_model)", hint="torch.arange(0, d_model, 2) counts 2i", shows=_wrong("i")),
    Mistake("exponent_doubled", "the exponent is doubled, 4i/d_model: the column index stepping by 2 already IS 2i, "
            "so the exponent is that index / d_model", hint="for i in range(0, d_model, 2): exponent = i / d_model",
            shows=_wrong("double")),
    Mistake("multiplied", "the position is multiplied by 10000^(2i/d_model): it is divided by it, pos / "
            "10000^(2i/d_model) (written with exp and log: exp(-2i ln(10000) / d_model), the minus sign included)",
            hint="torch.exp(-two_i * math.log(10000.0) / d_model)", shows=_wrong("times")),
    Mistake("from_one", "the positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1)",
            hint="torch.arange(max_len)", shows=_wrong("from_one")),
    Mistake("column_exponent", "the cosine columns use the exponent (2i+1)/d_model: columns 2i and 2i+1 share ONE "
            "frequency, 1 / 10000^(2i/d_model)", hint="the even column index 2i for both", shows=_wrong("column")),
    Mistake("same_frequency", "every pair of columns (2i, 2i+1) has the same frequency: the exponent 2i/d_model does "
            "not change with i", hint="an integer division (2 * i // d_model) is 0 for every i < d_model: divide "
            "with /", shows=_wrong("floor")),
    Mistake("not_tensor", "positional_encoding returned {got}: " + _RETURNS,
            hint="build it with torch, or torch.from_numpy(pe).float()",
            shows=lambda max_len, d_model: ref.sinusoidal_positional_encoding(max_len, d_model).double().numpy()),
    Mistake("float64", "positional_encoding returned {dtype}: " + _RETURNS + " (NumPy computes in float64)",
            hint=".float()", shows=lambda max_len, d_model: _pe(max_len, d_model)),
    float_size(shows=lambda max_len, d_model: torch.zeros(max_len, d_model / 2).repeat(1, 2)),
)


def _same_frequency(pe):
    """M.same_frequency when every pair of columns (2i, 2i+1) of the encoding holds the same values (at least two
    pairs), or None: the family of the integer division, whatever the one frequency."""
    a = to_numpy(pe).astype(np.float64)
    if a.ndim != 2 or a.shape[1] < 4 or a.shape[1] % 2:
        return None
    pairs = a.reshape(a.shape[0], -1, 2)
    return M.same_frequency if np.allclose(pairs, pairs[:, :1], atol=1e-4) else None


def _rounded(pe, candidates):
    """The registered slip whose encoding `pe` matches, allowing for float32 rounding of large angles (an angle of
    9000 in float32 is off by about 0.001, so its sine too); `candidates`: [(mistake, encoding, angles)]."""
    a = to_numpy(pe).astype(np.float64)
    for mistake, wrong, angles in candidates:
        wrong, angles = to_numpy(wrong), to_numpy(angles)
        if a.shape == wrong.shape and np.all(np.abs(a - wrong) <= 1e-4 + 4e-6 * np.abs(angles)):
            return mistake
    return None


@exercise("sinusoidal positional encoding", reference=ref.sinusoidal_positional_encoding, mistakes=M, random=False,
          right=[lambda max_len, d_model: torch.stack([_pe(max_len, d_model)[:, 0::2],
                                                       _pe(max_len, d_model)[:, 1::2]], -1).flatten(1).float()])
@single_threaded
@naming_crashes(M)
def positional_encoding(ev: Evaluation, answer):
    """answer(max_len, d_model) -> (max_len, d_model) float32 tensor: PE[pos, 2i] = sin(pos / 10000^(2i/d)),
    PE[pos, 2i+1] = cos(...)."""
    tests = 0
    for max_len, d_model in ((10, 8), (50, 16), (3, 4)):
        pe = ev.call(answer, max_len, d_model)
        what = f"positional_encoding({max_len}, {d_model})"
        expect_shape(pe, (max_len, d_model), what)
        candidates = [(M[key], _pe(max_len, d_model, form), _pe(max_len, d_model, form, angles=True))
                      for key, form in FORMS.items()]
        # (_rounded: a registered slip up to the float32 rounding of large angles; _same_frequency: its family)
        with explained(functools.partial(_rounded, pe, candidates), functools.partial(_same_frequency, pe)):
            ev.expect_close(pe, ref.sinusoidal_positional_encoding(max_len, d_model).double(), what, atol=1e-5,
                            mistakes=M.variants(FORMS, max_len, d_model))
        expect(isinstance(pe, torch.Tensor), M.not_tensor.at(got=f"a {type(pe).__module__}.{type(pe).__name__}"))
        expect(pe.dtype == torch.float32, M.float64.at(dtype=str(pe.dtype).replace("torch.", "")))
        tests += 1
    return tests
