"""Every figure the README and docs/ take from a file equals that file: one source for every figure.

FIGURES is the table: one row per sentence of a doc that quotes a result file, with `{}` where each
figure stands and, for each `{}` in order, the field of the JSON file it comes from (`a.b.0`: key `a`,
key `b`, item 0 of a list; `*100` or `/60` after it scales it, e.g. a fraction shown as a percentage,
seconds shown as minutes; a function of the whole file for a figure derived from two fields). A figure
passes when it equals the field at the precision it is printed with (`40.9` for 40.89, `85` for 84.7).

To add a figure (e.g. when lesson 13 or 14 quotes its reference file), add a row:

    Figure("14", "docs/results.md", "induction score {} after {} steps", REF / "lesson14.json",
           ("result.induction_score", "settings.steps")),

The text must be found in the doc (a row whose sentence is gone fails, so the table stays true); write
enough of the sentence to find it once. Figures measured by a command that keeps no file (a benchmark
printing a ratio, a lesson run by nbconvert) have no row: their command stands next to them.
Lessons 00, 01, 04, 07 and 08 quote no result file today. The README's study time per lesson is
checked against its estimate from the notebooks (`study_minutes`), lesson 14 included once it exists.
"""
import json
import re
from pathlib import Path
from typing import Callable, NamedTuple, Tuple, Union

import pytest

ROOT = Path(__file__).resolve().parents[1]
REF = Path("course_utils/reference_runs")
CPU = Path("course_utils/translation/reference_runs/cpu.json")
RESULTS, README = "docs/results.md", "README.md"
NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?)"


class Figure(NamedTuple):
    lesson: str
    doc: str
    text: str                                    # the doc's words, `{}` where each figure stands
    source: Path                                 # the JSON file the figures come from
    fields: Tuple[Union[str, Callable], ...]     # one per `{}`


def _min_attention(run):
    return min(run["accuracy"]["attention"].values())


def _max_attention(run):
    return max(run["accuracy"]["attention"].values())


def _perplexity_ratio(run):
    return run["result"]["gpt_val_ppl"] / run["result"]["bigram_val_ppl"]


def _seeds(run):
    return len(run["settings"]["seeds"])


def _sagan_paper(run):
    return run["result"]["mean_accuracy"]["CNN + SAGAN, values C/8 (paper)"]


def _sagan_code(run):
    return run["result"]["mean_accuracy"]["CNN + SAGAN, values C/2 (code)"]


def _minus_icl(run):
    return -run["result"]["icl_score"]


def _least_sink(run):
    return min(sum(row) / len(row) for row in run["gpt"]["sink_mass"])


def _most_sink(run):
    return max(sum(row) / len(row) for row in run["gpt"]["sink_mass"])


