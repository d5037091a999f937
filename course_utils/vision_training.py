"""Lesson 11's image models on the digits: the loop the lesson trains them with, and the lesson's full run.

    losses, evaluations = fit(model, next_batch, num_steps, lr=3e-3)    # Adam on the cross-entropy
    next_batch = digit_batches(X_train, y_train, batch_size=64, seed=0)  # a seeded stream of random batches
    model, losses, seconds = train_digits_model("ViT", seed=0)          # one of the lesson's models, trained as
                                                                         # its full mode trains it (lesson 14's ViT)
    python -m course_utils.vision_training --reference lesson11_vision  # the full run, saved for fast mode

The full run trains the lesson's four models (the CNN, the CNN with SAGAN's block in its two forms, the ViT)
for FULL["steps"] steps with each of FULL["seeds"], as the lesson's cells do in full mode (the same sizes, the
same seeding, one thread: tests/test_vision.py keeps FULL equal to the lesson's sizes cell), and saves what
the lesson's fast mode shows next to its own barely trained models: the accuracies, the training curves, γ,
the trained ViT's [CLS] attention on the first test digits (every layer and head), and the SAGAN maps of the
lesson's chosen pixels. The file is written by `reference_runs.write`, never by hand.
"""
import argparse
import shlex
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .config import describe_machine, load_average, seed_everything
from .training import smooth
from .vision import SmallCNN, ViT, accuracy, load_digits_split

COMMAND = "python -m course_utils.vision_training"
FULL = {"channels": 16, "batch_size": 64, "lr": 3e-3, "steps": 1500, "seeds": [0, 1, 2], "patch_size": 2,
        "vit": {"d_model": 32, "num_heads": 4, "num_layers": 2, "d_ff": 64, "dropout": 0.1},
        "test_fraction": 0.25, "split_seed": 0}
MODELS = ("CNN", "CNN + SAGAN, values C/8 (paper)", "CNN + SAGAN, values C/2 (code)", "ViT")
SHOWN = {"cls_digits": [0, 1, 2, 3], "pixel_digits": [0, 1], "pixels": [[1, 3], [4, 4], [6, 2]],
         "pixel_model": "CNN + SAGAN, values C/2 (code)", "statistics_digits": 50, "smooth": 25, "every": 10}


