"""The course's schematic diagrams, drawn by code (matplotlib only).

`DIAGRAMS` maps each diagram's name (its PNG is `diagrams/png/<name>.png`) to the function that
draws it and returns a matplotlib Figure. `tools/draw_diagrams.py` renders them all.
"""
import importlib

# name -> (module, function); the lesson that shows it is the name's prefix
_REGISTRY = {
    "01_lookup": ("lesson01", "lookup"),
    "02_encoder_decoder": ("lesson02", "encoder_decoder"),
    "03_attention_step": ("lesson03", "attention_step"),
    "04_score_functions": ("lesson04", "score_functions"),
    "04_global_local": ("lesson04", "global_local"),
    "05_ntm": ("lesson05", "ntm"),
    "05_addressing": ("lesson05", "addressing"),
    "06_pointer_network": ("lesson06", "pointer_network"),
    "07_qkv": ("lesson07", "qkv"),
    "07_masks": ("lesson07", "masks"),
    "08_multihead": ("lesson08", "multihead"),
    "09_transformer": ("lesson09", "transformer"),
    "10_beam_search": ("lesson10", "beam_search"),
    "10_data_parallel": ("lesson10", "data_parallel"),
    "11_sagan": ("lesson11", "sagan"),
    "11_vit": ("lesson11", "vit"),
    "11_snail": ("lesson11", "snail"),
    "12_decoder_only": ("lesson12", "decoder_only"),
    "13_tiling": ("lesson13", "tiling"),
    "14_induction_circuit": ("lesson14", "induction_circuit"),
    "14_rollout": ("lesson14", "rollout"),
    "15_latent_cache": ("lesson15", "latent_cache"),
    "15_layer_pattern": ("lesson15", "layer_pattern"),
    "15_delta_state": ("lesson15", "delta_state"),
    "16_paged_cache": ("lesson16", "paged_cache"),
    "16_continuous_batching": ("lesson16", "continuous_batching"),
    "16_speculative": ("lesson16", "speculative"),
}

NAMES = list(_REGISTRY)


def get(name):
    """The drawing function of diagram `name`."""
    module, func = _REGISTRY[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), func)


def draw(name):
    """Draw diagram `name` and return its Figure."""
    return get(name)()
