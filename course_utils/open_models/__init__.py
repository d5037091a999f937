"""Lesson 15's models (attention in today's open models) trained side by side, as tasks of the course's training
pipeline (course_utils/pipeline: the loop, checkpoints, runs, report).

    python -m course_utils.open_models --experiment captions --preset full    # the caption models (__main__.py)
    python -m course_utils.open_models --experiment recall --preset full      # the associative-recall models

What is specific to lesson 15; each module imports only modules listed below it:

    __main__   the command line: both experiments, their reference files
    run        run_captions, run_recall (every model, one run folder each), load_model, load_recall_model
    task       CaptionTask, RecallTask (pipeline/task.py's interface)
    measure    perplexity, largest_logits, first_position, recall_accuracy
    presets    Config, RecallConfig, MODELS, RECALL_MODELS, PRESETS, RECALL_PRESETS, build_model, ...
    data       prepare (lesson 12's captions and English-only BPE), windows

The models are lesson 15's references: course_utils.open_model (OpenLM), modern_block, latent_attention,
local_attention, delta_rule; lesson 12's GPT (course_utils.gpt) is the baseline. The names the lesson uses are
also here, imported on first use: `from course_utils.open_models import run_captions, MODELS, ...`.
"""
_WHERE = {"run_captions": "run", "run_recall": "run", "load_model": "run", "load_recall_model": "run",
          "CaptionTask": "task", "RecallTask": "task", "perplexity": "measure", "largest_logits": "measure",
          "first_position": "measure", "recall_accuracy": "measure", "Config": "presets", "RecallConfig": "presets",
          "MODELS": "presets", "RECALL_MODELS": "presets", "PRESETS": "presets", "RECALL_PRESETS": "presets",
          "make_config": "presets", "make_recall_config": "presets", "build_model": "presets",
          "build_recall_model": "presets", "layers_of": "presets", "prepare": "data", "windows": "data"}
__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'course_utils.open_models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
