"""Lessons 12 and 14 as a learner reads them (issue 39): no exercise's reference is one `??` away before the
exercise, each header says which twin is open, the display equations fit a JupyterLab page, lesson 14's text names
the sizes of both modes' models, lesson 12's times come from its reference runs, and its learning curve's legend
hides nothing."""
import ast
import importlib
import inspect
import re
import types
from pathlib import Path

import nbformat
import pytest

from course_utils.checks import exercises

ROOT = Path(__file__).resolve().parents[1]
LESSONS = {"12": "12_gpt_from_scratch.ipynb", "14": "14_what_attention_learns.ipynb"}


def _cells(folder, lesson):
    return nbformat.read(ROOT / folder / LESSONS[lesson], as_version=4).cells


# ---- a reference is imported after its exercise ------------------------------------------------------------
def _extra_references(lesson):
    """The course's own version of an exercise's answer where the check's reference is one of its own (lesson 12's
    GPT: the check compares with a copy, ReferenceGPT; `??GPT` would show the answer all the same)."""
    if lesson == "12":
        from course_utils.gpt import GPT
        return {"gpt": [GPT]}
    return {}


def _bound_by_imports(source):
    """{name: object} that the import statements of a cell bind (the rest of the cell is not run)."""
    bound = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module = importlib.import_module(alias.name)
                bound[alias.asname or alias.name.split(".")[0]] = module if alias.asname else \
                    importlib.import_module(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = importlib.import_module(node.module)
            for alias in node.names:
                try:
                    value = getattr(module, alias.name)
                except AttributeError:
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                bound[alias.asname or alias.name] = value
    return bound


def _gives_away(value, reference):
    """`value` is the reference, or a module (or class) that holds it as an attribute (`module.reference??`)."""
    if value is reference:
        return True
    if isinstance(value, types.ModuleType) or inspect.isclass(value):
        name = getattr(reference, "__name__", None)
        return name is not None and getattr(value, name, None) is reference
    return False


@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_no_reference_is_imported_before_its_exercise(lesson):
    cells = _cells("solutions", lesson)
    checks = {ex.exercise: ex for ex in exercises()[lesson]}
    extra = _extra_references(lesson)
    names_before = {}                                 # name -> (cell index, object), imports of the cells so far
    found = []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        called = re.match(r"check\.(\w+)\(", cell.source.strip())
        if called and called.group(1) in checks:
            ex = checks[called.group(1)]
            references = [r for r in [ex.reference] + extra.get(ex.exercise, []) if r is not None]
            for name, (where, value) in names_before.items():
                if any(_gives_away(value, r) for r in references):
                    found.append(f"{name!r} (imported in cell {where}) gives away {ex.exercise}'s answer before its "
                                 f"check in cell {i}")
        for name, value in _bound_by_imports(cell.source).items():
            names_before[name] = (i, value)
    assert not found, f"lesson {lesson}: " + "; ".join(found)


def test_the_test_catches_a_reference_imported_too_early():
    from course_utils import positions
    from course_utils.positions import apply_rope
    assert _gives_away(_bound_by_imports("from course_utils.positions import apply_rope")["apply_rope"], apply_rope)
    assert _gives_away(_bound_by_imports("from course_utils import positions")["positions"], apply_rope)
    assert positions.apply_rope is apply_rope and not _gives_away(positions, len)


# ---- the header says which twin is open --------------------------------------------------------------------
@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_each_twins_header_says_which_one_is_open(lesson):
    solution, learner = _cells("solutions", lesson)[0].source, _cells("notebooks", lesson)[0].source
    assert "This notebook: **solutions**" in solution and "**exercises**" not in solution.split("The exercises")[0]
    assert "This notebook: **exercises**" in learner


# ---- display equations fit the page ------------------------------------------------------------------------
def glyphs(line):
    """A rough count of the characters a line of LaTeX shows (commands as one glyph, fractions as their wider
    part, \\qquad as four): what decides whether it fits JupyterLab's page."""
    s = re.sub(r"\\(text|mathrm|operatorname|mathcal|mathbf)\{([^{}]*)\}", r"\2", line)
    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", lambda m: "x" * max(len(m[1]), len(m[2])), s)
    s = s.replace("\\qquad", "xxxx").replace("\\quad", "xx")
    s = re.sub(r"\\[a-zA-Z]+", "x", s)
    s = re.sub(r"[{}_^&]|\\[,;: !]", "", s)
    return len(re.sub(r"\s+", "", s))


WIDEST = 75        # lesson 12's section-4 equation was 98 and ran out of a 1400-pixel-wide JupyterLab window


@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_display_equations_fit_a_jupyterlab_page(lesson):
    wide = [(c.id, line.strip()[:60], glyphs(line)) for c in _cells("solutions", lesson) if c.cell_type == "markdown"
            for math in re.findall(r"\$\$(.+?)\$\$", c.source, re.S) for line in re.split(r"\\\\", math)
            if glyphs(line) > WIDEST]
    assert not wide, f"lesson {lesson}: display equations to split (\\begin{{aligned}} ... \\\\ ...): {wide}"


# ---- lesson 14 names the sizes of the model it shows, in both modes ----------------------------------------
def test_lesson_14_names_the_sizes_of_both_modes_models():
    from course_utils.induction_heads import PRESETS, make_config
    cells = {c.id: c.source for c in _cells("solutions", "14")}
    text = cells["l14-model"]
    for preset in ("full", "fast"):
        cfg = make_config(preset)
        said = re.search(rf"`{preset}`\s+preset\)?[^$]*\$N = (\d+)\$ layers of\s+\$h = (\d+)\$ heads, "
                         rf"\$d_{{model}} = (\d+)\$,[^$]*\$T = (\d+)\$", text)
        assert said, f"l14-model no longer says the {preset} preset's sizes as N = .. layers of h = .. heads, ..."
        assert tuple(map(int, said.groups())) == (cfg.num_layers, cfg.num_heads, cfg.d_model, cfg.length), preset
    assert PRESETS["full"]["num_heads"] != PRESETS["fast"]["num_heads"]
    # nowhere else does the text state one mode's sizes as if they were the model's
    for cid, source in cells.items():
        if cid != "l14-model" and re.search(r"\$h = \d+\$|d_\{model\} = \d+|\$T = \d+\$", source):
            assert "full" in source, f"{cid} states a model size without saying whose"


def test_lesson_14_prints_the_size_of_the_model_it_trains():
    cells = {c.id: c.source for c in _cells("solutions", "14")}
    assert "preset's model" in cells["l14-model-code"] and "cfg.num_heads" in cells["l14-model-code"]


# ---- lesson 12: its times from the reference runs, the mid preset offered ----------------------------------
def test_lesson_12s_header_gives_both_training_times_from_the_reference_run():
    """The header (stamped from the README's row, which tests/test_figures_docs.py holds to the reference file) gives
    the float32 run on one thread and the bf16 one; the lesson claims no time of its own ("under 10 minutes")."""
    from course_utils.reference_runs import reference_run
    cells = _cells("solutions", "12")
    full = reference_run("lesson12_full")
    said = re.search(r"training (\d+) min on (\d+) thread\(s\) in float32", cells[0].source)
    assert said and int(said.group(1)) == round(full["result"]["train_seconds"] / 60)
    assert int(said.group(2)) == full["machine"]["threads"] == 1 and full["settings"]["amp"] == "off"
    assert "8 min on 2 threads in bf16 on a CPU with bf16 instructions" in cells[0].source
    assert not any("under 10 minutes" in c.source for c in cells)


def test_lesson_12_offers_the_mid_preset_and_its_run_is_short():
    """The mid preset's reference run (its own command, --reference lesson12_mid) took at most 5 minutes on the
    course's 2-core CPU, the whole command, while other jobs shared it; the header states that time and the load."""
    from course_utils.language_model.presets import PRESETS
    from course_utils.reference_runs import reference_run
    cells = {c.id: c.source for c in _cells("solutions", "12")}
    assert '"mid"' in cells["l12-setup"] and "`mid` preset" in cells["l12-train"]
    mid = reference_run("lesson12_mid")
    assert mid is not None, "write it: python -m course_utils.language_model --preset mid --reference lesson12_mid"
    assert mid["written_by"].startswith("python -m course_utils.language_model --preset mid")
    assert {k: mid["settings"][k] for k in PRESETS["mid"]} == PRESETS["mid"], "PRESETS['mid'] changed: run it again"
    machine, wall = mid["machine"], mid["report"]["wall_seconds"]
    assert machine["cpus"] == 2 and mid["settings"]["amp"] == "off"               # float32: no bf16 instructions needed
    assert wall <= 5 * 60
    assert mid["result"]["gpt_val_ppl"] < 0.6 * mid["result"]["bigram_val_ppl"]
    said = re.search(r"recognisable captions in under 5 minutes on a 2-core CPU\s+\((\d+) minutes\s+measured on "
                     r"the course's machine while other jobs loaded it, load (\d+)\)", cells["l12-title"])
    assert said and int(said.group(1)) == round(wall / 60) and int(said.group(2)) == round(machine["load_before"][0])
    assert "mid_run" in cells["l12-mid"] and "greedy" in cells["l12-mid"]          # what it wrote, shown in the lesson


def test_the_learning_curves_legend_covers_no_curve_and_no_baseline():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_utils.language_model.figures import learning_curve
    from course_utils.reference_runs import reference_run
    run = reference_run("lesson12_full")
    fig, ax = learning_curve(run["history"], run["result"]["bigram_val_ppl"], title="a title\non two lines")
    fig.canvas.draw()
    legend, plot = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= plot.x1, "the legend lies over the plot"
    low, high = ax.get_ylim()
    assert low * 1.1 < run["result"]["bigram_val_ppl"] < high / 1.1, "the bigram's line sits on the plot's edge"
    fig, ax = learning_curve(run["history"], 500.0)                       # a baseline above every curve
    assert ax.get_ylim()[0] * 1.1 < 500.0 < ax.get_ylim()[1] / 1.1
    plt.close(fig)
    fig, ax = learning_curve(run["history"], 2.0)                         # and one below them all
    assert ax.get_ylim()[0] * 1.1 < 2.0 < ax.get_ylim()[1] / 1.1
    plt.close("all")
    assert "bigram" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
    plt.close(fig)
