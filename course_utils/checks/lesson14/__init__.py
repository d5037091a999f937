"""Checks for lesson 14 (what attention heads learn), one module per exercise, each with its registry of known
mistakes (mistakes.py); imported in the lesson's order. Where no registered mistake matches an answer, each check
names the property that fails and where (properties.py)."""
from .head_scores import head_scores  # noqa: I001 - the lesson's order, which the registry keeps
from .ablation_effect import ablation_effect
from .ov_circuit import ov_circuit
from .k_composition import k_composition
from .patch_head import patch_head
from .keep_sinks_and_window import keep_sinks_and_window
from .attention_rollout import attention_rollout

__all__ = ["head_scores", "ablation_effect", "ov_circuit", "k_composition", "patch_head", "keep_sinks_and_window",
           "attention_rollout"]
