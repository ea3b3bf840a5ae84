"""Position lab page (lecture §3.3, §9.3): five position schemes trained alike, measured in and beyond their
context; the claims checked; rotary's rotation and its relative property, live."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tx_explorer.analysis import position_lab as lab
from tx_explorer.analysis import spread
from tx_explorer.bundle import BundleError
from tx_explorer.errors import InputError
from tx_explorer.families import positions as positions_family
from tx_explorer.views import Panel, listed, sentences, signed, texts
from tx_explorer.views.inputs import Number, Real, Section, Switch
from tx_explorer.viz import charts
from tx_explorer.viz import positions as vp

PAGE = "position_lab"
__all__ = ["BundleError"]
Results = positions_family.Results
BUNDLE = "positions"  # the shipped runs' registry name
MAX_HEAD_DIM = 256
MAX_POSITIONS = 256
# The page's symbols, one meaning each (its "notation" line says them): m, n the query's and key's positions, d = m − n;
# i a rotary pair, θ_i its angle per position, b the base (RoFormer's notation); s_h ALiBi's slope of head h (the
# ALiBi paper's m, renamed here because m is a position); z a score before the softmax.
LATEX = {
    "rotary": (
        r"R(m)\begin{pmatrix}x_i\\x_{i+D_h/2}\end{pmatrix}=\begin{pmatrix}\cos m\theta_i&-\sin m\theta_i\\"
        r"\sin m\theta_i&\cos m\theta_i\end{pmatrix}\begin{pmatrix}x_i\\x_{i+D_h/2}\end{pmatrix},"
        r"\quad\theta_i=b^{-2i/D_h}",
        r"\langle R(m)q,\,R(n)k\rangle=\langle q,\,R(n-m)k\rangle=f(m-n)",
    ),
    "alibi": (r"z_{mn}=\frac{q_m\cdot k_n}{\sqrt{D_h}}-s_h\,(m-n),\quad s_h=2^{-8h/H},\ h=1,\dots,H",),
}


def label(scheme: str, lang: str = "en") -> str:
    return texts(PAGE, lang)(f"scheme_{scheme}")


def setup(res: Results, *, lang: str = "en") -> str:
    """The experiment in one sentence: model size, data, steps, seeds, time, and how the sinusoidal table is
    scaled (read from the sinusoidal model's config)."""
    T, s = texts(PAGE, lang), res.summary["settings"]
    cfg = res.summary["schemes"][res.schemes[0]]["config"]
    size = dict(layers=cfg["num_layers"], dim=cfg["dim"], heads=cfg["num_heads"])
    runs = len(res.schemes) * len(res.seeds)
    run = T("setup", **s, **size, long=s["seq_len"] * s["eval_factor"], cpu=res.summary["cpu_minutes"], runs=runs)
    return sentences([run, seeds_note(res, lang=lang)], lang)  # "。 每种" in 中文 with a plain space


def seeds_note(res: Results, *, lang: str = "en") -> str:
    """Which seeds, and what ± means: every table and verdict on the page reads them."""
    return texts(PAGE, lang)("seeds_note", seeds=listed(map(str, res.seeds), lang), count=len(res.seeds))


def sinusoidal_scale(res: Results, *, lang: str = "en") -> str:
    """How the sinusoidal model's table was scaled, from its config beside its token embeddings' initial std."""
    scale = res.summary["schemes"]["sinusoidal"]["config"].get("sinusoidal_scale", 1.0)
    return texts(PAGE, lang)("sinusoidal_note", scale=f"{scale:.4f}", rms=f"{scale / math.sqrt(2):.3f}")


def layers(res: Results) -> int:
    """Blocks of every scheme's model (the attention section's layer picker)."""
    return res.summary["schemes"][res.schemes[0]]["config"]["num_layers"]


def _mean_curve(res: Results, scheme: str, field: str) -> np.ndarray:
    """One recorded per-seed array (a curve or a [L, H, N] grid) averaged over the seeds; NaN where none ran."""
    rows = [np.asarray(r[field], dtype=float) for r in res.seed_runs(scheme)]  # None → nan
    return np.stack(rows).mean(axis=0)


def _smooth(y: Sequence[float | None], width: int) -> list[float]:
    """A centred moving average that leaves missing values (a learned table's end) missing."""
    a = np.array([np.nan if v is None else v for v in y], dtype=float)
    if width <= 1:
        return a.tolist()
    kernel = np.ones(width)
    valid = np.isfinite(a)
    num = np.convolve(np.where(valid, a, 0.0), kernel, mode="same")
    den = np.convolve(valid.astype(float), kernel, mode="same")
    return np.where(valid, num / np.maximum(den, 1), np.nan).tolist()


def bigram_curve(res: Results) -> list[float]:
    """A bigram model's loss at each position of the same held-out windows (counted once: no seeds)."""
    return res.summary["bigram"]["loss_by_position"]


def colours(schemes: Sequence[str], lang: str = "en") -> dict[str, str]:
    """Each scheme's fixed colour by its label: the same in every chart, whichever schemes are picked."""
    return {label(s, lang): vp.SCHEME_COLOURS[s] for s in schemes}


def loss_by_position(res: Results, schemes: Sequence[str], smoothing: int = 1, *, lang: str = "en") -> Panel:
    """Loss at each position 0 … 4N − 1 per scheme and a bigram model's, the training length marked."""
    T = texts(PAGE, lang)
    if not schemes:
        raise InputError("pick_one_scheme")
    series = {label(s, lang): _smooth(_mean_curve(res, s, "loss_by_position").tolist(), smoothing) for s in schemes}
    series[label("bigram", lang)] = _smooth(bigram_curve(res), smoothing)
    n = len(next(iter(series.values())))
    fig = vp.marked_lines(
        range(n),
        {k: np.round(v, 4) for k, v in series.items()},  # 4 decimals of a loss: half the chart's bytes, same curves
        mark=res.context - 0.5,
        mark_label=T("context_mark", n=res.context),
        title=T("loss_title"),
        x_title=T("axis_position"),
        y_title=T("axis_loss"),
        colours=colours([*schemes, "bigram"], lang),
    )
    return Panel("position_loss", fig, {k: np.array(v) for k, v in series.items()})


def loss_table(res: Results, *, lang: str = "en") -> list[dict[str, str]]:
    """Mean loss inside and beyond the context per scheme, mean ± std over the seeds (a learned table says it
    cannot go beyond), and the order probe's rise."""
    T = texts(PAGE, lang)
    split = [
        lab.per_seed(res.summary["schemes"], lambda r, i=i: lab.inside_beyond(r["loss_by_position"], res.context)[i])
        for i in (0, 1)
    ]
    harm = lab.per_seed(res.summary["schemes"], lab.order_harm)
    rows = []
    for s in res.schemes:
        inside, beyond = (spread.stat(part[s]) for part in split)
        original = spread.stat([r["order_probe"]["original"] for r in res.seed_runs(s)]).mean
        rows.append(
            {
                T("col_scheme"): label(s, lang),
                T("col_inside"): inside.plus_minus(),
                T("col_beyond"): beyond.plus_minus() if math.isfinite(beyond.mean) else T("no_rows", n=res.context),
                T("col_order"): T(
                    "order_cell", original=f"{original:.3f}", rise=signed(spread.stat(harm[s]).plus_minus(4))
                ),
            }
        )
    inside, beyond = lab.inside_beyond(bigram_curve(res), res.context)
    rows.append(
        {
            T("col_scheme"): label("bigram", lang),
            T("col_inside"): f"{inside:.3f}",
            T("col_beyond"): f"{beyond:.3f}",
            T("col_order"): T("bigram_order"),
        }
    )
    return rows


def attention_by_distance(res: Results, schemes: Sequence[str], layer: int, *, lang: str = "en") -> Panel:
    """Mean attention weight on the key d tokens back, averaged over heads, for one layer."""
    T = texts(PAGE, lang)
    if not schemes:
        raise InputError("pick_one_scheme")
    series = {label(s, lang): _mean_curve(res, s, "attention_by_distance")[layer].mean(axis=0) for s in schemes}
    fig = vp.marked_lines(
        range(res.context),
        series,
        title=T("attn_title", layer=layer),
        x_title=T("axis_distance"),
        y_title=T("axis_weight"),
        log_y=True,
        colours=colours(schemes, lang),
    )
    return Panel("position_attention", fig, series)


def _number(key: str, x: spread.Stat) -> str:
    """A verdict's number: rotary's rounding-sized spread as the largest over the seeds, a counted one (the
    bigram's: no spread) bare, the others mean ± std; a negative one with a true minus, as the prose writes it."""
    if key == "rotary_relative":
        return signed(f"{max(x.values):.2e}")
    digits = 4 if key == "orders" else 3
    return signed(spread.fixed(x.mean, digits) if x.std == 0 else x.plus_minus(digits))


def loss_note(res: Results, *, lang: str = "en") -> str:
    """What the loss table leaves out, at the bundle's own context: where a learned table ends, and the order probe's
    position (its prediction at the context's last token, the tokens before it kept or shuffled)."""
    return texts(PAGE, lang)("loss_note", context=res.context, before=res.context - 1)


def verdict_rows(res: Results, *, lang: str = "en") -> list[dict[str, str]]:
    """The claims, each holding, not holding or within seed noise, with the numbers (mean ± std over the seeds)
    they were read from and every comparison's gap against its spread."""
    T = texts(PAGE, lang)
    seeds = ", ".join(map(str, res.seeds))
    last = len(bigram_curve(res)) - 1  # the last position read: every curve spans the same held-out windows
    rows = []
    for v in _verdicts(res):  # computed here from the shipped numbers
        numbers = " · ".join(
            f"{label(s, lang)} {_number(v.key, x)}" if math.isfinite(x.mean) else T("cannot_run", scheme=label(s, lang))
            for s, x in v.numbers.items()
        )
        gaps = [T("gap_spread", gap=signed(f"{c.gap:.3g}"), spread=signed(f"{c.spread:.3g}")) for c in v.comparisons]
        if v.tested:  # several quantities in one claim: each gap says what it compares
            gaps = [
                T(
                    "tested_gap",
                    what=T(f"test_{q}"),
                    a=label(a, lang),
                    left=_number(v.key, c.left),
                    b=label(b, lang),
                    right=_number(v.key, c.right),
                    gap=gap,
                )
                for (q, a, b), c, gap in zip(v.tested, v.comparisons, gaps, strict=True)
            ]
        verdict = T(f"verdict_{v.state}", tests=T("gap_sep").join(gaps), seeds=seeds)
        if v.untestable:
            verdict = T(
                "verdict_partial",
                tested=listed((label(s, lang) for s in dict.fromkeys(b for _, _, b in v.tested)), lang, "and"),
                verdict=verdict,
                untested=listed((label(s, lang) for s in v.untestable), lang, "and"),
                why=T(f"untestable_{v.key}"),
            )
        rows.append(
            {
                T("col_claim"): T(f"claim_{v.key}", scheme=label(v.scheme, lang) if v.scheme else ""),
                T("col_verdict"): verdict,
                T("col_numbers"): T(f"numbers_{v.key}", numbers=numbers, context=res.context, last=last),
            }
        )
    return rows


def _verdicts(res: Results) -> list[lab.Verdict]:
    return lab.verdicts(res.summary["schemes"], res.context, bigram_curve(res))


def findings(res: Results, *, lang: str = "en") -> str:
    """What the verdicts say together, in words filled from them: which schemes learned order here and which did
    not, which ended worse than no positions inside the context, and where every model stands against the bigram,
    with why the comparison still answers its question."""
    T = texts(PAGE, lang)
    by_key: dict[str, list[lab.Verdict]] = {}
    for v in _verdicts(res):
        by_key.setdefault(v.key, []).append(v)

    def names(vs: Sequence[lab.Verdict]) -> str:
        return listed((label(v.scheme, lang) for v in vs), lang, "and")

    def numbers(vs: Sequence[lab.Verdict]) -> str:
        return listed((f"{label(v.scheme, lang)} {_number(v.key, v.numbers[v.scheme])}" for v in vs), lang, "and")

    def none(v: lab.Verdict) -> str:
        return _number(v.key, v.numbers["none"])

    order, inside = by_key["orders"], by_key["helps_inside"]
    learned = [v for v in order if v.holds]
    blind = [v for v in order if not v.holds]
    worse = [v for v in inside if v.state == "not_holds"]
    parts = [T("findings_title")] + ([T("findings_ordered", schemes=names(learned))] if learned else [])
    if blind:
        parts.append(T("findings_unordered", schemes=names(blind), numbers=numbers(blind), none=none(blind[0])))
    if worse:
        parts.append(T("findings_worse_inside", schemes=names(worse), numbers=numbers(worse), none=none(worse[0])))
    (floor,) = by_key["beats_bigram"]
    models = [x.mean for s, x in floor.numbers.items() if s != "bigram"]
    s = res.summary["settings"]
    parts.append(
        T(
            "findings_bigram" if not floor.holds else "findings_beat_bigram",
            lo=f"{min(models):.2f}",
            hi=f"{max(models):.2f}",
            count=len(models),
            bigram=f"{floor.numbers['bigram'].mean:.2f}",
            steps=s["steps"],
            tokens=f"{s['steps'] * s['batch_size'] * s['seq_len']:,}",
        )
    )
    return sentences(parts, lang)


def rotary_note(res: Results | None, *, lang: str = "en") -> str:
    """Under the live check: the property is exact up to rounding; then, where the trained runs are here, what the
    verdict table measured on them, rotary's spread along a diagonal against that of the schemes added to the input
    (larger than rounding: there a score depends on where the pair sits, said only where it is so)."""
    T = texts(PAGE, lang)
    parts = [T("rotary_note")]
    verdict = next((v for v in _verdicts(res) if v.key == "rotary_relative"), None) if res is not None else None
    if verdict is None:
        return parts[0]

    def worst(scheme: str) -> str:  # as the verdict table writes it: the largest over the seeds
        return _number(verdict.key, verdict.numbers[scheme])

    parts.append(T(f"rotary_note_{'holds' if verdict.holds else 'fails'}", rotary=worst("rotary")))
    added = [s for s in ("sinusoidal", "learned") if s in verdict.numbers]
    for depends in (True, False):
        group = [s for s in added if (max(verdict.numbers[s].values) > lab.RELATIVE_TOLERANCE) == depends]
        if group:
            numbers = listed((f"{label(s, lang)} {worst(s)}" for s in group), lang, "and")
            parts.append(T(f"rotary_note_added_{'depends' if depends else 'alike'}", numbers=numbers))
    return sentences(parts, lang)


@dataclass(frozen=True)
class RotaryDemo:
    rotation: Panel  # the pairs of one vector turning with position
    scores: Panel  # ⟨R(m)q, R(n)k⟩ over m, n
    by_distance: Panel  # the same scores against m − n: one curve if the property holds
    check: str  # the live check in words: the max deviation


def rotary_demo(dh: int, base: float, pos: int, pairs: int, seed: int, double: bool, *, lang: str = "en") -> RotaryDemo:
    """Turn one random vector of ``dh`` dimensions through ``pos`` positions, and check the relative property."""
    T = texts(PAGE, lang)
    head_dim, positions = dh, pos  # the widgets' short names (rot_dh, rot_pos), the formulas' long ones
    if not (2 <= head_dim <= MAX_HEAD_DIM and head_dim % 2 == 0):
        raise InputError("rotary_head_dim", value=head_dim, limit=MAX_HEAD_DIM)
    if not 2 <= positions <= MAX_POSITIONS:
        raise InputError("rotary_positions", value=positions, limit=MAX_POSITIONS)
    if not (base > 1 and math.isfinite(base)):
        raise InputError("rotary_theta", value=base)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(head_dim, generator=gen, dtype=torch.float64)
    shown = sorted({round(i * (head_dim // 2 - 1) / max(1, pairs - 1)) for i in range(pairs)})
    path = lab.rotation_path(q, torch.arange(positions), base)[shown].numpy()  # (pairs, P, 2)
    names = [T("pair_name", i=i, j=i + head_dim // 2) for i in shown]
    rot = vp.rotation(
        path,
        names,
        title=T("rotation_title", p=positions - 1),
        start=T("rotation_start"),
        axis=T("axis_pair"),
        position=T("axis_position"),
    )
    check = lab.rotary_relative_check(
        head_dim, positions, base=base, seed=seed, dtype=torch.float64 if double else torch.float32
    )
    scores = check.scores.numpy()
    heat = charts.signed_heatmap(scores, title=T("scores_title"), x_title=T("axis_n"), y_title=T("axis_m"), height=420)
    m, n = np.meshgrid(np.arange(positions), np.arange(positions), indexing="ij")
    dist = {T("diag_label", d=d): scores[m - n == d] for d in (0, 1, positions // 2)}
    spread = charts.lines(
        range(positions),
        {T("by_distance_line"): check.by_distance.numpy()[positions - 1 :]},
        title=T("by_distance_title"),
        x_title=T("axis_distance"),
        y_title=T("axis_score"),
    )
    words = T(
        "check_numbers",
        dev=f"{check.max_deviation:.2e}",
        scale=f"{check.scale:.3g}",
        dtype="float64" if double else "float32",
        n=positions,
        pairs=positions * positions,
    )
    return RotaryDemo(
        Panel("rotary_rotation", rot, path),
        Panel("rotary_scores", heat, scores),
        Panel("rotary_by_distance", spread, dist),
        words,
    )


# Rotary made visible: the one section with a fixed set of inputs (widget keys rot_<name>); needs no bundle.
ROTARY = Section(
    PAGE,
    "rot",
    (
        Number("dh", 2, MAX_HEAD_DIM, 16, step=2, label="head_dim", help="head_dim_help"),
        Real("base", 2.0, 1e7, 10_000.0, 1000.0, widget="number", help="base_help", format="%.0f"),  # 10000000 fits
        Number("pos", 2, MAX_POSITIONS, 64, label="positions", help="positions_help"),
        Number("pairs", 1, 8, 4, widget="slider", help="pairs_help"),
        Number("seed", 0, 10_000, 0),
        Switch("double", True, label="float64", help="dtype_help"),
    ),
    compute=rotary_demo,
)
