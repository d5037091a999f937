"""Full-mode runs whose results the lessons show in fast mode, where a figure or a claim needs a trained model.

    python tools/reference_runs.py ntm           # lesson 05: the NTM on the copy task  -> ntm_copy.json
    python tools/reference_runs.py bahdanau      # lesson 03: accuracy by length, alignment maps -> bahdanau.json
    python tools/reference_runs.py pointer       # lesson 06: pointer weights, accuracy by length -> pointer.json
    python tools/reference_runs.py transformer   # lesson 09: learning curve, every head's attention -> transformer.json
    python tools/reference_runs.py lesson14      # lesson 14: GPT heads and sinks, ViT deletion test, counterfactual
                                                 #   attention in the translator -> lesson14_measurements.json
    python tools/reference_runs.py ntm --settings   # print a run's full-mode settings only (no training)

A run executes the lesson's own code cells (found by their cell ids in the solution notebook) in
full mode, in one namespace, as "Run All" would without COURSE_FAST; figures are drawn off-screen.
Then it saves what the lesson's fast mode shows next to its own (untrained) figures, with the
settings, the machine and the time, in course_utils/reference_runs/<name>.json, through the course's one
writer of reference files (course_utils.reference_runs.write: one schema for every lesson). Commit the
file it writes; never edit its numbers by hand (`written_by` names the command; tests/test_reference_runs.py
checks every file's schema, runs its command with --help, and checks that its settings are still the lesson's).
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "course_utils" / "reference_runs"
SOLUTIONS = ROOT / "solutions"
GENERATED = {"course-setup", "course-progress"}


def _notebook_cells(notebook):
    """(id, source) of every code cell of `notebook`, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [(c.get("id"), "".join(c["source"])) for c in cells if c["cell_type"] == "code"]


def _cells(notebook, ids):
    """The sources of the code cells `ids` of `notebook`, in that order."""
    cells = dict(_notebook_cells(notebook))
    missing = [i for i in ids if i not in cells]
    if missing:
        raise SystemExit(f"error: {notebook.name} has no code cell with id {missing} (did the lesson change?)")
    return [cells[i] for i in ids]


def _cells_up_to(notebook, last, skip=()):
    """The sources of the code cells from the top of `notebook` to cell `last` (included), without the
    generated cells, the cells in `skip` and the widgets (they only redraw what the cells before draw)."""
    sources = []
    for cid, source in _notebook_cells(notebook):
        if cid not in GENERATED and cid not in skip and "interact(" not in source:
            sources.append(source)
        if cid == last:
            return sources
    raise SystemExit(f"error: {notebook.name} has no code cell with id {last!r} (did the lesson change?)")


def _full_mode():
    """Import course_utils in full mode (the lessons' sizes without COURSE_FAST), drawing off-screen."""
    if "course_utils.config" in sys.modules:
        raise RuntimeError("course_utils was imported before full mode was set")
    os.environ["COURSE_FAST"] = "0"
    os.environ.pop("CI", None)
    os.environ["COURSE_PROGRESS"] = "off"
    import matplotlib

    matplotlib.use("Agg")


def _round(values, digits=3):
    """Nested lists of floats rounded for a small file."""
    if isinstance(values, (list, tuple)):
        return [_round(v, digits) for v in values]
    return round(float(values), digits)


def _load():
    from course_utils.config import load_average

    return load_average()


def _machine(load_before):
    from course_utils.config import describe_machine

    return describe_machine("cpu", load_before)


def _execute(sources):
    """Run cell sources in one namespace, as a notebook would; figures are closed, not shown."""
    import matplotlib.pyplot as plt

    namespace = {"__name__": "__lesson__"}
    for source in sources:
        exec(compile(source, "<lesson cell>", "exec"), namespace)
        plt.close("all")
    return namespace


def _write(path, report):
    """The report through the course's one writer (course_utils.reference_runs.write)."""
    from course_utils.reference_runs import write

    report = {k: v for k, v in report.items() if k not in ("schema", "date")}
    path = write(path.stem, folder=path.parent, **report)
    shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    print(f"written: {shown} ({report['result']}, load {report['machine']['load_before']})")


