"""The full training runs made for the course, shipped with the package: lesson 10 shows what a full run
gives (its curves, its BLEU, its trained cross-attention) even in FAST mode or before your own run ends.

    python -m course_utils.translation.reference --from runs/cpu      # -> reference_runs/cpu.json
    reference_run("cpu")      # the whole file: report, history, attention (None when there is none)
    reference_report("cpu")   # its report.json part

A reference file is written by that ONE command from a finished run's folder (report.json,
history.json, model.pt) and committed as it comes out; never edit it by hand. It holds:
  written_by   the command that wrote it (tests check it)      schema   SCHEMA (this module's version)
  report       the run's report.json (command, machine, threads, time, BLEU, config, examples)
  history      the run's curves: per epoch (train/val loss, val BLEU) and per step (loss, lr)
  attention    the trained model's cross-attention (last decoder layer, every head) for ATTENTION_SENTENCES:
               one in English word order and one whose German verb comes last (the map shows the reordering)
"""
import argparse
import json
import sys
import warnings
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "reference_runs"
SCHEMA = 1
COMMAND = "python -m course_utils.translation.reference"
ATTENTION_SENTENCES = (
    "Ein Hund läuft über eine grüne Wiese.",                          # the same word order as in English
    "Ein Mann, der ein rotes Hemd trägt, spielt Gitarre.",            # a relative clause: its verb comes last
)
HISTORY_KEYS = ("epoch", "train_loss", "val_loss", "val_nll", "val_bleu", "train_seconds", "step", "step_loss",
                "step_lr")
TOP_KEYS = ("written_by", "schema", "report", "history", "attention")


def reference_run(preset, folder=None):
    """The reference file of `preset` (a dict with TOP_KEYS), or None when there is none, or when it is not
    one this module's command wrote (then a warning says how to write it again)."""
    path = Path(folder or FOLDER) / f"{preset}.json"
    if not path.exists():
        return None
    ref = json.loads(path.read_text(encoding="utf-8"))
    problems = check(ref)
    if problems:
        warnings.warn(f"{path} is not a reference file of this version ({'; '.join(problems)}): write it again "
                      f"with `{COMMAND} --from runs/{preset}`", stacklevel=2)
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


def build(run_dir, beam_size=5):
    """The reference dict of the finished run in `run_dir` (report.json, history.json, model.pt)."""
    from .presets import load_translator
    from .widgets import cross_attention

    run_dir = Path(run_dir)
    missing = [n for n in ("report.json", "history.json", "model.pt") if not (run_dir / n).exists()]
    if missing:
        raise FileNotFoundError(f"{run_dir} is not a finished run: it lacks {', '.join(missing)} "
                                "(train it first: python -m course_utils.translation --preset cpu)")
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    history = json.loads((run_dir / "history.json").read_text(encoding="utf-8"))
    model, tok, cfg = load_translator(run_dir / "model.pt")
    attention = []
    for sentence in ATTENTION_SENTENCES:
        weights, src_pieces, out_pieces, text = cross_attention(model, tok, sentence, beam_size=beam_size)
        attention.append({"source": sentence, "translation": text, "src_pieces": src_pieces,
                          "out_pieces": out_pieces, "layer": len(weights),
                          "weights": _rounded(weights[-1].tolist(), 4)})        # (heads, T, S)
    return {"written_by": f"{COMMAND} --from {run_dir}", "schema": SCHEMA, "report": report,
            "history": {k: _rounded(history[k], 5) if k != "epoch" and k != "step" else history[k]
                        for k in HISTORY_KEYS},
            "attention": attention}


def check(ref):
    """Problems of a reference dict (an empty list when it is as `build` writes it)."""
    problems = [f"no {key!r}" for key in TOP_KEYS if key not in ref]
    if problems:
        return problems
    if not str(ref["written_by"]).startswith(COMMAND + " --from "):
        problems.append(f"written_by is {ref['written_by']!r}, not this module's command")
    if ref["schema"] != SCHEMA:
        problems.append(f"schema {ref['schema']} is not {SCHEMA}")
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


def main(argv=None):
    p = argparse.ArgumentParser(prog=COMMAND, description="Write a finished run's reference file for lesson 10.")
    p.add_argument("--from", dest="run_dir", required=True, help="the run's folder, e.g. runs/cpu")
    p.add_argument("--to", default=None, help=f"output file (default: {FOLDER.name}/<preset>.json in the package)")
    args = p.parse_args(argv)
    try:
        ref = build(args.run_dir)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    problems = check(ref)
    if problems:
        print(f"error: {'; '.join(problems)}", file=sys.stderr)
        return 2
    target = Path(args.to) if args.to else FOLDER / f"{ref['report']['preset']}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(ref, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    report = ref["report"]
    print(f"written: {target} (BLEU {report['bleu_beam']} with beam search, {report['steps']} steps, "
          f"{report['train_seconds'] / 60:.1f} min of training)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
