"""The KV cache, measured (lecture §4.3, §6.3, §8.4): decoding token by token with our own cache.

:func:`decode` feeds a prompt one token at a time through :class:`~tx_explorer.modules.cache.KVCache`, then
continues greedily; every step is checked against the uncached forward pass (same logits within 1e-4, same
token). A prompt's opening may be read in one pass first (a prefill): that is how a run gets past Gemma 3's
512-token window (:func:`past_window`). :func:`cache_at` gives the cache's tensors after any step.
:func:`sharing_table` sets the bytes formula beside the bytes of real cache tensors for multi-head, grouped-query,
multi-query and sliding-window versions of one shape, and :data:`PUBLISHED` holds the configurations the memory
curve is drawn for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from tx_explorer.analysis.memory import kv_cache_bytes
from tx_explorer.analysis.seeding import seeded_init
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.modules.cache import KVCache, common_prefix
from tx_explorer.modules.transformer import CausalLM

LOGIT_TOLERANCE = 1e-4  # cached and uncached logits agree within this (float32) for up to 4 layers


def tolerance(cfg: TransformerConfig, scale: float = 0.0) -> float:
    """:data:`LOGIT_TOLERANCE` per 4 layers, and per 10 of the largest logit ``scale`` beyond 10: products of other
    shapes round differently in float32, the rounding compounds layer by layer and is relative to the values
    rounded (SmolLM2's 30 layers, logits up to 37 after a control-character prompt: 1.1e-3 measured, 2.8e-3
    allowed; a broken cache is off by whole nats)."""
    return LOGIT_TOLERANCE * max(1.0, cfg.num_layers / 4) * max(1.0, scale / 10)


MAX_NEW_TOKENS = 64  # a page's cap on greedy continuation


@dataclass(frozen=True)
class Published:
    """A published model's attention shape, as its config.json states it (``source`` says where)."""

    cfg: TransformerConfig
    source: str

    def per_token(self, bytes_per_element: int = 2) -> int:
        return kv_cache_bytes(self.cfg.replace(sliding_window=None, layer_types=None), 1, bytes_per_element)


def _published(
    layers: int, heads: int, kv: int, head_dim: int, vocab: int, window: int | None = None, every: int | None = None
):
    """``every``: one global layer in every ``every`` (the others local, within ``window``): Gemma 3's 6, Gemma 2's
    and gpt-oss's 2; None: every layer alike."""
    types = None if every is None else tuple("full" if (i + 1) % every == 0 else "sliding" for i in range(layers))
    return TransformerConfig(
        vocab_size=vocab,
        max_len=131072,
        dim=heads * head_dim,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        sliding_window=window,
        layer_types=types,
        positions="rotary",
    )


PUBLISHED: dict[str, Published] = {
    "Llama-2-7B": Published(
        _published(32, 32, 32, 128, 32000), "Touvron et al. 2023; meta-llama/Llama-2-7b-hf config.json"
    ),
    "Llama-3-8B": Published(_published(32, 32, 8, 128, 128256), "Meta 2024; meta-llama/Meta-Llama-3-8B config.json"),
    "Mistral-7B": Published(
        _published(32, 32, 8, 128, 32000, window=4096), "Jiang et al. 2023; mistralai/Mistral-7B-v0.1 config.json"
    ),
    "Qwen2-0.5B": Published(_published(24, 14, 2, 64, 151936), "Qwen team 2024; Qwen/Qwen2-0.5B config.json"),
    "Gemma-2-9B": Published(
        _published(42, 16, 8, 256, 256000, window=4096, every=2), "Gemma team 2024; google/gemma-2-9b config.json"
    ),
    "Gemma-3-270M": Published(
        _published(18, 4, 1, 256, 262144, window=512, every=6), "Gemma team 2025; google/gemma-3-270m config.json"
    ),
    "Gemma-3-4B": Published(
        _published(34, 8, 4, 256, 262208, window=1024, every=6), "Gemma team 2025; google/gemma-3-4b-pt config.json"
    ),
    "gpt-oss-20b": Published(
        _published(24, 64, 8, 64, 201088, window=128, every=2), "OpenAI 2025; openai/gpt-oss-20b config.json"
    ),
}


STEPPER_TOKENS = 128  # tokens the stepper walks, one cached forward pass each (plus one uncached check)


def limit(cfg: TransformerConfig) -> int:
    """Tokens the stepper takes for this model: its context, at most :data:`STEPPER_TOKENS` (SmolLM2's 8 192
    would be 8 192 forward passes of 135M weights per input)."""
    return min(cfg.max_len, STEPPER_TOKENS)


