"""KV cache stepper page (lecture §4.3, §6.3, §8.4): decode a prompt token by token with our own cache, watch
K and V grow, check cached against uncached decoding, and set the bytes formula beside real tensors; on a model
whose local window lies beyond the stepper's tokens (Gemma 3), a run past that window."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from tx_explorer import locales
from tx_explorer.analysis import atlas
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.jobs import Report
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import Panel, rounding, sentences, texts
from tx_explorer.views.inputs import Number, Section, Text
from tx_explorer.viz import charts
from tx_explorer.viz import kv_cache as vk
from tx_explorer.viz import positions as vp
from tx_explorer.viz.heatmap import heatmap

PAGE = "kv_cache"
MAX_NEW_TOKENS = kv.MAX_NEW_TOKENS
limit = kv.limit  # the stepper's tokens for a model: its context, at most kv.STEPPER_TOKENS
CURVE_TOKENS = [2**i for i in range(18)]  # 1 … 131 072
PROMPT = locales.text(PAGE, "prompt_default", "en")  # the prompt's default (English in both languages)
MODEL = "tiny-llama"  # the model a declared section decodes with when none is given (GQA: 4 query heads, 2 KV heads)
LATEX = {  # the bytes formula's right-hand side: every layer holds all T tokens, the last W, or local and global
    "all": r"2\cdot L\cdot H_{kv}\cdot D_h\cdot b\cdot T",
    "window": r"2\cdot L\cdot H_{kv}\cdot D_h\cdot b\cdot \min(T,\,W)",
    "mixed": r"2\cdot H_{kv}\cdot D_h\cdot b\cdot\bigl(L_{\text{local}}\cdot\min(T,\,W)+L_{\text{global}}\cdot T\bigr)",
}


def model_of(tm: TextModel) -> CausalLM:
    """The model behind a text model, if it is one of ours with a KV cache (a causal LM)."""
    if tm.kind != "causal" or not isinstance(tm.model, CausalLM):
        raise InputError("kv_not_causal", name=tm.name)
    return tm.model


def past_window(tm: TextModel) -> int | None:
    """The window a run past it would cross (:func:`kv.past_window`: Gemma 3's 512), or None: no such run."""
    return kv.past_window(tm.config)


def _local(cfg: TransformerConfig) -> list[int]:
    """The layers that keep only their last window of rows: every layer with a window on all, else the local ones."""
    return [i for i in range(cfg.num_layers) if (cfg.layer_window(i) or cfg.uniform_window) is not None]


def window_note(tm: TextModel, *, lang: str = "en") -> str | None:
    """For a model whose local layers' window lies beyond the stepper's tokens (Gemma 3: 512 against 128): that
    the stepper alone stops short of it, and the switch that goes past it. None for every other model."""
    window = past_window(tm)
    if window is None:
        return None
    T, cfg = texts(PAGE, lang), tm.config
    return T(
        "window_note",
        window=f"{window:,}",
        local=len(_local(cfg)),
        layers=cfg.num_layers,
        limit=kv.limit(cfg),
        past=T("past", window=f"{window:,}"),
        total=f"{window + kv.PAST_TOKENS:,}",
        beyond=kv.PAST_TOKENS,
    )


def past_label(tm: TextModel, *, lang: str = "en") -> tuple[str, str]:
    """The label and help of the switch that runs past the window (:func:`past_window`; the page shows it only
    where there is one)."""
    T, window = texts(PAGE, lang), past_window(tm)
    total, limit_ = f"{window + kv.PAST_TOKENS:,}", kv.limit(tm.config)
    return T("past", window=f"{window:,}"), T("past_help", total=total, window=f"{window:,}", limit=limit_)


def first_shared(names: Sequence[str], load: Callable[[str], TextModel]) -> str | None:
    """The first of ``names`` whose query heads share key/value heads (GQA or MQA): the page's default."""
    return next((n for n in names if load(n).config.kv_heads < load(n).config.num_heads), None)


def prompt_ids(tm: TextModel, prompt: str, *, opening: bool = True) -> list[int]:
    """The prompt's token ids, untruncated (a prompt too long for the model is refused by :func:`kv.decode`);
    ``opening``: with the tokens the tokenizer puts first (Gemma 3's <bos>)."""
    if not prompt or not prompt.strip():
        raise InputError("kv_prompt_empty")
    return list(tm.tokenizer.encode(prompt, add_special_tokens=opening).ids)


def past_ids(tm: TextModel, prompt: str) -> tuple[list[int], int]:
    """A prompt that ends :data:`kv.PAST_TOKENS` tokens past the model's window (:func:`past_window`): the bundled
    corpus's text (:func:`atlas.corpus_ids`, from its opening token), then ``prompt`` on a new paragraph; and the
    length of that text, read in one pass (:func:`kv.decode`'s prefill) while the prompt's tokens are stepped."""
    window = past_window(tm)
    if window is None:
        raise ValueError(f"{tm.name} has no window beyond the stepper's tokens to go past")
    if not prompt or not prompt.strip():
        raise InputError("kv_prompt_empty")
    own = prompt_ids(tm, "\n\n" + prompt, opening=False)
    fill = max(1, window + kv.PAST_TOKENS - len(own))  # at least the text's opening token
    return atlas.corpus_ids(tm, fill) + own, fill


@dataclass(frozen=True)
class Decoded:
    decoding: kv.Decoding
    labels: list[str]  # every token, prompt then continuation
    text: (
        str  # the continuation as one line of text: a newline shown as ↵ (the page sets it in bold, which ends at one)
    )
    prompt_note: str  # how a prompt past the window was made, or which steps an earlier decoding served ("": none)
    check: str  # identical tokens? max |Δ logit|, bytes = formula (and past the window: the rows each layer holds)
    ok: bool
    same: str  # the per-step chart's intro: equal up to rounding or not, read from the logits (not the bytes)
    growth: Panel  # rows and bytes per step: cache tensors beside the formula
    diff: Panel  # max |Δ logit| per step


def decoding(
    tm: TextModel,
    prompt: str,
    new_tokens: int,
    *,
    past: bool = False,
    report: Report | None = None,
    reuse: kv.Decoding | None = None,
) -> kv.Decoding:
    """Decode with and without the cache, step by step: the numbers alone (small, so a page can memoise them).

    ``past``: the prompt run past the model's window (:func:`past_ids`), its bundled text read in one pass.
    ``report(fraction, "")`` after each pass of the model (a job's progress; the page says what runs).
    ``reuse``: the last decoding by ``tm``, whose steps serve the opening tokens this prompt shares with it."""
    progress = None if report is None else lambda done, total: report(done / total, "")
    if past:
        ids, prefill = past_ids(tm, prompt)
        return kv.decode(model_of(tm), ids, new_tokens, prefill=prefill, progress=progress)
    return kv.decode(model_of(tm), prompt_ids(tm, prompt), new_tokens, progress=progress, reuse=reuse)


def decode(
    tm: TextModel | None = None,
    prompt: str = PROMPT,
    new: int = 8,
    *,
    past: bool = False,
    numbers: kv.Decoding | None = None,
    lang: str = "en",
) -> Decoded:
    """Decode ``new`` tokens after ``prompt`` with and without the cache, step by step, and compare (``tm`` default:
    :data:`MODEL`; ``past``: run past the window, see :func:`decoding`; ``numbers``: :func:`decoding`'s result for
    these inputs, when the page has it memoised)."""
    if tm is None:
        from tx_explorer import model_cache  # the registry loads every family: imported when a section asks

        tm = model_cache.shared_model(MODEL)
    return decoded(tm, numbers or decoding(tm, prompt, new, past=past), lang=lang)


def _rows(counts: Iterable[int], T: Callable[..., str]) -> str:
    """Row counts in words: "1 row", "5 rows", or "3 / 5 rows" where layers of a kind hold different counts."""
    shown = sorted(set(counts))
    return T("rows_one" if shown == [1] else "rows", rows=" / ".join(f"{r:,}" for r in shown))


def held(cfg: TransformerConfig, layer_rows: Sequence[int], *, lang: str = "en") -> str:
    """The rows each kind of layer holds (``layer_rows``: read off the cache's tensors), in words: one count for
    layers alike, the local and the global layers' apart (several counts where layers of a kind disagree)."""
    T = texts(PAGE, lang)
    listed = lambda layers: _rows((layer_rows[i] for i in layers), T)  # noqa: E731
    if cfg.layer_types is None:
        return T("rows_uniform", rows=listed(range(cfg.num_layers)))
    local = _local(cfg)
    others = [i for i in range(cfg.num_layers) if i not in local]
    return T(
        "rows_mixed", n_local=len(local), local_rows=listed(local), n_global=len(others), global_rows=listed(others)
    )


def _one_line(text: str) -> str:
    """A continuation on one line, every token of it visible: a newline as ↵ (as the token labels show it), and
    spaces as ␣ where there is nothing else (stripped, a reply of blanks or newlines printed as empty bold, "****")."""
    shown = text.replace("\n", "↵")
    return shown.strip() or shown.replace(" ", "␣")


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
        log_y=True,
        references={T("tolerance", tol=float(f"{tol:.2g}")): tol},  # 0.0023, not 0.00229576
    )
    equal = all(s.nbytes == s.formula for s in steps)
    ok = d.identical and d.max_diff <= tol and equal
    # a true minus in the prose ("6.2e−05", not "6.2e-05"), an exact 0 as "0"
    found = dict(steps=len(steps), diff=rounding(d.max_diff), tol=rounding(tol), equal=T("yes") if equal else T("no"))
    changed = sum(not s.same_next for s in steps)
    same = T(  # the chart shows the logits alone: its intro says what they show, the bytes stay in the verdict
        "same_intro",
        verdict=T("same_equal", **found)
        if not changed and d.max_diff <= tol
        else T("same_differ", **found, changed=changed),
    )
    prompt_note = ""
    if d.prefill:  # a run past the window: where it went and what the layers hold at its end
        window, last = tm.config.sliding_window, steps[-1]
        check = T(
            "check_past_ok" if ok else "check_past_bad",
            **found,
            prefill=f"{d.prefill:,}",
            last=f"{last.position:,}",
            beyond=last.position + 1 - window,
            window=f"{window:,}",
            held=held(tm.config, last.layer_rows, lang=lang),
        )
        own = d.prompt_len - d.prefill
        prompt_note = T("past_prompt", fill=f"{d.prefill:,}", own=own, total=f"{d.prompt_len:,}")
    else:
        check = T("check_ok" if ok else "check_bad", **found)
        if d.reused:
            prompt_note = T(
                "reused_prompt_one" if d.reused == 1 else "reused_prompt", n=d.reused, last=d.reused - 1, first=d.reused
            )
    data = {
        "step": np.array(x),
        "bytes": np.array([s.nbytes for s in steps]),
        "formula": np.array([s.formula for s in steps]),
    }
    return Decoded(
        decoding=d,
        labels=tm.labels(d.ids),
        text=_one_line(tm.decode(d.ids[d.prompt_len :])),
        prompt_note=prompt_note,
        check=check,
        ok=ok,
        same=same,
        growth=Panel("kv_growth", growth, data),
        diff=Panel("kv_diff", diff, np.array([s.logit_diff for s in steps])),
    )


