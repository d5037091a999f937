"""Training and measuring lesson 12's language model on the English captions of Multi30k.

    stream = caption_stream(tok, captions)              # 1-D ids: <bos> caption <eos> <bos> caption <eos> ...
    val = eval_windows(val_stream, context)             # (N, context) non-overlapping windows
    bigram = BigramModel.fit(train_stream, vocab_size)  # the baseline, add-α smoothed
    history = train_language_model(model, train_stream, steps=3000, context=64, batch_size=32,
                                   eval_windows=val)    # AdamW, warm-up + cosine, bf16 autocast on a CPU
    perplexity(model, val)                              # exp(mean cross-entropy of the next token)

Nothing here is specific to the GPT class: any module with model(tokens) -> (B, T, V) logits trains.
"""
import contextlib
import math
import time

import torch
from tqdm.auto import tqdm

from .gpt import next_token_loss

__all__ = ["caption_stream", "eval_windows", "random_windows", "BigramModel", "perplexity",
           "train_language_model", "PRESETS", "POSITION_EXPERIMENT", "prepare", "compare_positions", "run",
           "run_positions"]


def caption_stream(tok, captions, bos_id=1, eos_id=2):
    """One long 1-D tensor of ids: every caption framed as <bos> ... <eos>, one after the other."""
    ids = [i for e in tok.encode_batch(list(captions)) for i in [bos_id] + e + [eos_id]]
    return torch.tensor(ids, dtype=torch.long)


def eval_windows(stream, context):
    """(N, context) consecutive, non-overlapping windows of `stream` (the incomplete end is dropped)."""
    n = (stream.numel() // context) * context
    if n == 0:
        raise ValueError(f"a stream of {stream.numel()} tokens holds no window of {context}")
    return stream[:n].view(-1, context)


def random_windows(stream, context, batch_size, generator):
    """(batch_size, context) windows of `stream` starting at random offsets (nanoGPT's batches)."""
    starts = torch.randint(0, stream.numel() - context + 1, (batch_size,), generator=generator)
    return torch.stack([stream[s:s + context] for s in starts.tolist()])


class BigramModel:
    """p(next | previous) from counts with add-α smoothing: (count(a, b) + α) / (count(a) + α V)."""

    def __init__(self, counts, alpha):
        self.counts, self.alpha = counts, alpha                       # (V, V) float64
        row = counts.sum(1, keepdim=True)
        self.log_probs = ((counts + alpha) / (row + alpha * counts.size(1))).log()   # (V, V)

    @classmethod
    def fit(cls, stream, vocab_size, alpha=0.01):
        counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
        counts.index_put_((stream[:-1], stream[1:]), torch.ones(stream.numel() - 1, dtype=torch.float64),
                          accumulate=True)
        return cls(counts, alpha)

    def with_alpha(self, alpha):
        return BigramModel(self.counts, alpha)

    def perplexity(self, windows):
        """exp(mean -log p(token t | token t-1)) over the same targets as the GPT's: positions 1..T-1 of each window."""
        prev, nxt = windows[:, :-1].reshape(-1), windows[:, 1:].reshape(-1)
        return math.exp(-float(self.log_probs[prev, nxt].mean()))


def _autocast(device, amp_dtype):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=amp_dtype)


