"""A language model built like today's open models, one kind of token mixer per layer (lesson 15).

    model = OpenLM(vocab_size, d_model=64, num_heads=4, layers=layer_pattern(12, 6), d_ff=176, num_kv_heads=2,
                   window=16)                       # Gemma 3's 5:1 local/global pattern
    logits = model(tokens)                          # (B, T) -> (B, T, V)
    logits, state = model.decode_step(token, state) # one token with every layer's cache (start: state=None)
    model.cache_bytes(state)                        # what the caches hold, in bytes

Token embedding (not scaled, no position added: the attention layers rotate their queries and keys), a stack of
`ModernBlock`s (RMSNorm, a token mixer, RMSNorm, SwiGLU), a final RMSNorm, and an output layer of its own
(`tie=False`: untied input and output embeddings, as Llama 3, Qwen3's larger models, DeepSeek-V3 and gpt-oss).

The kinds of layers (`layers`, one name per layer):
    "full"            global causal attention (ModernAttention: GQA, RoPE, QK-norm, no biases)
    "local"           the same within the last `window` positions (a ring-buffer cache when decoding)
    "mla"             multi-head latent attention (course_utils.latent_attention)
    "linear", "deltanet", "gated_deltanet"   a state of d_head x d_head per head (course_utils.delta_rule)
`sinks=True` gives every softmax attention layer (full or local) a learned sink per head (gpt-oss);
`qk_norm=False` takes QK-norm away (the lesson's ablation).
"""
import torch
import torch.nn as nn

from .delta_rule import RULES, DeltaNetMixer
from .latent_attention import MultiHeadLatentAttention
from .modern_block import ModernAttention, ModernBlock, RMSNorm

__all__ = ["OpenLM", "KINDS", "SYMBOLS", "OpenState"]
KINDS = ("full", "local", "mla") + RULES
SYMBOLS = {"full": "G", "local": "L", "mla": "M", "linear": "A", "deltanet": "Δ", "gated_deltanet": "D"}


class OpenState:
    """The caches of an OpenLM's layers while decoding (one per layer) and the next position."""

    def __init__(self, num_layers):
        self.caches, self.position = [None] * num_layers, 0


class OpenLM(nn.Module):
    """Embedding, a ModernBlock per entry of `layers`, a final RMSNorm, an untied output layer (see the module)."""

    def __init__(self, vocab_size, d_model=64, num_heads=4, layers=("full",) * 4, d_ff=176, num_kv_heads=None,
                 qk_norm=True, window=None, sinks=False, d_latent=None, d_rope=None, tie=False, conv_size=4,
                 chunk_size=16):
        super().__init__()
        unknown = sorted(set(layers) - set(KINDS))
        if unknown:
            raise ValueError(f"layers must be kinds among {KINDS}, got {unknown}")
        if "local" in layers and not window:
            raise ValueError("a model with local layers needs a window (window=W: the W newest positions)")
        if "mla" in layers and not (d_latent and d_rope):
            raise ValueError("a model with MLA layers needs d_latent and d_rope")
        self.vocab_size, self.d_model, self.layer_kinds = vocab_size, d_model, tuple(layers)
        self.embed = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embed.weight, std=1.0)

        def mixer(kind):
            if kind in ("full", "local"):
                return ModernAttention(d_model, num_heads, num_kv_heads, qk_norm=qk_norm,
                                       window=window if kind == "local" else None, sinks=sinks)
            if kind == "mla":
                return MultiHeadLatentAttention(d_model, num_heads, d_latent, d_rope)
            return DeltaNetMixer(d_model, num_heads, rule=kind, conv_size=conv_size, chunk_size=chunk_size)

        self.layers = nn.ModuleList(ModernBlock(mixer(kind), d_model, d_ff) for kind in layers)
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        nn.init.normal_(self.head.weight, std=d_model ** -0.5)
        if tie:
            self.head.weight = self.embed.weight

    def forward(self, tokens):
        """tokens (B, T) -> logits (B, T, V): position t predicts token t + 1."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (B, T) ids, got shape {tuple(tokens.shape)}")
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))

    def decode_step(self, token, state=None):
        """Feed token (B,) at position state.position; returns (logits of the next token (B, V), state)."""
        state = OpenState(len(self.layers)) if state is None else state
        x = self.embed(token[:, None])
        for i, layer in enumerate(self.layers):
            x, state.caches[i] = layer.step(x, state.caches[i], state.position)
        state.position += 1
        return self.head(self.norm(x))[:, 0], state

    def cache_bytes(self, state, by_layer=False):
        """Bytes of the keys, values, latents and states the caches hold (a list per layer with by_layer)."""
        sizes = [layer.mixer.cache_bytes(cache) for layer, cache in zip(self.layers, state.caches)]
        return sizes if by_layer else sum(sizes)

    def attention_layers(self):
        """The softmax attention mixers (ModernAttention), with their layer index: [(i, mixer)]."""
        return [(i, layer.mixer) for i, layer in enumerate(self.layers) if isinstance(layer.mixer, ModernAttention)]

    def track_logits(self, flag=True):
        """Keep every attention layer's largest score q.k/sqrt(d) of the next forward passes (`max_logit`)."""
        for _, mixer in self.attention_layers():
            mixer.track_logits, mixer.max_logit = flag, None
        return self

    def store_attention(self, flag=True):
        """Keep every attention layer's weights of the next forward passes (`attn_weights`, (B, h, T, T))."""
        for _, mixer in self.attention_layers():
            mixer.store_weights, mixer.attn_weights = flag, None
        return self

    @torch.no_grad()
    def generate(self, prompt, steps):
        """Greedy continuation of prompt (B, T0) by `steps` tokens, one at a time with the caches: (B, steps)."""
        state, out = None, []
        for t in range(prompt.size(1)):
            logits, state = self.decode_step(prompt[:, t], state)
        for _ in range(steps):
            token = logits.argmax(-1)
            out.append(token)
            logits, state = self.decode_step(token, state)
        return torch.stack(out, dim=1)

    def extra_repr(self):
        return f"layers={''.join(SYMBOLS[k] for k in self.layer_kinds)} ({SYMBOLS})"
