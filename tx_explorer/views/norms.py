"""Norms and blocks page (lecture §5.2–5.3, §8.1–8.3): shipped runs, depth profiles, LayerNorm vs RMSNorm, the
identity argument, one sentence through two variants, a live mini-run, MLP vs SwiGLU."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from tokenizers import Tokenizer

from tx_explorer.analysis import norm_lab, variant_claims
from tx_explorer.bundle import BundleError as BundleError  # the notebook API catches it around load_results
from tx_explorer.config import TransformerConfig
from tx_explorer.families import variants as variants_family
from tx_explorer.families.text import TextModel
from tx_explorer.train import variants
from tx_explorer.views import Panel, axes, corpus_note, listed, sentences, signed, split_bytes_note, texts
from tx_explorer.views.inputs import Choice, Number, Real, Section, Switch, Text
from tx_explorer.viz import charts
from tx_explorer.viz import norm_figures as vn

PAGE = "norms"
BUNDLE = "variants"  # the shipped runs' registry name
METRICS = ("train_loss", "val_loss", "grad_norm", "lr")
Results = variants_family.Results
load_results = variants_family.load_results
Records = dict[str, list[tuple[int, float]]]  # variant -> [(step, training loss)] of a live run
QUANTITIES = ("grad_norm", "residual_rms")
LATEX = {  # the page's formulas, section by section
    "norms": (
        r"\mathrm{LN}(x)=\gamma\odot\frac{x-\mu}{\sqrt{\sigma^2+\epsilon}}+\beta,\quad "
        r"\mu=\tfrac1D\sum_i x_i,\ \sigma^2=\tfrac1D\sum_i(x_i-\mu)^2",
        r"\mathrm{RMSNorm}(x)=\gamma\odot\frac{x}{\mathrm{RMS}(x)},\quad "
        r"\mathrm{RMS}(x)=\sqrt{\epsilon+\tfrac1D\sum_i x_i^2}",
    ),
    "identity": (
        r"\text{Pre-Norm: } x_{l+1}=x_l+F(\mathrm{Norm}(x_l))\ \xrightarrow{F\,\equiv\,0}\ x_l",
        r"\text{Post-Norm: } x_{l+1}=\mathrm{Norm}(x_l+F(x_l))\ \xrightarrow{F\,\equiv\,0}\ \mathrm{Norm}(x_l)",
    ),
    "mlp": (
        # the lecture's row-vector layout (§8.3): X [N, D] times W₁ [D, 4D], as the lecture writes it
        r"\text{MLP: } \sigma(XW_1)\,W_2,\ W_1\in\mathbb{R}^{D\times 4D}\Rightarrow 2\cdot D\cdot 4D=8D^2",
        r"\text{SwiGLU: } (\mathrm{SiLU}(XW_1)\odot XW_2)\,W_3,\ W_1,W_2\in\mathbb{R}^{D\times H},\ H=\tfrac{8D}{3}"
        r"\Rightarrow 3\cdot D\cdot H=8D^2",
    ),
}


def defaults(res: Results) -> dict[str, list[str]]:
    """The variants each section starts with: the shallow runs, the deep ones, Post-LN beside Pre-LN live."""
    live = ["post-ln", "pre-ln"] if {"post-ln", "pre-ln"} <= set(res.names) else res.names[:2]
    deep = [n for n in res.names if n.startswith("deep-")] or res.names[:2]
    return {"runs": [n for n in res.names if not n.startswith("deep-")], "depth": deep, "live": live}


def shared_shape(a: TextModel, b: TextModel) -> tuple[int, int]:
    """(layers, heads) that two text models both have."""
    return min(a.config.num_layers, b.config.num_layers), min(a.config.num_heads, b.config.num_heads)


def index_of(res: Results, name: str) -> int:
    """Where ``name`` is among the shipped variants (0 when it is not shipped): a picker's default."""
    return res.names.index(name) if name in res.names else 0


def curve_series(res: Results, names: Sequence[str], metric: str, smoothing: float, lang: str = "en") -> dict:
    """``{label: (steps, values)}`` of one recorded metric (training metrics smoothed, validation raw)."""
    out = {}
    for n in names:
        h = res.history[n]
        if metric == "val_loss":
            out[res.label(n, lang)] = (h["val_step"], h["val_loss"])
        else:
            out[res.label(n, lang)] = (h["step"], norm_lab.ema(h[metric], smoothing if metric != "lr" else 0.0))
    return out


