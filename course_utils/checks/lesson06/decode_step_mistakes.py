"""One decoding step of a pointer network written with one typical slip: the single definition of the mistakes
lesson 06's decode_step check registers (decode_step.py), and the check's model.

    wrong_step(slip)(model, h, state, inp, mask) -> weights (B, T), j (B,), new_mask (B, T), (s, c)
"""
import torch
import torch.nn.functional as F

from ... import pointer as ref


def model(seed):
    """A small untrained PointerNetwork whose pointer is sharpened: at its initial scale tanh is nearly linear, so
    the decoder state adds about the same to every score and the weights hardly depend on it (a wrong state would
    pass, and the argmax would be a near tie)."""
    with torch.random.fork_rng(devices=[]):   # leave the learner's random state alone
        torch.manual_seed(seed)
        net = ref.PointerNetwork(d_model=16, d_attn=12).eval()
    with torch.no_grad():
        net.pointer.W_h.weight.mul_(8.0)
        net.pointer.W_s.weight.mul_(8.0)
        net.pointer.v.mul_(3.0)
    return net


def _state_in(slip, state):
    """The state handed to the decoder cell: as given, none (zeros), or (c, s)."""
    return {"no_state": (), "swapped_state": (state[::-1],)}.get(slip, (state,))


def wrong_step(slip=None):
    """decode_step with one `slip` (None: the right answer, written out)."""
    def decode_step(model, h, state, inp, mask):
        s, c = model.decoder(inp, *_state_in(slip, state))
        pointing = {"old_state": state[0], "cell_state": c, "old_cell_state": state[1]}.get(slip, s)
        weights = model.pointer(h, pointing, None if slip == "mask_unused" else mask)
        B, T = mask.shape
        j = {"argmax_batch": lambda: weights.argmax(0)[:B] % T, "j_unmasked": lambda: model.pointer(h, s).argmax(-1),
             "j_not_argmax": lambda: weights.argmin(-1)}.get(slip, lambda: weights.argmax(-1))()
        chosen = F.one_hot(j, T).bool()
        new_mask = {"mask_not_updated": lambda: mask, "masks_columns": lambda: mask & ~chosen.any(0, keepdim=True),
                    "keeps_only_chosen": lambda: mask & chosen, "mask_float": lambda: (mask & ~chosen).float()
                    }.get(slip, lambda: mask & ~chosen)()
        new_state = {"returned_old_state": state, "state_not_tuple": s}.get(slip, (s, c))
        return weights, j, new_mask, new_state
    decode_step.__name__ = f"decode_step_{slip}"
    return decode_step
