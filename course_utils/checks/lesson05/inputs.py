"""Lesson 05's random inputs, batch-first float32 torch tensors: a memory (B, N, M), a weighting (B, N) (a softmax
over the rows), a column of one value per example (B, 1) (a key strength, a gate, a sharpening exponent)."""
import numpy as np
import torch


def tensor(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


def memory(r, B, N, M):
    return tensor(r.normal(size=(B, N, M)))


def weighting(r, B, N, peaked=1.0):
    return torch.softmax(tensor(r.normal(size=(B, N)) * peaked), dim=-1)


def column(r, B, low, high):
    return tensor(r.uniform(low, high, size=(B, 1)))
