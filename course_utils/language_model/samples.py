"""What lesson 12 shows of a trained GPT, measured at the end of a run (LanguageModelTask.finish) and kept in its
report, so that fast mode shows the full run's (course_utils/reference_runs/lesson12_full.json, "samples"):

    shown = showcase(model, tok)     # {"sampling", "prompts", "greedy_caption", "cache"}: lists, numbers, strings
    shown["sampling"]                # section 7's figure: the next-token logits after PREFIX, three continuations
                                     #   for each of SETTINGS (sampling_figure_data)
    shown["prompts"][text]           # the widget: greedy and sampled continuations of each of PROMPTS
    shown["greedy_caption"]          # a caption written greedily from <bos>
    shown["cache"]                   # section 9: generation timed with and without the key/value cache (time_cache)

The lesson computes the same things with the same functions on its own model; every sample is drawn from a
generator seeded here, so a run's report is reproducible.
"""
import time

import torch

from ..decoding import generate
from ..tokenization import BOS_ID, EOS_ID

__all__ = ["PREFIX", "SETTINGS", "PROMPTS", "WIDGET_SETTINGS", "CACHE_LENGTHS", "prompt_ids", "sampling_figure_data",
           "time_cache", "showcase"]
PREFIX = "A man in a"                                 # section 7's figure
SETTINGS = ({"temperature": 0.5}, {"temperature": 1.0}, {"temperature": 1.5}, {"temperature": 1.0, "top_p": 0.5},
            {"temperature": 1.0, "top_p": 0.9}, {"temperature": 1.0, "top_k": 5})
PROMPTS = ("A little girl", "A man in a", "Two dogs", "A group of people", "A woman is", "The")   # the widget's
WIDGET_SETTINGS = {"temperature": 0.8, "top_p": 0.9}  # the widget's sliders, as they start
CACHE_LENGTHS = (16, 32, 64, 120)                     # tokens generated, timed with and without the cache
TOP = 12                                              # bars of the figure: the most probable next tokens


def prompt_ids(tok, text, max_len):
    """<bos> + the pieces of `text`, (1, T0), its last max_len // 2 tokens (room left for the continuation)."""
    return torch.tensor([[BOS_ID] + tok.encode(text)])[:, -max_len // 2:]


@torch.no_grad()
def sampling_figure_data(model, tok, prefix=PREFIX, settings=SETTINGS, samples=3, new_tokens=12, seed=0):
    """The next-token logits after `prefix` (V,), the TOP most probable tokens at temperature 1, and `samples`
    continuations of `new_tokens` tokens for each setting (one generator, seeded, drawn in the order of settings)."""
    prompt = prompt_ids(tok, prefix, model.max_len)
    was_training = model.training
    model.eval()
    logits = model(prompt)[0, -1].float()                                   # (V,)
    model.train(was_training)
    top = logits.softmax(-1).topk(TOP).indices
    generator = torch.Generator().manual_seed(seed)
    continuations = [[tok.decode(c) for c in generate(model, prompt.repeat(samples, 1), new_tokens, eos_id=EOS_ID,
                                                      generator=generator, **setting).tolist()]
                     for setting in settings]
    return {"prefix": prefix, "next_logits": [round(float(x), 4) for x in logits], "top_ids": top.tolist(),
            "top_pieces": [tok.id_to_token(i) for i in top.tolist()], "settings": [dict(s) for s in settings],
            "continuations": continuations}


@torch.no_grad()
def time_cache(model, lengths=CACHE_LENGTHS, rounds=2):
    """Greedy generation from <bos> of each length, with and without the cache, interleaved `rounds` times
    (a busy machine slows both alike); the fastest of each. Returns [{"tokens", "no_cache_tokens_per_second",
    "cache_tokens_per_second", "speedup", "same_tokens"}]."""
    prompt, rows = torch.tensor([[BOS_ID]]), []
    for n in lengths:
        if n > model.max_len:
            continue
        seconds, outputs = {True: [], False: []}, {}
        for use_cache in (False, True) * rounds:
            start = time.perf_counter()
            outputs[use_cache] = generate(model, prompt, n, temperature=0, use_cache=use_cache)
            seconds[use_cache].append(time.perf_counter() - start)
        slow, fast = min(seconds[False]), min(seconds[True])
        rows.append({"tokens": n, "no_cache_tokens_per_second": round(n / slow, 1),
                     "cache_tokens_per_second": round(n / fast, 1), "speedup": round(slow / fast, 2),
                     "same_tokens": bool(torch.equal(outputs[True], outputs[False]))})
    return rows


@torch.no_grad()
def showcase(model, tok, samples=4, new_tokens=20, seed=0):
    """Everything above, for the run's report (float32, on the model's device: the CPU in this course)."""
    generator = torch.Generator().manual_seed(seed)
    prompts = {}
    for text in PROMPTS:
        prompt = prompt_ids(tok, text, model.max_len)
        greedy = generate(model, prompt, new_tokens, temperature=0, eos_id=EOS_ID)[0].tolist()
        sampled = generate(model, prompt.repeat(samples, 1), new_tokens, eos_id=EOS_ID, generator=generator,
                           **WIDGET_SETTINGS).tolist()
        prompts[text] = {"greedy": tok.decode(greedy), "sampled": [tok.decode(c) for c in sampled]}
    caption = generate(model, torch.tensor([[BOS_ID]]), 40, temperature=0, eos_id=EOS_ID)[0].tolist()
    return {"sampling": sampling_figure_data(model, tok), "prompts": prompts, "widget_settings": dict(WIDGET_SETTINGS),
            "greedy_caption": tok.decode(caption), "cache": time_cache(model)}