@dataclass(frozen=True)
class CacheView:
    keys: Panel
    values: Panel
    groups: Panel
    numbers: str
    layers: Panel | None  # rows each layer holds, for a model of local and global layers


def bytes_formula(tm: TextModel, *, lang: str = "en") -> tuple[str, str]:
    """The cache section's intro, naming the symbols of the bytes formula for this model's layers, and that formula
    (LaTeX, its word in ``lang``): with a window only where the model has one, local and global layers apart."""
    T, cfg = texts(PAGE, lang), tm.config
    kind = "mixed" if cfg.layer_types is not None else "window" if cfg.uniform_window is not None else "all"
    return T("grow_intro", bytes=T(f"grow_bytes_{kind}")), rf"\text{{{T('formula_bytes')}}}=" + LATEX[kind]


def layer_names(tm: TextModel, *, lang: str = "en") -> list[str]:
    """Each layer's name for a picker: its index, and whether it is local or global where the model has both."""
    T, cfg = texts(PAGE, lang), tm.config
    if cfg.layer_types is None:
        return [str(i) for i in range(cfg.num_layers)]
    local = _local(cfg)
    return [T("layer_local" if i in local else "layer_global", layer=i) for i in range(cfg.num_layers)]


def _rows_terms(cfg: TransformerConfig, tokens: int) -> str:
    """The formula's rows summed over the layers, written out: L · T, L · min(T, W) with a window on every layer,
    or (local · min(T, W) + global · T) with local and global layers."""
    if cfg.layer_types is not None:
        local = len(_local(cfg))
        return f"({local} · {min(tokens, cfg.sliding_window)} + {cfg.num_layers - local} · {tokens})"
    return f"{cfg.num_layers} · {min(tokens, cfg.uniform_window or tokens)}"


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
    """One layer's cached K and V after ``step`` (rows = kept positions, columns = KV head · dimension), which
    query head reads which KV head, and with local and global layers the rows each holds. ``decoding`` (of these
    ``ids``): its last step's cache is used as it is, a step after its prefill replayed from the prefill's."""
    T = texts(PAGE, lang)
    model = model_of(tm)
    cache = kv.cache_at(model, ids, step, decoding=decoding)
    cfg = model.cfg
    layer_rows = [cache.rows(i) for i in range(cfg.num_layers)]
    kept = cache.positions.tolist()[-layer_rows[layer] :]  # a local layer keeps the last of the stack's positions
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
            title=T(f"{which}_title", layer=layer, rows=_rows([len(kept)], T), cols=flat.shape[1]),
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
        title=T("groups_title_one" if cfg.kv_heads == 1 else "groups_title", h=cfg.num_heads, g=cfg.kv_heads),
        x_title=T("axis_kv_heads"),
        y_title=T("axis_q_heads"),
    )
    _reads_words(gfig, m, T)
    b = cache.keys[0].element_size()
    numbers = T(
        "cache_numbers",
        step=step,
        held=held(cfg, layer_rows, lang=lang),
        kv=cfg.kv_heads,
        dh=cfg.head_dim,
        b=b,
        terms=_rows_terms(cfg, step + 1),
        measured=f"{cache.nbytes:,}",
        formula=f"{kv.kv_cache_bytes(cfg, step + 1, b):,}",
    )
    layers = _layer_rows(tm, layer_rows, step, lang)
    return CacheView(panels[0], panels[1], Panel("kv_groups", gfig, m), numbers, layers)


