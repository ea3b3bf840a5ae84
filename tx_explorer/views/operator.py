"""Attention operator page (lecture §2, §9.1–9.2): Q, K, V; E = QKᵀ/√D, A = softmax(E), Y = AV; replacing V or
K; why divide by √D; cross-attention."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from tx_explorer.analysis import atlas, heads, params
from tx_explorer.analysis import operator_lab as op
from tx_explorer.analysis import qk_norm as qk
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, axes, rounding, sentences, signed, texts
from tx_explorer.views.inputs import Number, Section
from tx_explorer.viz import charts
from tx_explorer.viz.heatmap import heatmap, number

PAGE = "operator"
DIMS = [2**i for i in range(11)]  # D = 1 … 1024 for the saturation curve
LATEX = {
    "operator": r"E=\frac{QK^\top}{\sqrt{D}}\in\mathbb{R}^{N_Q\times N_K},\quad A=\operatorname{softmax}(E),"
    r"\quad Y=AV\in\mathbb{R}^{N_Q\times D_V}",
    "sqrt": r"q_i,k_i\sim\mathcal{N}(0,1)\;\Rightarrow\;\operatorname{Var}(q\cdot k)=D,"
    r"\qquad \operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt{D}}\right)=1",
    "qk_norm": r"\hat q=\frac{q}{\operatorname{rms}(q)}\odot w_q,\quad \hat k=\frac{k}{\operatorname{rms}(k)}\odot w_k,"
    r"\quad E_{ij}=\frac{\hat q_i\cdot\hat k_j}{\sqrt{D_H}}",
    "sinks": r"A_{ij}=\frac{e^{E_{ij}}}{e^{s_h}+\sum_k e^{E_{ik}}},\qquad \sum_j A_{ij}"
    r"=1-\frac{e^{s_h}}{e^{s_h}+\sum_k e^{E_{ik}}}<1",
}


EXAMPLE = op.EXAMPLE  # hand-editable Q, K, V to start from
random_qkv, parse_matrix, format_matrix = op.random_qkv, op.parse_matrix, op.format_matrix
SaturationCurve = op.SaturationCurve


def labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


def _signed(T, m: Tensor, rows: str, title: str, key: str) -> Panel:
    """A matrix with rows of vectors (q…, k…) and columns of dimensions."""
    fig = charts.signed_heatmap(
        m.numpy(),
        labels(rows, m.shape[0]),
        labels("d", m.shape[1]),
        title=title,
        x_title=T("axis_dims"),
        y_title=T(f"axis_{rows}"),
    )
    return Panel(key, fig, m.numpy())


def inputs(q: Tensor, k: Tensor, v: Tensor, *, lang: str = "en") -> tuple[Panel, Panel, Panel]:
    """Q, K and V as heatmaps (rows = vectors, columns = dimensions)."""
    T = texts(PAGE, lang)
    return tuple(
        _signed(T, m, rows, f"{name} [{m.shape[0]} × {m.shape[1]}]", name.lower())
        for name, m, rows in (("Q", q, "q"), ("K", k, "k"), ("V", v, "k"))
    )


@dataclass(frozen=True)
class Steps:
    scores: Panel  # E
    weights: Panel  # A
    out: Panel  # Y
    numbers: str  # scale, score spread, mean peak weight, row-sum error


def steps(q: Tensor, k: Tensor, v: Tensor, scaled: bool = True, *, lang: str = "en") -> Steps:
    """The three steps for Q, K, V (the shapes are checked here)."""
    T, ax = texts(PAGE, lang), axes(lang)
    s = op.operator_steps(q, k, v, scaled)
    rows, cols = labels("q", q.shape[0]), labels("k", k.shape[0])
    e_name = "E = QKᵀ/√D" if scaled else "E = QKᵀ"
    shape = f"[{q.shape[0]} × {k.shape[0]}]"
    summary = op.summarize(s, q.shape[1], scaled)
    numbers = T(
        "steps_numbers",
        scale=f"{summary.scale:.3f}",
        std=number(summary.score_std),  # as E's cells write it: 2.45e6 for typed entries of 1000
        peak=f"{summary.mean_peak:.2f}",
        rowsum=rounding(summary.max_row_error),
    )
    scores, weights = s.scores.numpy(), s.weights.numpy()
    return Steps(
        Panel("scores", charts.signed_heatmap(scores, rows, cols, title=f"{e_name} {shape}", **ax), scores),
        Panel("weights", heatmap(weights, rows, cols, title=f"A = softmax(E) {shape}", **ax), weights),
        _signed(T, s.out, "q", f"Y = AV [{q.shape[0]} × {v.shape[1]}]", "output"),
        numbers,
    )


@dataclass(frozen=True)
class Replaced:
    weights_diff: float  # how much A moved
    out_diff: float  # how much Y moved
    weights: Panel
    out: Panel
    reading: str  # what moved, with the two differences: new keys may leave A as it was (one key, uniform rows)


SAME_WEIGHTS = 1e-6  # float32 softmax: weights within this of each other are the same weights (rounding, not a change)


def replace(
    q: Tensor, k: Tensor, v: Tensor, which: str = "V", *, seed: int = 1, scaled: bool = True, lang: str = "en"
) -> Replaced:
    """Draw a new V (A stays, Y changes) or a new K (both change)."""
    T, ax = texts(PAGE, lang), axes(lang)
    r = op.replace_input(q, k, v, which, seed=seed, scaled=scaled)
    rows, cols = labels("q", q.shape[0]), labels("k", k.shape[0])
    fig = heatmap(r.after.weights.numpy(), rows, cols, title=T("weights_after", which=which), **ax)
    return Replaced(
        r.weights_diff,
        r.out_diff,
        Panel("weights_after", fig, r.after.weights.numpy()),
        _signed(T, r.after.out, "q", T("out_after", which=which), "out_after"),
        _replaced_reading(T, r),
    )


def _replaced_reading(T, r: op.Replacement) -> str:
    """What replacing V or K did, read from the two differences: new keys change A unless every query's weights are
    fixed whatever the keys (one key, or each row uniform before and after)."""
    diffs = dict(a=plain(r.weights_diff), y=plain(r.out_diff))
    if r.replaced == "V" or r.weights_diff > SAME_WEIGHTS:
        return T(f"replace_result_{r.replaced}", **diffs)
    nk = r.before.weights.shape[1]
    uniform = all((s.weights - 1 / nk).abs().max().item() <= SAME_WEIGHTS for s in (r.before, r.after))
    if nk == 1:
        why = T("replace_why_one_key")
    elif uniform:
        why = T("replace_why_uniform", nk=nk, share=f"1/{nk}")
    else:
        why = T("replace_why_other")
    return T("replace_result_K_same", why=why, **diffs)


def saturation(n_keys: int, seed: int, scaled: bool) -> op.SaturationCurve:
    return op.softmax_saturation(DIMS, n_keys=n_keys, trials=64, seed=seed, scaled=scaled)


def scaling(
    n_keys: int = 16, *, curve: Callable[[int, int, bool], op.SaturationCurve] = saturation, lang: str = "en"
) -> tuple[list[Panel], str]:
    """Entropy, largest weight and softmax gradient against D, with and without the √D (``curve`` may be cached)."""
    T = texts(PAGE, lang)
    curves = {s: curve(n_keys, 0, s) for s in (True, False)}
    names = {True: T("with_scaling"), False: T("without_scaling")}
    refs = {
        "entropy": {T("ref_uniform"): curves[True].uniform_entropy},
        "max_weight": {T("ref_uniform"): curves[True].uniform_max_weight, T("ref_one_hot"): 1.0},
        "grad_norm": {},
    }
    panels = [
        Panel(
            f"curve_{stat}",
            charts.lines(
                DIMS,
                {names[s]: getattr(curves[s], stat) for s in curves},
                title=T(f"curve_{stat}"),
                x_title="D",
                y_title=T(f"axis_{stat}"),
                log_x=True,
                references=refs[stat],
            ),
            {"scaled" if s else "unscaled": getattr(curves[s], stat) for s in curves},
        )
        for stat in refs
    ]
    numbers = T(
        "sqrt_numbers",
        d=DIMS[-1],
        h_scaled=f"{curves[True].entropy[-1]:.2f}",
        h_unscaled=f"{curves[False].entropy[-1]:.2f}",
        h_max=f"{curves[True].uniform_entropy:.2f}",
        m_scaled=f"{curves[True].max_weight[-1]:.2f}",
        m_unscaled=f"{curves[False].max_weight[-1]:.2f}",
        g_scaled=f"{curves[True].grad_norm[-1]:.3f}",
        g_unscaled=f"{curves[False].grad_norm[-1]:.3f}",
    )
    return panels, sentences([numbers, *_scaling_verdict(curves[True], curves[False], T)], lang)


# "With the scaling the softmax behaves the same at every width" holds where the scaled entropy stays within this
# share of uniform's across D; "without it, it saturates" where its largest weight ends this close to one-hot and
# the softmax's Jacobian shrinks by at least GRAD_FALL.
SAME_ENTROPY, SATURATED, GRAD_FALL = 0.1, 0.9, 2.0


def _scaling_verdict(scaled: op.SaturationCurve, unscaled: op.SaturationCurve, T) -> list[str]:
    """The lecture's two claims read from the curves drawn, at the smallest and the largest D."""
    h = scaled.entropy
    ends = dict(d0=DIMS[0], d1=DIMS[-1], h_max=f"{scaled.uniform_entropy:.2f}")
    same = (h.max() - h.min()) <= SAME_ENTROPY * scaled.uniform_entropy
    first = T(
        "sqrt_same" if same else "sqrt_moves",
        lo=f"{h.min():.2f}",
        hi=f"{h.max():.2f}",
        h0=f"{h[0]:.2f}",
        h1=f"{h[-1]:.2f}",
        m0=f"{scaled.max_weight[0]:.2f}",
        m1=f"{scaled.max_weight[-1]:.2f}",
        **ends,
    )
    g = unscaled.grad_norm
    saturates = unscaled.max_weight[-1] >= SATURATED and g[-1] * GRAD_FALL <= g[0]
    second = T(
        "sqrt_saturates" if saturates else "sqrt_not_saturated",
        h0=f"{unscaled.entropy[0]:.2f}",
        h1=f"{unscaled.entropy[-1]:.2f}",
        m0=f"{unscaled.max_weight[0]:.2f}",
        m1=f"{unscaled.max_weight[-1]:.2f}",
        g0=f"{g[0]:.3f}",
        g1=f"{g[-1]:.3f}",
        fold=f"{g[0] / g[-1]:.1f}" if g[-1] > 0 else "∞",
        **ends,
    )
    return [first, second]