def corpus(res: Results, *, lang: str = "en") -> str:
    """The text and tokenizer the shipped runs learnt from, read from the bundle's summary against tiny-gpt's."""
    vocab = Tokenizer.from_file(str(res.folder / "tokenizer.json")).get_vocab()
    return corpus_note(res.folder.name, res.summary["corpus"], vocab, "tiny-gpt", lang=lang, page=PAGE)


@dataclass(frozen=True)
class Runs:
    caption: str  # the recipe every shipped run shared
    curves: Panel | None  # None when no variant is picked: no empty axes
    claims: list[dict[str, str]]  # claim, verdict, the numbers behind it (translated columns)
    empty: str | None = None  # what to do instead, when no variant is picked


def runs(
    res: Results, names: Sequence[str], metric: str = "val_loss", smoothing: float = 0.8, *, lang: str = "en"
) -> Runs:
    """The shipped experiment: one metric's curves for the chosen variants and the lecture's claims checked."""
    T = texts(PAGE, lang)
    s0, seeds = res.summary["variants"][res.names[0]]["settings"], res.summary["seeds"]
    caption = T(
        "runs_caption",
        **s0,
        seeds=", ".join(map(str, seeds)),
        first=seeds[0],
        minutes=res.summary["minutes"],
        threads=res.summary["threads"],
    )
    rows = []
    for cl in variant_claims.claims(res.summary):  # computed here from every seed's shipped numbers
        numbers = [
            T(
                "claim_numbers",
                name=res.label(n, lang),
                loss=T("diverged") if math.isinf(cl["losses"][n].mean) else cl["losses"][n].plus_minus(),
                params=f"{cl['params'][n]:,}",
            )
            for n in cl["variants"]
        ]
        c = cl["comparison"]
        gap = T("gap_spread", gap=signed(f"{c.gap:.3g}"), spread=signed(f"{c.spread:.3g}"))
        if cl["tolerance"] is not None:  # the gap is the room left within the tolerance: show what it is made of
            fmt = (lambda v: f"{v:,.0f}") if cl["key"] == "swiglu_same_params" else (lambda v: f"{v:.3g}")
            gap = T(
                "margin_spread",
                difference=signed(fmt(cl["difference"])),
                tolerance=fmt(cl["tolerance"]),
                gap=signed(fmt(c.gap)),
                spread=signed(f"{c.spread:.3g}"),
            )
        rows.append(
            {
                T("claim"): T(f"claim_{cl['key']}"),
                T("verdict"): T(f"verdict_{cl['state']}", tests=gap, seeds=", ".join(map(str, seeds))),
                T("numbers"): " · ".join(numbers),
            }
        )
    if not names:
        return Runs(caption, None, rows, T("pick_variant"))
    series = curve_series(res, names, metric, smoothing, lang)
    fig = vn.curves(series, x_title=T("axis_step"), y_title=T(f"metric_{metric}"), log_y=metric == "grad_norm")
    return Runs(caption, Panel("norms_curves", fig, norm_lab.pad_rows([y for _, y in series.values()])), rows)


def depth(
    res: Results, names: Sequence[str], quantity: str = "grad_norm", *, lang: str = "en"
) -> tuple[Panel | None, str]:
    """Gradient norm or residual RMS against depth, at initialisation and after training; the numbers in words
    (with no variant picked: no panel, and what to do instead)."""
    T = texts(PAGE, lang)
    if not names:
        return None, T("pick_variant")
    panels = {
        T(f"panel_{when}"): {res.label(n, lang): res.profiles[n][when][quantity] for n in names}
        for when in ("init", "final")
    }
    # blocks counted from 1, as the note under the chart and the residual axis (0 = embeddings, then after block 1)
    first = 1 if quantity == "grad_norm" else 0
    fig = vn.depth_profiles(panels, x_title=T(f"x_{quantity}"), y_title=T(f"quantity_{quantity}"), x_start=first)
    # Plotly's default SI ticks write 1e-4 as "100μ", on the page where μ is LayerNorm's mean: powers of ten instead
    fig.update_yaxes(exponentformat="power")
    data = norm_lab.pad_rows([res.profiles[n][w][quantity] for n in names for w in ("init", "final")])
    words = " · ".join(
        T("name_value", name=res.label(n, lang), value=signed(f"{g[0]:.2g} → {g[-1]:.2g}"))  # 中文: a full-width colon
        for n in names
        for g in [res.profiles[n]["final"]["grad_norm"]]
    )
    return Panel("norms_depth", fig, data), T("depth_numbers", values=words)


