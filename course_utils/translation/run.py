"""A whole run of lesson 10's translator: train, then decode test_2016_flickr greedily and with beam search,
and write report.json (the pipeline's trainer.run with translation.task.TranslationTask).

    report = run(make_config("cpu"), "runs/cpu", resume=True)      # the command line's run, from Python

A run writes tokenizer.json, checkpoint.pt (to resume; see pipeline/trainer.py), model.pt (the final
weights, possibly averaged), history.json, learning_curves.png, the test translations, and
report.json (pipeline/report.py: preset, steps, epochs, train_seconds, threads, tokens_per_second, machine,
config, then bleu_greedy, bleu_beam, sacrebleu_signature, examples...). Runs go to `default_out(preset)`
unless told otherwise: runs/<preset> in the runs folder (config.runs_dir(): $COURSE_RUNS_DIR, else runs/ at
the repository root), the folder lesson 10 looks in too.
"""
from ..config import runs_dir
from ..pipeline import trainer
from .task import TranslationTask


def default_out(preset):
    """Where a preset's run goes unless --out says otherwise: runs/<preset> in the runs folder."""
    return runs_dir() / preset


def run(cfg, out_dir=None, resume=False, show_progress=True, log=print, dist=None, command=None, overwrite=False,
        reference=None):
    """Train + decode + report.json; returns the report dict (None on ranks other than 0).

    `resume=True`: go on with the run kept in `out_dir`, or start one (the notebook's "run the cell again").
    Without it a run kept there is refused, unless `overwrite` (which replaces it).
    """
    return trainer.run(TranslationTask(cfg), out_dir if out_dir is not None else default_out(cfg.preset),
                       resume=resume, overwrite=overwrite, show_progress=show_progress, log=log, dist=dist,
                       command=command, reference=reference)