# --------------------------------------------------------------------------------------------------
# lesson 05: the NTM on the copy task
# --------------------------------------------------------------------------------------------------
NTM_NOTEBOOK = SOLUTIONS / "05_neural_turing_machine.ipynb"
NTM_SIZES, NTM_TRAIN, NTM_LENGTHS = "cell-03", "cell-39", "cell-44"   # the lesson's cells it runs
NTM_SETTINGS = ("N", "M", "controller_size", "min_length", "max_length", "batch_size", "lr", "clip",
                "target_bits", "window", "eval_per_length", "max_sequences", "time_budget", "test_lengths")


def ntm_settings():
    """The lesson's full-mode settings: its sizes cell, executed."""
    namespace = _execute(_cells(NTM_NOTEBOOK, [NTM_SIZES]))
    return {name: namespace[name] for name in NTM_SETTINGS} | {"seed": 0}


def ntm(path):
    """Train the lesson-05 NTM as the lesson does in full mode; save the curve, the heads and the settings."""
    import torch

    from course_utils.data.copy_task import copy_batch

    load_before = _load()
    started = time.perf_counter()
    ns = _execute(_cells(NTM_NOTEBOOK, [NTM_SIZES, NTM_TRAIN, NTM_LENGTHS]))   # prints as the lesson does
    seconds = time.perf_counter() - started
    model = ns["model"]
    heads = []
    for length, seed in [(ns["max_length"], 0), (ns["test_lengths"][-2], 1)]:   # as section 9 shows them
        x, y = copy_batch(1, length, seed=seed)
        with torch.no_grad():
            probs = torch.sigmoid(model(x))[0]                        # (2T+1, 8)
        wrong = int(((probs[length + 1:] > 0.5).float() != y[0]).sum())
        heads.append({"length": length, "seed": seed, "wrong_bits": wrong,
                      "write_weights": _round(model.write_weights[0].tolist()),    # (2T+1, N)
                      "read_weights": _round(model.read_weights[0].tolist()),      # (2T+1, N)
                      "output_probabilities": _round(probs.tolist())})             # (2T+1, 8)
    report = {
        "written_by": "python tools/reference_runs.py ntm",
        "lesson": NTM_NOTEBOOK.name,
        "what": "the lesson's NTM trained on the copy task in full mode (its cells "
                f"{NTM_SIZES}, {NTM_TRAIN}, {NTM_LENGTHS}, executed with COURSE_FAST=0)",
        "settings": {name: ns[name] for name in NTM_SETTINGS} | {"seed": 0},
        "machine": _machine(load_before),
        "result": {"converged": bool(ns["converged"]), "sequences": ns["seen"], "steps": len(ns["costs"]),
                   "running_cost": round(ns["running_costs"][-1], 4),
                   "heldout_cost": round(ns["final_heldout"], 4),
                   "wall_minutes": round(ns["wall_minutes"], 2), "cpu_minutes": round(ns["cpu_minutes"], 2),
                   "run_seconds": round(seconds, 1)},
        "curve": {"sequences_per_step": ns["batch_size"],
                  "cost": _round(ns["costs"], 4), "running_cost": _round(ns["running_costs"], 4)},
        "heldout_log": [[seen, round(cost, 4)] for seen, cost in ns["heldout_log"]],
        "generalisation": {str(L): {"bits": round(bits, 3), "wrong_bits": round(errors, 3)}
                           for L, (bits, errors) in ns["generalisation"].items()},
        "heads": heads,
    }
    _write(path, report)
    return 0 if report["result"]["converged"] else 1