PAST_TOKENS = 4  # a run past the window: its prompt ends this many tokens beyond the local layers' window


def past_window(cfg: TransformerConfig) -> int | None:
    """The sliding window a run must pass where the stepper's tokens stop short of it and the context reaches
    beyond it (Gemma 3's local layers: 512 rows against 128 tokens, in a context of 32 768); None where there is no
    window or the stepper already passes it."""
    window = cfg.sliding_window
    if window is None or limit(cfg) > window or window + PAST_TOKENS + MAX_NEW_TOKENS > cfg.max_len:
        return None
    return window


def check_prompt(cfg: TransformerConfig, prompt: Sequence[int], new_tokens: int, prefill: int = 0) -> None:
    """Refuse an empty prompt, a bad count, or more tokens to step through than the stepper takes (:func:`limit`;
    the ``prefill`` tokens read in one pass do not count) or the context holds."""
    if not prompt:
        raise InputError("kv_prompt_empty")
    if not 0 <= new_tokens <= MAX_NEW_TOKENS:
        raise InputError("kv_new_tokens", value=new_tokens, limit=MAX_NEW_TOKENS)
    if not 0 <= prefill <= len(prompt):
        raise ValueError(f"the prefill must lie in [0, {len(prompt)}] (the prompt's tokens), got {prefill}")
    if len(prompt) - prefill + new_tokens > limit(cfg):
        raise InputError("kv_prompt_too_long", count=len(prompt) - prefill, new=new_tokens, limit=limit(cfg))
    if len(prompt) + new_tokens > cfg.max_len:
        raise InputError("kv_prompt_too_long", count=len(prompt), new=new_tokens, limit=cfg.max_len)


def check_window(cfg: TransformerConfig, window: int | None) -> None:
    """A sliding window must hold at least one key and no more than the stepper's tokens."""
    if window is not None and not 1 <= window <= limit(cfg):
        raise InputError("kv_window_range", window=window, limit=limit(cfg))


@dataclass(frozen=True)
class Step:
    position: int  # the fed token's position (the prefill's last, for the prefill)
    token: int  # the fed token
    rows: int  # positions the cache keeps after the step: every layer's rows, or the global layers' (Gemma 3)
    layer_rows: tuple[int, ...]  # rows each layer's tensors hold after the step
    nbytes: int  # bytes of the cache tensors
    formula: int  # kv_cache_bytes at this many tokens
    logit_diff: float  # max |cached − uncached| over the vocabulary at this position
    same_next: bool  # both pick the same next token (argmax)
    logit_max: float = 0.0  # the largest |logit| of the uncached pass here (float32 rounding is relative to it)


@dataclass(frozen=True)
class Decoding:
    ids: list[int]  # prompt then greedy continuation
    prompt_len: int
    steps: list[Step]
    cache: KVCache | None = field(default=None, repr=False, compare=False)  # as the last step left it
    logit_scale: float = 0.0  # the largest |logit| the uncached pass gave the compared positions (float32 rounding
    # is relative to it)
    prefill: int = 0  # prompt tokens read in one pass before the steps
    start: KVCache | None = field(default=None, repr=False, compare=False)  # as the prefill left it
    reused: int = 0  # the first steps, taken from an earlier decoding of the same opening tokens (a prefix cache)

    @property
    def max_diff(self) -> float:
        return max(s.logit_diff for s in self.steps)

    @property
    def identical(self) -> bool:
        return all(s.same_next for s in self.steps)


def shared_steps(reuse: Decoding | None, prompt: Sequence[int], prefill: int = 0) -> int:
    """How many of ``prompt``'s first tokens :func:`decode` can take from ``reuse`` (steps and cache rows): those it
    shares with ``reuse.ids``, short of the prompt's last token (fed again: its logits pick the first new token);
    none with a prefill on either side or a cache that has dropped rows (a window)."""
    if reuse is None or prefill or reuse.prefill or reuse.cache is None or not reuse.cache.complete():
        return 0
    return min(common_prefix(reuse.ids, prompt), len(prompt) - 1, reuse.cache.seen)