FIGURES = [
    # 02: the seq2seq curve comes from the run that compares it with attention (lesson 03's reference run)
    Figure("02", RESULTS, "test accuracy {} at length 4, {} at 10, {} at 16, {} at 24", REF / "bahdanau.json",
           ("accuracy.seq2seq.4", "accuracy.seq2seq.10", "accuracy.seq2seq.16", "accuracy.seq2seq.24")),
    Figure("03", RESULTS, "Bahdanau attention: {}–{} at every length 4–24 (seq2seq {} on lengths 22–24)",
           REF / "bahdanau.json", (_min_attention, _max_attention, "result.seq2seq")),
    Figure("03", RESULTS, "66 s (reference run: {} s, load {})", REF / "bahdanau.json",
           ("run_seconds", "machine.load_before.0")),
    Figure("05", RESULTS, "held-out {}) after **{} training sequences**", REF / "ntm_copy.json",
           ("result.heldout_cost", "result.sequences")),
    Figure("05", RESULTS, "(reference run: {} min, {} min of CPU, load {})", REF / "ntm_copy.json",
           ("result.wall_minutes", "result.cpu_minutes", "machine.load_before.0")),
    Figure("06", RESULTS, "sorting length 10: **{} % per position, {} % whole sequence**; length 20: {} % / {} %",
           REF / "pointer.json", ("result.per_position_10*100", "result.whole_sequence_10*100",
                                  "accuracy.20.per_position*100", "accuracy.20.whole_sequence*100")),
    Figure("06", RESULTS, "1.5–3.5 min (reference run: {} s, load {})", REF / "pointer.json",
           ("run_seconds", "machine.load_before.0")),
    Figure("09", RESULTS, "**{} %** of {} test sequences", REF / "transformer.json",
           ("result.test_accuracy*100", "settings.num_test")),
    Figure("09", RESULTS, "40 s training (reference run: {} s, load {})", REF / "transformer.json",
           ("result.train_seconds", "machine.load_before.0")),
    Figure("10", RESULTS, "({} M parameters, joint {}k BPE, bf16 autocast, {} epochs = {} optimizer steps): "
                          "**sacreBLEU {} with beam search**, {} greedy", CPU,
           ("report.parameters/1000000", "report.vocab_size/1000", "report.epochs", "report.steps",
            "report.bleu_beam", "report.bleu_greedy")),
    Figure("10", RESULTS, "{} min of training on {} thread ({} tokens/s), {} min in all", CPU,
           ("report.train_seconds/60", "report.threads", "report.tokens_per_second", "report.wall_seconds/60")),
    Figure("10", RESULTS, "The {} minutes (the report's", CPU, ("report.train_seconds/60",)),
    Figure("10", RESULTS, "(greedy {} s, beam {} {} s for the {} test", CPU,
           ("report.greedy_seconds", "report.config.beam_size", "report.beam_seconds", "report.test_sentences")),
    Figure("10", RESULTS, "bring the whole run to {} minutes", CPU, ("report.wall_seconds/60",)),
    Figure("10", README, "| ≈ {} min (cpu preset: {} min of training on {} thread", CPU,
           ("report.wall_seconds/60", "report.train_seconds/60", "report.threads")),
    Figure("11", RESULTS, "digits ({} seeds, {} steps): **ViT {}** mean test accuracy ({} parameters) vs CNN {}, "
                          "CNN + SAGAN {} (values C/8, paper) / {} (values C/2, authors' code)",
           REF / "lesson11_vision.json", (_seeds, "settings.steps", "result.mean_accuracy.ViT", "parameters.ViT",
                                          "result.mean_accuracy.CNN", _sagan_paper, _sagan_code)),
    Figure("11", RESULTS, "(reference run of the digits' models: {} s, load {})", REF / "lesson11_vision.json",
           ("wall_seconds", "machine.load_before.0")),
    Figure("12", RESULTS, "a {} M-parameter GPT ({} layers, d_model {}, {} query / {} key-value heads",
           REF / "lesson12_full.json", ("report.parameters/1000000", "settings.num_layers", "settings.d_model",
                                        "settings.num_heads", "settings.num_kv_heads")),
    Figure("12", RESULTS, "English-only BPE of {} pieces, float32) on Multi30k's English captions, {} steps: "
                          "**validation perplexity {}** against the smoothed bigram's {} (ratio {};",
           REF / "lesson12_full.json", ("report.vocab_size", "settings.steps", "result.gpt_val_ppl",
                                        "result.bigram_val_ppl", _perplexity_ratio)),
    Figure("12", RESULTS, "at twice the training context {}.", REF / "lesson12_full.json", ("result.gpt_val_ppl_2x",)),
    Figure("12", RESULTS, "{} min of training on {} thread(s), float32 (load {} before", REF / "lesson12_full.json",
           ("result.train_seconds/60", "machine.threads", "machine.load_before.0")),
    Figure("12", RESULTS, "({}-layer models, {} steps, context {},", REF / "lesson12_positions.json",
           ("settings.num_layers", "settings.steps", "settings.context")),
    Figure("12", RESULTS, "learned {} → {}, sinusoidal {} → {}, **RoPE {} → {}**", REF / "lesson12_positions.json",
           ("result.val_ppl.learned", "result.val_ppl_2x.learned", "result.val_ppl.sinusoidal",
            "result.val_ppl_2x.sinusoidal", "result.val_ppl.rope", "result.val_ppl_2x.rope")),
    Figure("12", RESULTS, "the positions {} min", REF / "lesson12_positions.json", ("wall_seconds/60",)),
    Figure("12", README, "a {} M-parameter GPT trained", REF / "lesson12_full.json", ("report.parameters/1000000",)),
    Figure("12", README, "training {} min on {} thread(s) in float32", REF / "lesson12_full.json",
           ("result.train_seconds/60", "machine.threads")),
    Figure("14", RESULTS, "attention-only Transformer ({} parameters, {} steps on repeated random tokens): "
                          "**phase change near step {}**, in-context learning score −{} at the end",
           REF / "lesson14_induction.json", ("report.parameters", "report.steps", "result.phase_change_step",
                                             _minus_icl)),
    Figure("14", RESULTS, "loss on the second copy {} against {} on the first", REF / "lesson14_induction.json",
           ("report.second_copy_loss", "report.first_copy_loss")),
    Figure("14", RESULTS, "the induction head **layer {}, head {}** (zeroing it: +{} nats on the second copy), "
                          "the previous-token head layer {}, head {} (+{})", REF / "lesson14_induction.json",
           ("result.induction_head.0", "result.induction_head.1", "result.induction_head_effect",
            "result.previous_token_head.0", "result.previous_token_head.1", "result.previous_token_head_effect")),
    Figure("14", RESULTS, "its induction score falls from {} to {} when the previous-token head is removed from what "
                          "its keys read ({} from its queries')", REF / "lesson14_induction.json",
           ("report.composition.none", "report.composition.keys", "report.composition.queries")),
    Figure("14", RESULTS, "best induction score {}, second copy's loss {} against {} on the first",
           REF / "lesson14_measurements.json",
           ("result.gpt_best_induction_score", "gpt.second_copy_loss", "gpt.first_copy_loss")),
    Figure("14", RESULTS, "weight on position 0 {}–{} per layer (uniform {})", REF / "lesson14_measurements.json",
           (_least_sink, _most_sink, "gpt.uniform_mass")),
    Figure("14", RESULTS, "a cache of {} tokens: plain window {}, {} sinks + window {}, window recomputed {}",
           REF / "lesson14_measurements.json",
           ("gpt.cache", "result.gpt_stream_ppl.plain window", "settings.sinks", "result.gpt_stream_ppl.sinks + window",
            "result.gpt_stream_ppl.window, recomputed")),
    Figure("14", RESULTS, "the full cache {} on tokens 64–127", REF / "lesson14_measurements.json",
           ("gpt.stream.full cache.ppl_up_to_max_len",)),
    Figure("14", RESULTS, "ViT ({} steps, test accuracy {}): area under the deletion curve raw attention {}, "
                          "**rollout {}**, input × gradient {}, random {}", REF / "lesson14_measurements.json",
           ("vit.steps", "result.vit_accuracy", "result.deletion_area.raw attention", "result.deletion_area.rollout",
            "result.deletion_area.input x gradient", "result.deletion_area.random")),
    Figure("14", RESULTS, "(reference runs: training {} s on {} thread, load {} before;",
           REF / "lesson14_induction.json",
           ("result.train_seconds", "report.threads", "machine.load_before.0")),
    Figure("14", RESULTS, "the measurements {} s, load {})", REF / "lesson14_measurements.json",
           ("run_seconds", "machine.load_before.0")),
]