# --------------------------------------------------------------------------------------------------
# lessons 03, 06 and 09: the lesson's cells from the top to the figure that needs the trained model
# --------------------------------------------------------------------------------------------------
def _bahdanau(ns):
    """Lesson 03: accuracy by length of both models; the alignment maps of the lesson's first two examples."""
    from course_utils.decoding import greedy_decode

    examples = []
    for index in (0, 1):
        src, tgt = ns["examples"][index]
        batch = ns["collate"]([(src, tgt)]).to(ns["DEVICE"])
        tokens, weights = greedy_decode(ns["models"]["attention"], batch.src, ns["BOS_ID"], ns["EOS_ID"],
                                        ns["PAD_ID"], max_len=len(tgt) + 1, return_weights=True)
        examples.append({"index": index, "source": ns["vocab"].decode(src), "target": ns["vocab"].decode(tgt),
                         "output": [ns["vocab"].itos[i] for i in tokens[0].tolist()],
                         "weights": _round(weights[0].cpu().tolist())})            # (output, source)
    return {
        "result": {name: round(float(ns["np"].mean(list(a.values())[-3:])), 3) for name, a in ns["accuracy"].items()}
        | {"train_seconds": {name: round(s, 1) for name, s in ns["seconds"].items()}},
        "accuracy": {name: {str(L): round(acc, 4) for L, acc in a.items()} for name, a in ns["accuracy"].items()},
        "alignments": examples,
    }


def _pointer(ns):
    """Lesson 06: the training curve, accuracy by length, the pointer weights of one length-10 sequence."""
    if len(ns["losses"]) != ns["num_steps"]:
        raise SystemExit(f"error: training stopped after {len(ns['losses'])} of {ns['num_steps']} steps (the time "
                         "budget): the run would not be the lesson's; try again on a quieter machine")
    x10 = ns["x10"]
    return {
        "result": {"per_position_10": round(ns["per_position"], 4), "whole_sequence_10": round(ns["whole_sequence"], 4),
                   "steps": len(ns["losses"]), "train_seconds": round(ns["train_seconds"], 1)},
        "losses": _round(ns["losses"], 4),
        "accuracy": {str(L): {"per_position": round(p, 4), "whole_sequence": round(w, 4)}
                     for L, (p, w) in ns["results"].items()},
        "pointers": {"inputs": _round(x10[0].tolist(), 3), "chosen": ns["pointers"][0].tolist(),
                     "weights": _round(ns["weights"][0].tolist())},                # (output step, input)
    }


def _transformer(ns):
    """Lesson 09: the training curve, the test accuracy during training, every head's attention maps."""
    return {
        "result": {"test_accuracy": ns["test_accuracy"], "steps": ns["num_steps"],
                   "train_seconds": round(ns["train_seconds"], 1)},
        "losses": _round(ns["losses"], 4),
        "accuracies": {str(step): round(acc, 4) for step, acc in ns["accuracies"].items()},
        "maps": {"source": ns["src_labels"], "decoder_input": ns["tgt_labels"],
                 **{name: _round(ns["maps"][name][:, 0].tolist()) for name in       # (layers, heads, T_q, T_k)
                    ("encoder_self", "decoder_self", "decoder_cross")}},
    }


def _lesson14(ns):
    """Lesson 14: what its fast mode shows of the trained models: lesson 12's GPT, the ViT, lesson 10's translator.
    Refused unless the GPT is lesson 12's trained run. The translator is recorded only when it is lesson 10's
    trained cpu run; otherwise `translator` is null and `translator_not_measured` says why."""
    measured = ns["measurements"]
    if measured["gpt"] is None:                                # the notebook said why: Multi30k is not available
        raise SystemExit(f"error: lesson 14's reference file needs Multi30k: {ns['missing']}")
    if not measured["gpt"]["source"].startswith("the trained"):
        raise SystemExit("error: lesson 14's reference file needs lesson 12's trained GPT in the runs folder "
                         "(runs/language_model-full: python -m course_utils.language_model --preset full); the "
                         f"notebook measured {measured['gpt']['source']}")
    gpt, vit, translator = measured["gpt"], measured["vit"], measured["translator"]
    not_measured = None
    if not translator["source"].startswith("the trained"):     # a smoke model's numbers are no reference
        not_measured = ("lesson 10's trained cpu run (runs/cpu/model.pt, from python -m course_utils.translation "
                        f"--preset cpu) was not in the runs folder; the notebook measured {translator['source']}, "
                        "which is not recorded")
        translator = None
    return {"result": {"gpt_best_induction_score": round(max(max(row) for row in gpt["induction_scores"]), 3),
                       "gpt_second_copy_loss": round(gpt["second_copy_loss"], 3),
                       "gpt_stream_ppl": {k: v["ppl_after_cache"] for k, v in gpt["stream"].items()},
                       "vit_accuracy": round(vit["accuracy"], 3), "deletion_area": vit["area"],
                       "translator_source": translator["source"] if translator else None},
            **measured, "translator": translator, "translator_not_measured": not_measured}


