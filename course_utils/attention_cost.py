"""Time and peak memory of one attention call (lesson 13, benchmarks/attention_memory.py).

    plain_attention(q, k, v, mask=None)              scores, softmax, weights @ v: every T x T matrix stored
    attention_memory_bytes(T, d_head, "plain")       what plain and tiled attention hold in memory, counted
    sdpa_backend(q, k, v, mask, ...)                 the kernel torch's fused scaled_dot_product_attention picks
    run_attention("tiled", q, k, v, block=256)       plain | tiled | fused, optionally causal or windowed
    peak_memory_bytes("plain", T=4096, d_head=64)    measured in a FRESH process (see below)
    median_seconds(fn, repeats)                      the median CPU time of fn() (one thread: steady under load)

How the peak memory is measured. Each measurement runs in a new process: it builds q, k, v, calls the
attention once, and reports the rise of its peak resident memory (`resource.getrusage(RUSAGE_SELF).ru_maxrss`,
what the operating system counts for that process alone) from just before q, k, v were built to just
after the call. So it counts q, k, v, the output and everything the call materialises, including what
torch allocates in C++ (which `tracemalloc` cannot see), and nothing of the other programs on the
machine. A fresh process matters: a peak only ever grows, and a process that already ran a bigger
attention would hide a smaller one's. The processes are forked from a server that has imported torch
once (multiprocessing's "forkserver"), so each costs a fraction of a second, not a new `import torch`.
On Windows (no `resource`, no forkserver) psutil's peak working set is used when psutil is installed.
"""
import math
import multiprocessing
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from .efficient_attention import _check_qkv, sliding_window_attention, tiled_attention
from .masks import causal_mask, masked_softmax, sliding_window_mask

__all__ = ["METHODS", "plain_attention", "attention_memory_bytes", "sdpa_backend", "run_attention",
           "peak_memory_bytes", "median_seconds", "random_qkv", "fitted_slope"]

METHODS = ("plain", "tiled", "fused")


def random_qkv(T, d_head=64, batch_heads=1, seed=0, dtype=torch.float32):
    """q, k, v of shape (1, batch_heads, T, d_head), standard normal, seeded."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, batch_heads, T, d_head, generator=generator, dtype=dtype) for _ in range(3))


def plain_attention(q, k, v, mask=None):
    """The formula step by step, every (T_q x T_k) matrix stored: scores, weights, then weights @ v.
    (The same values as `course_utils.attention.scaled_dot_product_attention(..., need_weights=True)`.)"""
    _check_qkv(q, k, v)
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)             # (..., T_q, T_k)
    return masked_softmax(scores, mask) @ v                                  # (..., T_q, d_v)


def attention_memory_bytes(T_q, d_k, method="plain", block_q=64, block_k=None, T_k=None, d_v=None,
                           element_size=4, batch_heads=1):
    """The bytes one attention call holds at its peak, counted tensor by tensor (q, k, v included):

    plain: q, k, v, output, plus the scores AND the weights (both T_q x T_k, alive together);
    tiled: q, k, v, output, plus one tile of scores and of probabilities (block_q x block_k), the
           accumulator (block_q x d_v) and m, l (block_q each), whatever T is.
    """
    T_k = T_q if T_k is None else T_k
    d_v = d_k if d_v is None else d_v
    io = T_q * d_k + T_k * (d_k + d_v) + T_q * d_v
    if method == "plain":
        extra = 2 * T_q * T_k
    elif method == "tiled":
        block_k = block_q if block_k is None else block_k
        bq, bk = min(block_q, T_q), min(block_k, T_k)
        extra = 2 * bq * bk + bq * d_v + 2 * bq + bq * d_k
    else:
        raise ValueError(f"method must be 'plain' or 'tiled', got {method!r}")
    return batch_heads * (io + extra) * element_size


def sdpa_backend(q, k, v, mask=None, dropout_p=0.0, is_causal=False):
    """The name of the kernel `torch.nn.functional.scaled_dot_product_attention` picks for these inputs
    on their device: "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION" or "MATH" (the formula
    step by step). Asks torch's own dispatcher (`torch._fused_sdp_choice`, the function the call uses)."""
    try:
        from torch.nn.attention import SDPBackend

        return SDPBackend(torch._fused_sdp_choice(q, k, v, mask, dropout_p, is_causal)).name
    except (AttributeError, ImportError, RuntimeError, ValueError) as error:   # an older or newer torch
        return f"unknown ({type(error).__name__}: this torch does not expose its choice)"


