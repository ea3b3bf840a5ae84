"""Masked attention (lecture §3.4, §9.4): every mask kind as an ``[N, N]`` matrix and what it does to A."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from tx_explorer import masks
from tx_explorer.analysis import heads
from tx_explorer.analysis.operator_lab import list_items
from tx_explorer.analysis.seeding import generator
from tx_explorer.attention import AttentionSteps, attention_steps
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError, checked_words
from tx_explorer.families.text import TextModel
from tx_explorer.trace import Trace

MaskKind = Literal["causal", "padding", "sliding_window", "prefix_lm", "block_diagonal", "custom"]
MASK_KINDS: tuple[str, ...] = ("causal", "padding", "sliding_window", "prefix_lm", "block_diagonal", "custom")
GridStart = Literal["causal", "full", "diagonal", "empty"]
GRID_STARTS: tuple[str, ...] = ("causal", "full", "diagonal", "empty")
MAX_TOKENS = 24
MAX_TOKEN_CHARS = 32  # longer "words" would only stretch the axis labels


def tokens(text: str, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Whitespace-separated tokens of ``text``.

    Raises:
        ValueError: when there are none, more than ``max_tokens``, or one longer than ``MAX_TOKEN_CHARS``.
    """
    return checked_words(str(text).split(), limit=max_tokens, max_chars=MAX_TOKEN_CHARS, unit="token")


def parse_sizes(text: str, n: int) -> list[int]:
    """Block sizes such as ``"3, 4, 3"`` (or ``"3，4，3"``); they must be positive integers summing to ``n``."""
    cells = list_items(text)
    if not cells:
        raise InputError("sizes_missing", n=n)
    try:
        sizes = [int(c) for c in cells]
    except ValueError:
        raise InputError("sizes_not_whole", text=str(text)[:40]) from None
    if any(s < 1 for s in sizes):
        raise InputError("sizes_below_one")
    if sum(sizes) != n:
        raise InputError("sizes_sum", total=sum(sizes), n=n)
    return sizes