LESSONS = {   # run: (notebook, the cell it runs up to, cells it skips, settings (names of its sizes cell), collect)
    "bahdanau": ("03_bahdanau_attention.ipynb", "cell-25", (),
                 ("min_len", "max_len", "num_tokens", "num_train", "test_per_length", "batch_size", "d_emb",
                  "d_hidden", "d_attn", "num_steps", "lr"), _bahdanau),
    "pointer": ("06_pointer_networks.ipynb", "cell-28", (),
                ("d_model", "batch_size", "num_steps", "lr", "clip", "test_size", "test_lengths"), _pointer),
    "transformer": ("09_transformer.ipynb", "cell-35", ("cell-28-speed-code",),
                    ("min_len", "max_len", "d_model", "num_heads", "num_layers", "d_ff", "dropout", "batch_size",
                     "num_steps", "lr", "warmup", "label_smoothing", "num_test", "eval_every"), _transformer),
    "lesson14": ("14_what_attention_learns.ipynb", "l14-measured", ("l14-widget",),
                 ("PRESET", "gpt_repeat", "gpt_sequences", "stream_tokens", "stream_rows", "sinks", "window",
                  "vit_sizes", "vit_steps", "vit_batch", "vit_lr", "jw_pairs"), _lesson14),
}
SIZES_CELL = {"lesson14": "l14-setup"}   # a lesson's sizes cell, where it is not cell-03


def lesson_settings(run):
    notebook, *_, names, _ = LESSONS[run]
    ns = _execute(_cells(SOLUTIONS / notebook, [SIZES_CELL.get(run, "cell-03")]))
    return {name: ns[name] for name in names}


def lesson_run(run, path):
    """Run a lesson's cells in full mode up to the figure that needs a trained model; save what it shows."""
    notebook, last, skip, names, collect = LESSONS[run]
    load_before = _load()
    started = time.perf_counter()
    ns = _execute(_cells_up_to(SOLUTIONS / notebook, last, skip))
    seconds = time.perf_counter() - started
    collected = collect(ns)
    report = {"written_by": f"python tools/reference_runs.py {run}", "lesson": notebook,
              "what": f"the lesson's code cells up to {last} (without {', '.join(skip) or 'none'} and the widgets), "
                      "executed with COURSE_FAST=0",
              "settings": {name: ns[name] for name in names}, "machine": _machine(load_before),
              "run_seconds": round(seconds, 1)} | collected
    _write(path, report)
    return 0


RUNS = {"ntm": "ntm_copy", "bahdanau": "bahdanau", "pointer": "pointer", "transformer": "transformer",
        "lesson14": "lesson14_measurements"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", choices=list(RUNS), help="which reference run")
    parser.add_argument("--settings", action="store_true", help="print the full-mode settings as JSON and stop")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: course_utils/reference_runs/)")
    args = parser.parse_args(argv)
    _full_mode()
    if args.settings:
        print(json.dumps(ntm_settings() if args.run == "ntm" else lesson_settings(args.run)))
        return 0
    path = args.out or FOLDER / f"{RUNS[args.run]}.json"
    return ntm(path) if args.run == "ntm" else lesson_run(args.run, path)


if __name__ == "__main__":
    sys.exit(main())
