"""KV cache stepper page (lecture §4.3, §6.3, §8.4): decode a prompt token by token with our own cache, watch
K and V grow, check cached against uncached decoding, and set the bytes formula beside real tensors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from tx_explorer import locales
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import Panel, texts
from tx_explorer.views.inputs import Number, Section, Text
from tx_explorer.viz import charts
from tx_explorer.viz import positions as vp
from tx_explorer.viz.heatmap import heatmap

PAGE = "kv_cache"
MAX_NEW_TOKENS = kv.MAX_NEW_TOKENS
limit = kv.limit  # the stepper's tokens for a model: its context, at most kv.STEPPER_TOKENS
CURVE_TOKENS = [2**i for i in range(18)]  # 1 … 131 072
PROMPT = locales.text(PAGE, "prompt_default", "en")  # the prompt's default (English in both languages)
MODEL = "tiny-llama"  # the model a declared section decodes with when none is given (GQA: 4 query heads, 2 KV heads)
LATEX = {
    "bytes": r"\text{bytes}=2\cdot L\cdot H_{kv}\cdot D_h\cdot b\cdot \min(T,\,W)",
}


def model_of(tm: TextModel) -> CausalLM:
    """The model behind a text model, if it is one of ours with a KV cache (a causal LM)."""
    if tm.kind != "causal" or not isinstance(tm.model, CausalLM):
        raise InputError("kv_not_causal", name=tm.name)
    return tm.model


def window_note(tm: TextModel, *, lang: str = "en") -> str | None:
    """For a model whose local layers' window lies beyond the stepper's tokens (Gemma 3: 512 against 128): that
    the stepper cannot reach it, and where it is checked instead. None for every other model."""
    cfg = tm.config
    if cfg.layer_types is None or cfg.sliding_window is None or cfg.sliding_window < kv.limit(cfg):
        return None
    local = sum(t == "sliding" for t in cfg.layer_types)
    return texts(PAGE, lang)(
        "window_note", window=f"{cfg.sliding_window:,}", local=local, layers=cfg.num_layers, limit=kv.limit(cfg)
    )


def first_shared(names: Sequence[str], load: Callable[[str], TextModel]) -> str | None:
    """The first of ``names`` whose query heads share key/value heads (GQA or MQA): the page's default."""
    return next((n for n in names if load(n).config.kv_heads < load(n).config.num_heads), None)


def prompt_ids(tm: TextModel, prompt: str) -> list[int]:
    """The prompt's token ids, untruncated (a prompt too long for the model is refused by :func:`kv.decode`)."""
    if not prompt or not prompt.strip():
        raise InputError("kv_prompt_empty")
    return list(tm.tokenizer.encode(prompt).ids)


@dataclass(frozen=True)
class Decoded:
    decoding: kv.Decoding
    labels: list[str]  # every token, prompt then continuation
    text: str  # the continuation as text
    check: str  # identical tokens? max |Δ logit|
    ok: bool
    growth: Panel  # rows and bytes per step: cache tensors beside the formula
    diff: Panel  # max |Δ logit| per step


def decoding(tm: TextModel, prompt: str, new_tokens: int) -> kv.Decoding:
    """Decode with and without the cache, step by step: the numbers alone (small, so a page can memoise them)."""
    return kv.decode(model_of(tm), prompt_ids(tm, prompt), new_tokens)


def decode(
    tm: TextModel | None = None,
    prompt: str = PROMPT,
    new: int = 8,
    *,
    numbers: kv.Decoding | None = None,
    lang: str = "en",
) -> Decoded:
    """Decode ``new`` tokens after ``prompt`` with and without the cache, step by step, and compare (``tm`` default:
    :data:`MODEL`; ``numbers``: :func:`decoding`'s result for these inputs, when the page has it memoised)."""
    if tm is None:
        from tx_explorer import model_cache  # the registry loads every family: imported when a section asks

        tm = model_cache.shared_model(MODEL)
    return decoded(tm, numbers or decoding(tm, prompt, new), lang=lang)