def _reads_words(fig: go.Figure, reads: np.ndarray, T: Callable[..., str]) -> None:
    """The query → KV head map in words: a ✓ in each cell a query head reads (not "1.00" and "0.00" on a colour
    scale), and each cell's hover saying whether it reads that KV head (not a bare "1.0000")."""
    trace = fig.data[0]
    trace.update(text=np.where(reads > 0, "✓", "").astype(object), showscale=False)
    if trace.customdata is None:  # a map too large for labelled cells: its axes name the heads
        return
    names = np.asarray(trace.customdata, dtype=object)  # [H, H_kv, 2]: query head, KV head
    words = np.where(reads > 0, T("reads_yes"), T("reads_no"))[..., None].astype(object)
    hover = T("reads_hover", q="%{customdata[0]}", kv="%{customdata[1]}", verdict="%{customdata[2]}")
    trace.update(customdata=np.concatenate([names, words], axis=-1), hovertemplate=hover + "<extra></extra>")


def _layer_rows(tm: TextModel, layer_rows: Sequence[int], step: int, lang: str) -> Panel | None:
    """Bars of the rows each layer holds after ``step``, the window drawn across: local layers stop at it, the
    global ones grow past it (None for a model whose layers are all alike)."""
    T, cfg = texts(PAGE, lang), tm.config
    if cfg.layer_types is None:
        return None
    window = cfg.sliding_window
    floor = vk.rows_floor(layer_rows, window)
    fig = vk.layer_rows(
        layer_names(tm, lang=lang),
        layer_rows,
        window,
        title=T("rows_title", step=step),
        x_title=T("axis_layer"),
        y_title=T("axis_rows_from", floor=f"{floor:,}") if floor else T("axis_rows"),
        series=T("series_rows"),
        window_name=T("window_line", window=f"{window:,}"),
    )
    return Panel("kv_layer_rows", fig, np.array(layer_rows))


