"""Long-context attention atlas page: every head's habits over a long text, from tiles — a layers × heads
grid of each statistic, one head's statistic along the positions, an exact block of weights, and a needle test."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import torch

from tx_explorer.analysis import atlas
from tx_explorer.analysis.heads import head_labels
from tx_explorer.analysis.memory import format_bytes
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, Result, listed, model_facts, sentences, texts
from tx_explorer.viz import atlas as va

PAGE = "atlas"
SOURCES = ("corpus", "paste", "upload")
DEFAULT_TOKENS = 512  # SmolLM2 reads 512 tokens in about 3 s of one CPU core; its context holds 8 192
TABLE_DECIMALS = 3
CHECK_TOLERANCE = 1e-3  # float32 tiles and dense rows agree to ~1e-6; beyond, the check fails
CHECK_TOLERANCE_16 = 0.25  # 16-bit weights: the dense rows' bfloat16 weights move an entropy by up to ~0.1 nats
SINK = 0.5  # a head "is a sink" when over half of its attention, averaged over the positions, is on token 0
Report = Callable[[float, str], None]  # jobs.Report: (fraction done, what is being done)


def source_ids(
    tm: TextModel, source: str, *, tokens: int = DEFAULT_TOKENS, text: str = "", upload: bytes = b""
) -> list[int]:
    """The token ids to read: the first ``tokens`` of the bundled corpus, a pasted text or an uploaded ``.txt``
    (blank, binary or longer than the model's context: a clear message, never a cut)."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of {SOURCES}")
    if source == "corpus":
        return atlas.corpus_ids(tm, tokens)
    if source == "upload":
        text = atlas.read_upload(upload)
        if not text.strip():  # not "the text is empty: type a sentence": a file was given, not a box left blank
            raise InputError("atlas_blank_file")
    return atlas.encode_text(tm, text)


def moved(tm: TextModel, device: torch.device) -> TextModel:
    """A copy of ``tm`` on ``device`` (the GPU when present): the shared model stays where every page expects it."""
    return dataclasses.replace(tm, model=copy.deepcopy(tm.model).to(device))


def _reporter(report: Report | None, layers: int, n: int, lang: str) -> atlas.Progress | None:
    """``atlas.Progress`` (layer, rows done) as a job's report: the fraction of all L · T rows, and in words."""
    if report is None:
        return None
    T = texts(PAGE, lang)
    return lambda layer, rows: report(
        (layer * n + rows) / (layers * n), T("progress", layer=layer, last=layers - 1, done=rows, total=n)
    )


def dense_maps(tm: TextModel, *, lang: str = "en") -> str:
    """What every N × N map of ``tm`` at its full context would take: the memory the atlas does without."""
    return model_facts.say(PAGE, "dense_maps", tm, lang, size=format_bytes(atlas.dense_bytes(tm, tm.max_len)))


def needle_reads(tm: TextModel, *, lang: str = "en") -> str:
    """How ``tm`` reads the planted text and the question: as one user message of its chat template, or plainly."""
    return model_facts.say(PAGE, "needle_chat" if atlas.chats(tm) else "needle_plain", tm, lang)


def compute(
    tm: TextModel, ids: Sequence[int], *, window: int = 64, lang: str = "en", report: Report | None = None
) -> atlas.HeadStats:
    """The atlas's statistics (:func:`tx_explorer.analysis.atlas.head_stats`), reporting rows done per layer."""
    return atlas.head_stats(tm, ids, window=window, progress=_reporter(report, len(tm.model.blocks), len(ids), lang))


def _axes(lang: str) -> dict[str, str]:
    T = texts(PAGE, lang)
    return dict(x_title=T("axis_head"), y_title=T("axis_layer"))


def _largest(values: np.ndarray) -> tuple[int, int]:
    layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
    return int(layer), int(head)


def focus(stats: atlas.HeadStats) -> tuple[int, int]:
    """The head to open first: the one with the largest share on the first token."""
    return _largest(stats.per_head("first"))


def overview(
    stats: atlas.HeadStats, statistic: str = "first", *, global_layers: Sequence[int] = (), lang: str = "en"
) -> Result:
    """The layers × heads grid of one statistic (clickable; ``global_layers``, the model's, named as such), the
    computed facts about sinks, spread and locality, and every head's numbers in a table."""
    T = texts(PAGE, lang)
    values = stats.per_head(statistic)
    fig = va.head_grid(
        values,
        title=T(f"grid_{statistic}", n=stats.first.shape[-1], window=stats.window),
        zmax=1.0 if statistic in ("first", "local") else None,
        layer_marks=model_facts.layer_marks(global_layers, lang),
        **_axes(lang),
    )
    first, entropy, local = (stats.per_head(s) for s in ("first", "entropy", "local"))
    heads = first.size
    sink_l, sink_h = _largest(first)
    n = stats.first.shape[-1]
    # Each count beside what a head spreading its attention evenly would score: on a short text that alone passes
    # the bar (28 tokens lie within a 64-key window: "270 of 270 heads local" said nothing)
    share = lambda v: f"{v:.2f}"  # noqa: E731
    even_first, even_first_said = _even(stats, lambda w: atlas.even_first(n, w), share, lang)
    even_local, even_local_said = _even(stats, lambda w: atlas.even_local(n, stats.window, w), share, lang)
    _, uniform = _even(stats, lambda w: atlas.even_entropy(n, w), lambda v: T("nats", value=f"{v:.2f}"), lang)
    said_n = f"{n:,}"  # "1,024 tokens", as the layer note writes it
    sinks = dict(count=int((first > SINK).sum()), heads=heads, n=said_n, even=even_first_said)
    near = dict(count=int((local > SINK).sum()), heads=heads, window=stats.window, n=said_n, even=even_local_said)
    notes = (
        T("note_sinks_trivial", **sinks)
        if even_first > SINK
        else _sinks_note(stats, T("note_sinks", **sinks, layer=sink_l, head=sink_h, share=f"{first.max():.2f}"), lang),
        T("note_entropy", median=f"{np.median(entropy):.2f}", uniform=uniform),
        T("note_local_trivial" if even_local > SINK else "note_local", **near),
    )
    columns = {s: T(f"stat_{s}") for s in atlas.STATS}
    table = {T("col_head"): head_labels(*first.shape)}
    table |= {column: stats.per_head(s).ravel().tolist() for s, column in columns.items()}
    # Every statistic to three places (a grid drops trailing zeros: 0.11 beside 0.131)
    decimals = dict.fromkeys(columns.values(), TABLE_DECIMALS)
    return Result((Panel(f"atlas_grid_{statistic}", fig, values),), notes, table, decimals)


def _hidden(stats: atlas.HeadStats) -> list[int | None]:
    """Per layer, its window where the text outruns it (its queries past the window no longer see the first keys),
    else None: a window no shorter than the text hides nothing, and such a layer sees what a global one does."""
    n = stats.first.shape[-1]
    return [w if w is not None and w < n else None for w in stats.windows]


def first_seen(stats: atlas.HeadStats) -> np.ndarray:
    """``[L, H]``: the first token's share per head, averaged over the queries that can see it: a layer whose window
    the text outruns over its first ``window`` queries (past them its share is 0 whatever the head does, and its mean
    over all queries falls with the text's length), every other layer over all of them."""
    first = stats.per_head("first")
    for layer, window in enumerate(_hidden(stats)):
        if window is not None:
            first[layer] = stats.first[layer, :, :window].mean(dim=-1).numpy()
    return first


def _sinks_note(stats: atlas.HeadStats, plain: str, lang: str) -> str:
    """The sink count (``plain``), and where some layer's window is shorter than the text (Gemma 3's local layers
    past 512 tokens), the count again with those layers' shares over the queries that still see the first token."""
    hidden = _hidden(stats)
    windows = [w for w in hidden if w is not None]
    if not windows:
        return plain
    seen = first_seen(stats)
    layer, head = _largest(seen)
    words = texts(PAGE, lang)(
        "note_sinks_seen" if None in hidden else "note_sinks_seen_all",  # local and global layers, or a window on all
        window=f"{windows[0]:,}",
        cap=f"{windows[0] - 1:,}",
        count=int((seen > SINK).sum()),
        heads=seen.size,
        even=f"{atlas.even_first(windows[0]):.2f}",  # an even head over the first `window` queries, all of them seen
        layer=layer,
        head=head,
        share=f"{seen.max():.2f}",
    )
    return sentences([plain, words], lang)


def _even(
    stats: atlas.HeadStats, baseline: Callable[[int | None], float], form: Callable[[float], str], lang: str
) -> tuple[float, str]:
    """A head spreading its attention evenly, scored by ``baseline(window)`` over what each layer sees: a sliding
    window hides keys from a local layer (Gemma 3's see 512 of 793 tokens), so the local and global layers are said
    apart where their numbers, written by ``form``, differ. Returns the smallest layer's score (a count is said to
    say nothing only where every layer passes it without trying; the words show where some do) and the words."""
    scores = {w: baseline(w) for w in dict.fromkeys(_hidden(stats))}  # one per kind of layer, in the layers' order
    said = {w: form(v) for w, v in scores.items()}
    if len(set(said.values())) == 1:
        return min(scores.values()), next(iter(said.values()))
    window = next(w for w in said if w is not None)
    words = texts(PAGE, lang)("even_kinds", local=said[window], window=f"{window:,}", full=said[None])
    return min(scores.values()), words


def layer_kinds(tm: TextModel, stats: atlas.HeadStats, *, lang: str = "en") -> str | None:
    """For a model of local and global layers (Gemma 3): how far each kind looks and how much it gives the first
    token, from these statistics; None when every layer is alike. Past the window a local layer's queries cannot see
    the first token, so its share there is 0 and its mean over all queries falls with the text's length: the share
    over the queries that still see it is said beside it (1024 tokens: 0.27 over all, 0.55 over those)."""
    cfg = tm.config
    if cfg.layer_types is None:
        return None
    full = list(cfg.global_layers)
    local = [i for i in range(cfg.num_layers) if i not in full]
    distance, first = stats.stat("distance").numpy(), stats.per_head("first")  # (L, H, T), (L, H)
    n = distance.shape[-1]
    return texts(PAGE, lang)(
        "note_layer_kinds" if n > cfg.sliding_window else "note_layer_kinds_short",
        local=len(local),
        window=f"{cfg.sliding_window:,}",
        cap=f"{cfg.sliding_window - 1:,}",
        reach=f"{distance[local].max():,.0f}",
        full=listed(map(str, full), lang),  # 5、11、17 in 中文
        full_reach=f"{distance[full].max():,.0f}",
        local_first=f"{first[local].max():.2f}",
        local_first_seen=f"{first_seen(stats)[local].max():.2f}",  # said where the text outruns the window
        full_first=f"{first[full].max():.2f}",
        n=f"{n:,}",
    )


def head_along(stats: atlas.HeadStats, statistic: str, layer: int, head: int, *, lang: str = "en") -> Panel:
    """One head's statistic at every position, beside its layer's mean over heads."""
    T = texts(PAGE, lang)
    t = stats.stat(statistic)
    if not 0 <= layer < t.shape[0] or not 0 <= head < t.shape[1]:
        raise ValueError(f"no head L{layer} H{head}: the model has {t.shape[0]} layers of {t.shape[1]} heads")
    series = {
        T("series_head", layer=layer, head=head): t[layer, head].numpy(),
        T("series_layer"): t[layer].mean(0).numpy(),
    }
    x_title = T("axis_key") if statistic == "received" else T("axis_query")
    fig = va.along(
        np.arange(t.shape[-1]),
        series,
        title=T(f"along_{statistic}", layer=layer, head=head),
        x_title=x_title,
        y_title=T(f"stat_{statistic}"),
    )
    return Panel("atlas_along", fig, t[layer, head].numpy())


@dataclasses.dataclass(frozen=True)
class Block:
    """The exact weights of one head on a block of queries × keys, and how far the atlas's tiled statistics of
    those rows lie from their dense ones: numbers only, worded by :func:`block` in the language shown."""

    layer: int
    head: int
    rows: tuple[int, int]  # [first, end) query positions
    cols: tuple[int, int]  # [first, end) key positions
    weights: np.ndarray  # (rows, cols)
    diff: float  # the largest |tiled − dense| statistic over these rows
    row_sums: tuple[float, float]  # the smallest and largest row sum of the head's dense weights over every key
    tol: float = CHECK_TOLERANCE  # the largest diff the check passes: float32 rounding, more for 16-bit weights
    window: int | None = None  # the keys back this layer sees (Gemma 3's local layers: 512), None: all


def exact_block(
    tm: TextModel,
    ids: Sequence[int],
    stats: atlas.HeadStats,
    layer: int,
    head: int,
    row_start: int,
    col_start: int,
    size: int,
) -> Block:
    """The exact weights of one head on ``size`` queries from ``row_start`` × ``size`` keys from ``col_start`` (cut
    at the text's end; at most 512 each), from a dense pass over those rows, checked against ``stats``."""
    n = len(ids)
    rows, cols = (row_start, min(row_start + size, n)), (col_start, min(col_start + size, n))
    if not 0 <= cols[0] < cols[1] <= len(ids) or cols[1] - cols[0] > atlas.MAX_DENSE:
        raise InputError("atlas_rows", start=cols[0], end=cols[1], n=len(ids), limit=atlas.MAX_DENSE)
    dense = atlas.dense_rows(tm, ids, layer, rows, window=stats.window)
    diff = max(
        float((v - stats.stat(k)[layer, :, rows[0] : rows[1]]).abs().max())
        for k, v in dense.stats.items()
        if k != "distance"
    )
    sums = dense.weights[head].sum(-1)
    weights = dense.weights[head, :, cols[0] : cols[1]].numpy()
    tol = CHECK_TOLERANCE if next(tm.model.parameters()).dtype == torch.float32 else CHECK_TOLERANCE_16
    window = stats.windows[layer] if layer < len(stats.windows) else None
    return Block(layer, head, rows, cols, weights, diff, (float(sums.min()), float(sums.max())), tol, window)


def block(found: Block, *, lang: str = "en") -> Result:
    """The block's weights drawn, how far the atlas lies from them, and how much of each row's attention it holds."""
    T = texts(PAGE, lang)
    fig = va.weights_block(
        found.weights,
        range(*found.rows),
        range(*found.cols),
        title=T("block_title", layer=found.layer, head=found.head),
        x_title=T("axis_key"),
        y_title=T("axis_query"),
    )
    low, high = found.row_sums
    check = "block_check" if found.diff <= found.tol else "block_check_bad"  # a check says when it fails
    notes = (
        T(check, diff=f"{found.diff:.1e}", rows=found.rows[1] - found.rows[0], tol=f"{found.tol:g}"),
        T("block_mass", share=f"{float(found.weights.sum(-1).mean()):.3f}", low=f"{low:.6f}", high=f"{high:.6f}"),
    )
    if found.window is not None:
        # A local layer's zeros far below the diagonal are its window's, not the head's: said, counted (a block of
        # rows 512… × keys 0… on Gemma 3's layer 0 was all 0, unexplained)
        i, j = np.arange(*found.rows)[:, None], np.arange(*found.cols)[None, :]
        hidden = int(((j <= i) & (i - j >= found.window)).sum())
        if hidden:
            said = T("block_window", count=f"{hidden:,}", cells=f"{found.weights.size:,}", window=found.window)
            notes = (*notes, said)
    return Result((Panel("atlas_block", fig, found.weights),), notes)


@dataclasses.dataclass(frozen=True)
class NeedleTest:
    """A needle test's numbers (:func:`plant_needle`), worded by :func:`needle` in the language shown."""

    depth: float
    tokens: int  # the planted text's length
    span: tuple[int, int]  # [first, end) positions of the planted sentence
    share: np.ndarray  # (L, H): the last query's attention on the planted sentence
    reply: str  # the model's greedy answer
    answer: str  # what it should contain
    answered: bool
    windows: tuple[int | None, ...] = ()  # per layer, the keys back it sees (Gemma 3's local layers: 512), None: all


def plant_needle(
    tm: TextModel,
    ids: Sequence[int],
    sentence: str,
    question: str,
    answer: str,
    depth: float,
    *,
    new_tokens: int = 16,
    lang: str = "en",
    report: Report | None = None,
) -> NeedleTest:
    """Plant ``sentence`` at ``depth`` of the text, ask ``question`` at its end: which heads look at the sentence
    from the last position (where the answer starts), and whether the model's greedy answer contains ``answer``
    (``lang``: the progress's words only)."""
    probe = atlas.plant(tm, [], sentence, question, answer, 0.0)  # how many tokens the sentence and question take
    room = tm.max_len - len(probe.ids)
    planted = atlas.plant(tm, list(ids)[: max(room, 0)], sentence, question, answer, depth)
    stats = atlas.head_stats(
        tm, planted.ids, span=planted.span, progress=_reporter(report, len(tm.model.blocks), len(planted.ids), lang)
    )
    reply = tm.decode(atlas.greedy(tm, planted.ids, new_tokens))
    return NeedleTest(
        depth,
        len(planted.ids),
        planted.span,
        stats.span[:, :, -1].numpy(),
        reply,
        planted.answer,
        atlas.answered(reply, planted.answer),
        stats.windows,
    )


def needle(found: NeedleTest, *, lang: str = "en") -> Result:
    """The heads' attention on the planted sentence as a grid, where it lies, and the model's answer judged."""
    T = texts(PAGE, lang)
    share = found.share
    full = [i for i, w in enumerate(found.windows) if w is None] if any(found.windows) else []
    fig = va.head_grid(
        share,
        title=T("needle_title", depth=f"{found.depth:.0%}", n=found.tokens),
        zmax=1.0,
        layer_marks=model_facts.layer_marks(full if len(full) < len(found.windows) else (), lang),
        **_axes(lang),
    )
    best_l, best_h = _largest(share)
    a, b = found.span
    notes = (
        *_needle_hidden(found, full, lang),
        T("needle_where", start=a, end=b - 1, fair=f"{(b - a) / found.tokens:.4f}"),  # the span ends before b
        T(
            "needle_heads",
            count=int((share > 0.5).sum()),
            heads=share.size,
            layer=best_l,
            head=best_h,
            share=f"{share.max():.2f}",
        ),
        T("needle_reply", reply=found.reply.strip() or "∅"),
        T("needle_yes" if found.answered else "needle_no", answer=found.answer),
    )
    return Result((Panel("atlas_needle", fig, share),), notes)


def _needle_hidden(found: NeedleTest, full: Sequence[int], lang: str) -> tuple[str, ...]:
    """Where the planted sentence lies farther back from the last position than some layers' window (Gemma 3's
    local layers past 512 tokens): those layers' heads cannot see it, their 0 is the mask's, not a head's choice; the
    layers that can, and the most any of their heads gives it, said beside. Empty where every layer sees it."""
    gap = found.tokens - found.span[1]  # from the sentence's last token to the last position
    hidden = [i for i, w in enumerate(found.windows) if w is not None and gap >= w]
    if not hidden:
        return ()
    T = texts(PAGE, lang)
    window = found.windows[hidden[0]]
    if len(hidden) == len(found.windows):
        return (T("needle_hidden_all", gap=f"{gap:,}", window=f"{window:,}"),)
    seen = found.share.copy()
    seen[hidden] = -1.0  # only the layers that see the sentence compete for "the most"
    layer, head = _largest(seen)
    return (
        T(
            "needle_hidden",
            gap=f"{gap:,}",
            window=f"{window:,}",
            local=len(hidden),
            heads=len(hidden) * found.share.shape[1],
            full=listed(map(str, full), lang),
            layer=layer,
            head=head,
            share=f"{found.share[layer, head]:.2f}",
        ),
    )
