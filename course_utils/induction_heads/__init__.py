"""Lesson 14's attention-only Transformer trained on repeated random tokens, as a task of the course's training
pipeline (course_utils/pipeline: the loop, checkpoints, runs, report, command line). Its induction heads form
in a phase change that every evaluation records.

    python -m course_utils.induction_heads --preset full      # the command line (__main__.py)

    __main__   the command line: the pipeline's (pipeline/cli.py) with the task's options
    task       InductionTask (pipeline/task.py's interface), Config, PRESETS, run, load_induction_model

The model, the data, the scores and the ablation are lesson 14's reference, course_utils.induction.
The names the lesson uses are also here, imported on first use: `from course_utils.induction_heads import run`.
"""
__all__ = ["Config", "PRESETS", "make_config", "InductionTask", "run", "load_induction_model", "phase_change_step",
           "find_phase_change", "ICL_FALL", "STRIPE_RISE"]


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module 'course_utils.induction_heads' has no attribute {name!r}")
    from . import task

    return getattr(task, name)
