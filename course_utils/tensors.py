"""Small conversions every other module may use (this module imports nothing of the course)."""
import numpy as np


def to_numpy(x):
    """NumPy copy of an array, a torch tensor (any device, with grad) or a number."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy() if x.dtype.is_floating_point else x.detach().cpu().numpy()
    return np.asarray(x)


def cpu_state_dict(model):
    """A copy of `model`'s state dict on the CPU (what checkpoints and weight averages hold)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
