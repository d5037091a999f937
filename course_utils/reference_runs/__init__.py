"""Full-mode runs that the lessons show in fast mode, where a figure or a claim needs a trained model.

    reference_run("ntm_copy")      # lesson 05: the NTM's learning curve and heads on the copy task
    reference_run("bahdanau")      # lesson 03: accuracy by length, alignment maps
    reference_run("pointer")       # lesson 06: pointer weights, accuracy by length
    reference_run("transformer")   # lesson 09: learning curve, attention maps of every head
    reference_run("lesson12_full")        # lesson 12: the GPT's run, perplexity against the bigram
    reference_run("lesson12_positions")   # lesson 12: learned, sinusoidal, rotary at 1x and 2x the context

Each `<name>.json` of lessons 03-09 is written by `python tools/reference_runs.py <run>`, which executes the
lesson's own cells in full mode; its `written_by` field names that command. Lesson 12's are written by
`python -m course_utils.language_model ... --out <file>` (the functions its notebook calls), named by their
`command` field. Never edit the numbers by hand.
"""
import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def reference_run(name):
    """The saved full-mode run `name` (a dict), or None when its file is missing."""
    path = FOLDER / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
