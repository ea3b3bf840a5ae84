"""Mixture of Experts page (lecture §8.4): cost (parameters ×E, compute ×k), dense vs MoE curves, the experts of
typed text, held-out routing statistics per layer, and the same statistics for a checkpoint with routed experts
(tiny-moe, gpt-oss)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tx_explorer import locales, models, paths
from tx_explorer.analysis import atlas, params, routing, spread, variant_claims
from tx_explorer.errors import InputError
from tx_explorer.families.moe import RETRAIN as RETRAIN  # how to build the bundle (the page says it)
from tx_explorer.families.moe import MoEBundle
from tx_explorer.families.text import TextModel
from tx_explorer.modules.moe_lm import MoEConfig as MoEConfig  # the cost section's default without a bundle
from tx_explorer.views import Panel, corpus_note, sentences, signed, split_bytes_note, texts
from tx_explorer.views.inputs import Choice, Number, Real, Section, Text
from tx_explorer.viz import moe as vm

PAGE = "moe"
FACTORS = [round(0.25 + 0.125 * i, 3) for i in range(23)]  # capacity factors 0.25 … 3.0 of the drop curves
LATEX = (
    r"p(x)=\operatorname{softmax}(W_r x),\qquad \mathcal{T}=\operatorname{top}_k\,p(x),\qquad "
    r"y=\sum_{i\in\mathcal{T}} \frac{p_i(x)}{\sum_{j\in\mathcal{T}}p_j(x)}\;\mathrm{FFN}_i(x)",
    r"\text{{{capacity}}}=\left\lceil \frac{{k\cdot\text{{{tokens}}}}}{{E}}\times\text{{{factor}}}\right\rceil",
    r"\mathcal{{L}}_{{\text{{bal}}}}=E\sum_{{i=1}}^{{E}} f_i P_i\;(=1\text{{ {uniform}}}),\qquad "
    r"\mathcal{{L}}_z=\frac{{1}}{{N}}\sum_{{n}}\Big(\log\sum_{{i}} e^{{\ell_{{n,i}}}}\Big)^2",
)  # the last two name their quantities in words, the page's language (formulas())


def formulas(*, lang: str = "en") -> tuple[str, ...]:
    """:data:`LATEX` with its words (capacity, tokens, factor, uniform) in ``lang``."""
    T = texts(PAGE, lang)
    words = {w: T(f"tex_{w}") for w in ("capacity", "tokens", "factor", "uniform")}
    return (LATEX[0], *(f.format(**words) for f in LATEX[1:]))


SHIPPED = MoEConfig()  # the bundled model's shape (tiny-moe trains on the defaults): the inputs' defaults
AXES = ("step", "flops", "seconds")  # what the training curves can be drawn against
SENTENCE = locales.text(PAGE, "sentence_default", "en")  # the typed text's default (English in both languages)


def shipped() -> MoEBundle:
    """The bundled model, loaded once per process (what a declared section runs when no bundle is given)."""
    from tx_explorer import model_cache  # the registry loads every family: imported when a section asks

    return model_cache.shared_model(models.available_models("moe")[0])


def _words(lang: str) -> dict[str, str]:
    T = texts(PAGE, lang)
    return {key: T(f"fig_{key}") for key in vm.WORDS}  # the figures' words


@dataclass(frozen=True)
class Cost:
    metrics: dict[str, str]  # total and active parameters, FLOPs per token, their ratio
    sweep: Panel  # against the number of experts
    caption: str


def cost(
    base: MoEConfig | None = None,
    experts: int = SHIPPED.num_experts,
    top_k: int = SHIPPED.top_k,
    *,
    lang: str = "en",
) -> Cost:
    """Parameters and FLOPs per token of ``base`` (default: the bundled model's shape) with E experts, top-k
    (k > E is refused with a message)."""
    T = texts(PAGE, lang)
    if not 1 <= top_k <= experts:  # in the sliders' words (k, E), not the module's (top_k, num_experts)
        raise InputError("moe_k_above_e", experts=experts, top_k=top_k)
    cfg = (base or SHIPPED).replace(num_experts=experts, top_k=top_k)
    counts, flops = routing.moe_params(cfg), routing.moe_flops_per_token(cfg)
    dense = params.flops_per_token(cfg.dense_counterpart())["total"]
    metrics = {
        T("total_params"): f"{counts['total'] / 1e6:.2f} M",
        T("active_params"): f"{counts['active'] / 1e6:.2f} M",
        T("flops_token"): f"{flops['total'] / 1e6:.2f} M",
        T("ratio"): f"{counts['total'] / counts['active']:.2f}×",
    }
    grid = list(range(top_k, max(experts, 16) + 1))
    s = routing.cost_sweep(cfg, grid)
    fig = vm.cost_chart(
        grid,
        s["total"],
        s["active"],
        s["flops"],
        chosen=experts,
        title=T("cost_title", k=top_k),
        words=_words(lang),
    )
    data = np.array([grid, s["total"], s["active"], s["flops"]]).T  # E, total, active, FLOPs
    caption = T(
        "cost_caption",
        dense=f"{dense / 1e6:.2f}",
        router=f"{flops['router'] / 1e3:.1f}",
        context=cfg.transformer.max_len,
    )
    return Cost(metrics, Panel("moe_cost", fig, data), caption)


def about(bundle: MoEBundle, *, lang: str = "en") -> str:
    """The bundled model in its own record's terms: experts, top-k, and the text and tokenizer it learnt from."""
    cfg, tm = bundle.config, bundle.text
    note = corpus_note(tm.name, bundle.summary["corpus"], tm.tokenizer.get_vocab(), "tiny-gpt", lang=lang)
    return sentences([texts(PAGE, lang)("about", e=cfg.num_experts, k=cfg.top_k), note], lang)  # "。 " in 中文


STACK_CHECK_TOKENS = 16  # random vectors run through the stacked experts and through each expert module


def stacked_experts(bundle: MoEBundle, *, lang: str = "en") -> str:
    """§8.4's W₁ ``[E, D, H]``: every layer's expert MLPs stacked, their shapes and count beside the cost
    section's, and the stacked tensors run against the expert modules."""
    model, cfg = bundle.text.model, bundle.config
    x = torch.randn(STACK_CHECK_TOKENS, cfg.transformer.dim, generator=torch.Generator().manual_seed(0))
    layers = [routing.stacked_experts(block.mlp, x) for block in model.blocks]
    first = layers[0]
    total = sum(s.weights + s.biases for s in layers)
    counted = routing.moe_params(cfg)["experts_total"]
    return texts(PAGE, lang)(
        "stacked_note",
        w1=", ".join(map(str, first.w1)),
        w2=", ".join(map(str, first.w2)),
        ratio=f"{first.w1[2] / first.w1[1]:g}",
        weights=f"{first.weights:,}",
        biases=f"{first.biases:,}",
        layers=len(layers),
        total=f"{total:,}",
        counted=f"{counted:,}",
        agree=texts(PAGE, lang)("stacked_agree" if total == counted else "stacked_differ"),
        n=STACK_CHECK_TOKENS,
        diff=signed(f"{max(s.max_diff for s in layers):.1e}"),
    )


def seed_runs(summary: dict) -> list[dict]:
    """The bundle's runs, one per seed (seed, final losses, …): those its record lists under ``seeds`` (the
    shipped run and the runs ``python -m tx_explorer.train moe --record-seeds`` added), else the shipped run alone."""
    return summary.get("seeds") or [{"seed": summary["seed"], "final_val_loss": summary["final_val_loss"]}]


EVEN_TIME = 0.1  # training times within a tenth of each other are said even: wall-clock varies that much run to run


def loss_intro(bundle: MoEBundle, *, lang: str = "en") -> str:
    """The shipped dense vs MoE run in numbers: steps, tokens, final validation losses, seconds, and whether the
    gap is established over the seeds trained (:func:`loss_verdict`)."""
    T, s = texts(PAGE, lang), bundle.summary
    intro = T(
        "loss_intro",
        steps=s["steps"],
        tokens=f"{s['tokens_seen']:,}",
        seed=s["seed"],
        moe=f"{s['final_val_loss']['moe']:.3f}",
        dense=f"{s['final_val_loss']['dense']:.3f}",
    )
    # equal FLOPs, and the recorded seconds say whether the time was equal too: slower, even or faster
    moe_s, dense_s = s["seconds"]["moe"], s["seconds"]["dense"]
    ratio = moe_s / dense_s
    pace = "slower" if ratio > 1 + EVEN_TIME else "faster" if ratio < 1 - EVEN_TIME else "even"
    time = T(f"loss_time_{pace}", moe_s=moe_s, dense_s=dense_s, ratio=f"{ratio:.2f}")
    # the curves' validation points come from a smaller sample than the final losses: their last points differ
    last = {name: f"{bundle.curves[name]['val_loss'][-1]:.3f}" for name in ("moe", "dense")}
    sample = T("loss_curve_sample", final=f"{s['validation_tokens_final']:,}", **last)
    # a spread of its own needs two seeds at least; below that the block variants' is borrowed for scale
    reference = reference_spreads() if len(seed_runs(s)) < 2 else None
    return sentences([intro, time, sample], lang) + "\n\n" + loss_verdict(bundle, reference, lang=lang)


def reference_spreads() -> tuple[int, list[float]] | None:
    """The block variants' seed count and each variant's standard deviation of its final loss over the seeds
    (diverged variants left out), when that bundle is on this machine: the seed noise of similar small LMs."""
    if not models.available_models("variants"):
        return None
    from tx_explorer import model_cache  # the registry loads every family: imported when asked

    res = model_cache.shared_model(models.available_models("variants")[0])
    stats = [spread.stat(variant_claims.losses(run)) for run in res.summary["variants"].values()]
    return len(res.summary["seeds"]), [x.std for x in stats if math.isfinite(x.mean)]


def loss_verdict(bundle: MoEBundle, reference: tuple[int, list[float]] | None, *, lang: str = "en") -> str:
    """MoE below dense, judged as the norms and position pages judge a gap (:func:`tx_explorer.analysis.spread.less`)
    over the seeds the record lists, each seed's gap beside it. One seed gives no spread (within noise); then the
    gap is also read against twice the largest seed deviation of the block variants, when given."""
    T, runs = texts(PAGE, lang), seed_runs(bundle.summary)
    loss = [r["final_val_loss"] for r in runs]
    gap = routing.loss_gap([x["moe"] for x in loss], [x["dense"] for x in loss], reference[1] if reference else ())
    c = gap.comparison
    if len(runs) >= 2:
        sep = "、" if lang == "zh" else ", "
        verdict = T(
            f"loss_seeds_{c.state}",
            count=len(runs),
            seeds=sep.join(str(r["seed"]) for r in runs),
            moe=c.left.plus_minus(),
            dense=c.right.plus_minus(),
            gap=f"{c.gap:.3f}",
            spread=f"{c.spread:.3f}",
            per_seed=sep.join(
                T("loss_seed_gap", seed=r["seed"], gap=f"{g:+.3f}") for r, g in zip(runs, gap.per_seed, strict=True)
            ),
        )
        # Within noise though every seed's gap goes one way: the seed moves both of its models together, and the rule
        # does not pair them. A sign test says how often that many seeds fall on one side with no real difference.
        if c.state == "noise" and (all(g > 0 for g in gap.per_seed) or all(g < 0 for g in gap.per_seed)):
            chance = 2 * 0.5 ** len(runs)
            verdict = sentences([verdict, T("loss_seeds_same_sign", count=len(runs), chance=f"{chance:.2f}")], lang)
        return verdict
    words = [T("loss_one_seed", seed=runs[0]["seed"], gap=f"{c.gap:.3f}")]
    if reference and gap.reference:
        words.append(
            T(
                "loss_borrowed_beyond" if gap.beyond_borrowed else "loss_borrowed_within",
                seeds=reference[0],
                lo=f"{min(gap.reference.values):.3f}",
                hi=f"{max(gap.reference.values):.3f}",
                borrowed=f"{gap.borrowed:.3f}",
            )
        )
    return sentences(words, lang)


def losses(bundle: MoEBundle | None = None, axis: str = "step", *, lang: str = "en") -> Panel:
    """Dense vs MoE training curves against steps, FLOPs or seconds (default: the bundled model's)."""
    bundle = bundle or shipped()
    T, cfg = texts(PAGE, lang), bundle.config
    labels = {"moe": T("label_moe", e=cfg.num_experts, k=cfg.top_k), "dense": T("label_dense")}
    fig = vm.loss_curves(
        bundle.curves, axis, labels=labels, x_title=T(f"x_{axis}"), title=T("loss_title"), words=_words(lang)
    )
    return Panel("moe_loss", fig, {n: np.array([c["step"], c["train_loss"]]) for n, c in bundle.curves.items()})


@dataclass(frozen=True)
class Typed:
    truncated: str | None  # a warning when the text was cut to the context
    tokens: Panel  # each token coloured by its first expert, per layer
    gates: Panel  # gates and router probabilities per layer
    caption: str  # how to read the gates, and what a token shown as \xNN is (a byte of a split character)


def typed(bundle: MoEBundle | None = None, sentence: str = SENTENCE, *, lang: str = "en") -> Typed:
    """Route typed text: each token's experts and gates in every layer (default: the bundled model)."""
    bundle = bundle or shipped()
    T, cfg = texts(PAGE, lang), bundle.config
    enc = bundle.text.encode(sentence)
    trace = bundle.text.maps(enc.ids, enc.tokens)
    per = {key: v.numpy() for key, v in routing.per_layer(routing.routing_tables(trace)).items()}  # [L, T, (E)]
    words = _words(lang)
    fig = vm.coloured_tokens(enc.tokens, per["first"], cfg.num_experts, title=T("tokens_title"), words=words)
    gates = vm.gate_heatmaps(per["gates"], per["probs"], enc.tokens, title=T("gates_title", k=cfg.top_k), words=words)
    split = split_bytes_note(bundle.text.labels(enc.ids), lang)  # Chinese typed to an English tokenizer: bytes
    return Typed(
        T("truncated", n=enc.num_tokens, max=bundle.text.max_len) if enc.truncated else None,
        Panel("moe_tokens", fig, per["first"]),
        Panel("moe_gates", gates, {"gates": per["gates"], "probs": per["probs"]}),
        sentences([T("gates_caption"), *([split] if split else [])], lang),
    )


def heldout_routing(bundle: MoEBundle) -> tuple[list[routing.RoutingTable], list[list[float]]]:
    """The bundle's held-out windows routed (dropless), and each layer's drop rate at every factor in FACTORS."""
    tables = routing.collect_routing(bundle.text.model, bundle.heldout)
    return tables, [routing.drop_curve(t.flat()[0], t.top_k, FACTORS, bundle.group_size) for t in tables]


@dataclass(frozen=True)
class Statistics:
    stats: dict[str, list[float]]  # per statistic (translated), one value per layer
    layers: list[str]  # row names
    caption: str
    load: Panel  # each expert's load relative to the layer's mean (the counts behind it: ``[L, E]``)
    entropy: Panel  # token and marginal routing entropy against ln E


def statistics(
    tables: Sequence[routing.RoutingTable],
    factor: float | None = None,
    group_size: int | None = None,
    *,
    key: str = "moe",
    lang: str = "en",
) -> Statistics:
    """Every layer's routing statistics (:func:`tx_explorer.analysis.routing.layer_statistics`), E and k read from
    the tables; the drop rate only at a capacity ``factor`` (None: routing without a capacity has none). ``key``
    prefixes the panels' keys, so that two sections of one page can show their own."""
    T, words = texts(PAGE, lang), _words(lang)
    e, k = tables[0].num_experts, tables[0].top_k
    per = [routing.layer_statistics(t, factor, group_size) for t in tables]
    stats = {T(f"stat_{name}"): [float(s[name]) for s in per] for name in per[0]}
    first, any_ = routing.repetition_baseline(e, k)
    caption = T("stats_caption", ln_e=f"{math.log(e):.3f}", first=f"{first:.3f}", any=f"{any_:.3f}")
    loads = routing.load_matrix(tables).double()  # (L, E) assignments
    relative = (loads / loads.mean(dim=1, keepdim=True)).numpy()
    entropy = vm.entropy_bars(
        [x["token_entropy"] for x in per],
        [x["marginal_entropy"] for x in per],
        math.log(e),
        title=T("entropy_title"),
        words=words,
    )
    return Statistics(
        stats,
        [T("layer", i=i).replace(" ", "\u00a0") for i in range(len(per))],  # one line in the table's first column
        caption,
        Panel(f"{key}_load", vm.load_heatmap(relative, title=T("load_title"), words=words), loads.numpy()),
        Panel(f"{key}_entropy", entropy),
    )


@dataclass(frozen=True)
class Heldout:
    statistics: Statistics  # per layer, at the capacity factor
    drops: Panel  # drop rate against the capacity factor


def heldout(
    bundle: MoEBundle | None = None,
    routed: tuple[Sequence[routing.RoutingTable], Sequence[Sequence[float]]] | None = None,
    factor: float = 1.25,
    *,
    lang: str = "en",
) -> Heldout:
    """Held-out statistics per layer at one capacity factor; ``routed`` is :func:`heldout_routing`'s result
    (default: the bundled model, its held-out windows routed here)."""
    bundle = bundle or shipped()
    tables, drop_table = routed or heldout_routing(bundle)
    drops = np.array(drop_table)
    fig = vm.drop_curves(FACTORS, drops, current=factor, title=texts(PAGE, lang)("drop_title"), words=_words(lang))
    return Heldout(statistics(tables, factor, bundle.group_size, lang=lang), Panel("moe_drop", fig, drops))


def cooccurrence(table: routing.RoutingTable, key: str = "moe", *, lang: str = "en") -> Panel | None:
    """Which experts one layer chooses together (first × second choice), or None when k = 1."""
    if table.top_k < 2:
        return None
    co = routing.cooccurrence(table.chosen, table.num_experts).numpy()
    return Panel(
        f"{key}_cooc", vm.cooccurrence_heatmap(co, title=texts(PAGE, lang)("cooc_title"), words=_words(lang)), co
    )


def layer(bundle: MoEBundle, table: routing.RoutingTable, *, lang: str = "en") -> tuple[Panel | None, list[dict]]:
    """One layer: which experts are chosen together (top-k ≥ 2) and the tokens each expert takes most."""
    T = texts(PAGE, lang)
    first = table.chosen[..., 0].reshape(-1)
    spec = routing.specialisation(first, bundle.heldout.reshape(-1), table.num_experts, top=6)
    firsts = torch.bincount(first, minlength=table.num_experts).tolist()

    def empty(e: int) -> str:  # an expert first only for rare tokens is no "never a first choice"
        return T("spec_rare", count=firsts[e], min=routing.SPEC_MIN) if firsts[e] else T("spec_none")

    rows = [
        {
            T("col_expert"): e,
            T("col_tokens"): ", ".join(f"{bundle.text.labels([t])[0]} ({share:.0%}, {n})" for t, n, share in toks)
            or empty(e),
        }
        for e, toks in enumerate(spec)
    ]
    return cooccurrence(table, lang=lang), rows


# ---- a model's routed experts (tiny-moe, gpt-oss): the held-out section's statistics on one text --------------------
CHECKPOINT_TOKENS = 128  # the default text: the bundled corpus's first tokens
CHECKPOINT_LIMIT = 512  # tokens of a typed text routed at most (a real gpt-oss is billions of parameters on a CPU)
CHECKPOINT_KEY = "moe_ckpt"  # its panels' keys, apart from the held-out section's


def routed_checkpoints() -> dict[str, str]:
    """The checkpoints cached on this machine whose ``config.json`` declares routed experts (``num_local_experts``,
    gpt-oss's key): folder → repository. Reads only the small config files."""
    found = {}
    for c in paths.cached_checkpoints():
        try:
            config = json.loads((c.path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):  # a GGUF file, or a config that cannot be read: no experts declared
            continue
        if isinstance(config, dict) and config.get("num_local_experts"):
            found[str(c.path)] = c.repo
    return found


def has_experts(model: TextModel | MoEBundle) -> bool:
    """Whether the model's MLPs are routed experts: the bundled MoE, or a checkpoint whose config's ``mlp`` is
    ``"experts"`` (as :func:`~tx_explorer.modules.block.make_mlp` builds them, gpt-oss)."""
    return isinstance(model, MoEBundle) or model.config.mlp == "experts"


@dataclass(frozen=True)
class RoutedText:
    """A text routed through a model with routed experts (:func:`route_text`): numbers only, worded by
    :func:`routed_statistics` in the language shown."""

    tables: list[routing.RoutingTable]  # one per layer, the text as one sequence
    tokens: int  # routed
    typed: int | None  # the typed text's tokens when it was cut to CHECKPOINT_LIMIT, else None
    capacity_factor: float | None  # the bundle's training capacity (it is routed here without one)


def route_text(model: TextModel | MoEBundle, text: str = "") -> RoutedText:
    """Route ``text`` (empty: the first :data:`CHECKPOINT_TOKENS` tokens of the bundled corpus) through a model with
    routed experts (:func:`has_experts`; another has no router records, a LookupError)."""
    tm = model.text if isinstance(model, MoEBundle) else model
    typed = None
    if text.strip():
        enc = tm.encode(text, limit=CHECKPOINT_LIMIT)
        ids = enc.ids
        typed = enc.num_tokens if enc.truncated else None
    else:
        ids = atlas.corpus_ids(tm, min(CHECKPOINT_TOKENS, tm.max_len))
    capacity = model.config.capacity_factor if isinstance(model, MoEBundle) else None
    return RoutedText(routing.routing_tables(tm.maps(ids)), len(ids), typed, capacity)


@dataclass(frozen=True)
class Checkpoint:
    about: str  # E, k, layers and tokens routed (and whether the text was cut); no capacity
    tables: list[routing.RoutingTable]  # one per layer, the text as one sequence
    statistics: Statistics


def routed_statistics(routed: RoutedText, *, lang: str = "en") -> Checkpoint:
    """Every layer's statistics of a routed text as the held-out section computes them, without a drop rate (the
    model routes without a capacity), and what was routed in words."""
    T, tables = texts(PAGE, lang), routed.tables
    words = [T("truncated", n=routed.typed, max=routed.tokens)] if routed.typed is not None else []
    e, k = tables[0].num_experts, tables[0].top_k  # as routed: the bundle's TextModel config holds no experts
    assigned = routed.tokens * k
    counts = {
        what: T(f"ckpt_{what}" + ("_one" if v == 1 else ""), n=v)
        for what, v in (("layers", len(tables)), ("tokens", routed.tokens), ("assignments", assigned))
    }
    words.append(T("ckpt_about", e=e, k=k, **counts))
    if assigned < e:  # some experts must be idle: the load columns then measure the text's length, not the router
        words.append(T("ckpt_few", assignments=counts["assignments"], e=e, idle=e - assigned))
    if routed.capacity_factor is not None:  # trained with one, run without
        words.append(T("ckpt_trained_capacity", factor=f"{routed.capacity_factor:g}"))
    return Checkpoint(sentences(words, lang), tables, statistics(tables, key=CHECKPOINT_KEY, lang=lang))


def checkpoint(model: TextModel | MoEBundle, text: str = "", *, lang: str = "en") -> Checkpoint:
    """:func:`route_text` worded by :func:`routed_statistics` (the page keeps the routing and words it per run)."""
    return routed_statistics(route_text(model, text), lang=lang)


# The sections with a fixed set of inputs (widget keys <prefix>_<name>): the cost of E experts with top-k (on the
# page, of the bundled model's config), the training curves' axis, the typed text, the held-out statistics' capacity
# factor. The held-out section's layer picker stays plain: its options are the bundle's layers; so does the checkpoint
# section: its model is the visitor's pick, tiny-moe by default.
COST = Section(
    PAGE,
    "moe_cost",
    (
        Number("experts", 1, 64, SHIPPED.num_experts, widget="slider"),
        Number("top_k", 1, 16, SHIPPED.top_k, widget="slider", help="top_k_help"),
    ),
    compute=cost,
)
LOSS = Section(
    PAGE, "moe_loss", (Choice("axis", AXES, "step", label="loss_x", option_prefix="x_", widget="radio"),), losses
)
TYPED = Section(PAGE, "moe", (Text("sentence", SENTENCE, 2000),), compute=typed)  # key moe_sentence
HELDOUT = Section(
    PAGE,
    "moe_heldout",
    (Real("factor", 0.25, 3.0, SHIPPED.capacity_factor or 1.25, 0.05, help="factor_help"),),
    compute=heldout,
)
