"""Self-attention and position page (lecture §3.1–3.3, §9.3): permutation equivariance, word order, positions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from tx_explorer import locales
from tx_explorer.analysis import self_attention
from tx_explorer.views import Panel, axes, listed, rounding, signed, subscripted, texts
from tx_explorer.views.inputs import Choice, Number, Section, Text
from tx_explorer.viz import charts
from tx_explorer.viz.heatmap import heatmap, number, tick_cells

PAGE = "self_attention"
LATEX = {
    "qkv": r"Q=XW_Q,\quad K=XW_K,\quad V=XW_V,\qquad [Q\;K\;V]=X\,[W_Q\;W_K\;W_V]",
    "perm": r"F(\sigma(X))=\sigma(F(X))",
    "enc": r"\tilde{x}_i=x_i+p_i,\qquad p_{i,2j}=\sin\!\left(\frac{i}{10000^{2j/D}}\right),"
    r"\quad p_{i,2j+1}=\cos\!\left(\frac{i}{10000^{2j/D}}\right)",
}
SHOWN_HEAD = 0  # the head whose weights section 1 draws, for X and for σ(X) alike


@dataclass(frozen=True)
class Permutation:
    check: self_attention.PermutationCheck
    order: str  # the shuffled order in words
    out: Panel
    weights: Panel
    out_shuffled: Panel
    weights_shuffled: Panel
    equal: bool  # outputs equal up to the permutation (no positions)
    verdict: str


def permutation(
    *, n: int, dim: int, heads: int, seed: int, kind: str, perm_seed: int = 1, lang: str = "en"
) -> Permutation:
    """One attention layer on tokens and on the same tokens shuffled (by ``perm_seed``, the Shuffle button's count):
    equal up to the order without positions. The inputs' defaults are :data:`LAYER`'s."""
    T, ax = texts(PAGE, lang), axes(lang)
    check = self_attention.permutation_check(n, dim, heads, seed, perm_seed, kind)
    names = [subscripted("x", i + 1) for i in range(n)]
    shuffled = [names[i] for i in check.perm.tolist()]
    dims = [subscripted("d", i + 1) for i in range(dim)]
    kw = {"x_title": T("axis_dims"), "y_title": T("axis_tokens")}
    # One head's weights before and after the shuffle: equivariance says they are the same map, permuted.
    head_x, head_s = check.weights[SHOWN_HEAD].numpy(), check.weights_shuffled[SHOWN_HEAD].numpy()
    out, out_s = check.out.numpy(), check.out_shuffled.numpy()
    equal = check.max_diff < self_attention.EQUIVARIANCE_TOL
    verdict = (
        T("perm_equal", diff=rounding(check.max_diff))
        if equal
        else T("perm_broken", diff=f"{check.max_diff:.2f}", kind=T(f"pos_{kind}"))
    )
    return Permutation(
        check,
        T("perm_order", order=listed(shuffled, lang)),
        Panel("perm_out", charts.signed_heatmap(out, names, dims, title=T("out_title"), **kw), out),
        Panel(
            "perm_weights",
            heatmap(head_x, names, names, title=T("weights_title", head=SHOWN_HEAD), **ax),
            check.weights.numpy(),
        ),
        Panel(
            "perm_out_shuffled",
            charts.signed_heatmap(out_s, shuffled, dims, title=T("out_shuffled_title"), **kw),
            out_s,
        ),
        Panel(
            "perm_weights_shuffled",
            heatmap(head_s, shuffled, shuffled, title=T("weights_shuffled_title", head=SHOWN_HEAD), **ax),
            check.weights_shuffled.numpy(),
        ),
        equal,
        verdict,
    )


@dataclass(frozen=True)
class Order:
    chart: Panel  # per word: how much its output changes between the two sentences, per position kind
    max_diff: dict[str, float]  # per position kind
    pooled_diff: dict[str, float]  # of the mean-pooled sentence vector
    conclusion: str


def word_order(
    *, a: str, b: str, dim: int | None = None, heads: int | None = None, seed: int | None = None, lang: str = "en"
) -> Order:
    """The same words in two orders through one layer, with each kind of position. The page hands its layer's width,
    heads and seed on (unset: :data:`LAYER`'s defaults); the sentences' defaults are :data:`ORDER`'s."""
    default = handed_on(LAYER.defaults())
    dim, heads, seed = (default[k] if v is None else v for k, v in {"dim": dim, "heads": heads, "seed": seed}.items())
    T = texts(PAGE, lang)
    results = {k: self_attention.word_order(a, b, dim, heads, k, seed) for k in self_attention.POSITION_KINDS}
    fig = charts.bars(
        results["none"].words_a,
        {T(f"pos_{k}"): r.word_diff.numpy() for k, r in results.items()},
        title=T("order_chart"),
        x_title=T("order_x"),
        y_title=T("order_y"),
    )
    max_diff = {k: r.max_diff for k, r in results.items()}
    return Order(
        Panel("word_order", fig, {k: r.word_diff.numpy() for k, r in results.items()}),
        max_diff,
        {k: r.pooled_diff for k, r in results.items()},
        _order_conclusion(results["none"].words_a == results["none"].words_b, max_diff, T),
    )


def difference(d: float) -> str:
    """A measured output difference as a student reads it: "1.10" rather than ``.2e``'s 1.10e+00, a float's
    rounding as a power of ten with a true minus ("2.4e−07"), an exact 0 as "0"."""
    return f"{d:.2f}" if abs(d) >= 0.01 else rounding(d)


def _order_conclusion(same_sentence: bool, max_diff: Mapping[str, float], T: Callable[..., str]) -> str:
    """What the three measured differences say together: one sentence typed twice (nothing to tell apart), the set
    seen without positions and told apart with both kinds, or anything else, reported with its numbers."""
    zero = {k: d < self_attention.EQUIVARIANCE_TOL for k, d in max_diff.items()}
    if same_sentence and all(zero.values()):
        return T("order_same_sentence")
    if zero["none"] and not zero["sinusoidal"] and not zero["learned"]:
        return T("order_conclusion")
    return T("order_unexpected", **{k: difference(d) for k, d in max_diff.items()})


def encodings(
    source: str = "sinusoidal",
    n: int = 64,
    dim: int = 64,
    seed: int = 0,
    trained: dict[str, torch.Tensor] | None = None,
    *,
    lang: str = "en",
) -> tuple[Panel, Panel, str | None]:
    """A position table (sinusoidal, learned at init, or a trained model's from ``trained``) and the cosine
    similarity of its rows; a note on a trained table's size."""
    T = texts(PAGE, lang)
    note = None
    if trained and source in trained:
        table = trained[source][:n]
        note = T("enc_trained_note", rows=trained[source].shape[0], dim=table.shape[1])
    else:
        table = self_attention.position_table(source, n, dim, seed=seed)
    sim = self_attention.position_similarity(table).numpy()
    table = table.numpy()
    pos = [str(i) for i in range(table.shape[0])]
    fig = charts.signed_heatmap(
        table,
        pos,
        [str(j) for j in range(table.shape[1])],
        title=T("enc_matrix"),
        x_title=T("axis_dims"),
        y_title=T("axis_positions"),
        x_tick_cells=tick_cells(table.shape[1], most=8),  # 0, 20, 40 … upright (every 5th of 128 stood crowded)
    )
    sim_fig = charts.signed_heatmap(
        sim,
        pos,
        pos,
        title=T("enc_similarity"),
        x_title=T("axis_positions_cols"),
        y_title=T("axis_positions"),
        x_tick_cells=tick_cells(len(pos), most=8),  # positions as the table's dimensions: 0, 10, 20 … upright
    )
    return Panel("pos_table", fig, table), Panel("pos_similarity", sim_fig, sim), note


MAX_POSITIONS = 128  # section 3's positions slider: the longest table a map's 128 × 128 cells still read


def position_range(source: str, trained: Mapping[str, torch.Tensor] | None = None) -> int:
    """The most positions section 3 can draw of ``source``: a trained table's rows (64 for the seq2seq
    Transformer: a slider up to 128 drew 64 and still read 128), else :data:`MAX_POSITIONS`."""
    if trained and source in trained:
        return max(2, min(MAX_POSITIONS, int(trained[source].shape[0])))
    return MAX_POSITIONS


def encoding_reading(source: str, table: Any, similarity: Any, *, trained: bool = False, lang: str = "en") -> str:
    """What section 3's similarity map shows, measured on the table and map drawn (:func:`encodings`' panels): how
    the table is built, then nearby against distant positions (a band along the diagonal or not) and whether the
    similarity depends on the offset i − j alone, each with its numbers. A band (or its reverse) in a table of
    independent random rows is said to be chance, with the spread of a random cosine in that width, 1/√D."""
    T = texts(PAGE, lang)
    p = self_attention.distance_profile(torch.as_tensor(similarity))
    intro = T(f"enc_reading_{'trained' if trained else source}")
    if p.band == "short":
        return f"{intro}\n\n{T('enc_band_short', n=p.n, far_from=p.far_from)}"
    f3 = lambda v: signed(f"{v:.3f}")  # noqa: E731  (a far cosine is often below 0: −0.005)
    diff = p.near - p.far
    sentences = [
        T("enc_measured", n=p.n, near=f3(p.near), far=f3(p.far), far_from=p.far_from),
        T(
            f"enc_band_{p.band}",
            diff=signed(f"{diff:+.3f}") if p.band == "none" else f3(abs(diff)),
            margin=self_attention.BAND_MARGIN,
        ),
    ]
    if source == "learned" and not trained and p.band != "none":
        dim = torch.as_tensor(table).shape[1]
        sentences.append(T("enc_band_chance", dim=dim, sd=f"{dim**-0.5:.2f}"))
    spread, tol = p.diagonal_spread, self_attention.TOEPLITZ_TOL
    sentences.append(T("enc_offset_only" if spread <= tol else "enc_offset_not", spread=number(spread)))
    sep = "" if lang == "zh" else " "  # 中文 sentences follow one another without a space
    return f"{intro}\n\n{sep.join(sentences)}"


def source_label(source: str, *, lang: str = "en") -> str:
    """One choice of section 3's encodings in words: a kind of table, or a bundled model's trained table named by
    the bundle's words where it is a collection (``bundle_<name>``), else by the model's own name."""
    T = texts(PAGE, lang)
    if source in ("sinusoidal", "learned"):
        return T(f"enc_{source}")
    key = f"bundle_{source}"
    return T("enc_trained", name=T(key) if key in locales.table(PAGE) else source)


def handed_on(layer: Mapping[str, Any]) -> dict[str, Any]:
    """What the page hands on from its layer's settings (:data:`LAYER`'s values) to the word-order section."""
    return {k: layer[k] for k in ("dim", "heads", "seed")}


# The sections with a fixed set of inputs. The layer's settings (section 1) serve every section: the page hands
# width, heads and seed on to the word-order section, and the shuffle count of its Shuffle button (a plain button) to
# the permutation. The encodings section stays plain: its choices include the bundled models' trained tables, and a
# trained table fixes the width. Width, heads and positions keep the keys the page's tests knew ("dim", "heads",
# "positions"); the shuffle count holds "perm_seed", so the layer's prefix is "layer".
LAYER = Section(
    PAGE,
    "layer",
    (
        Number("n", 2, 16, 6, widget="slider", label="tokens"),
        Number("dim", 2, 256, 16, step=2, label="width", help="width_help", key="dim"),  # even: sinusoids pair up
        Number("heads", 1, 16, 4, help="heads_help", key="heads"),
        Number("seed", 0, 10_000, 0),
        Choice("kind", self_attention.POSITION_KINDS, "none", label="positions", option_prefix="pos_", key="positions"),
    ),
    compute=permutation,
)
ORDER = Section(  # keys sentence_a, sentence_b; at most 16 words (analysis.self_attention.MAX_WORDS) fit in 200
    PAGE,
    "sentence",
    (
        Text("a", "dog bites man", 200, label="sentence_a", localized="sentence_a_default"),
        Text("b", "man bites dog", 200, label="sentence_b", localized="sentence_b_default"),
    ),
    compute=word_order,
)
