"""The reference runs that lessons show in fast mode: written by commands, never by hand.

Every file is present, has the one schema (course_utils.reference_runs), names the command that wrote it
(a command that exists: each is run with --help; never a machine's folders), and was made with the
lesson's current full-mode settings (a lesson whose sizes change needs a new run)."""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils import reference_runs
from course_utils.reference_runs import FOLDER, reference_run
from course_utils.translation.reference import FOLDER as TRANSLATION_FOLDER

ROOT = Path(__file__).resolve().parents[1]
RUNS = {"ntm": "ntm_copy", "bahdanau": "bahdanau", "pointer": "pointer", "transformer": "transformer",
        "lesson14": "lesson14_measurements"}
FILES = sorted(FOLDER.glob("*.json")) + sorted(TRANSLATION_FOLDER.glob("*.json"))


def _run(name):
    run = reference_run(RUNS[name])
    assert run is not None, f"{FOLDER / (RUNS[name] + '.json')} is missing: run `python tools/reference_runs.py {name}`"
    assert run["written_by"] == f"python tools/reference_runs.py {name}"
    for key in ("lesson", "what", "settings", "machine", "date", "result"):
        assert key in run, f"{RUNS[name]}.json has no {key!r}"
    return run


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_reference_file_has_the_one_schema(path):
    ref = json.loads(path.read_text(encoding="utf-8"))
    assert not reference_runs.check(ref), f"{path.name}: {reference_runs.check(ref)}"
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"(/work/|/tmp/|/home/|/root/|/Users/|[A-Z]:\\\\)", text), \
        f"{path.name} names a folder of the machine it was made on: a reference file shows its command only"


def _commands():
    """(file, command) of every command a reference file records: the one that wrote it, and its run's."""
    found = []
    for path in FILES:
        ref = json.loads(path.read_text(encoding="utf-8"))
        for command in (ref.get("written_by"), ref.get("report", {}).get("command")):
            if command and (path.name, command) not in found:
                found.append((path.name, command))
    return found


# One process runs every recorded command with --help (torch imported once, not once per command).
_HELP_ALL = """
import contextlib, io, json, runpy, shlex, sys
failed = []
for name, command in json.loads(sys.argv[1]):
    words = shlex.split(command)[1:]
    module = words[1] if words[0] == "-m" else None
    sys.argv = [module or words[0], *(words[2:] if module else words[1:]), "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(module, run_name="__main__", alter_sys=True) if module else \
                runpy.run_path(words[0], run_name="__main__")
        code = 0
    except SystemExit as done:
        code = done.code or 0
    except BaseException as error:
        code = f"{type(error).__name__}: {error}"
    if code != 0 or "usage:" not in out.getvalue():
        failed.append(f"{name} records `{command}`, which does not run: {code}")
print(json.dumps(failed))
"""


