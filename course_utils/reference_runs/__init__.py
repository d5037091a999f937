"""Full-mode runs that the lessons show in fast mode, where a figure or a claim needs a trained model: ONE
schema, ONE writer (`write`), for every lesson.

    reference_run("ntm_copy")      # lesson 05: the NTM's learning curve and heads on the copy task
    reference_run("bahdanau")      # lesson 03: accuracy by length, alignment maps
    reference_run("pointer")       # lesson 06: pointer weights, accuracy by length
    reference_run("transformer")   # lesson 09: learning curve, attention maps of every head
    reference_run("lesson12_full")        # lesson 12: the GPT's run, perplexity against the bigram
    reference_run("lesson12_positions")   # lesson 12: learned, sinusoidal, rotary at 1x and 2x the context
    reference_run("lesson11_vision")      # lesson 11: the CNNs and the ViT on the digits, [CLS] and pixel maps
    reference_run("cpu", folder=translation.reference.FOLDER)   # lesson 10 (translation/reference.py reads it)

A file is written by the command named in its `written_by` field, never by hand:
  lessons 03-09   `python tools/reference_runs.py <run>` (it executes the lesson's own cells in full mode);
  lessons 10, 12  the pipeline's command with `--reference NAME`, e.g. `python -m course_utils.language_model
                  --preset full --reference lesson12_full` (course_utils/pipeline: the run, then its report);
  lesson 12's positions  `python -m course_utils.language_model.positions --reference lesson12_positions`;
  lesson 11       `python -m course_utils.vision_training --reference lesson11_vision` (the lesson's loop).

The schema (SCHEMA = 2; `check(ref)` lists what a file lacks):
  schema      2
  written_by  the command that wrote the file, as one types it (no machine's folders); tests run it with --help
  what        one line: what was run
  date        YYYY-MM-DD
  machine     config.describe_machine(): platform, processor, cpus, device, torch, threads, load_before/after
  settings    the sizes the run used (the lesson's sizes cell, or the run's configuration)
  result      the headline numbers the lesson quotes
  ...         whatever the lesson draws (curves, maps, examples, the run's report and history): free keys

Adding one (e.g. lessons 11 or 14), one small step: a command that trains at full size and calls
`write(NAME, written_by=..., what=..., settings=..., result=..., machine=..., **what_the_lesson_draws)` (a run
of the pipeline: its command with `--reference NAME` does all of it); run it once and commit the file; the
lesson reads it with `reference_run(NAME)` in fast mode; tests/test_reference_runs.py checks every file's
schema and runs its command with --help.
"""
import datetime
import json
import re
import shlex
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
SCHEMA = 2
REQUIRED = ("schema", "written_by", "what", "date", "machine", "settings", "result")
MACHINE = ("platform", "processor", "cpus", "torch", "threads", "load_before", "load_after")
_MACHINE_PATH = re.compile(r"^(/|~|[A-Za-z]:\\)")                  # an absolute path of some machine


def reference_run(name, folder=None):
    """The saved full-mode run `name` (a dict), or None when its file is missing."""
    path = Path(folder or FOLDER) / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def check(ref):
    """What a reference dict lacks or gets wrong (an empty list when it is as `write` writes it)."""
    problems = [f"no {key!r}" for key in REQUIRED if key not in ref]
    if problems:
        return problems
    if ref["schema"] != SCHEMA:
        problems.append(f"schema {ref['schema']!r} is not {SCHEMA}")
    words = shlex.split(str(ref["written_by"]))
    if len(words) < 2 or words[0] != "python":
        problems.append(f"written_by {ref['written_by']!r} is not a command (python ...)")
    problems += [f"written_by names a machine's folder: {w!r}" for w in words if _MACHINE_PATH.match(w)]
    problems += [f"machine lacks {key!r}" for key in MACHINE if key not in ref["machine"]]
    return problems


def write(name, *, written_by, what, settings, result, machine, folder=None, **payload):
    """Write reference file `name`.json (in `folder`, default this package's) with the schema above; returns
    its path. Raises ValueError, writing nothing, when the result would not pass `check`."""
    ref = {"schema": SCHEMA, "written_by": written_by, "what": what,
           "date": datetime.date.today().isoformat(), "machine": machine, "settings": settings, "result": result,
           **payload}
    problems = check(ref)
    if problems:
        raise ValueError(f"reference file {name}.json not written: {'; '.join(problems)}")
    path = Path(folder or FOLDER) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(ref), encoding="utf-8")
    return path


def dumps(ref):
    """The file's text: one top-level key a line (readable, diffable), each value compact."""
    lines = [f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'), ensure_ascii=False)}" for k, v in ref.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"
