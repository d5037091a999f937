"""What the loss and beam-step checks share: inputs drawn until the right answer and every registered mistake give
values far apart (or equal), so that each mistake is named alike under every seed offset."""
import numpy as np

from ..core import to_numpy


def distinct(values, rtol, atol, equal_ok=True):
    """No two of `values` (the right answer and the mistakes) are near each other (within rtol, atol) unless they
    are equal and `equal_ok`: then a check names one mistake, the same one under every seed."""
    arrays = [to_numpy(v).astype(np.float64) for v in values]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a.shape != b.shape:
                continue
            if np.allclose(a, b, rtol=1e-5, atol=1e-6):
                if not equal_ok:
                    return False
            elif np.allclose(a, b, rtol=rtol, atol=atol):
                return False
    return True
