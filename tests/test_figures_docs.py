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
import functools
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


def _least_ov_layer0(run):
    return -min(run["report"]["circuits"]["ov_eigenvalue_score"][0])


def _most_ov_layer0(run):
    return max(run["report"]["circuits"]["ov_eigenvalue_score"][0])


def _minus_patching_previous(run):
    layer, head = run["report"]["previous_token_head"]
    return -run["report"]["circuits"]["patching"][layer][head]


def _least_sink(run):
    return min(sum(row) / len(row) for row in run["gpt"]["sink_mass"])


def _most_sink(run):
    return max(sum(row) / len(row) for row in run["gpt"]["sink_mass"])


CAPTIONS15, RECALL15 = REF / "lesson15_captions.json", REF / "lesson15_recall.json"


# lesson 15: figures derived from a reference file (the largest logit of the last evaluation, means over the global
# layers), and the cache sizes computed by the course's code at the sizes the reference run records
def _last_max_logit(model):
    def last(run):
        return max(run["models"][model]["history"]["max_logit"][-1])
    last.__name__ = f"max_logit_{model}"
    return last


def _d_head(run):
    return run["settings"]["d_model"] // run["settings"]["num_heads"]


def _v3(size):
    def published(run):
        from course_utils.latent_attention import DEEPSEEK_V3

        return DEEPSEEK_V3[size]
    published.__name__ = f"DEEPSEEK_V3_{size}"
    return published


def _first_mass(model, key="first"):
    def mean(run):
        found = run["models"][model]["first_position"][key]
        return sum(found) / len(found)
    mean.__name__ = f"first_position_{model}_{key}"
    return mean


def _uniform_first(run):
    from course_utils.attention_sinks import uniform_first_position_mass

    return uniform_first_position_mass(run["settings"]["context"])


def _cache_numbers(kind, sizes="ours"):
    """Numbers a layer caches per token (course_utils.latent_attention.cache_numbers), at the run's sizes or
    DeepSeek-V3's (GQA there with 8 key-value heads, as the lesson writes)."""
    def numbers(run):
        from course_utils.latent_attention import DEEPSEEK_V3, cache_numbers

        s = run["settings"]
        at = dict(DEEPSEEK_V3, num_kv_heads=8) if sizes == "v3" else dict(
            num_heads=s["num_heads"], d_head=s["d_model"] // s["num_heads"], num_kv_heads=s["num_kv_heads"],
            d_latent=s["d_latent"], d_rope=s["d_rope"])
        return cache_numbers(kind, at["num_heads"], at["d_head"], at["num_kv_heads"], at["d_latent"], at["d_rope"])
    numbers.__name__ = f"cache_numbers_{kind}_{sizes}"
    return numbers


def _v3_kib(kind):
    def kib(run):
        from course_utils.latent_attention import DEEPSEEK_V3

        return _cache_numbers(kind, "v3")(run) * 2 * DEEPSEEK_V3["num_layers"] / 1024
    kib.__name__ = f"v3_kib_{kind}"
    return kib


@functools.lru_cache(maxsize=None)
def _layer_cache_kib(kind, T):
    """KiB one layer's cache holds after decoding T tokens, measured with the course's layer at lesson 15's full
    sizes (the layers' `cache_bytes`, as the lesson's cell counts them)."""
    import torch

    from course_utils.delta_rule import DeltaNetMixer
    from course_utils.modern_block import ModernAttention

    s = json.loads((ROOT / CAPTIONS15).read_text(encoding="utf-8"))["settings"]
    torch.manual_seed(0)
    if kind in ("full", "local"):
        layer = ModernAttention(s["d_model"], s["num_heads"], s["num_kv_heads"],
                                window=s["window"] if kind == "local" else None)
    else:
        layer = DeltaNetMixer(s["d_model"], s["num_heads"], rule=kind, chunk_size=s["chunk_size"])
    cache, x = None, torch.randn(1, T, s["d_model"])
    with torch.no_grad():
        for t in range(T):
            _, cache = layer.step(x[:, t:t + 1], cache, t)
    return layer.cache_bytes(cache) / 1024


def _layer_kib(kind, T):
    def kib(run):
        return _layer_cache_kib(kind, T)
    kib.__name__ = f"layer_cache_kib_{kind}_{T}"
    return kib