def test_every_recorded_command_exists():
    """Lesson 10's fast mode used to show `python -m course_utils.translate ...`, a module renamed since."""
    commands = _commands()
    assert all(shlex.split(c)[0] == "python" for _, c in commands), \
        [f"{n}: {c!r} is not a python command" for n, c in commands if shlex.split(c)[0] != "python"]
    done = subprocess.run([sys.executable, "-c", _HELP_ALL, json.dumps(commands)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-1500:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, failed


def test_the_one_writer_refuses_what_the_schema_does_not_allow(tmp_path):
    good = dict(written_by="python tools/reference_runs.py ntm", what="x", settings={}, result={},
                machine={k: None for k in reference_runs.MACHINE})
    path = reference_runs.write("x", folder=tmp_path, **good, curve=[1, 2])
    assert reference_runs.reference_run("x", tmp_path)["curve"] == [1, 2] and path.name == "x.json"
    with pytest.raises(ValueError, match="names a machine's folder"):
        reference_runs.write("y", folder=tmp_path, **{**good, "written_by": "python -m m --out /home/me/runs"})
    with pytest.raises(ValueError, match="machine lacks"):
        reference_runs.write("y", folder=tmp_path, **{**good, "machine": {}})
    assert not (tmp_path / "y.json").exists()


def _rows_sum_to_one(matrix, what, tolerance=0.02):
    assert all(abs(sum(row) - 1) < tolerance for row in matrix), f"{what}: a row does not sum to 1"


def test_ntm_copy():
    run = _run("ntm")
    settings, result, curve = run["settings"], run["result"], run["curve"]
    assert result["converged"] and result["heldout_cost"] < settings["target_bits"]
    assert result["steps"] == len(curve["cost"]) == len(curve["running_cost"])
    assert result["sequences"] == result["steps"] * curve["sequences_per_step"]
    assert curve["sequences_per_step"] == settings["batch_size"]
    assert curve["running_cost"][-1] < settings["target_bits"] < curve["running_cost"][0]
    assert [int(L) for L in run["generalisation"]] == settings["test_lengths"]
    assert all({"bits", "wrong_bits"} <= set(v) for v in run["generalisation"].values())
    assert [h["length"] for h in run["heads"]] == [settings["max_length"], settings["test_lengths"][-2]]
    for heads in run["heads"]:
        steps = 2 * heads["length"] + 1
        for key, width in (("write_weights", settings["N"]), ("read_weights", settings["N"]),
                           ("output_probabilities", 8)):
            rows = heads[key]
            assert len(rows) == steps and all(len(row) == width for row in rows), f"{key}: wrong shape"
        _rows_sum_to_one(heads["write_weights"], "write weights")
        _rows_sum_to_one(heads["read_weights"], "read weights")


def test_bahdanau():
    run = _run("bahdanau")
    settings = run["settings"]
    assert set(run["accuracy"]) == {"seq2seq", "attention"}
    for accuracy in run["accuracy"].values():
        lengths = [int(L) for L in accuracy]
        assert min(lengths) == settings["min_len"] and max(lengths) == settings["max_len"]
        assert all(0 <= a <= 1 for a in accuracy.values())
    assert run["result"]["attention"] > 0.9 > 0.6 > run["result"]["seq2seq"], "the lesson's promise (its assert)"
    for example in run["alignments"]:
        weights = example["weights"]
        assert len(weights) == len(example["output"]) and all(len(row) == len(example["source"]) for row in weights)
        _rows_sum_to_one(weights, "alignment weights")


def test_pointer():
    run = _run("pointer")
    settings, pointers = run["settings"], run["pointers"]
    assert len(run["losses"]) == settings["num_steps"] == run["result"]["steps"]
    assert [int(L) for L in run["accuracy"]] == settings["test_lengths"]
    assert run["result"]["per_position_10"] > 0.98 and run["result"]["whole_sequence_10"] > 0.90
    assert len(pointers["inputs"]) == 10 and sorted(pointers["chosen"]) == list(range(10))
    assert len(pointers["weights"]) == 10 and all(len(row) == 10 for row in pointers["weights"])
    _rows_sum_to_one(pointers["weights"], "pointer weights")


def test_transformer():
    run = _run("transformer")
    settings, maps = run["settings"], run["maps"]
    assert len(run["losses"]) == settings["num_steps"] == run["result"]["steps"]
    assert str(settings["num_steps"]) in run["accuracies"] and run["result"]["test_accuracy"] == 1.0
    shapes = {"encoder_self": (maps["source"], maps["source"]), "decoder_self": (maps["decoder_input"],) * 2,
              "decoder_cross": (maps["decoder_input"], maps["source"])}
    for name, (queries, keys) in shapes.items():
        layers = maps[name]
        assert len(layers) == settings["num_layers"] and all(len(heads) == settings["num_heads"] for heads in layers)
        for heads in layers:
            for weights in heads:
                assert len(weights) == len(queries) and all(len(row) == len(keys) for row in weights), name
                _rows_sum_to_one(weights, name)


def _full_mode_python(code):
    env = dict(os.environ, COURSE_FAST="0", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "tools"))
    env.pop("CI", None)
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                             timeout=300, cwd=ROOT).stdout
    return json.loads(printed.strip().splitlines()[-1])


