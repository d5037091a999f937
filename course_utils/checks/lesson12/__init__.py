"""Checks for lesson 12 (a GPT from scratch), one module per exercise, each with its registry of known mistakes
(mistakes.py), imported in the lesson's order: the next-token loss, the decoder block, the GPT, the sampling
distribution, rotary positions, one attention step with a key/value cache, grouped-query attention. The imports
keep the lesson's order, which is the registry's: they are not sorted. The references the checks compare with stay in
their modules: a learner's `check.` + Tab must not offer an exercise's answer."""
# isort: off
from .next_token_loss import next_token_loss
from .gpt_block import gpt_block
from .gpt import gpt
from .sampling_distribution import sampling_distribution
from .apply_rope import apply_rope
from .cached_attention_step import cached_attention_step
from .grouped_query_attention import grouped_query_attention
# isort: on

__all__ = ["next_token_loss", "gpt_block", "gpt", "sampling_distribution", "apply_rope", "cached_attention_step",
           "grouped_query_attention"]