def value(run, field):
    """The number `field` names in the parsed JSON `run` ("a.b.0", "a.b*100", "a/60", or a function)."""
    if callable(field):
        return float(field(run))
    path, op, factor = re.fullmatch(r"(.*?)(?:([*/])(\d+(?:\.\d+)?))?", field).groups()
    for key in path.split("."):
        try:
            run = run[int(key)] if isinstance(run, list) else run[key]
        except (KeyError, IndexError, ValueError):
            raise AssertionError(f"the file has no field {path!r} (at {key!r}): did its schema change?") from None
    number = float(run)
    if op:
        number = number * float(factor) if op == "*" else number / float(factor)
    return number


def shown_as(number, text):
    """True when `text` ("40.9", "2,560", "85") is `number` at the precision `text` shows."""
    decimals = len(text.partition(".")[2])
    return abs(number - float(text.replace(",", ""))) <= 0.5 * 10 ** -decimals + 1e-9


def _pattern(text):
    return re.compile(NUMBER.join(re.escape(part) for part in text.split("{}")))


@pytest.mark.parametrize("figure", FIGURES, ids=[f"{f.lesson}-{f.doc}-{f.text[:30]}" for f in FIGURES])
def test_figure_equals_its_source(figure):
    assert figure.text.count("{}") == len(figure.fields), f"{figure.text!r}: one field per {{}}"
    doc = (ROOT / figure.doc).read_text(encoding="utf-8")
    found = _pattern(figure.text).findall(doc)
    assert found, (f"{figure.doc} no longer says {figure.text!r} (with numbers for {{}}): update this row of "
                   f"tests/test_figures_docs.py with the doc")
    run = json.loads((ROOT / figure.source).read_text(encoding="utf-8"))
    for numbers in found:
        numbers = numbers if isinstance(numbers, tuple) else (numbers,)
        wrong = [f"{text} but {figure.source.name} has {field if isinstance(field, str) else field.__name__} = "
                 f"{value(run, field):g}" for text, field in zip(numbers, figure.fields)
                 if not shown_as(value(run, field), text)]
        assert not wrong, f"{figure.doc} (lesson {figure.lesson}) says {'; '.join(wrong)}"