def run_attention(method, q, k, v, block=256, causal=False, window=None):
    """One attention call: "plain" (scores, softmax, weights @ v, all stored), "tiled" (the lesson's
    tiled_attention, tiles of block x block) or "fused" (torch.nn.functional.scaled_dot_product_attention).
    causal / window=(left, right): plain and fused get the pattern as a boolean mask (fused: is_causal
    when there is no window), tiled skips the tiles outside it."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "tiled":
        if window is not None:
            return sliding_window_attention(q, k, v, window, block, causal=causal)
        return tiled_attention(q, k, v, block, causal=causal)[0]
    T = q.shape[-2]
    mask = None
    if window is not None:
        mask = sliding_window_mask(T, *window)
        if causal:
            mask = mask & causal_mask(T)
    elif causal and method == "plain":
        mask = causal_mask(T)
    if method == "plain":
        return plain_attention(q, k, v, mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)


def median_seconds(fn, repeats=3, warmup=0, clock=time.process_time):
    """The median time of fn() over `repeats` calls (after `warmup` untimed ones). The default clock is
    this process's CPU time: with one thread it does not count the time other programs hold the core,
    so it is the steadier measure on a shared machine (pass clock=time.perf_counter for wall-clock time)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# Peak memory, one fresh process per measurement
# ---------------------------------------------------------------------------------------------
def _peak_rss_bytes():
    """This process's peak resident memory so far, in bytes."""
    try:
        import resource
    except ImportError:                                   # Windows
        try:
            import psutil
        except ImportError:
            return None
        return psutil.Process().memory_info().peak_wset
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024     # macOS: bytes; Linux: kilobytes


def _return_free_memory():
    """Give the memory freed so far back to the operating system (glibc's malloc_trim), so that what
    the call allocates next shows in the resident memory even when it is small. Best effort."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _measure(method, T, d_head, block, causal, window, batch_heads, connection):
    """Runs in the fresh process: warm up on a tiny input (libraries load their buffers once), then
    peak before q, k, v exist and after the call."""
    try:
        torch.set_num_threads(1)
        run_attention(method, *random_qkv(min(T, 64), d_head, 1), block=min(block, 64), causal=causal,
                      window=window)
        _return_free_memory()
        before = _peak_rss_bytes()
        q, k, v = random_qkv(T, d_head, batch_heads)
        out = run_attention(method, q, k, v, block=block, causal=causal, window=window)
        after = _peak_rss_bytes()
        del out
        connection.send(None if before is None else after - before)
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
        connection.send(error)
    finally:
        connection.close()


_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(["torch", __name__])
        else:
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


def peak_memory_bytes(method, T, d_head=64, block=256, causal=False, window=None, batch_heads=1,
                      timeout=600):
    """The peak memory (bytes) of one `run_attention(method, ...)` call on random q, k, v of shape
    (1, batch_heads, T, d_head), inputs and output included, measured in a fresh process (module
    docstring). None where the platform offers no per-process peak (Windows without psutil)."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_measure, args=(method, T, d_head, block, causal, window, batch_heads, send),
                          daemon=True)
    process.start()
    send.close()
    try:
        if not receive.poll(timeout):
            process.kill()
            raise TimeoutError(f"measuring {method} attention at T={T} took more than {timeout} s")
        result = receive.recv()
    except EOFError:
        raise RuntimeError(f"the process measuring {method} attention at T={T} died (exit code "
                           f"{process.exitcode}): out of memory? (A script that measures must start its work under "
                           "`if __name__ == \"__main__\":`, as multiprocessing requires.)") from None
    finally:
        process.join(timeout=10)
    if isinstance(result, BaseException):
        raise result
    return result


def fitted_slope(xs, ys):
    """The least-squares slope of log(y) against log(x): 2 for y ~ x², 1 for y ~ x."""
    if min(xs) <= 0 or min(ys) <= 0:
        raise ValueError(f"a slope on the log-log scale needs positive values, got {list(xs)} and {list(ys)}")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