# The Post-Norm pattern the paper plots: the last block's gradient norm at least this many times the first's. An
# order of magnitude, since one batch's noise moves a block's gradient norm by far less: crossing it is the trend.
PATTERN_FACTOR = 10.0


def depth_note(res: Results, *, lang: str = "en") -> str:
    """The depth section's "what to look for", every fact in it measured on the deep runs: their gradient norms at
    initialisation and the first logged step with the Post-Norm pattern, how far the trained gradient norm moves from
    the first block to the last (the caption's two numbers per variant), and the trained residual RMS."""
    T, names = texts(PAGE, lang), defaults(res)["depth"]
    return T(
        "depth_note",
        init=sentences([_at_init(res, n, T, lang) for n in names], lang),
        spreads=T("depth_spread_sep").join(_spread(res, n, T, lang) for n in names),
        residuals=T("depth_spread_sep").join(_residual(res, n, T, lang) for n in names),
    )


def _times(ratio: float) -> str:
    """A ratio in prose: 2,800 rather than 2.8e+03, three digits below ten (1.02, not 1)."""
    return f"{float(f'{ratio:.2g}'):,.0f}" if ratio >= 10 else f"{ratio:.3g}"


def _rise(g: Sequence[float | None]) -> float:
    """The last block's gradient norm over the first's; nan where a step's norms were not finite (stored as None)."""
    if g[0] is None or g[-1] is None:
        return math.nan
    return g[-1] / g[0] if g[0] else math.inf


def _at_init(res: Results, name: str, T: Callable[..., str], lang: str) -> str:
    """One variant at initialisation: the spread of the blocks above the first, the first against them, and when
    (whether) the Post-Norm pattern is there."""
    g = res.profiles[name]["init"]["grad_norm"]
    above = g[1:]
    return T(
        "depth_init",
        name=res.label(name, lang),
        layers=len(g),
        spread=_times(max(above) / min(above)),
        first=_times(g[0] / float(np.median(above))),
        pattern=_pattern(res, name, T),
    )


def _pattern(res: Results, name: str, T: Callable[..., str]) -> str:
    """Whether the Post-Norm pattern is there at initialisation, else the first logged step it is, else its peak."""
    factor, at_init = _times(PATTERN_FACTOR), _rise(res.profiles[name]["init"]["grad_norm"])
    if at_init >= PATTERN_FACTOR:
        return T("depth_pattern_init", factor=factor, rise=_times(at_init))
    h = res.history[name]
    rises = [(_rise(g), step) for step, g in zip(h["step"], h["layer_grad_norm"])]
    onset = next(((r, step) for r, step in rises if r >= PATTERN_FACTOR), None)
    if onset:
        return T("depth_pattern_step", factor=factor, init=_times(at_init), rise=_times(onset[0]), step=onset[1])
    peak, step = max((r, step) for r, step in rises if not math.isnan(r))
    return T("depth_pattern_never", factor=factor, init=_times(at_init), count=len(rises), peak=_times(peak), step=step)


def _spread(res: Results, name: str, T: Callable[..., str], lang: str) -> str:
    """How far the trained gradient norm moves from the first block to the last, and which way."""
    g = res.profiles[name]["final"]["grad_norm"]
    factor = max(g[0], g[-1]) / min(g[0], g[-1])
    return T(
        "depth_spread",
        name=res.label(name, lang),
        direction=T("depth_rises" if g[-1] > g[0] else "depth_falls"),
        factor=_times(factor),
        orders=f"{math.log10(factor):.1f}",
        layers=len(g),
    )