def decoded(tm: TextModel, d: kv.Decoding, *, lang: str = "en") -> Decoded:
    """:func:`decoding`'s numbers shown: the verdict, the cache's growth beside the formula, the logit gaps."""
    T = texts(PAGE, lang)
    steps = d.steps
    x = [s.position for s in steps]
    growth = charts.lines(
        x,
        {T("series_measured"): [s.nbytes for s in steps], T("series_formula"): [s.formula for s in steps]},
        title=T("growth_title"),
        x_title=T("axis_step"),
        y_title=T("axis_bytes"),
    )
    growth.update_traces(selector=dict(name=T("series_formula")), mode="markers", marker=dict(symbol="x", size=9))
    tol = kv.tolerance(tm.config, d.logit_scale)
    diff = charts.lines(
        x,
        {T("series_diff"): [max(s.logit_diff, 1e-12) for s in steps]},
        title=T("diff_title"),
        x_title=T("axis_step"),
        y_title=T("axis_diff"),
        references={T("tolerance", tol=tol): tol},
    )
    diff.update_yaxes(type="log")
    ok = d.identical and d.max_diff <= tol
    check = T(
        "check_ok" if ok else "check_bad",
        steps=len(steps),
        diff=f"{d.max_diff:.1e}",
        tol=f"{tol:.1e}",
        equal=T("yes") if all(s.nbytes == s.formula for s in steps) else T("no"),
    )
    data = {
        "step": np.array(x),
        "bytes": np.array([s.nbytes for s in steps]),
        "formula": np.array([s.formula for s in steps]),
    }
    return Decoded(
        decoding=d,
        labels=tm.labels(d.ids),
        text=tm.decode(d.ids[d.prompt_len :]),
        check=check,
        ok=ok,
        growth=Panel("kv_growth", growth, data),
        diff=Panel("kv_diff", diff, np.array([s.logit_diff for s in steps])),
    )


@dataclass(frozen=True)
class CacheView:
    keys: Panel
    values: Panel
    groups: Panel
    numbers: str


def cache_view(
    tm: TextModel,
    ids: Sequence[int],
    labels: Sequence[str],
    step: int,
    layer: int,
    *,
    lang: str = "en",
    decoding: kv.Decoding | None = None,
) -> CacheView:
    """One layer's cached K and V after ``step`` (rows = kept positions, columns = KV head · dimension), and
    which query head reads which KV head. ``decoding`` (of these ``ids``): its last step's cache is used as it is."""
    T = texts(PAGE, lang)
    model = model_of(tm)
    cache = kv.cache_at(model, ids, step, decoding=decoding)
    cfg = model.cfg
    kept = cache.positions.tolist()
    rows = [f"{p}: {labels[p]}" for p in kept]
    cols = [f"g{g}·{i}" for g in range(cfg.kv_heads) for i in range(cfg.head_dim)]
    panels = []
    for which in ("k", "v"):
        t = kv.tensor(cache, layer, which)  # (H_kv, T, Dh)
        flat = t.permute(1, 0, 2).reshape(t.shape[1], -1).numpy()  # (T, H_kv·Dh): KV heads side by side
        fig = charts.signed_heatmap(
            flat,
            rows,
            cols,
            title=T(f"{which}_title", layer=layer, rows=len(kept), cols=flat.shape[1]),
            x_title=T("axis_kv_dims"),
            y_title=T("axis_cached"),
        )
        _tick_every_quarter_head(fig, cols, cfg.head_dim)
        panels.append(Panel(f"kv_{which}", fig, flat))
    groups = model.blocks[layer].attn.groups
    m = np.zeros((cfg.num_heads, cfg.kv_heads))
    m[np.arange(cfg.num_heads), groups] = 1.0
    gfig = heatmap(
        m,
        [T("q_head", h=h) for h in range(cfg.num_heads)],
        [T("kv_head", g=g) for g in range(cfg.kv_heads)],
        title=T("groups_title", h=cfg.num_heads, g=cfg.kv_heads),
        x_title=T("axis_kv_heads"),
        y_title=T("axis_q_heads"),
    )
    numbers = T(
        "cache_numbers",
        step=step,
        rows=len(kept),
        layers=cfg.num_layers,
        kv=cfg.kv_heads,
        dh=cfg.head_dim,
        measured=f"{cache.nbytes:,}",
        formula=f"{kv.kv_cache_bytes(cfg, step + 1, cache.keys[0].element_size()):,}",
    )
    return CacheView(panels[0], panels[1], Panel("kv_groups", gfig, m), numbers)