def test_every_run_used_its_lessons_current_full_settings():
    """Each file's settings are its lesson's sizes cell in full mode; lesson 02 shows lesson 03's seq2seq
    run, so its sizes must be lesson 03's too."""
    settings = _full_mode_python(
        "import json, reference_runs as r\n"
        "r._full_mode()\n"
        "s = {run: (r.ntm_settings() if run == 'ntm' else r.lesson_settings(run)) for run in r.RUNS}\n"
        "ns = r._execute(r._cells(r.SOLUTIONS / '02_seq2seq_bottleneck.ipynb', ['cell-03']))\n"
        "s['02'] = {k: ns[k] for k in s['bahdanau'] if k in ns}\n"
        "print(json.dumps(s))\n")
    for name, file in RUNS.items():
        assert settings[name] == reference_run(file)["settings"], \
            f"the lesson's full-mode settings changed: run `python tools/reference_runs.py {name}` again"
    lesson02 = settings.pop("02")
    assert lesson02 == {k: v for k, v in settings["bahdanau"].items() if k in lesson02} and len(lesson02) >= 9, \
        "lesson 02 shows lesson 03's seq2seq run: their sizes must agree"


def test_lesson12_runs_were_written_by_the_command_with_the_current_sizes():
    """Lesson 12's two runs come from its commands (not tools/reference_runs.py: the training is the
    pipeline's, the notebook calls the same functions) with today's full-mode sizes."""
    from course_utils.gpt import POSITIONS
    from course_utils.language_model.presets import POSITION_EXPERIMENT, PRESETS

    main = reference_run("lesson12_full")
    assert main is not None and main["written_by"].startswith("python -m course_utils.language_model --preset full")
    assert {k: main["settings"].get(k) for k in PRESETS["full"]} == PRESETS["full"], \
        "PRESETS['full'] changed: run `python -m course_utils.language_model --preset full --reference " \
        "lesson12_full` again"
    assert main["history"]["eval_step"][-1] == PRESETS["full"]["steps"] == main["result"]["steps"]
    assert main["result"]["gpt_val_ppl"] == round(main["history"]["val_ppl"][-1], 2)
    assert main["result"]["gpt_val_ppl"] <= main["result"]["bigram_val_ppl"] / 2, \
        "the lesson's promise (its full-mode assert)"
    positions = reference_run("lesson12_positions")
    assert positions is not None and positions["written_by"].startswith(
        "python -m course_utils.language_model.positions") and positions["preset"] == "full"
    assert positions["settings"] == POSITION_EXPERIMENT["full"], \
        "POSITION_EXPERIMENT['full'] changed: run `python -m course_utils.language_model.positions --reference " \
        "lesson12_positions` again"
    at_t, at_2t = positions["result"]["val_ppl"], positions["result"]["val_ppl_2x"]
    assert set(at_t) == set(at_2t) == set(POSITIONS)
    assert positions["vocab_size"] == main["report"]["vocab_size"]
    # what the lesson's prose says of this table (l12-rope-experiment-after)
    change = {k: at_2t[k] / at_t[k] for k in POSITIONS}
    assert at_t["rope"] < at_t["sinusoidal"] < at_t["learned"], \
        "the lesson says: at T, RoPE, then sinusoidal, then learned"
    assert change["sinusoidal"] > change["learned"] > change["rope"], \
        "the lesson says: at 2T sinusoidal degrades most, learned less, RoPE least"


@pytest.mark.parametrize("lesson", ["02_seq2seq_bottleneck", "03_bahdanau_attention", "05_neural_turing_machine",
                                    "06_pointer_networks", "09_transformer", "12_gpt_from_scratch"])
def test_fast_mode_says_so_and_shows_the_full_run(lesson):
    """A lesson whose figures need a trained model loads its reference run in fast mode, and only there."""
    cells = json.loads((ROOT / "solutions" / f"{lesson}.ipynb").read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "reference_run(" in code and ") if FAST else None" in code and "Fast mode:" in code