def _residual(res: Results, name: str, T: Callable[..., str], lang: str) -> str:
    """The trained residual RMS after the first block and after the last, and its spread over all blocks."""
    r = res.profiles[name]["final"]["residual_rms"][1:]  # row 0 is after the embeddings, before any block
    return T(
        "depth_residual",
        name=res.label(name, lang),
        first=f"{r[0]:.3g}",
        last=f"{r[-1]:.3g}",
        spread=_times(max(r) / min(r)),
    )


def layer_steps(res: Results, name: str, quantity: str = "grad_norm", *, lang: str = "en") -> Panel:
    """One variant's per-layer quantity at every logged step (layers × steps)."""
    T = texts(PAGE, lang)
    h = res.history[name]
    grid = np.asarray(h["layer_grad_norm" if quantity == "grad_norm" else "residual_rms"], dtype=float).T  # (L, steps)
    fig = vn.layer_by_step(
        grid,
        h["step"],
        title=res.label(name, lang),
        z_title=T(f"quantity_{quantity}"),
        x_title=T("axis_step"),
        y_title=T(f"x_{quantity}"),  # the residual RMS has one row more: row 0 is after the embeddings
    )
    if quantity == "grad_norm":  # blocks counted from 1, as in the depth profiles above and the note
        fig.update_traces(y=list(range(1, grid.shape[0] + 1)))
    return Panel("norms_layer_step", fig, grid)


@dataclass(frozen=True)
class Normalised:
    steps: norm_lab.NormSteps  # μ, σ, RMS and every intermediate vector
    layernorm: Panel
    rmsnorm: Panel
    note: str


def normalise(x: str, gamma: str = "", beta: str = "", eps: float = 1e-5, *, lang: str = "en") -> Normalised:
    """LayerNorm and RMSNorm of a typed vector (comma-separated numbers), step by step."""
    T = texts(PAGE, lang)
    ns = norm_lab.norm_steps(
        norm_lab.parse_vector(x, "x"),
        norm_lab.parse_vector(gamma, "γ") if gamma.strip() else None,
        norm_lab.parse_vector(beta, "β") if beta.strip() else None,
        eps=eps,
    )
    dims = [f"x{i}" for i in range(len(ns.x))]
    ln = {"x": ns.x, "x − μ": ns.centred, "(x − μ)/σ": ns.ln_hat, "γ ⊙ x̂ + β": ns.ln_out}
    rms = {"x": ns.x, "x / RMS(x)": ns.rms_hat, "γ ⊙ x̂": ns.rms_out}
    return Normalised(
        ns,
        Panel(
            "norms_ln",
            charts.bars(dims, ln, x_title=T("axis_element"), y_title=T("value")),
            norm_lab.pad_rows(list(ln.values())),
        ),
        Panel(
            "norms_rms",
            charts.bars(dims, rms, x_title=T("axis_element"), y_title=T("value")),
            norm_lab.pad_rows(list(rms.values())),
        ),
        _norm_note(ns, eps, T),
    )


def _norm_note(ns: norm_lab.NormSteps, eps: float, T: Callable[..., str]) -> str:
    """What the two normalised vectors measure here; where ε is not small beside x's own scale (the ε box goes to
    1), why the variance or mean square is below 1 (a note saying "≈ 1" read false on x = 0.001, 0.002)."""
    ln_var, rms_ms = float(ns.ln_hat.pow(2).mean()), float(ns.rms_hat.pow(2).mean())
    var, ms = float(ns.centred.pow(2).mean()), float(ns.x.pow(2).mean())
    below = ""
    if ln_var < NEAR_ONE:
        below += T("eps_not_small_ln", eps=signed(f"{eps:.3g}"), var=signed(f"{var:.3g}"))
    if rms_ms < NEAR_ONE:
        below += T("eps_not_small_rms", eps=signed(f"{eps:.3g}"), ms=signed(f"{ms:.3g}"))
    return T(
        "ln_note",
        mean=signed(f"{ns.mean:.3g}"),  # x's own scale: a typed 1e-15 is no rounding error
        ln_mean=_g3(float(ns.ln_hat.mean())),
        ln_var=_g3(ln_var),
        rms_ms=_g3(rms_ms),
        rms_mean=_g3(float(ns.rms_hat.mean())),
        below_one=below,
    )