def _tick_every_quarter_head(fig: go.Figure, cols: Sequence[str], head_dim: int) -> None:
    """A cache map's column ticks: four per head, not one per dimension (64 → 8 labels to draw and measure for
    tiny-llama); each cell's hover still names its column."""
    x = list(fig.data[0].x)  # column indices, or their names on a large map's categorical axis
    every = range(0, len(x), max(1, head_dim // 4))
    fig.update_xaxes(tickvals=[x[i] for i in every], ticktext=[cols[i] for i in every])


def sharing(tm: TextModel, tokens: int, window: int) -> list[kv.SharingRow]:
    """MHA, GQA, MQA and a sliding window at the model's shape, four random models built and run (seconds at
    SmolLM2's size): numbers only, so one computation serves every language."""
    return kv.sharing_table(model_of(tm).cfg, tokens, window)


def sharing_rows(
    tm: TextModel, table: Sequence[kv.SharingRow], tokens: int, window: int, *, lang: str = "en"
) -> list[dict[str, str]]:
    """:func:`sharing`'s ``table`` as the page shows it: formula bytes beside real cache tensors'."""
    T = texts(PAGE, lang)
    cfg = model_of(tm).cfg
    local = sum(t == "sliding" for t in cfg.layer_types or ())
    rows = {  # layers × rows each: local layers stop at the window, the others hold every token
        "own": f"({local} · {min(tokens, window)} + {cfg.num_layers - local} · {tokens})",
        "window": f"{cfg.num_layers} · {min(tokens, window)}",
    }
    every = f"{cfg.num_layers} · {tokens}"
    return [
        {
            T("col_kind"): T(f"kind_{r.name}", window=window, local=local, layers=cfg.num_layers),
            T("col_kv_heads"): str(r.kv_heads),
            T("col_formula"): f"2 · {r.kv_heads} · {cfg.head_dim} · 4 · {rows.get(r.name, every)} = {r.formula:,}",
            T("col_measured"): f"{r.measured:,}",
            T("col_equal"): "✓" if r.formula == r.measured else "✗",
        }
        for r in table
    ]


def published(*, lang: str = "en") -> tuple[Panel, list[dict[str, str]]]:
    """The formula's memory curve out to 128k tokens in fp16 for published configurations, and their numbers."""
    T = texts(PAGE, lang)
    curves = kv.published_curve(CURVE_TOKENS)
    gib = {name: [b / 2**30 for b in ys] for name, ys in curves.items()}
    fig = vp.marked_lines(
        CURVE_TOKENS,
        gib,
        title=T("published_title"),
        x_title=T("axis_tokens"),
        y_title=T("axis_gib"),
        log_x=True,
        log_y=True,
    )
    rows = [
        {
            T("col_model"): name,
            T("col_layers"): str(p.cfg.num_layers),
            T("col_kv_heads"): f"{p.cfg.kv_heads} / {p.cfg.num_heads}",
            T("col_head_dim"): str(p.cfg.head_dim),
            T("col_window"): _window_cell(p.cfg, T),
            T("col_per_token"): f"{p.per_token() / 2**10:,.0f} KiB",
            T("col_at_128k"): f"{curves[name][-1] / 2**30:,.1f} GiB",
            T("col_source"): p.source,
        }
        for name, p in kv.PUBLISHED.items()
    ]
    return Panel("kv_published", fig, {k: np.array(v) for k, v in curves.items()}), rows


def _window_cell(cfg: TransformerConfig, T: Callable[..., str]) -> str:
    """The window, and on how many layers when only the local ones have it (Gemma 2/3, gpt-oss)."""
    if cfg.sliding_window is None:
        return "—"
    if cfg.layer_types is None:
        return f"{cfg.sliding_window:,}"
    local = sum(t == "sliding" for t in cfg.layer_types)
    return T("window_layers", window=f"{cfg.sliding_window:,}", local=local, layers=cfg.num_layers)


def published_note(*, lang: str = "en") -> str:
    """What the published table shows, its numbers read from :data:`PUBLISHED` (grouping, window, bytes)."""
    T = texts(PAGE, lang)
    llama3, mistral, qwen, gemma = (kv.PUBLISHED[n] for n in ("Llama-3-8B", "Mistral-7B", "Qwen2-0.5B", "Gemma-3-270M"))
    longest = CURVE_TOKENS[-1]
    note = T(
        "published_note",
        l3_share=llama3.cfg.num_heads // llama3.cfg.kv_heads,
        window=f"{mistral.cfg.sliding_window:,}",
        qwen_kv=qwen.cfg.kv_heads,
        qwen_dim=qwen.cfg.head_dim,
        qwen_kib=f"{qwen.per_token() / 2**10:,.0f}",
    )
    mixed = T(
        "published_mixed",
        window=f"{gemma.cfg.sliding_window:,}",
        local=sum(t == "sliding" for t in gemma.cfg.layer_types or ()),
        layers=gemma.cfg.num_layers,
        gib=f"{kv.kv_cache_bytes(gemma.cfg, longest, 2) / 2**30:.2f}",
        full=f"{gemma.per_token() * longest / 2**30:.2f}",
    )
    return f"{note} {mixed}"


# The section with a fixed set of inputs (widget keys kv_prompt, kv_new): the prompt and how many tokens to decode,
# with the model picked above it. The other sections' inputs hang on the model (its layers, its context) and stay
# plain.
DECODE = Section(
    PAGE,
    "kv",
    (Text("prompt", PROMPT, 2000), Number("new", 0, MAX_NEW_TOKENS, 8, label="new_tokens")),
    compute=decode,
)