@torch.no_grad()
def decode(
    model: CausalLM,
    prompt: Sequence[int],
    new_tokens: int,
    *,
    prefill: int = 0,
    progress: Callable[[int, int], None] | None = None,
    reuse: Decoding | None = None,
) -> Decoding:
    """Feed ``prompt`` one token at a time through a KV cache, then ``new_tokens`` greedy tokens; each step's
    logits are compared with an uncached forward pass over the same tokens.

    One uncached pass over every token fed serves all the steps: under the causal mask its position ``t`` sees
    tokens ``0 … t`` only, which is what a pass over the first ``t + 1`` tokens computes (one pass instead of one
    per step: on SmolLM2 each pass reads the 135M weights, 0.1 s on a CPU core, whatever the length).

    ``prefill``: the prompt's first tokens are read in one pass with the cache, as a server reads a prompt, and
    count as one step (Gemma 3 past its 512-token window: a step costs a pass over its 268M weights, so 500 of
    them would take minutes); the cache it leaves is kept for :func:`cache_at`. ``progress(done, total)``: after
    each pass of the model, the uncached one last.

    ``reuse``: an earlier decoding by this same model. The steps of the opening tokens the prompt shares with it
    (:func:`shared_steps`) are taken from it and its cache cut to them, as a server's prefix cache does: a step
    depends on its token and the ones before it alone, so running it again would compute it again."""
    cfg = model.cfg
    check_prompt(cfg, prompt, new_tokens, prefill)
    model.eval()
    device = next(model.parameters()).device
    shared = shared_steps(reuse, prompt, prefill)
    ids, cache, cached, sizes, start = list(prompt), KVCache(), [], [], None
    kept: list[Step] = []
    if shared:
        cache, kept = reuse.cache.prefix(shared), [s for s in reuse.steps if s.position < shared]
    last = len(prompt) + new_tokens - 1 if new_tokens else len(prompt)
    ends = range(max(prefill, shared + 1), last + 1)
    for begin, end in zip([shared, *ends], ends):  # the prefill's tokens at once, then one token a pass
        # The last position's logits alone (V,): the prefill's [prefill, V] were half a GB at Gemma 3's 500 (a step of
        # one token is the same product as the whole model's pass, bit for bit)
        states = model.states(torch.tensor([ids[begin:end]], device=device), cache=cache)  # (1, n, D)
        cached.append(model.logits(states[:, -1:])[0, 0])
        sizes.append((len(cache), tuple(cache.rows(layer) for layer in range(len(cache.keys))), cache.nbytes))
        if end == prefill:
            start = copy.deepcopy(cache)  # a copy: the steps go on appending to ``cache``; replays start here
        if end == len(ids) and new_tokens:  # none asked: the prompt's last step is checked, nothing is written
            ids.append(int(cached[-1].argmax()))
        if progress is not None:
            progress(len(cached), len(ends) + 1)
    positions = [end - 1 for end in ends]
    # No cache; the LM head at the steps' positions only (not at the shared ones, whose steps were kept).
    full = model.logits(model.states(torch.tensor([ids[: ends[-1]]], device=device))[0, positions])  # (steps, V)
    if progress is not None:
        progress(len(ends) + 1, len(ends) + 1)
    steps = kept + [
        Step(
            position=t,
            token=ids[t],
            rows=rows,
            layer_rows=layer_rows,
            nbytes=nbytes,
            formula=kv_cache_bytes(cfg, t + 1, cache.keys[0].element_size()),
            logit_diff=float((logits - uncached).abs().max()),
            same_next=int(logits.argmax()) == int(uncached.argmax()),
            logit_max=float(uncached.abs().max()),
        )
        for t, logits, uncached, (rows, layer_rows, nbytes) in zip(positions, cached, full, sizes)
    ]
    return Decoding(
        ids=ids,
        prompt_len=len(prompt),
        steps=steps,
        cache=cache,
        logit_scale=max(s.logit_max for s in steps),
        prefill=prefill,
        start=start,
        reused=shared,
    )


@torch.no_grad()
def cache_at(model: CausalLM, ids: Sequence[int], step: int, *, decoding: Decoding | None = None) -> KVCache:
    """The cache after feeding ``ids[: step + 1]`` one token at a time (what step ``step`` of :func:`decode` saw).

    ``decoding``: :func:`decode`'s result for these ``ids``; its last step's cache is returned as it is instead of
    replaying that step (the page's default view, right after decoding); an earlier step (from its prefill's last
    on) is the first rows of that cache while it holds every row (no window has dropped one), else a step after the
    prefill is replayed from the cache the prefill left (a few passes, not hundreds). A replay runs the blocks
    alone, one token a pass."""
    if not 0 <= step < len(ids):
        raise ValueError(f"step must lie in [0, {len(ids) - 1}], got {step}")
    cache = KVCache()
    if decoding is not None and decoding.ids[: step + 1] == list(ids[: step + 1]):
        kept = decoding.cache
        if kept is not None and kept.seen == step + 1:
            return kept
        if kept is not None and kept.complete() and decoding.prefill <= step + 1 <= kept.seen:
            # Every row still held: a step's rows are the first rows of the last one's, bit for bit (a token's keys
            # and values depend on it and the tokens before it alone, fed the same way). Replaying a late step
            # of Gemma 3 took 20 s (a pass through the 268M weights per token).
            return kept.prefix(step + 1)
        if decoding.start is not None and decoding.start.seen <= step + 1:
            cache = copy.deepcopy(decoding.start)  # its copy: the replay appends to it
    device = next(model.parameters()).device
    model.eval()
    for t in range(cache.seen, step + 1):  # the blocks alone: the LM head's V logits are never read here
        model.states(torch.tensor([[ids[t]]], device=device), cache=cache)
    return cache