NEAR_ONE = 0.99  # a variance or mean square this close to 1 is what the norms promise; below it ε is explained


def _g3(value: float) -> str:
    """A normalised vector's statistic (of order 1) to three significant figures, float64 rounding shown as the 0 it
    is (x̂'s mean is 1e-17, not "1.48e-17")."""
    return signed(f"{round(value, 12) + 0.0:.3g}")


def identity(
    norm: str = "layernorm", n: int = 6, scale: float = 3.0, offset: float = 1.0, *, lang: str = "en"
) -> tuple[norm_lab.IdentityDemo, Panel]:
    """Pre-Norm keeps x when the branch is zero, Post-Norm returns Norm(x): the demo's numbers and maps."""
    T = texts(PAGE, lang)
    cfg = TransformerConfig(vocab_size=8, max_len=16, dim=16, num_heads=2, norm=norm)
    demo = norm_lab.identity_demo(cfg, norm_lab.sample_residual(n, cfg.dim, scale=scale, offset=offset, seed=0))
    maps = {"x": demo.x.numpy(), T("pre_out"): demo.pre.numpy(), T("post_out"): demo.post.numpy()}
    fig = vn.side_by_side(
        maps,
        row_labels=[f"t{i}" for i in range(n)],
        col_labels=[f"d{j}" for j in range(cfg.dim)],
        diverging=list(maps),
        x_title=T("axis_dims"),
        y_title=T("axis_tokens"),
        height=320,
    )
    return demo, Panel("norms_identity", fig, np.stack(list(maps.values())))


@dataclass(frozen=True)
class PairNotes:
    truncated: str | None  # the text was cut to the models' context: said, with the context
    split: str | None  # what a token shown as \xNN is (a byte of a character the English tokenizer split)


def pair(
    res: Results, a: TextModel, b: TextModel, sentence: str, layer: int = 0, head: int = 0, *, lang: str = "en"
) -> tuple[Panel, PairNotes]:
    """One head of two trained variants (text models ``a``, ``b``) on the same sentence, and what to say under it."""
    T = texts(PAGE, lang)
    p = norm_lab.attention_pair(a, b, sentence, layer=layer, head=head)
    maps = {res.label(a.name, lang): p.a.numpy(), res.label(b.name, lang): p.b.numpy(), T("difference"): p.diff.numpy()}
    fig = vn.side_by_side(maps, row_labels=p.tokens, col_labels=p.tokens, diverging=[T("difference")], **axes(lang))
    notes = PairNotes(
        T("truncated", n=a.max_len) if p.truncated else None,
        split_bytes_note(p.tokens, lang),  # Chinese typed to the variants' byte-level English tokenizer
    )
    return Panel("norms_pair", fig, np.stack(list(maps.values()))), notes


LIVE_LAST = 10  # the live run's final loss: the mean of its last this many steps (one step's batch is noisy)


@dataclass
class LiveLog:
    """A live run's losses (filled in place while it trains: a stop keeps them) and how it ended."""

    losses: Records
    steps: int  # asked for
    budget: float  # seconds
    seconds: float = 0.0  # spent
    ended: str | None = None  # "steps", "budget" or "diverged"; None: stopped before its end (Stop, an input changed)


def ending(log: LiveLog) -> str:
    """Why a finished run stopped, from its losses: every step done, a non-finite loss (that variant stops), or else
    the time budget."""
    if any(r and not math.isfinite(r[-1][1]) for r in log.losses.values()):
        return "diverged"
    return "steps" if all(len(r) >= log.steps for r in log.losses.values()) else "budget"


