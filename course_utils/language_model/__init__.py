"""Lesson 12's language model: a GPT trained on Multi30k's English captions, measured against a bigram, as a
task of the course's training pipeline (course_utils/pipeline: the loop, checkpoints, runs, report, command line).

    python -m course_utils.language_model --preset full       # the command line (__main__.py)
    python -m course_utils.language_model.positions           # section 8's position experiment

What is specific to the language model; each module imports only modules listed below it:

    __main__     the command line: the pipeline's (pipeline/cli.py) with the model's options
    positions    compare_positions, run_positions: three small GPTs, learned / sinusoidal / rotary positions
    task         LanguageModelTask (pipeline/task.py's interface): data, optimiser, schedule, loss, evaluation;
                 run (a run kept in a folder), train_language_model (a given model, in memory)
    presets      Config (pipeline.task.RunConfig + the model's settings), PRESETS, POSITION_EXPERIMENT,
                 build_model, load_language_model
    evaluate     perplexity, BigramModel, best_bigram
    data         caption_stream, eval_windows, random_windows, prepare (the English-only BPE and the streams)

The names the lesson uses are also here, imported on first use:
`from course_utils.language_model import caption_stream, perplexity, train_language_model, PRESETS, ...`.
"""
_WHERE = {"caption_stream": "data", "eval_windows": "data", "random_windows": "data", "prepare": "data",
          "BigramModel": "evaluate", "best_bigram": "evaluate", "perplexity": "evaluate",
          "Config": "presets", "PRESETS": "presets", "POSITION_EXPERIMENT": "presets", "make_config": "presets",
          "build_model": "presets", "load_language_model": "presets",
          "LanguageModelTask": "task", "run": "task", "train_language_model": "task",
          "compare_positions": "positions", "run_positions": "positions"}
__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'course_utils.language_model' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
