"""Checks for lesson 15 (attention in today's open models), one module per exercise, each with its registry of known
mistakes (mistakes.py), imported in the lesson's order: the latent attention forward pass, the absorbed decoding
step, attention with a learned sink, the ring-buffer cache, the delta-rule state update, the chunked delta rule. The
imports keep the lesson's order, which is the registry's: they are not sorted."""
# isort: off
from .latent_attention import latent_attention
from .absorbed_step import absorbed_step
from .attention_with_sink import attention_with_sink
from .ring_buffer import ring_buffer
from .delta_rule_step import delta_rule_step
from .delta_rule_chunked import delta_rule_chunked
# isort: on

__all__ = ["latent_attention", "absorbed_step", "attention_with_sink", "ring_buffer", "delta_rule_step",
           "delta_rule_chunked"]