def live_curves(res: Results, log: LiveLog, *, lang: str = "en") -> tuple[Panel, str]:
    """The live run's training-loss curves, and in words how many steps each variant did, why the run stopped and
    each one's final loss (no verdict: one seed on training batches, the claims table reads three)."""
    T = texts(PAGE, lang)
    kept = {n: r for n, r in log.losses.items() if n in res.names}
    named = partial(listed, lang=lang)
    done = named(T("name_value", name=res.label(n, lang), value=len(r)) for n, r in kept.items())
    words = [T("live_done", steps=done)]
    if log.ended == "diverged":
        failed = {n: r[-1][0] for n, r in kept.items() if r and not math.isfinite(r[-1][1])}
        at = named(T("name_value", name=res.label(n, lang), value=T("at_step", step=k)) for n, k in failed.items())
        words.append(T("live_diverged", at=at))
    elif log.ended is not None:
        words.append(T(f"live_ended_{log.ended}", steps=log.steps, budget=f"{log.budget:g}", s=f"{log.seconds:.1f}"))
    else:
        words.append(T("live_stopped", steps=log.steps))
    last = min(LIVE_LAST, max((len(r) for r in kept.values()), default=0))
    finals = {n: [v for _, v in r[-last:] if math.isfinite(v)] for n, r in kept.items()}
    if any(finals.values()):
        losses = named(
            T("name_value", name=res.label(n, lang), value=f"{np.mean(v):.3f}" if v else T("diverged"))
            for n, v in finals.items()
        )
        words.append(T("live_final", last=last, losses=losses))
    return _live_panel(res, kept, lang), sentences(words, lang)


def _live_panel(res: Results, records: Records, lang: str) -> Panel:
    T = texts(PAGE, lang)
    series = {res.label(n, lang): ([s for s, _ in r], [v for _, v in r]) for n, r in records.items()}
    fig = vn.curves(series, x_title=T("axis_step"), y_title=T("metric_train_loss"))
    return Panel("norms_live", fig, norm_lab.pad_rows([y for _, y in series.values()]))


def live_pick(names: Sequence[str], *, lang: str = "en") -> str | None:
    """What to do instead of training, when no variant is picked (the run would refuse in English, on empty axes)."""
    return None if names else texts(PAGE, lang)("pick_live")


def live_train(
    res: Results,
    names: Sequence[str],
    *,
    steps: int = 200,
    lr: float = 2e-3,
    budget: float = 30.0,
    records: Records | None = None,
    on_step: Callable[..., None] = lambda fraction, text: None,
    on_curves: Callable[[Records], None] = lambda records: None,
    lang: str = "en",
) -> Records:
    """Train fresh copies of ``names`` in lock-step on the shipped tokens; ``records`` is filled in place (a stop
    keeps what was trained). ``on_step`` gets progress in words, ``on_curves`` the records every few steps, to
    draw (:class:`LiveRun` draws them in the language its visitor reads then)."""
    T = texts(PAGE, lang)
    settings = variants.Settings(steps=steps, batch_size=8, seq_len=32, lr=lr, warmup=0)
    records = {n: [] for n in names} if records is None else records
    total = steps * len(names)
    for i, (name, rec) in enumerate(variants.live_run(names, res.tokens("train"), settings, time_budget=budget), 1):
        records[name].append((rec.step, rec.train_loss))
        on_step(min(1.0, i / total), text=T("progress", name=res.label(name, lang), step=rec.step, loss=rec.train_loss))
        if i % (4 * len(names)) == 0:
            on_curves(records)
    return records


@dataclass
class LiveRun:
    """A live mini-run as a job for the pool (``run(report)``): a worker trains and leaves its latest curves here,
    the page's thread draws them (Streamlit draws only from the page's thread)."""

    res: Results
    names: Sequence[str]
    steps: int = 200
    lr: float = 2e-3
    budget: float = 30.0
    lang: str = "en"  # the curves' language: the page sets it on each of its runs
    records: LiveLog = field(init=False)  # filled in place: a stop keeps what was trained
    latest: Panel | None = None  # curves not drawn yet

    def __post_init__(self) -> None:
        self.records = LiveLog({n: [] for n in self.names}, self.steps, self.budget)

    def __call__(self, report: Callable[[float, str], None]) -> LiveLog:
        log, start = self.records, time.monotonic()
        kw = dict(steps=self.steps, lr=self.lr, budget=self.budget, records=log.losses, lang=self.lang)
        try:
            live_train(self.res, self.names, **kw, on_step=report, on_curves=self._keep)
        finally:  # a stop raises out of report: the time spent is still the run's
            log.seconds = time.monotonic() - start
        log.ended = ending(log)  # not reached on a stop: ended stays None
        return log

    def _keep(self, records: Records) -> None:
        self.latest = _live_panel(self.res, records, self.lang)  # ``lang`` read now: the page may have switched

    def draw_latest(self, draw: Callable[[Panel], None]) -> None:
        """``draw`` the curves the worker left, if any since the last call."""
        panel, self.latest = self.latest, None
        if panel is not None:
            draw(panel)