def cross(
    nq: int = 3, nx: int = 7, dim: int = 16, heads: int = 4, seed: int = 0, head: int = 0, *, lang: str = "en"
) -> tuple[Panel, str]:
    """Cross-attention of N_Q queries over N_X context rows: one head's weights and the shapes in words."""
    T = texts(PAGE, lang)
    ca = op.cross_attention(nq, nx, dim, heads, seed)
    if not 0 <= head < ca.weights.shape[0]:
        raise ValueError(f"head {head} out of range: there are {ca.weights.shape[0]} heads")
    fig = heatmap(
        ca.weights[head].numpy(),
        labels("q", nq),
        labels("x", nx),
        title=T("cross_title", head=head, nq=nq, nx=nx),
        x_title=T("axis_x"),
        y_title=axes(lang)["y_title"],
    )
    shapes = [list(t.shape) for t in (ca.queries, ca.context, ca.weights, ca.out)]
    words = (
        T("cross_shapes", **dict(zip("qxay", shapes)), nq=nq)
        + "\n\n"
        + T("cross_self", diff=rounding(ca.self_diff), nq=nq)
    )
    return Panel("cross_weights", fig, ca.weights.numpy()), words


# 3. Why divide by √D: the curves for random queries over N keys (the page passes a cached ``curve``).
SQRT = Section(PAGE, "sqrt", (Number("n_keys", 4, 64, 16, widget="slider", help="n_keys_help"),), compute=scaling)