SHARING = ("mha", "gqa", "mqa", "window")  # and "own" for a model of local and global layers


def sharing_kinds(cfg: TransformerConfig) -> tuple[str, ...]:
    """The rows :func:`sharing_configs` builds for ``cfg``: the four of :data:`SHARING`, then "own" for a model of
    local and global layers (its own layout)."""
    return SHARING if cfg.layer_types is None else (*SHARING, "own")


def sharing_configs(cfg: TransformerConfig, window: int) -> dict[str, TransformerConfig]:
    """One shape, four ways to cache it: every head its own K/V (MHA), half as many K/V heads (GQA; the
    model's own count when it already shares), one K/V head (MQA), and MHA with a sliding window; a model of
    local and global layers (Gemma 3) adds its own layers and K/V heads with the window on its local layers."""
    check_window(cfg, window)
    h = cfg.num_heads
    gqa = cfg.kv_heads if 1 < cfg.kv_heads < h else next((g for g in range(h // 2, 1, -1) if h % g == 0), 1)
    base = cfg.replace(sliding_window=None, layer_types=None)  # every layer alike (Gemma 3's pattern: its own row)
    configs = {
        "mha": base.replace(num_kv_heads=None),
        "gqa": base.replace(num_kv_heads=gqa),
        "mqa": base.replace(num_kv_heads=1),
        "window": base.replace(num_kv_heads=None, sliding_window=window),
        "own": cfg.replace(sliding_window=window),
    }
    return {name: configs[name] for name in sharing_kinds(cfg)}


@dataclass(frozen=True)
class SharingRow:
    name: str
    kv_heads: int
    window: int | None
    formula: int
    measured: int  # bytes of the cache tensors after the tokens


@torch.no_grad()
def sharing_table(cfg: TransformerConfig, tokens: int, window: int, *, seed: int = 0) -> list[SharingRow]:
    """For each of :func:`sharing_configs`: the formula's bytes and those of a real cache after ``tokens``
    tokens (a randomly initialised model of that shape: the bytes do not depend on the weights)."""
    if not 1 <= tokens <= limit(cfg):
        raise InputError("kv_prompt_too_long", count=tokens, new=0, limit=limit(cfg))
    rows = []
    # The cache's bytes depend on layers, K/V heads, head width and tokens only: a vocabulary of 256 and a narrow MLP
    # keep the models small (at SmolLM2's shape, 4 × 135M random weights would take minutes to draw and run).
    small = dict(num_layers=cfg.num_layers, vocab_size=min(cfg.vocab_size, 256), mlp_ratio=0.25)
    ids = torch.randint(0, small["vocab_size"], (1, tokens), generator=torch.Generator().manual_seed(seed))
    for name, c in sharing_configs(cfg, window).items():
        model = seeded_init(CausalLM(c.replace(**small)), seed).eval()
        cache = KVCache()
        for t in range(tokens):  # a row per step, as decoding fills it
            model(ids[:, t : t + 1], cache=cache)
        rows.append(SharingRow(name, c.kv_heads, c.sliding_window, kv_cache_bytes(c, tokens), cache.nbytes))
    return rows


def published_curve(tokens: Sequence[int], bytes_per_element: int = 2) -> dict[str, list[int]]:
    """``{model: bytes at each token count}`` from the formula (fp16 by default), window included."""
    return {name: [kv_cache_bytes(p.cfg, t, bytes_per_element) for t in tokens] for name, p in PUBLISHED.items()}


def tensor(cache: KVCache, layer: int, which: str) -> Tensor:
    """One layer's cached keys or values ``[H_kv, T, Dh]`` (batch 0)."""
    if not 0 <= layer < len(cache.keys):
        raise ValueError(f"layer must lie in [0, {len(cache.keys) - 1}], got {layer}")
    return (cache.keys if which == "k" else cache.values)[layer][0]