def _tick_every_quarter_head(fig: go.Figure, cols: Sequence[str], head_dim: int) -> None:
    """A cache map's column ticks: four per head, not one per dimension (64 → 8 labels to draw and measure for
    tiny-llama); each cell's hover still names its column."""
    x = list(fig.data[0].x)  # column indices, or their names on a large map's categorical axis
    every = range(0, len(x), max(1, head_dim // 4))
    fig.update_xaxes(tickvals=[x[i] for i in every], ticktext=[cols[i] for i in every])


def sharing(tm: TextModel, tokens: int, window: int) -> list[kv.SharingRow]:
    """MHA, GQA, MQA and a sliding window at the model's shape (and its own layout of local and global layers),
    random models built and run (seconds at SmolLM2's size): numbers only, so one computation serves every
    language."""
    return kv.sharing_table(model_of(tm).cfg, tokens, window)


def sharing_intro(tm: TextModel, *, lang: str = "en") -> str:
    """The sharing section's intro: how many ways the table caches the model's shape, read off its rows (the four
    of :data:`kv.SHARING`, and the model's own layout where it has local and global layers)."""
    T = texts(PAGE, lang)
    kinds = kv.sharing_kinds(model_of(tm).cfg)
    return T("sharing_intro", ways=T("ways_own" if "own" in kinds else "ways"))


def window_help(tm: TextModel, *, lang: str = "en") -> str:
    """The window box's help: what W means, and its top, the tokens the section runs (:func:`limit`), and why."""
    return texts(PAGE, lang)("window_help", limit=f"{limit(tm.config):,}", most=kv.STEPPER_TOKENS)


def sharing_rows(
    tm: TextModel, table: Sequence[kv.SharingRow], tokens: int, window: int, *, lang: str = "en"
) -> list[dict[str, str]]:
    """:func:`sharing`'s ``table`` as the page shows it: formula bytes beside real cache tensors'."""
    T = texts(PAGE, lang)
    cfg = model_of(tm).cfg
    local = sum(t == "sliding" for t in cfg.layer_types or ())
    configs = kv.sharing_configs(cfg, window)  # each row's layers: local ones stop at the window, others hold all
    return [
        {
            T("col_kind"): T(f"kind_{r.name}", window=window, local=local, layers=cfg.num_layers),
            T("col_kv_heads"): str(r.kv_heads),
            T("col_formula"): f"2 · {r.kv_heads} · {cfg.head_dim} · 4 · {_rows_terms(configs[r.name], tokens)}"
            f" = {r.formula:,}",
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
    fig.update_yaxes(exponentformat="power")  # 10⁻⁴ GiB, not SI's "100μ" GiB
    rows = [
        {
            T("col_model"): name,
            T("col_layers"): str(p.cfg.num_layers),
            T("col_kv_heads"): f"{p.cfg.kv_heads} / {p.cfg.num_heads}",
            T("col_head_dim"): str(p.cfg.head_dim),
            T("col_window"): _window_cell(p.cfg, T),
            T("col_per_token"): f"{p.per_token() / 2**10:,.0f} KiB",
            T("col_at_128k"): f"{_gib(curves[name][-1])} GiB",
            T("col_source"): p.source,
        }
        for name, p in kv.PUBLISHED.items()
    ]
    return Panel("kv_published", fig, {k: np.array(v) for k, v in curves.items()}), rows


def _gib(nbytes: float) -> str:
    """Bytes in GiB as the table and the note both write them: two decimals under 10 GiB (Gemma 3's 0.38 read 0.4
    in the table beside 0.38 in the note), one above."""
    gib = nbytes / 2**30
    return f"{gib:,.2f}" if gib < 10 else f"{gib:,.1f}"


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
        gib=_gib(kv.kv_cache_bytes(gemma.cfg, longest, 2)),
        full=_gib(gemma.per_token() * longest),
    )
    return sentences([note, mixed], lang)  # no space after a Chinese full stop


# The section with a fixed set of inputs (widget keys kv_prompt, kv_new): the prompt and how many tokens to decode,
# with the model picked above it. The other sections' inputs hang on the model (its layers, its context) and stay
# plain.
DECODE = Section(
    PAGE,
    "kv",
    (Text("prompt", PROMPT, 2000), Number("new", 0, MAX_NEW_TOKENS, 8, label="new_tokens")),
    compute=decode,
)