@torch.no_grad()
def perplexity(model, windows, batch_size=64, amp_dtype=None, pad_id=0):
    """exp(mean next-token cross-entropy) of `model` over windows (N, T) (positions 1..T-1 are predicted)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    try:
        for i in range(0, windows.size(0), batch_size):
            batch = windows[i:i + batch_size].to(device)
            with _autocast(device, amp_dtype):
                logits = model(batch)
            targets = int((batch[:, 1:] != pad_id).sum())
            total += float(next_token_loss(logits, batch, pad_id)) * targets
            count += targets
    finally:
        model.train(was_training)
    return math.exp(total / count)


def train_language_model(model, train_stream, steps, context, batch_size, lr=1e-3, warmup=100,
                         weight_decay=0.1, clip=1.0, eval_windows=None, eval_every=None, amp_dtype=None,
                         seed=0, show_progress=True, desc="training"):
    """AdamW on random windows of train_stream, the rate warmed up linearly then decayed on a cosine to lr/10.

    Returns a history: {"step": [...], "train_loss": [...]} (each step's loss) and, every `eval_every` steps
    and at the end, {"eval_step": [...], "train_ppl": [...], "val_ppl": [...]} (train_ppl from the running
    mean of the last steps' losses), "seconds" (training time, evaluation excluded) and "tokens_per_second".
    """
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": other, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))

    def rate(step):                                                  # step counts from 0
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    history = {"step": [], "train_loss": [], "eval_step": [], "train_ppl": [], "val_ppl": []}
    seconds, recent = 0.0, []
    model.train()
    for step in tqdm(range(1, steps + 1), desc=desc, disable=not show_progress, leave=False):
        start = time.perf_counter()
        batch = random_windows(train_stream, context, batch_size, generator).to(device)   # (B, T)
        with _autocast(device, amp_dtype):
            loss = next_token_loss(model(batch), batch, getattr(model, "pad_id", 0))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        schedule.step()
        seconds += time.perf_counter() - start
        history["step"].append(step)
        history["train_loss"].append(loss.item())
        recent = (recent + history["train_loss"][-1:])[-50:]
        if eval_windows is not None and ((eval_every and step % eval_every == 0) or step == steps):
            history["eval_step"].append(step)
            history["train_ppl"].append(math.exp(sum(recent) / len(recent)))
            history["val_ppl"].append(perplexity(model, eval_windows, amp_dtype=amp_dtype))
            model.train()
    model.eval()
    history["seconds"] = seconds
    history["tokens_per_second"] = steps * batch_size * context / max(seconds, 1e-9)
    return history


# ---------------------------------------------------------------------------------------------
# Lesson 12's run: the sizes the notebook uses, and the same run from the command line
# ---------------------------------------------------------------------------------------------
PRESETS = {
    # a few seconds: the notebook's tests (COURSE_FAST=1)
    "fast": dict(captions=2000, vocab_size=500, context=32, batch_size=16, d_model=64, num_heads=4,
                 num_kv_heads=2, num_layers=2, d_ff=128, dropout=0.0, steps=60, lr=2e-3, warmup=10, eval_every=30),
    # the lesson in full: about 8 minutes of training on a 2-core CPU (bf16 autocast). No dropout: on a
    # CPU its random numbers cost ~40 % of a step at these sizes, and 1,200 steps (~3.5 epochs) overfit little
    "full": dict(captions=None, vocab_size=500, context=64, batch_size=32, d_model=256, num_heads=8,
                 num_kv_heads=2, num_layers=7, d_ff=1024, dropout=0.0, steps=1200, lr=2.5e-3, warmup=100,
                 eval_every=200),
}


# the position experiment (section 8): small GPTs identical but for their positions, trained at `context`
# on the main run's tokens, measured at `context` and at twice it
POSITION_EXPERIMENT = {
    "fast": dict(context=16, batch_size=8, d_model=32, num_heads=4, num_layers=1, d_ff=64, steps=15, lr=2e-3, warmup=3),
    "full": dict(context=32, batch_size=32, d_model=128, num_heads=4, num_layers=4, d_ff=512, steps=600, lr=2e-3,
                 warmup=50),
}


def prepare(preset="full"):
    """The data of `preset`: an English-only BPE trained on the training captions, and the training and
    validation captions as streams of ids. Returns (tok, train_stream, val_stream)."""
    from .data.multi30k import load_multi30k
    from .tokenization import train_bpe

    p = PRESETS[preset]
    train_text = [en for _, en in load_multi30k("train", max_pairs=p["captions"])]
    val_text = [en for _, en in load_multi30k("val")]
    tok = train_bpe(train_text, vocab_size=p["vocab_size"])
    return tok, caption_stream(tok, train_text), caption_stream(tok, val_text)


def compare_positions(train_stream, val_stream, vocab_size, sizes, amp_dtype=None, seed=0, show_progress=True):
    """Train one small GPT per kind of positions ("learned", "sinusoidal", "rope") with `sizes`
    (POSITION_EXPERIMENT); returns {positions: (validation PPL at sizes["context"], at twice it)} and
    {positions: training seconds}."""
    from .gpt import GPT, POSITIONS

    results, seconds = {}, {}
    for positions in POSITIONS:
        torch.manual_seed(seed)
        small = GPT(vocab_size, sizes["d_model"], sizes["num_heads"], sizes["num_layers"], sizes["d_ff"],
                    max_len=2 * sizes["context"], positions=positions)
        h = train_language_model(small, train_stream, sizes["steps"], sizes["context"], sizes["batch_size"],
                                 lr=sizes["lr"], warmup=sizes["warmup"], amp_dtype=amp_dtype, seed=seed,
                                 show_progress=show_progress, desc=positions)
        results[positions] = tuple(perplexity(small, eval_windows(val_stream, T), amp_dtype=amp_dtype)
                                   for T in (sizes["context"], 2 * sizes["context"]))
        seconds[positions] = h["seconds"]
    return results, seconds


def _conditions(amp_dtype):
    """What a report records of how it ran: the autocast dtype and the machine."""
    import os
    import platform

    return dict(amp=str(amp_dtype).replace("torch.", "") if amp_dtype else "off",
                machine=dict(processor=platform.processor() or platform.machine(), cpus=os.cpu_count(),
                             torch=torch.__version__, threads=torch.get_num_threads()))


def run(preset="full", amp_dtype=torch.bfloat16, seed=0, show_progress=True):
    """Lesson 12's main run: English-only BPE on Multi30k's training captions, the smoothed bigram baseline,
    the GPT of `preset` trained on the training stream; validation perplexity at the training context and at
    twice it. Returns (report (a dict), model, tok)."""
    from .gpt import GPT

    p = PRESETS[preset]
    start = time.time()
    tok, train_stream, val_stream = prepare(preset)
    val = eval_windows(val_stream, p["context"])
    bigram = min((BigramModel.fit(train_stream, tok.vocab_size, a) for a in (0.003, 0.01, 0.03, 0.1)),
                 key=lambda m: m.perplexity(val))
    torch.manual_seed(seed)
    model = GPT(tok.vocab_size, p["d_model"], p["num_heads"], p["num_layers"], p["d_ff"], max_len=2 * p["context"],
                dropout=p["dropout"], positions="rope", num_kv_heads=p["num_kv_heads"])
    history = train_language_model(model, train_stream, p["steps"], p["context"], p["batch_size"], lr=p["lr"],
                                   warmup=p["warmup"], eval_windows=val, eval_every=p["eval_every"],
                                   amp_dtype=amp_dtype, seed=seed, show_progress=show_progress)
    report = dict(preset=preset, sizes=p, parameters=sum(q.numel() for q in model.parameters()),
                  vocab_size=tok.vocab_size, train_tokens=train_stream.numel(), val_tokens=val_stream.numel(),
                  bigram_alpha=bigram.alpha, bigram_val_ppl=round(bigram.perplexity(val), 2),
                  gpt_val_ppl=round(history["val_ppl"][-1], 2),
                  gpt_val_ppl_2x=round(perplexity(model, eval_windows(val_stream, 2 * p["context"]),
                                                  amp_dtype=amp_dtype), 2),
                  history={k: history[k] for k in ("eval_step", "train_ppl", "val_ppl")},
                  train_seconds=round(history["seconds"], 1), tokens_per_second=round(history["tokens_per_second"]),
                  wall_seconds=round(time.time() - start, 1), threads=torch.get_num_threads(),
                  **_conditions(amp_dtype))
    return report, model, tok


def run_positions(preset="full", amp_dtype=torch.bfloat16, seed=0, show_progress=True):
    """Section 8's experiment on `preset`'s tokens with POSITION_EXPERIMENT[preset]. Returns a report (a dict)."""
    start = time.time()
    tok, train_stream, val_stream = prepare(preset)
    sizes = POSITION_EXPERIMENT[preset]
    results, seconds = compare_positions(train_stream, val_stream, tok.vocab_size, sizes, amp_dtype, seed,
                                         show_progress)
    return dict(preset=preset, sizes=sizes, vocab_size=tok.vocab_size, seed=seed,
                val_ppl={k: round(a, 2) for k, (a, _) in results.items()},
                val_ppl_2x={k: round(b, 2) for k, (_, b) in results.items()},
                train_seconds={k: round(v, 1) for k, v in seconds.items()},
                wall_seconds=round(time.time() - start, 1), **_conditions(amp_dtype))


def main(argv=None):
    """python -m course_utils.language_model --preset full --out report.json"""
    import argparse
    import json
    import os
    import sys

    parser = argparse.ArgumentParser(description="Lesson 12's language model: train and measure it.")
    parser.add_argument("--preset", choices=list(PRESETS), default="full")
    parser.add_argument("--out", help="write the report (JSON) here")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--amp", choices=["bf16", "off"], default="bf16")
    parser.add_argument("--positions", action="store_true",
                        help="run section 8's experiment (learned, sinusoidal, rotary positions) instead")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    amp_dtype = torch.bfloat16 if args.amp == "bf16" else None
    if args.positions:
        report = run_positions(args.preset, amp_dtype, show_progress=False)
    else:
        report, _, _ = run(args.preset, amp_dtype, show_progress=False)
    report["load_before"], report["load_after"] = [round(x, 2) for x in load_before], \
        [round(x, 2) for x in os.getloadavg()]
    report["command"] = "python -m course_utils.language_model " + " ".join(sys.argv[1:] if argv is None else argv)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
