"""The full training runs made for the course, shipped with the package: lesson 10 shows what a full run
gives (its curves, its BLEU, its trained cross-attention) even in FAST mode or before your own run ends.

    reference_run("cpu")      # the whole file: report, history, attention (None when there is none)
    reference_report("cpu")   # its report.json part

A reference file is written by the run's own command with `--reference NAME` (the schema and the one
writer: course_utils.reference_runs), e.g.

    python -m course_utils.translation --preset cpu --threads 1 --reference cpu      # -> reference_runs/cpu.json

(from a finished run: the same command with `--resume`, which trains no more and writes the report and
the file again) and committed as it comes out; never edit it by hand. Besides the schema's keys it holds:
  report       the run's report.json (command, machine, threads, time, BLEU, config, examples)
  history      the run's curves: per epoch (train/val loss, val BLEU) and per step (loss, lr)
  attention    the trained model's cross-attention (last decoder layer, every head) for ATTENTION_SENTENCES:
               one in English word order and one whose German verb comes last (the map shows the reordering)
"""
import warnings
from pathlib import Path

from .. import reference_runs

FOLDER = Path(__file__).resolve().parent / "reference_runs"
COMMAND = "python -m course_utils.translation"
ATTENTION_SENTENCES = (
    "Ein Hund läuft über eine grüne Wiese.",                          # the same word order as in English
    "Ein Mann, der ein rotes Hemd trägt, spielt Gitarre.",            # a relative clause: its verb comes last
)
HISTORY_KEYS = ("epoch", "train_loss", "val_loss", "val_nll", "val_bleu", "train_seconds", "step", "step_loss",
                "step_lr")


def reference_run(preset, folder=None):
    """The reference file of `preset` (a dict), or None when there is none, or when it is not one of this
    version (then a warning says how to write it again)."""
    ref = reference_runs.reference_run(preset, folder or FOLDER)
    if ref is None:
        return None
    problems = check(ref)
    if problems:
        warnings.warn(f"{Path(folder or FOLDER) / (preset + '.json')} is not a reference file of this version "
                      f"({'; '.join(problems)}): write it again with `{COMMAND} --preset {preset} --resume "
                      f"--reference {preset}`", stacklevel=2)
        return None
    return ref


def reference_report(preset):
    """The reference run's report.json (a dict), or None when there is none for `preset`."""
    run = reference_run(preset)
    return run["report"] if run is not None else None


def _rounded(values, digits):
    if isinstance(values, (list, tuple)):
        return [_rounded(v, digits) for v in values]
    return round(float(values), digits)


def attention_maps(model, tok, beam_size=5):
    """What a reference file keeps of the trained model: its cross-attention for ATTENTION_SENTENCES."""
    from .widgets import cross_attention

    attention = []
    for sentence in ATTENTION_SENTENCES:
        weights, src_pieces, out_pieces, text = cross_attention(model, tok, sentence, beam_size=beam_size)
        attention.append({"source": sentence, "translation": text, "src_pieces": src_pieces,
                          "out_pieces": out_pieces, "layer": len(weights),
                          "weights": _rounded(weights[-1].tolist(), 4)})        # (heads, T, S)
    return attention


def rounded_history(history):
    """The run's curves as a reference file keeps them (5 digits)."""
    return {k: _rounded(history[k], 5) if k not in ("epoch", "step") else history[k] for k in HISTORY_KEYS}


def check(ref):
    """Problems of a lesson-10 reference dict (an empty list when it is as the command writes it)."""
    problems = reference_runs.check(ref)
    problems += [f"no {key!r}" for key in ("report", "history", "attention") if key not in ref]
    if problems:
        return problems
    for key in ("preset", "steps", "bleu_beam", "bleu_greedy", "command", "train_seconds", "threads", "config"):
        if key not in ref["report"]:
            problems.append(f"the report lacks {key!r}")
    problems += [f"the history lacks {key!r}" for key in HISTORY_KEYS if key not in ref["history"]]
    if [a.get("source") for a in ref["attention"]] != list(ATTENTION_SENTENCES):
        problems.append("attention is not of ATTENTION_SENTENCES")
    for a in ref["attention"]:
        heads = a.get("weights", [])
        if not heads or any(len(h) != len(a["out_pieces"]) or any(len(r) != len(a["src_pieces"]) for r in h)
                            for h in heads):
            problems.append(f"attention weights of {a['source']!r} are not (heads, output pieces, source pieces)")
    return problems