# 4. Cross-attention: queries from one sequence, keys and values from another (the head shown is picked among the
# declared heads on the page).
CROSS = Section(
    PAGE,
    "cross",
    (
        Number("nq", 1, 16, 3, label="cross_nq", help="help_cross_nq"),
        Number("nx", 1, 16, 7, label="cross_nx", help="help_cross_nx"),
        Number("dim", 1, 256, 16, label="width"),
        Number("heads", 1, 16, 4),
        Number("seed", 0, 10_000, 0),
    ),
    compute=cross,
)


# ---- 5. QK-norm on a real model ----------------------------------------------------------------------------------
def first_qk_normed(names: Sequence[str], load: Callable[[str], TextModel]) -> str | None:
    """The first of ``names`` whose attention normalises q and k (Gemma 3): the section's default."""
    return next((n for n in names if load(n).config.qk_norm), None)


def qk_intro(tm: TextModel, *, lang: str = "en") -> str:
    """What the selected model's QK-norm does, from its config: per head or over the full width, and its gains."""
    T, cfg = texts(PAGE, lang), tm.config
    q, k = cfg.num_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    how = T(f"qk_how_{cfg.qk_norm_width}", dh=cfg.head_dim, q=f"{q:,}", k=f"{k:,}")
    return T("qk_intro", model=tm.name, how=how, gains=f"{params.qk_norm_params(cfg):,}")


def qk_absent(name: str, default: str | None, *, lang: str = "en") -> str:
    """``name`` has no QK-norm: say so, and name the model offered that has it (the section's default), if any."""
    T = texts(PAGE, lang)
    return T("qk_absent", model=name, which=T("qk_which", models=default) if default else "")


def qk_norm_numbers(tm: TextModel) -> list[qk.QKNormLayer]:
    """:func:`qk_norm.qk_norm_effect` on the first :data:`qk_norm.QK_TOKENS` tokens of the bundled text."""
    return qk.qk_norm_effect(tm, atlas.corpus_ids(tm, min(qk.QK_TOKENS, tm.max_len)))


