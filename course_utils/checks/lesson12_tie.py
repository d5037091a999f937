"""Lesson 12, Exercise 3: the tie of MyGPT's output layer to its token embedding, tested as the exercise states it:
after __init__, the output layer and the embedding are ONE parameter, and the logits are computed with it."""
from .core import expect
from .gpt_mistakes import TIED_IN_FORWARD, UNTIED
from .lesson12_setup import tied

HEAD_UNUSED = ("the logits use the embedding matrix E, but self.head is never tied to it in __init__: it stays a "
               "second (vocab_size, d_model) parameter that the model counts, saves and hands to the optimiser for "
               "nothing. Tie in __init__ as the exercise asks, self.head.weight = self.embed.weight (then "
               "self.head(x) is x E^T)")


def expect_tied(ev, module, tokens, logits, training, tied_in_init):
    """The output layer of `module` (its logits `logits` for `tokens`) is its embedding's parameter: the logits
    come from E (tested at evaluation, where they are deterministic), the tie is made in __init__ (`tied_in_init`:
    `module.head.weight is module.embed.weight` before the first forward), and self.head is that parameter."""
    expect(training or tied(ev, module, tokens, logits), UNTIED)
    expect(tied_in_init or module.head.weight is not module.embed.weight, TIED_IN_FORWARD)
    expect(module.head.weight is module.embed.weight, HEAD_UNUSED)
