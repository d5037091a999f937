"""Mixed precision: which 16-bit type to compute in, and the autocast context (lesson 10).

    dtype = resolve_amp("auto", device)      # bf16 on a CPU or a recent GPU, fp16 on an older GPU
    with autocast(device, dtype):            # matrix products in 16 bits, softmax/norms/loss in 32
        loss = ...
    scaler = grad_scaler(device, dtype)      # fp16 needs its gradients scaled; bf16 and fp32 do not

Weights stay float32; under autocast the matrix products run in the low precision. float16 has a
5-bit exponent, so small gradients underflow unless the loss is multiplied by a large factor before
`backward` and the gradients divided by it before the step: `torch.amp.GradScaler` does both, and
skips a step whose gradients overflowed (then lowers the factor).
"""
import contextlib

import torch

AMP_CHOICES = ("auto", "bf16", "fp16", "off")


def resolve_amp(amp, device):
    """The autocast dtype for `amp` on `device` (None = full fp32).

    auto: bf16 on a GPU that supports it, else fp16 (with a gradient scaler); bf16 on a CPU
    (measured on the course's 2-core CPU: bf16 autocast trains faster than fp32, benchmarks/amp_step.py).
    """
    if amp not in AMP_CHOICES:
        raise ValueError(f"amp must be one of {', '.join(AMP_CHOICES)}, got {amp!r}")
    if amp == "off":
        return None
    if amp == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if device.type == "cpu" else None
    return torch.bfloat16 if amp == "bf16" else torch.float16


def autocast(device, dtype):
    """torch.autocast for `device` and `dtype`, or a no-op when dtype is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def grad_scaler(device, dtype):
    """A GradScaler, enabled only for float16 (which needs it)."""
    return torch.amp.GradScaler(torch.device(device).type, enabled=dtype == torch.float16)