def plain(v: float) -> str:
    """``v`` to three significant figures as a sentence writes it: plain below a million ("0.989", "12.3",
    "1,150", "10,200"; ``.3g`` wrote 1.15e+03), a power of ten beyond it or below 0.001 ("2.4e−7")."""
    if v == 0:
        return "0"
    if not 1e-3 <= abs(v) < 1e6:
        return number(v)  # its true minus already
    v = float(f"{v:.3g}")  # rounded to three figures first: 999.7 → 1,000
    decimals = max(0, 2 - math.floor(math.log10(abs(v))))
    return signed(f"{v:,.{decimals}f}")


ONE_KEY_NATS = 0.1  # a row's entropy below this puts ≥ 98 % of its weight on one key (a row of 0.98 and 0.02: 0.098)


def qk_norm(tm: TextModel, found: Sequence[qk.QKNormLayer], *, lang: str = "en") -> tuple[list[Panel], str]:
    """The scores' spread and the rows' entropy per layer, with and without the norm, and what they show."""
    T = texts(PAGE, lang)
    layers = [str(r.layer) for r in found]
    with_, without = T("qk_with"), T("qk_without")
    spread = {with_: [r.normed.spread for r in found], without: [r.raw.spread for r in found]}
    entropy = {with_: [r.normed.entropy for r in found], without: [r.raw.entropy for r in found]}
    fig = charts.bars(layers, spread, title=T("qk_spread_title"), x_title=T("qk_layer"), y_title=T("qk_spread"))
    fig.update_yaxes(type="log")  # the spreads differ by orders of magnitude without the norm
    panels = [
        Panel("qk_norm_spread", fig, {k: np.array(v) for k, v in spread.items()}),
        Panel(
            "qk_norm_entropy",
            charts.bars(layers, entropy, title=T("qk_entropy_title"), x_title=T("qk_layer"), y_title=T("qk_entropy")),
            {k: np.array(v) for k, v in entropy.items()},
        ),
    ]
    low = lambda side: min(getattr(r, side).spread for r in found)  # noqa: E731
    high = lambda side: max(getattr(r, side).spread for r in found)  # noqa: E731
    peaked = min(found, key=lambda r: r.raw.entropy)
    falls = peaked.raw.entropy < peaked.normed.entropy  # the sharpest layer without the norm: sharper than with it?
    sharpest = T(
        "qk_sharpest_falls" if falls else "qk_sharpest_rises",
        layer=peaked.layer,
        entropy=f"{peaked.normed.entropy:.2f}",
        raw_entropy=f"{peaked.raw.entropy:.3f}",
        one_key=T("qk_one_key") if peaked.raw.entropy < ONE_KEY_NATS else "",
    )
    words = T(
        "qk_reading",
        model=tm.name,
        n=min(qk.QK_TOKENS, tm.max_len),
        low=plain(low("normed")),
        high=plain(high("normed")),
        raw_low=plain(low("raw")),
        raw_high=plain(high("raw")),
        largest=plain(max(r.normed.largest for r in found)),
        raw_largest=plain(max(r.raw.largest for r in found)),
        sharpest=sharpest,
        sharper=sum(r.raw.entropy < r.normed.entropy for r in found),
        layers=len(found),
    )
    return panels, words


# ---- 6. Rows that sum to less than 1: learned attention sinks ----------------------------------------------------
SINK_TOKENS = 64  # the bundled text's first tokens: every layer's maps at once (gpt-oss-20b: 24 × 64 × 64², 25 MB)


def sink_numbers(tm: TextModel) -> heads.RowSums:
    """:func:`heads.traced_row_sums`: the model's own traced rows summed, on the first :data:`SINK_TOKENS` tokens of
    the bundled text."""
    return heads.traced_row_sums(tm, atlas.corpus_ids(tm, min(SINK_TOKENS, tm.max_len)))


def sinks(tm: TextModel, r: heads.RowSums, *, lang: str = "en") -> tuple[str, list[dict[str, str]] | None]:
    """What the rows of ``tm``'s A sum to, measured: with learned sinks (gpt-oss) the sink's share and a row per
    layer; without, one line that they sum to 1 (and no table)."""
    T, numbers = texts(PAGE, lang), dict(model=tm.name, **r.summary())
    if not tm.config.attention_sinks:
        return T("sinks_absent", **numbers), None
    words = T("sinks_reading", **numbers)
    table = [
        {
            T("sinks_col_layer"): str(i),
            T("sinks_col_mean"): f"{r.mean[i].mean():.3f}",
            T("sinks_col_min"): f"{r.min[i].min():.3f} (H{int(r.min[i].argmin())})",
            T("sinks_col_share"): f"{r.share[i].mean():.3f}",
            T("sinks_col_most"): f"H{int(r.share[i].argmax())}: {r.share[i].max():.3f}",
        }
        for i in range(r.mean.shape[0])
    ]
    return words, table
