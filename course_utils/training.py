"""A generic training loop (like minGPT's trainer, nothing in it is specific to a model).

    history = train(model, data, loss_fn, num_steps=2000, lr=3e-3)
    plot_learning_curves({"train loss": smooth(history)})

`data` is any re-iterable of batches (a list, a DataLoader, a BatchLoader); it is iterated again
when exhausted. `loss_fn(model, batch)` returns a scalar tensor: the loss function is where a
model meets its data, so the loop itself needs to know nothing about either.
"""
import numpy as np
import torch
from tqdm.auto import tqdm


def train(model, data, loss_fn, num_steps, lr=1e-3, optimizer=None, grad_clip=1.0,
          progress=True, desc="training"):
    """Take `num_steps` optimizer steps (Adam unless `optimizer` is given); return the losses."""
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    history, batches = [], iter(data)
    bar = tqdm(range(num_steps), desc=desc, disable=not progress)
    for step in bar:
        try:
            batch = next(batches)
        except StopIteration:                 # one pass over the data done: start the next
            batches = iter(data)
            try:
                batch = next(batches)
            except StopIteration:
                raise ValueError("train() got data without any batch") from None
        loss = loss_fn(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        history.append(loss.item())
        if step % 20 == 0 or step == num_steps - 1:
            bar.set_postfix(loss=f"{np.mean(history[-20:]):.3f}")
    model.eval()
    return history


def smooth(values, window=50):
    """Moving average over `window` values (shorter at the start): for readable loss curves."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    starts = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    return (cumsum[1:] - cumsum[starts]) / (np.arange(1, len(values) + 1) - starts)
