"""Mixed precision: which 16-bit type to compute in, and the autocast context (lesson 10).

    dtype = resolve_amp("auto", device)      # bf16 on a recent GPU or a CPU with bf16 instructions, fp16 on an
                                             # older GPU, float32 (None) on other CPUs
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


def cpu_has_bf16():
    """True when this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX). Elsewhere torch emulates bf16,
    and autocast to bf16 is far SLOWER than float32: `python benchmarks/amp_step.py --threads 2` (lesson 10's
    cpu-preset Transformer) measured 3,153 tokens/s in float32 and 114 in bf16 on a 2-core AMD EPYC with AVX2
    only, where an earlier machine of the course's, with bf16 instructions, trained faster in bf16."""
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


def resolve_amp(amp, device):
    """The autocast dtype for `amp` on `device` (None = full fp32).

    auto: on a GPU, bf16 where it supports it, else fp16 (with a gradient scaler); on a CPU, bf16 where the
    CPU has bf16 instructions (cpu_has_bf16), else float32.
    """
    if amp not in AMP_CHOICES:
        raise ValueError(f"amp must be one of {', '.join(AMP_CHOICES)}, got {amp!r}")
    if amp == "off":
        return None
    if amp == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if device.type == "cpu" and cpu_has_bf16() else None
    return torch.bfloat16 if amp == "bf16" else torch.float16


def autocast(device, dtype):
    """torch.autocast for `device` and `dtype`, or a no-op when dtype is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def grad_scaler(device, dtype):
    """A GradScaler, enabled only for float16 (which needs it)."""
    return torch.amp.GradScaler(torch.device(device).type, enabled=dtype == torch.float16)
