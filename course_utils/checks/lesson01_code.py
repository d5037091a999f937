"""Lesson 01's properties beyond the values: a Python loop where the exercise asks for none (loops.py), and
weights that are a softmax of the scores scaled by a constant."""
import numpy as np

from .core import to_numpy
from .loops import python_loop  # noqa: F401 - lesson01's checks import it from here


def scaled_softmax(alpha, e, what, sizes):
    """A probe: `alpha` is softmax(c * e) for a constant c != 1 (the scores scaled before the softmax): a message
    naming c (and which size it is 1/sqrt of, from `sizes`, {name: size}), or None."""
    a, e = np.asarray(to_numpy(alpha), dtype=np.float64), np.asarray(e, dtype=np.float64)
    if a.shape != e.shape or a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)) or not np.all(a > 0) \
            or not np.isclose(a.sum(), 1.0, atol=1e-4):
        return None
    x, y = e - e.mean(), np.log(a) - np.log(a).mean()
    if np.abs(x).max() < 1e-9:
        return None
    c = float(x @ y / (x @ x))
    if np.isclose(c, 1.0, rtol=1e-3) or not np.allclose(y, c * x, atol=1e-4, rtol=1e-3):
        return None
    names = [label for n, size in sizes.items()
             for label, v in ((f"1/sqrt({n})", 1 / np.sqrt(size)), (f"1/{n}", 1 / size), (f"sqrt({n})", np.sqrt(size)))
             if np.isclose(c, v, rtol=1e-3)]
    which = f" = {' = '.join(dict.fromkeys(names))}" if names else ""
    return (f"{what} is the softmax of the scores multiplied by a constant ({c:.3g}{which}): the scores were scaled "
            "before the softmax; Bahdanau's weights take the scores e as they come, alpha = softmax(e): drop the "
            "scaling (a score function may scale its own scores, as sqrt(d_k) in section 5; this step does not).")