def _model_kib(model, T):
    def kib(run):
        from course_utils.open_models import layers_of, make_config

        return sum(_layer_cache_kib(kind, T) for kind in layers_of(make_config("full", model=model)))
    kib.__name__ = f"model_cache_kib_{model}_{T}"
    return kib


def _open_models_training_minutes(run, key="train_seconds"):
    recall = json.loads((ROOT / RECALL15).read_text(encoding="utf-8"))
    return (run[key] + recall[key]) / 60


def _open_models_cpu_minutes(run):
    return _open_models_training_minutes(run, "cpu_seconds")


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
    Figure("12", RESULTS, "The `mid` preset ({} layers, d_model {}, {} M parameters, {} steps of {} windows, float32): "
                          "validation perplexity {} against the bigram's {}", REF / "lesson12_mid.json",
           ("settings.num_layers", "settings.d_model", "report.parameters/1000000", "settings.steps",
            "settings.batch_size", "result.gpt_val_ppl", "result.bigram_val_ppl")),
    Figure("12", RESULTS, "the whole `mid` command {} min on {} thread(s) of this 2-core CPU (load {} before,",
           REF / "lesson12_mid.json", ("report.wall_seconds/60", "machine.threads", "machine.load_before.0")),
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
    Figure("14", RESULTS, "the OV circuits of layer 1's heads 0, 2 and 3 have eigenvalue scores {}, {} and {} and put "
                          "a token's own logit first for {}, {} and {} of the 64 tokens (layer 0's heads: scores −{} "
                          "to {})",
           REF / "lesson14_induction.json",
           ("report.circuits.ov_eigenvalue_score.1.0", "report.circuits.ov_eigenvalue_score.1.2",
            "report.circuits.ov_eigenvalue_score.1.3", "report.circuits.ov_diagonal_top1.1.0",
            "report.circuits.ov_diagonal_top1.1.2", "report.circuits.ov_diagonal_top1.1.3", _least_ov_layer0,
            _most_ov_layer0)),
    Figure("14", RESULTS, "puts the query's own token first for {} of the tokens ({} through layer 0's head 2, {} "
                          "without layer 0)", REF / "lesson14_induction.json",
           ("report.circuits.k_composition_top1.3", "report.circuits.k_composition_top1.2",
            "report.circuits.direct_qk_top1")),
    Figure("14", RESULTS, "layer 1's heads 0, 2 and 3 close {}, {} and {} of the second copy's loss gap, the "
                          "previous-token head −{}, although it restores the induction head's score from {} to {} ({} "
                          "clean)",
           REF / "lesson14_induction.json",
           ("report.circuits.patching.1.0", "report.circuits.patching.1.2", "report.circuits.patching.1.3",
            _minus_patching_previous, "report.circuits.patched_induction_scores.corrupted.0",
            "report.circuits.patched_induction_scores.previous-token head patched.0",
            "report.circuits.patched_induction_scores.clean.0")),
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
    Figure("14", RESULTS, "(reference runs: training {} s on {} thread, load {} before (",
           REF / "lesson14_induction.json",
           ("result.train_seconds", "report.threads", "machine.load_before.0")),
    Figure("14", RESULTS, "the measurements {} s, load {})", REF / "lesson14_measurements.json",
           ("run_seconds", "machine.load_before.0")),
    Figure("15", RESULTS, "seven {}-layer caption models (d_model {}, {} query / {} key-value heads of {}, {} "
                          "steps of {} windows of {} tokens, float32) on lesson 12's captions, validation perplexity: "
                          "**today's block {} against lesson 12's GPT-2 block {}** ({} and {} parameters)", CAPTIONS15,
           ("settings.num_layers", "settings.d_model", "settings.num_heads", "settings.num_kv_heads", _d_head,
            "settings.steps", "settings.batch_size", "settings.context",
            "models.modern.val_ppl", "models.gpt2.val_ppl", "models.modern.parameters", "models.gpt2.parameters")),
    Figure("15", RESULTS, "at the end of training: GPT-2 block {}, today's block without QK-norm {}, **with QK-norm "
                          "{}**", CAPTIONS15,
           (_last_max_logit("gpt2"), _last_max_logit("no_qk_norm"), _last_max_logit("modern"))),
    Figure("15", RESULTS, "cache per token and layer (numbers): MHA {}, GQA {}, MQA {}, MLA {} at this size; at "
                          "DeepSeek-V3's sizes ({} layers, {} heads of {}; GQA with {} key-value heads) MHA {}, GQA "
                          "{}, MQA {}, **MLA {}** ({} + {}), per token over all layers in bf16 {} KiB, {} KiB, {} KiB "
                          "and {} KiB", CAPTIONS15,
           (_cache_numbers("MHA"), _cache_numbers("GQA"), _cache_numbers("MQA"), _cache_numbers("MLA"),
            _v3("num_layers"), _v3("num_heads"), _v3("d_head"), lambda run: 8,
            _cache_numbers("MHA", "v3"), _cache_numbers("GQA", "v3"), _cache_numbers("MQA", "v3"),
            _cache_numbers("MLA", "v3"), _v3("d_latent"), _v3("d_rope"),
            _v3_kib("MHA"), _v3_kib("GQA"), _v3_kib("MQA"), _v3_kib("MLA"))),
    Figure("15", RESULTS, "GQA against MLA at equal cache bytes ({} numbers per token and layer): **GQA {}, MLA {}** "
                          "(MLA: {} parameters", CAPTIONS15,
           (_cache_numbers("MLA"), "models.modern.val_ppl", "models.mla.val_ppl", "models.mla.parameters")),
    Figure("15", RESULTS, "cache of all 12 layers after 256 tokens (float32): all global {} KiB, 5 local : 1 global "
                          "{} KiB, 3 Gated DeltaNet : 1 global {} KiB (a global layer {} KiB, growing with the "
                          "context; a local layer {} KiB from {} tokens on; a Gated DeltaNet layer's state {} KiB at "
                          "every length)", CAPTIONS15,
           (_model_kib("modern", 256), _model_kib("local", 256), _model_kib("gated_deltanet", 256),
            _layer_kib("full", 256), _layer_kib("local", 256), "settings.window", _layer_kib("gated_deltanet", 256))),
    Figure("15", RESULTS, "perplexity at {} tokens and at 4× ({}): all global {} → {}, 5:1 local {} → {}, 5:1 local "
                          "with learned sinks {} → {}", CAPTIONS15,
           ("settings.context", lambda run: 4 * run["settings"]["context"], "models.modern.val_ppl",
            "models.modern.val_ppl_4x", "models.local.val_ppl", "models.local.val_ppl_4x", "models.local_sinks.val_ppl",
            "models.local_sinks.val_ppl_4x")),
    Figure("15", RESULTS, "on the first position (uniform {}): all global {}, 5:1 local {}, with learned sinks {} "
                          "while the sinks take {}", CAPTIONS15,
           (_uniform_first, _first_mass("modern"), _first_mass("local"), _first_mass("local_sinks"),
            _first_mass("local_sinks", "sink"))),
    Figure("15", RESULTS, "**3:1 Gated DeltaNet hybrid {}** (at 4×: {}; {} parameters) against all global {}",
           CAPTIONS15, ("models.gated_deltanet.val_ppl", "models.gated_deltanet.val_ppl_4x",
                        "models.gated_deltanet.parameters", "models.modern.val_ppl")),
    Figure("15", RESULTS, "Multi-query associative recall ({} layers, {} heads, a state of {} × {} per head, {} "
                          "steps, {} to {} pairs)", RECALL15,
           ("settings.num_layers", "settings.num_heads", _d_head, _d_head, "settings.steps", "settings.min_pairs",
            "settings.max_pairs")),
    *[Figure("15", RESULTS, f"{said} {{}} / {{}} / {{}} / {{}} / {{}}", RECALL15,
             tuple(f"result.accuracy.{model}.{n}" for n in (2, 4, 8, 12, 16)))
      for said, model in (("softmax", "softmax"), ("linear attention", "linear"), ("**DeltaNet", "deltanet"),
                          ("Gated DeltaNet", "gated_deltanet"))],
    Figure("15", RESULTS, "reference runs: the caption models {} min of training ({} min wall, {} min of CPU; load "
                          "{} before)", CAPTIONS15,
           ("train_seconds/60", "wall_seconds/60", "cpu_seconds/60", "machine.load_before.0")),
    Figure("15", RESULTS, "recall models {} min of training ({} min wall, {} min of CPU; load {} before)", RECALL15,
           ("train_seconds/60", "wall_seconds/60", "cpu_seconds/60", "machine.load_before.0")),
    Figure("15", README, "training {} min on {} thread in float32 ({} min of CPU; the reference runs, on a 2-core "
                         "machine, load {} before)", CAPTIONS15,
           (_open_models_training_minutes, "machine.threads", _open_models_cpu_minutes, "machine.load_before.0")),
    Figure("16", RESULTS, "on caption requests (mean {} positions) a contiguous cache reserved for the context leaves "
                          "**{} % of it unfilled**, a paged cache of blocks of 16 {} % (blocks of 8: {} %, 32: {} %)",
           REF / "lesson16_serving.json", ("mean_length", "result.contiguous_waste*100", "result.paged_waste_16*100",
                                           "waste.paged.8*100", "waste.paged.32*100")),
    Figure("16", RESULTS, "a Poisson stream of {} caption requests at {}× what sequential decoding serves: "
                          "**continuous batching {} tokens/s, {}× static batching ({}) and {}× sequential decoding "
                          "({})**, with speculation {} ({}×", REF / "lesson16_serving.json",
           ("settings.stream_requests", "settings.loads.5", "result.continuous_throughput",
            "result.continuous_over_static", "result.static_throughput", "result.continuous_over_sequential",
            "result.sequential_throughput", "result.continuous_speculative_throughput",
            "result.speculative_over_continuous")),
    Figure("16", RESULTS, "time to first token p50 / p99: sequential {} / {} s, static {} / {} s, **continuous {} / "
                          "{} s**, with speculation {} / {} s; time per output token p50: sequential {} s, continuous "
                          "{} s, with speculation {} s", REF / "lesson16_serving.json",
           ("result.sequential_ttft_p50", "result.sequential_ttft_p99", "result.static_ttft_p50",
            "result.static_ttft_p99", "result.continuous_ttft_p50", "result.continuous_ttft_p99",
            "result.continuous_speculative_ttft_p50", "result.continuous_speculative_ttft_p99",
            "result.sequential_tpot_p50", "result.continuous_tpot_p50", "result.continuous_speculative_tpot_p50")),
    Figure("16", RESULTS, "static batching reserves {} MiB for {} requests, the paged engine held {} MiB for up to {};",
           REF / "lesson16_serving.json", ("result.static_peak_bytes/1048576", "settings.static_batch",
                                           "result.continuous_peak_bytes/1048576", "settings.max_running")),
    Figure("16", RESULTS, "at best **{}× faster** (a 1-layer draft, k = {}, acceptance {} %)",
           REF / "lesson16_serving.json",
           ("result.best_speedup", "result.best_speedup_k", "result.best_speedup_acceptance*100")),
    Figure("16", RESULTS, "with speculation {} ({}×: a batch of {} leaves speculation nothing to fill)",
           REF / "lesson16_serving.json", ("result.continuous_speculative_throughput",
                                           "result.speculative_over_continuous", "settings.max_running")),
    Figure("16", RESULTS, "{}–{}× up to k = 4, {}–{}× at k = {} (acceptance {} % and {} %:",
           REF / "lesson16_serving.json",
           (lambda run: min(r["speedup"] for r in run["speculation"] if r["k"] <= 4),
            lambda run: max(r["speedup"] for r in run["speculation"] if r["k"] <= 4),
            lambda run: min(r["speedup"] for r in run["speculation"] if r["k"] == 8),
            lambda run: max(r["speedup"] for r in run["speculation"] if r["k"] == 8), "settings.ks.5",
            lambda run: 100 * min(r["acceptance"] for r in run["speculation"] if r["k"] == 8),
            lambda run: 100 * max(r["acceptance"] for r in run["speculation"] if r["k"] == 8))),
    Figure("16", RESULTS, "reference run: {} min wall, {} min CPU (load {} before)", REF / "lesson16_serving.json",
           ("result.wall_seconds/60", "result.cpu_seconds/60", "machine.load_before.0")),
    Figure("16", README, "measured on caption requests ({} % of it never filled)", REF / "lesson16_serving.json",
           ("result.contiguous_waste*100",)),
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