def mlp_counts(dim: int = 64, ratio: float = 4.0, bias: bool = True, *, lang: str = "en") -> tuple[Panel, str]:
    """Parameters of an MLP and a SwiGLU of the same budget, by formula and counted."""
    T = texts(PAGE, lang)
    c = norm_lab.mlp_param_counts(int(dim), float(ratio), bias=bias)
    words = T(
        "mlp_counts",
        h=c["mlp_hidden"],
        hs=c["swiglu_hidden"],
        m=f"{c['mlp_formula']:,}",
        s=f"{c['swiglu_formula']:,}",
        mc=f"{c['mlp_counted']:,}",
        sc=f"{c['swiglu_counted']:,}",
    )
    table = np.array([[c["mlp_formula"], c["swiglu_formula"]], [c["mlp_counted"], c["swiglu_counted"]]])
    series = {T("formula"): table[0].tolist(), T("counted"): table[1].tolist()}
    fig = charts.bars(["MLP", "SwiGLU"], series, y_title=T("params_per_block"), height=300)
    check = norm_lab.swiglu_by_hand(int(dim), float(ratio))
    by_hand = T(
        "swiglu_by_hand",
        d=check.dim,
        h=check.hidden,
        n=norm_lab.SWIGLU_CHECK_TOKENS,
        max_d=norm_lab.SWIGLU_CHECK_MAX_DIM,
        diff=signed(f"{check.max_diff:.1e}"),
        scale=f"{check.scale:.3g}",
    )
    return Panel("norms_mlp_counts", fig, table), "\n\n".join([words, by_hand, T("swiglu_not_measured")])


def mlp_curves(res: Results, *, lang: str = "en") -> Panel | None:
    """Pre-RMS with an MLP against Pre-RMS with SwiGLU (training solid, validation dashed), when both were trained."""
    T = texts(PAGE, lang)
    names = ["pre-rms", "pre-rms-swiglu"]
    if not set(names) <= set(res.names):
        return None
    fig = vn.curves(
        curve_series(res, names, "train_loss", 0.8, lang),
        x_title=T("axis_step"),
        y_title=T("metric_train_loss"),
        dashed=curve_series(res, names, "val_loss", 0.0, lang),
        dashed_suffix=T("metric_val_loss"),
    )
    return Panel("norms_mlp_curves", fig)


# The sections with a fixed set of inputs (widget keys <prefix>_<name>): LayerNorm vs RMSNorm of a typed vector, the
# identity argument, MLP vs SwiGLU parameters. A vector holds at most 64 numbers: 2,000 characters hold them all.
NORM = Section(
    PAGE,
    "norm",
    (
        Text("x", "4, 6, 5, 9, 3, 7", 2000, label="vector", help="vector_help"),
        Text("gamma", "", 2000, placeholder="gamma_placeholder", help="gamma_help"),
        Text("beta", "", 2000, placeholder="beta_placeholder", help="beta_help"),
        Real("eps", 0.0, 1.0, 1e-5, 0.01, widget="number", format="%.0e"),
    ),
    compute=normalise,
)
IDENTITY = Section(
    PAGE,
    "identity",
    (
        Choice("norm", ("layernorm", "rmsnorm"), "layernorm", widget="radio"),
        Number("n", 2, 12, 6, widget="slider", label="tokens"),
        Real("scale", 0.1, 10.0, 3.0, 0.1, help="scale_help"),
        Real("offset", -5.0, 5.0, 1.0, 0.5, help="offset_help"),
    ),
    compute=identity,
)
MLP = Section(
    PAGE,
    "mlp",
    (
        Number("dim", 1, 65_536, 64, label="mlp_dim"),
        Real("ratio", 0.5, 16.0, 4.0, 0.5, widget="number"),
        Switch("bias", True, label="mlp_bias", help="mlp_bias_help"),
    ),
    compute=mlp_counts,
)