def cnn_configs(channels):
    """The lesson's CNNs: name -> SmallCNN's arguments (the SAGAN block's values with C/8 or C/2 channels)."""
    return {"CNN": dict(attention=False), "CNN + SAGAN, values C/8 (paper)": dict(attention=True),
            "CNN + SAGAN, values C/2 (code)": dict(attention=True, d_value=channels // 2)}


def make_model(name, settings=FULL):
    """A new model of the lesson, `name` one of MODELS, sized by `settings`."""
    if name == "ViT":
        return ViT(image_size=8, patch_size=settings["patch_size"], num_classes=10, **settings["vit"])
    return SmallCNN(num_classes=10, channels=settings["channels"], **cnn_configs(settings["channels"])[name])


def fit(model, next_batch, num_steps, lr, outputs=lambda model, inputs: model(inputs), evaluate=None,
        eval_every=100, desc="training", progress=True):
    """Adam on the cross-entropy of `outputs(model, inputs)` for `num_steps` batches `next_batch()` -> (inputs,
    targets); returns the losses and the evaluations [(step, evaluate(model))] every `eval_every` steps."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses, evaluations = [], []
    for step in tqdm(range(1, num_steps + 1), desc=desc, leave=False, disable=not progress):
        inputs, targets = next_batch()
        loss = F.cross_entropy(outputs(model, inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if evaluate is not None and (step % eval_every == 0 or step == num_steps):
            evaluations.append((step, evaluate(model)))
    return losses, evaluations


def digit_batches(X, y, batch_size, seed):
    """A function that returns the next random batch (X[idx], y[idx]), drawn with its own seeded generator."""
    generator = torch.Generator().manual_seed(seed)

    def next_batch():
        idx = torch.randint(len(X), (batch_size,), generator=generator).to(X.device)
        return X[idx], y[idx]
    return next_batch


def train_digits_model(name, seed, settings=FULL, data=None, progress=True):
    """Model `name` trained on the digits' training split for settings["steps"] steps with `seed`, as the
    lesson trains it (seed_everything(seed), then the model, then `fit`); returns (model in eval mode, the
    losses, the training seconds). data: (X_train, y_train), else load_digits_split's."""
    if data is None:
        data = load_digits_split(settings["test_fraction"], settings["split_seed"])[:2]
    seed_everything(seed)
    model = make_model(name, settings)
    start = time.perf_counter()
    losses, _ = fit(model, digit_batches(*data, settings["batch_size"], seed), settings["steps"], settings["lr"],
                    desc=f"{name}, seed {seed}", progress=progress)
    return model.eval(), losses, time.perf_counter() - start


def _rounded(x, digits=3):
    return np.round(np.asarray(x, dtype=float), digits).tolist()


def _shown(runs, X_test, y_test, settings):
    """What the lesson draws from the trained models of seed 0: curves, [CLS] maps, pixel maps, map statistics."""
    seed = settings["seeds"][0]
    every, window = SHOWN["every"], SHOWN["smooth"]
    steps = list(range(every, settings["steps"] + 1, every))
    at = np.array(steps, dtype=int) - 1                                # the curves at every `every`-th step
    curves = {"seed": seed, "window": window, "steps": steps,
              "loss": {name: _rounded(smooth(runs[name, seed][1], window)[at]) for name in MODELS}}
    vit, digits = runs["ViT", seed][0], SHOWN["cls_digits"]
    with torch.no_grad():
        cls = vit.cls_attention(X_test[digits])                        # (layers, K, heads, N + 1)
        predicted = vit(X_test[digits]).argmax(-1).tolist()
    cnn, pixel_digits = runs[SHOWN["pixel_model"], seed][0], SHOWN["pixel_digits"]
    with torch.no_grad():
        cnn(X_test[pixel_digits])
        rows = [r * 8 + c for r, c in SHOWN["pixels"]]
        pixel_weights = cnn.attention.attn_weights[:, rows]            # (K, pixels, 64)
        cnn(X_test[:SHOWN["statistics_digits"]])
        maps = cnn.attention.attn_weights                              # (K, 64, 64)
    n = maps.shape[1]
    between = 0.5 * (maps[:, :, None, :] - maps[:, None, :, :]).abs().sum(-1)                 # (K, 64, 64)
    return {
        "curves": curves,
        "cls_attention": {"model": "ViT", "seed": seed, "digits": digits, "labels": y_test[digits].tolist(),
                          "predicted": predicted, "weights": _rounded(cls),
                          "self_weight": _rounded(cls[:, :, :, 0].mean((1, 2)))},
        "pixel_attention": {"model": SHOWN["pixel_model"], "seed": seed, "digits": pixel_digits,
                            "labels": y_test[pixel_digits].tolist(), "pixels": SHOWN["pixels"],
                            "weights": _rounded(pixel_weights, 4),
                            "between_pixels": round(float(between.sum() / (maps.shape[0] * n * (n - 1))), 3),
                            "to_uniform": round(float(0.5 * (maps - 1 / n).abs().sum(-1).mean()), 3),
                            "statistics_digits": SHOWN["statistics_digits"]},
    }


def full_run(settings=FULL, progress=True):
    """Train every model of MODELS with every seed; returns the report's fields (a dict)."""
    X_train, y_train, X_test, y_test = load_digits_split(settings["test_fraction"], settings["split_seed"])
    runs = {}
    for seed in settings["seeds"]:
        for name in MODELS:
            model, losses, seconds = train_digits_model(name, seed, settings, (X_train, y_train), progress)
            runs[name, seed] = model, losses, accuracy(model, X_test, y_test), seconds
    accuracies = {name: {str(s): round(runs[name, s][2], 4) for s in settings["seeds"]} for name in MODELS}
    means = {name: round(float(np.mean(list(a.values()))), 4) for name, a in accuracies.items()}
    return {
        "result": {"mean_accuracy": means, "vit_minus_cnn": round(means["ViT"] - means["CNN"], 4),
                   "test_digits": len(y_test)},
        "accuracy": accuracies,
        "parameters": {name: sum(p.numel() for p in runs[name, settings["seeds"][0]][0].parameters())
                       for name in MODELS},
        "train_seconds": {name: {str(s): round(runs[name, s][3], 1) for s in settings["seeds"]} for name in MODELS},
        "gamma": {name: [round(runs[name, s][0].attention.gamma.item(), 3) for s in settings["seeds"]]
                  for name in MODELS if name != "ViT" and runs[name, settings["seeds"][0]][0].attention is not None},
        **_shown(runs, X_test, y_test, settings),
    }


def main(argv=None):
    from . import reference_runs

    parser = argparse.ArgumentParser(prog=COMMAND, description="Lesson 11's full run: the CNN, the CNN with SAGAN's "
                                     "block (two forms) and the ViT on the digits, every seed; what fast mode shows.")
    parser.add_argument("--steps", type=int, default=FULL["steps"], help="training steps per model (default: the "
                                                                         "lesson's full mode)")
    parser.add_argument("--seeds", type=int, nargs="+", default=FULL["seeds"])
    parser.add_argument("--reference", metavar="NAME", help="write the reference file NAME.json into the package")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    settings = {**FULL, "steps": args.steps, "seeds": list(args.seeds)}
    torch.set_num_threads(1)            # as the lesson: tiny models run fastest on one thread
    load_before, started = load_average(), time.perf_counter()
    report = full_run(settings, progress=not args.no_progress)
    wall = round(time.perf_counter() - started, 1)
    print(f"mean test accuracy: {report['result']['mean_accuracy']} ({wall} s)")
    if args.reference:
        words = sys.argv[1:] if argv is None else list(argv)
        path = reference_runs.write(
            args.reference, written_by=shlex.join([*COMMAND.split(), *words]),
            what="lesson 11's CNNs (with and without SAGAN's block) and ViT trained on the digits, every seed, "
                 "as the lesson's full mode trains them", settings=settings, result=report.pop("result"),
            machine=describe_machine("cpu", load_before), wall_seconds=wall, **report)
        print(f"written: {path.name} ({path.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