def even_split(n: int, parts: int = 3) -> list[int]:
    """``n`` tokens as ``parts`` documents of nearly equal length (fewer when n is small)."""
    parts = max(1, min(parts, n))
    return [n // parts + (i < n % parts) for i in range(parts)]


def start_grid(start: GridStart, n: int) -> np.ndarray:
    """A boolean ``[n, n]`` grid to begin drawing a custom mask from."""
    grids = {
        "causal": lambda: masks.causal(n).numpy(),
        "full": lambda: masks.full(n).numpy(),
        "diagonal": lambda: np.eye(n, dtype=bool),
        "empty": lambda: np.zeros((n, n), dtype=bool),
    }
    if start not in grids:
        raise ValueError(f"unknown starting grid {start!r}; expected one of {GRID_STARTS}")
    return grids[start]()


def mask_from_grid(grid: np.ndarray | Sequence[Sequence[bool]]) -> Tensor:
    """A user-drawn ``[n, n]`` grid of ticks (True = may attend) as a mask.

    Raises:
        ValueError: when the grid is not square, contains anything but booleans/0/1, or hides every key.
    """
    arr = np.asarray(grid, dtype=object)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0:
        raise ValueError(f"a custom mask must be a square grid, got shape {arr.shape}")
    if not all(v in (True, False, 0, 1) for v in arr.flat):  # None (a cleared cell) or text are refused
        raise InputError("grid_cells")
    mask = torch.tensor(arr.astype(bool))
    if not mask.any():
        raise InputError("grid_empty")
    return mask


def build_mask(
    kind: MaskKind,
    n: int,
    *,
    length: int | None = None,
    window: int | None = None,
    prefix: int | None = None,
    sizes: Sequence[int] | None = None,
    grid: np.ndarray | None = None,
    causal: bool = False,
) -> Tensor:
    """The ``[n, n]`` mask of one kind (True = may attend), optionally AND-ed with a causal mask.

    ``length`` (padding: real tokens, the rest are pads), ``window`` (sliding window), ``prefix``
    (prefix LM), ``sizes`` (block diagonal) and ``grid`` (custom) are the parameters of their kind.
    """
    builders = {
        "causal": lambda: masks.causal(n),
        "padding": lambda: masks.padding([n if length is None else length], n)[0].expand(n, n),  # (1, n) → (n, n)
        "sliding_window": lambda: masks.sliding_window(n, 3 if window is None else window),
        "prefix_lm": lambda: masks.prefix_lm(n, n // 2 if prefix is None else prefix),
        "block_diagonal": lambda: masks.block_diagonal(even_split(n) if sizes is None else sizes),
        "custom": lambda: mask_from_grid(masks.causal(n).numpy() if grid is None else grid),
    }
    if kind not in builders:
        raise ValueError(f"unknown mask kind {kind!r}; expected one of {MASK_KINDS}")
    mask = builders[kind]()
    if mask.shape != (n, n):
        raise ValueError(f"the {kind} mask is {tuple(mask.shape)} but the sequence has {n} tokens")
    return masks.combine(mask, masks.causal(n)) if causal else mask


@dataclass(frozen=True)
class MaskedAttention:
    """One mask applied to seeded random scores, with the checks a reader can verify."""

    mask: Tensor  # [N, N] bool
    steps: AttentionSteps  # scores, masked (−∞ where hidden), weights, out
    hidden: int  # number of hidden (query, key) pairs
    max_hidden_weight: float  # largest weight on a hidden pair: exactly 0.0
    empty_rows: list[int]  # queries that see no key: their weights and output are zero
    max_row_error: float  # max |Σ_j A_ij − 1| over the queries that see something


@torch.no_grad()
def masked_attention(mask: Tensor, seed: int, dim: int = 16) -> MaskedAttention:
    """softmax(QKᵀ/√D with −∞ where hidden) for random ``Q, K, V [N, dim]`` drawn from ``seed``."""
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        raise ValueError(f"the mask must be [N, N], got shape {tuple(mask.shape)}")
    n = mask.shape[0]
    g = generator(seed)
    q, k, v = (torch.randn(n, dim, generator=g) for _ in range(3))
    steps = attention_steps(q, k, v, mask=mask)
    sees = mask.any(-1)
    row_sums = steps.weights.sum(-1)[sees]
    return MaskedAttention(
        mask=mask,
        steps=steps,
        hidden=int((~mask).sum()),
        max_hidden_weight=steps.weights[~mask].abs().max().item() if (~mask).any() else 0.0,
        empty_rows=torch.nonzero(~sees).flatten().tolist(),
        max_row_error=(row_sums - 1).abs().max().item() if sees.any() else 0.0,
    )


def visible_keys(mask: Tensor, labels: Sequence[str]) -> list[list[str]]:
    """For each query row, the labels of the keys it may attend to."""
    if mask.shape != (len(labels), len(labels)):
        raise ValueError(f"{len(labels)} labels for a mask of shape {tuple(mask.shape)}")
    return [[labels[j] for j in torch.nonzero(row).flatten().tolist()] for row in mask]


# ---- the model's own mask, layer by layer ------------------------------------------------------------------------
MODEL_TOKENS = 640  # the default text: past Gemma 3's 512-token window, so its local layers show where they stop
MAX_MODEL_TOKENS = 1024  # one layer's maps at a time: SmolLM2's 9 heads × 1024² float32, 38 MB
SHOWN_CELLS = 128  # a shown map is pooled to at most this many rows and columns (the largest weight of each block)


@dataclass(frozen=True)
class LayerMask:
    layer: int
    window: int | None  # keys a query sees, itself included; None: every earlier key
    theta: float | None  # the layer's rotary base θ; None without rotary positions
    reach: int  # the farthest key any query of any head gives a weight > 0: the largest i − j
    max_hidden: float  # the largest weight on a key the layer's mask hides, over every head and row
    hidden: int  # cells the layer's mask hides (of N², per head)
    row_mean: float  # a row's weights summed, averaged over heads and rows: 1 unless a learned sink takes a share
    row_min: float  # the smallest such sum; 1 − Σ is what the sink took from that row


@dataclass(frozen=True)
class ModelMasks:
    n: int  # tokens read
    heads: int
    layers: list[LayerMask]
    shown: dict[int, np.ndarray]  # layer → its weights, the largest over heads, pooled to ≤ SHOWN_CELLS²; with
    # learned sinks one more column last: the sink's share 1 − Σ_j A_ij, the largest over heads and pooled rows
    pool: int  # positions per shown cell
    sinks: bool  # the model learned a sink logit per head (gpt-oss): its rows sum to less than 1


def layer_window(cfg: TransformerConfig, layer: int) -> int | None:
    """How many keys back ``layer`` sees: every layer's window (Mistral), this layer's own (Gemma 3's local layers)
    or None."""
    return cfg.uniform_window if cfg.layer_types is None else cfg.layer_window(layer)


def shown_layers(cfg: TransformerConfig) -> tuple[int, ...]:
    """The layers whose maps are drawn: the first of each window (Gemma 3: layer 0, local, and layer 5, global)."""
    first: dict[int | None, int] = {}
    for layer in range(cfg.num_layers):
        first.setdefault(layer_window(cfg, layer), layer)
    return tuple(sorted(first.values()))


@torch.no_grad()
def model_masks(tm: TextModel, ids: Sequence[int]) -> ModelMasks:
    """Run ``tm`` (a causal text model) on ``ids`` one block at a time, through its own modules, and measure each
    layer's weights against the mask that layer applies: the stack's causal mask and the layer's own window.

    One layer's maps are held at a time (memory linear in the layers).

    Raises:
        InputError: for fewer than 2 tokens (nothing hidden to check) or more than the model's context.
    """
    model, cfg = tm.model, tm.config
    if tm.kind != "causal":
        raise InputError("not_causal_lm", model=tm.name)
    n = len(ids)
    if n < 2:  # one token sees only itself: no layer hides a key, and a verdict on no hidden key would pass vacuously
        raise InputError("mask_check_tokens", count=n)
    if n > min(MAX_MODEL_TOKENS, tm.max_len):
        raise InputError("context_exceeded", count=n, limit=min(MAX_MODEL_TOKENS, tm.max_len))
    device = next(model.parameters()).device
    x = model.embed(torch.tensor([list(ids)], device=device))  # (1, N, D)
    pos = torch.arange(n, device=device)
    mask = model.mask(n, device)  # (N, N): the stack's own
    back = (pos[:, None] - pos[None, :]).cpu()  # (N, N): i − j
    pool = -(-n // SHOWN_CELLS)
    layers, shown, wanted = [], {}, shown_layers(cfg)
    for i, block in enumerate(model.blocks):
        trace = Trace()
        x = block(x, mask, trace=trace.scope(f"blocks.{i}", layer=i), kind=model.kind, pos=pos)
        a = trace.stack(name_contains="attn")[0, 0].float().cpu()  # (H, N, N)
        sums = heads.row_sums(a)  # (H, N): 1 per row, less where a learned sink took its share
        window = layer_window(cfg, i)
        hidden = ~(mask if window is None else mask & masks.causal_between(pos, pos, window)).cpu()  # (N, N)
        layers.append(
            LayerMask(
                layer=i,
                window=window,
                theta=cfg.layer_theta(i) if cfg.positions == "rotary" else None,
                reach=int(back[(a > 0).any(dim=0)].max()),
                max_hidden=float(a[:, hidden].max()),  # two tokens or more: the causal mask hides a key
                hidden=int(hidden.sum()),
                row_mean=float(sums.mean()),
                row_min=float(sums.min()),
            )
        )
        if i in wanted:
            top = a.amax(dim=0)[None, None]  # (1, 1, N, N): the largest weight over heads
            shown[i] = torch.nn.functional.max_pool2d(top, pool, ceil_mode=True)[0, 0].numpy()
            if cfg.attention_sinks:  # the sink as one more key: the share each row gave it
                sink = (1 - sums).clamp(min=0).amax(dim=0)[None, None]  # (1, 1, N)
                column = torch.nn.functional.max_pool1d(sink, pool, ceil_mode=True)[0, 0].numpy()
                shown[i] = np.concatenate([shown[i], column[:, None]], axis=1)
    return ModelMasks(n=n, heads=cfg.num_heads, layers=layers, shown=shown, pool=pool, sinks=cfg.attention_sinks)