def study_minutes(notebook):
    """The README's estimate of a learner's time for a lesson: prose at 100 words a minute, code at 15
    lines a minute, 10 minutes an exercise, 5 a widget (the course's generated cells not counted)."""
    import nbformat

    cells = [c for c in nbformat.read(notebook, as_version=4).cells
             if not {"course-header", "course-setup", "course-progress"} & set(c.metadata.get("tags", []))]
    words = sum(len(c.source.split()) for c in cells if c.cell_type == "markdown")
    code = [c for c in cells if c.cell_type == "code"]
    lines = sum(1 for c in code for line in c.source.splitlines() if line.strip())
    exercises = sum(c.source.count("### BEGIN SOLUTION") for c in cells)
    widgets = sum("widget" in c.metadata.get("tags", []) or "interact(" in c.source for c in code)
    return words / 100 + lines / 15 + 10 * exercises + 5 * widgets


def test_readme_study_time_is_the_estimate():
    text = (ROOT / README).read_text(encoding="utf-8")
    paragraph = text.split("**Your time.**", 1)[1].split("\n\n", 1)[0]
    said = {n: float(h.replace("½", ".5")) if h[0] != "½" else 0.5
            for n, h in re.findall(r"(\d\d) (½|\d+½?)(?= ·|;)", paragraph)}
    estimates = {p.name[:2]: study_minutes(p) / 60 for p in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))}
    wrong = [f"{n}: README {said.get(n)} h, estimate {h:.2f} h" for n, h in estimates.items()
             if n not in said or abs(said[n] - h) > 0.5]
    assert not wrong, "README's 'Your time' (to the nearest half hour): " + "; ".join(wrong)
    total = float(re.search(r"about (\d+) hours in all", paragraph).group(1))
    estimate = sum(estimates.values())
    assert abs(total - estimate) <= 1, f"README: {total} hours in all, estimate {estimate:.1f}"


def test_the_table_reads_figures_as_written():
    assert shown_as(40.89, "40.9") and shown_as(2560, "2,560") and shown_as(84.7467, "85")
    assert not shown_as(84.7467, "38.2") and not shown_as(0.968, "96.8")
    assert value({"a": {"b": [0.5, 2]}}, "a.b.0*100") == 50 and value({"s": 120}, "s/60") == 2
    assert _pattern("BLEU {} with beam").findall("sacreBLEU 40.9 with beam search") == ["40.9"]
    assert {f.lesson for f in FIGURES} >= {"02", "03", "05", "06", "09", "10", "12"}
