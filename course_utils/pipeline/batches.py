"""The arithmetic of a global batch that does not depend on the number of processes.

An optimizer step takes ONE global batch (a task's `batches(epoch)` gives an epoch's, in order). The
pipeline splits it into world_size x accum_steps micro-batches (`Task.split`): process r takes, for
accumulation step j, part j * world_size + r. So 1 process, N processes and N-fold accumulation take
the same optimizer steps on the same examples, and an epoch has the same number of steps for any N:

    global batch = micro-batch x processes (world_size) x accumulation steps
    accumulation_steps(global, micro, world_size)   micro_batch_size(global, world_size, accum)
    my_parts(parts, world_size, rank)               the parts of a split global batch that process `rank` takes
    check_enough_steps(steps, what)                 at least one optimizer step per epoch, or a clear error
"""
from .task import ConfigError


def accumulation_steps(global_batch, micro_batch, world_size):
    """Micro-batches per process and optimizer step: global = micro x world_size x accumulation."""
    if global_batch % (micro_batch * world_size):
        raise ConfigError(
            f"global batch {global_batch} is not divisible by micro-batch {micro_batch} x "
            f"{world_size} processes: choose a global batch that is a multiple of "
            f"{micro_batch * world_size}, or another micro-batch / number of processes")
    return global_batch // (micro_batch * world_size)


def micro_batch_size(global_batch, world_size, accum_steps):
    """Per-process micro-batch: global / (world_size x accum_steps), which must divide exactly."""
    if accum_steps < 1 or global_batch % (world_size * accum_steps):
        raise ConfigError(
            f"global batch {global_batch} cannot be split into {world_size} processes x "
            f"{accum_steps} accumulation steps: choose a global batch that is a multiple of "
            f"{world_size * max(accum_steps, 1)}, or another number of processes / accumulation steps")
    return global_batch // (world_size * accum_steps)


def my_parts(parts, world_size, rank):
    """Process `rank`'s micro-batches of one global batch split into world_size x accum parts, in the order
    it accumulates them: parts rank, rank + world_size, rank + 2 world_size, ..."""
    return parts[rank::world_size]


def check_enough_steps(steps, what="the training data"):
    """Fail early unless an epoch has at least one optimizer step."""
    if steps < 1:
        raise ConfigError(f"{what} gives no optimizer step per epoch: use fewer processes or accumulation "
                          "steps, a smaller batch, or more data")
