"""Model sizes page (lecture §5.4): parameters counted by formula and on the meta device, next to the lecture's
and the published figures; where they sit in each preset; a model of your own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tx_explorer.analysis import params
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.views import Panel, listed, sentences, signed, texts
from tx_explorer.views.inputs import Choice, Number, Section, Switch
from tx_explorer.viz import bars as vb

PAGE = "model_sizes"
# SmolLM2-135M (Allal et al. 2025; its config.json), the text pages' default model, beside the lecture's three in the
# chart: a 2024 small model with grouped-query heads, SwiGLU and RMSNorm. Its model card says 135M.
SMOLLM2 = TransformerConfig(
    vocab_size=49152,
    max_len=8192,
    dim=576,
    num_layers=30,
    num_heads=9,
    num_kv_heads=3,
    mlp="swiglu",
    norm="rmsnorm",
    positions="rotary",
    rope_theta=100_000.0,
    bias=False,
)
SMOLLM2_PUBLISHED = 135e6
# Gemma 3 270M (Gemma team 2025; google/gemma-3-270m config.json, as our reader builds it from its GGUF file): four
# query heads of width 256 sharing one key/value head, QK-norm, sandwich norms, GeGLU, and a vocabulary of 262,144
# tokens. Its model card says 268M, "170M embedding parameters" among them.
GEMMA3 = TransformerConfig(
    vocab_size=262144,
    max_len=32768,
    dim=640,
    num_layers=18,
    num_heads=4,
    head_width=256,
    num_kv_heads=1,
    mlp="geglu",
    mlp_ratio=3.2,
    activation="gelu_tanh",
    norm="rmsnorm",
    norm_position="sandwich",
    norm_eps=1e-6,
    positions="rotary",
    rope_theta=1_000_000.0,
    qk_norm=True,
    embed_scale=True,
    bias=False,
)
GEMMA3_PUBLISHED = 268e6
Counts = tuple[dict[str, int], dict[str, int]]  # (by formula, counted on the meta device), per part
Counter = Callable[..., Counts]  # (config as a dict, kind, decoder layers) -> Counts; the page caches it


def counted(cfg: dict, kind: str = "causal", decoder_layers: int | None = None) -> Counts:
    """(formula, sum(p.numel()) on the meta device) for one config."""
    c = TransformerConfig.from_dict(cfg)
    return params.count_params(c, kind, decoder_layers), params.measure(params.build_on_meta(c, kind, decoder_layers))


# A parameter count's units, largest first: M, B, T in both languages, as the lecture's table, the page's notes and the
# comparison chart's logarithmic axis write them. (size, letter, decimals kept)
UNITS = ((1e12, "T", 2), (1e9, "B", 2), (1e6, "M", 1))


def fmt(n: float) -> str:
    """A parameter count to read at a glance: ``"29"``, ``"124,439"``, ``"124.4M"``, ``"1.56B"``, ``"175.0B"``,
    ``"13.19T"``."""
    for size, unit, decimals in UNITS:
        if (v := round(n / size, decimals)) >= 1:  # 999,960,000 is 1.00B, not 1000.0M
            digits = len(str(int(v)))  # at most 4 significant digits: 175.0B beside 213.0M, not 175.00B
            return f"{n / size:.{max(1, min(decimals, 4 - digits))}f}{unit}"
    return f"{round(n):,}"  # under a million: every digit


def latex(lang: str = "en") -> str:
    """N ≈ 12·L·D² + V·D + T·D with each term named under its brace, in the page's language."""
    T = texts(PAGE, lang)
    return (
        rf"N\approx\underbrace{{12\,L\,D^2}}_{{\text{{{T('latex_blocks')}}}4D^2\text{{{T('latex_attention')}}}"
        rf"+8D^2\text{{ MLP}}}}+\underbrace{{V D}}_{{\text{{{T('latex_embedding')}}}}}"
        rf"+\underbrace{{T D}}_{{\text{{{T('latex_positions')}}}}}"
    )


def _row_key(p: params.Published) -> str:
    return p.model.lower().replace(" ", "_").replace("-", "")  # original_transformer, gpt2, gpt3


def lecture_table(count: Counter = counted, *, lang: str = "en") -> tuple[list[dict[str, str]], Panel]:
    """The lecture's three models: its figures, the published ones, ours counted (and checked against the formula)."""
    T = texts(PAGE, lang)
    rows, exact = [], []
    for p in params.LECTURE_TABLE:
        row = _row_key(p)
        formula, measured = count(p.config.to_dict(), p.kind, p.decoder_layers)
        exact.append(sum(measured.values()))
        rows.append(
            {
                T("col_model"): T(f"model_{row}"),
                T("col_lecture"): T(
                    "lecture_cell",
                    blocks=p.lecture_blocks,
                    dim=p.lecture_dim,
                    heads=p.lecture_heads,
                    context=p.lecture_context,
                    params=fmt(p.lecture_params),
                ),
                T("col_published"): T("published_cell", params=fmt(p.published_params), source=T(f"source_{row}")),
                T("col_config"): T(
                    f"config_{p.kind}",
                    layers=p.config.num_layers,
                    dec=p.decoder_layers or 0,
                    dim=p.config.dim,
                    heads=p.config.num_heads,
                    vocab=p.config.vocab_size,
                    context=p.config.max_len,
                ),
                T("col_counted"): f"{exact[-1]:,}",
                T("col_check"): "✓" if formula == measured else "✗",
            }
        )
    smol = sum(count(SMOLLM2.to_dict(), "causal")[1].values())
    gemma = sum(count(GEMMA3.to_dict(), "causal")[1].values())
    fig = vb.log_bars(
        [T(f"model_{_row_key(p)}") for p in params.LECTURE_TABLE] + ["SmolLM2-135M", "Gemma-3-270M"],
        {  # the lecture has neither SmolLM2 nor Gemma 3: no bar
            T("series_lecture"): [p.lecture_params for p in params.LECTURE_TABLE] + [float("nan")] * 2,
            T("series_published"): [p.published_params for p in params.LECTURE_TABLE]
            + [SMOLLM2_PUBLISHED, GEMMA3_PUBLISHED],
            T("series_counted"): [*exact, smol, gemma],
        },
        title=T("compare_title"),
        y_title=T("parameters"),
    )
    return rows, Panel("sizes_compare", fig)


def _percent_gap(total: int, published: float) -> str:
    """How far a count is from a published figure, in percent with a true minus: two decimals under 0.1% (Gemma 3's
    +0.04% read "+0.0%"), one above."""
    gap = (total - published) / published
    return signed(f"{gap:+.2%}" if abs(gap) < 0.001 else f"{gap:+.1%}")


def vocabulary_share(count: Counter = counted, *, lang: str = "en") -> str:
    """Gemma 3 270M counted against its card, and how much of it is the token embedding (the vocabulary)."""
    formula, measured = count(GEMMA3.to_dict(), "causal")
    total, embedding = sum(measured.values()), measured["embeddings"]
    block = params.attention_params(GEMMA3) + params.mlp_params(GEMMA3) + params.block_norm_params(GEMMA3)
    # what the count holds past the embedding, any untied head and the blocks is the final norm
    blocks = GEMMA3.num_layers * block
    return texts(PAGE, lang)(
        "gemma_share",
        model="Gemma 3 270M",
        total=f"{total:,}",
        published=fmt(GEMMA3_PUBLISHED),
        gap=_percent_gap(total, GEMMA3_PUBLISHED),
        vocab=f"{GEMMA3.vocab_size:,}",
        dim=GEMMA3.dim,
        embedding=f"{embedding:,}",
        share=f"{embedding / total:.1%}",
        blocks=f"{blocks:,}",
        block=f"{block:,}",
        final=f"{total - embedding - measured['head'] - blocks:,}",
        layers=GEMMA3.num_layers,
        check="✓" if formula == measured else "✗",
    )


STACK_MODEL = "tiny-gpt"  # a bundled model whose blocks are read weight by weight (the stack section)


def stack(*, lang: str = "en") -> tuple[list[dict[str, str]], str]:
    """§5.4's "a stack of identical blocks" in a real model: every block's size and shapes against block 0's, how
    far its weights are, and the block's size from the formula."""
    from tx_explorer import model_cache  # the registry loads every family: imported when the section asks

    T = texts(PAGE, lang)
    tm = model_cache.shared_model(STACK_MODEL)
    rows = params.block_table(tm.model.blocks)
    cfg = tm.config
    formula = params.attention_params(cfg) + params.mlp_params(cfg) + 2 * params.norm_params(cfg)
    table = [
        {
            T("col_block"): str(r.index),
            T("col_block_params"): f"{r.params:,}",
            T("col_same_shapes"): "✓" if r.same_shapes else "✗",
            T("col_weight_diff"): f"{r.max_diff:.3f}",
        }
        for r in rows
    ]
    same = all(r.same_shapes and r.params == rows[0].params for r in rows)
    words = T(
        "stack_same" if same else "stack_differ",
        model=STACK_MODEL,
        n=len(rows),
        params=f"{rows[0].params:,}",
        formula=f"{formula:,}",
        least=f"{min(r.max_diff for r in rows[1:]):.3f}" if len(rows) > 1 else "0",
    )
    return table, words


FIT_MODELS = (  # (name, config, a decoder block with cross-attention)
    ("2017_encoder", params.TRANSFORMER_BIG, False),
    ("2017_decoder", params.TRANSFORMER_BIG, True),
    ("gpt2", params.LECTURE_TABLE[1].config, False),
    ("gpt3", params.LECTURE_TABLE[2].config, False),
    ("smollm2", SMOLLM2, False),
    ("gemma3", GEMMA3, False),
)


def since_2017(*, lang: str = "en") -> tuple[list[dict[str, str]], str]:
    """§5.4's "the architecture has stayed the same": one formula, 12·D² per block, against every block's counted
    matrices from 2017 to SmolLM2 (2024) and Gemma 3 (2025), each off block's attention against 4D² and MLP against
    8D², and the fields of the block that changed in between."""
    T = texts(PAGE, lang)
    fits = {name: params.block_fit(cfg, cross=cross) for name, cfg, cross in FIT_MODELS}
    table = [
        {
            T("col_model"): T(f"fit_{name}"),
            T("col_fit_attention"): f"{f.attention:,}",
            T("col_fit_mlp"): f"{f.mlp:,}",
            T("col_fit_rule"): f"{f.rule:,}",
            T("col_fit_ratio"): f"{f.ratio:.3f}",
        }
        for name, f in fits.items()
    ]
    exact = [T(f"fit_{n}") for n, f in fits.items() if f.ratio == 1]
    off = [T("fit_off", model=T(f"fit_{n}"), ratio=f"{f.ratio:.3f}") for n, f in fits.items() if f.ratio != 1]

    def value(v: object) -> str:
        return T(f"value_{str(v).lower()}") if isinstance(v, bool) or not str(v)[0].isdigit() else str(v)

    def changes(after: TransformerConfig) -> str:
        return T("list_sep").join(
            T("change", field=T(f"field_{k}"), before=value(a), after=value(b))
            for k, (a, b) in params.architecture_changes(params.TRANSFORMER_BIG, after).items()
        )

    parts = T("model_sep").join(
        T("fit_part", model=T(f"fit_{n}"), attention=f"{f.attention_ratio:.3f}", mlp=f"{f.mlp_ratio:.3f}")
        for n, f in fits.items()
        if f.ratio != 1
    )
    words = T(
        "fit_verdict",
        exact=T("model_sep").join(exact),
        off=T("model_sep").join(off),
        changes=changes(SMOLLM2),
        gemma=changes(GEMMA3),
        parts=parts,
    )
    return table, words


def _kind(preset: str) -> params.Kind:
    return "encoder" if preset.startswith("bert") else "causal"  # BERT-base is counted as its encoder alone


def _preset_parts(count: Counter) -> dict[str, dict[str, int]]:
    """Every preset's parameters by part (:data:`params.PARTS`), counted on the meta device."""
    return {k: count(cfg.to_dict(), _kind(k))[1] for k, cfg in PRESETS.items()}


# The lecture's split of a block: the MLP's 8D² of 12D². A model whose MLP holds this share of its blocks to half a
# percent is said to hold two thirds (biases tilt a tiny model's: tiny-gpt's is 66.6%).
MLP_SHARE, MLP_TOLERANCE = 2 / 3, 0.005
NORMS_NEGLIGIBLE = 0.01  # the norms' largest share that still reads as a rounding error


def breakdown_words(count: Counter = counted, *, lang: str = "en") -> str:
    """The breakdown chart read in words, part by part, for the presets it shows: how the embedding's share moves
    from the smallest model to the largest, the MLP's share of the blocks against the lecture's two thirds, the
    norms' largest share, and which models' LM head costs nothing (tied to the embedding, or no head at all)."""
    T = texts(PAGE, lang)
    parts = _preset_parts(count)
    total = {m: sum(v.values()) for m, v in parts.items()}
    share = {m: {p: v[p] / total[m] for p in v} for m, v in parts.items()}
    name = {m: T(f"preset_{m}") for m in parts}
    small, large = min(parts, key=total.get), max(parts, key=total.get)
    words = [
        T(
            "bd_embedding_falls" if share[small]["embeddings"] > share[large]["embeddings"] else "bd_embedding_not",
            small=name[small],
            large=name[large],
            s=f"{share[small]['embeddings']:.1%}",
            l=f"{share[large]['embeddings']:.1%}",
            blocks=f"{share[large]['attention'] + share[large]['mlp']:.1%}",
        )
    ]
    mlp = {m: v["mlp"] / (v["attention"] + v["mlp"]) for m, v in parts.items()}
    third = [m for m in parts if abs(mlp[m] - MLP_SHARE) <= MLP_TOLERANCE]
    other = [T("bd_share_of", model=name[m], share=f"{mlp[m]:.1%}") for m in parts if m not in third]
    span = "–".join(dict.fromkeys(f"{mlp[m]:.1%}" for m in sorted(third, key=mlp.get)))  # "66.6–66.7%"
    models = dict(models=listed([name[m] for m in third], lang, "and"), others=listed(other, lang, "and"))
    key = "bd_mlp_none" if not third else "bd_mlp_all" if not other else "bd_mlp_some"
    words.append(T(key, span=span.replace("%–", "–"), **models))
    top = max(parts, key=lambda m: share[m]["norms"])
    words.append(
        T(
            "bd_norms_small" if share[top]["norms"] < NORMS_NEGLIGIBLE else "bd_norms_large",
            model=name[top],
            share=f"{share[top]['norms']:.1%}",
            limit=f"{NORMS_NEGLIGIBLE:.0%}",
        )
    )
    tied = [name[m] for m in parts if parts[m]["head"] == 0 and _kind(m) == "causal"]
    headless = [name[m] for m in parts if parts[m]["head"] == 0 and _kind(m) != "causal"]
    own = [T("bd_share_of", model=name[m], share=f"{share[m]['head']:.1%}") for m in parts if parts[m]["head"]]
    if tied:
        words.append(T("bd_head_tied", models=listed(tied, lang, "and")))
    if headless:
        words.append(T("bd_head_none", models=listed(headless, lang, "and")))
    if own:
        words.append(T("bd_head_own", models=listed(own, lang, "and")))
    return sentences(words, lang)


def breakdown(share: bool = True, count: Counter = counted, *, lang: str = "en") -> Panel:
    """Where each preset's parameters are: embeddings, attention, MLP, norms, head (share of the total or counts)."""
    T = texts(PAGE, lang)
    parts = _preset_parts(count)
    fig = vb.stacked_parts(
        [T(f"preset_{k}") for k in parts],  # the models' names, not the presets' keys
        {T(f"part_{p}"): [parts[m][p] for m in parts] for p in params.PARTS},
        title=T("breakdown_title"),
        share=share,
        x_title=T("share_axis") if share else T("parameters"),
    )
    return Panel("sizes_breakdown", fig, {m: list(v.values()) for m, v in parts.items()})


@dataclass(frozen=True)
class Custom:
    total: int  # counted on the meta device
    rule: int  # 12·L·D² + V·D (+ T·D)
    head_dim: int
    ok: bool  # formula == count, part by part
    check: str
    parts: Panel
    heads: str  # what the number of heads changes: D_H, not the count; what the key/value heads chosen save


def custom(cfg: TransformerConfig, count: Counter = counted, *, lang: str = "en") -> Custom:
    """A causal model of your own: its parameters counted two ways and by part; with fewer key/value heads than query
    heads, the multi-head model of the same shape counted beside it, a second bar, so that the saving shows."""
    T = texts(PAGE, lang)
    formula, measured = count(cfg.to_dict(), "causal")
    total = sum(measured.values())
    ok = formula == measured
    check = (
        T("check_ok", total=f"{total:,}")
        if ok
        else T("check_bad", formula=f"{sum(formula.values()):,}", measured=f"{total:,}")
    )
    bars = {T("your_model"): measured}
    if cfg.kv_heads < cfg.num_heads:
        bars[T("multi_head_model", h=cfg.num_heads)] = count(replace(cfg, num_kv_heads=None).to_dict(), "causal")[1]
    by_part = {T(f"part_{p}"): [m[p] for m in bars.values()] for p in params.PARTS}
    fig = vb.stacked_parts(list(bars), by_part, title=T("custom_title"), share=False, x_title=T("parameters"))
    data = {"formula": list(formula.values()), "measured": list(measured.values())}
    panel = Panel("sizes_custom", fig, data)
    multi_total = sum(list(bars.values())[-1].values())  # this model's own where it is multi-head
    words = _heads_words(cfg, total, multi_total, count, lang)
    return Custom(total, params.rule_of_thumb(cfg), cfg.head_dim, ok, check, panel, words)


def _heads_words(cfg: TransformerConfig, total: int, multi_total: int, count: Counter, lang: str) -> str:
    """What the key/value heads chosen save against the multi-head model (``multi_total``: W_K and W_V are
    D × (H_kv·D_H)); the heads split D, they add nothing: the multi-head model counted with another number of heads
    (1, or the smallest other divisor of D); with as many key/value heads as query heads, what one would save."""
    T = texts(PAGE, lang)
    words = [T("heads_width", h=cfg.num_heads, dh=cfg.head_dim, d=cfg.dim)]
    if cfg.kv_heads < cfg.num_heads:  # said before the multi-head count it is set against
        words.append(
            T(
                "heads_mqa" if cfg.kv_heads == 1 else "heads_gqa",
                kv=cfg.kv_heads,
                h=cfg.num_heads,
                d=cfg.dim,
                width=cfg.kv_heads * cfg.head_dim,
                fewer=f"{multi_total - total:,}",
                layers=cfg.num_layers,
                multi=f"{multi_total:,}",
            )
        )
    alt = 1 if cfg.num_heads > 1 else next((h for h in range(2, cfg.dim + 1) if cfg.dim % h == 0), None)
    if alt is not None:  # D = 1 has one head only
        other = replace(cfg, num_heads=alt, num_kv_heads=None)
        n = sum(count(other.to_dict(), "causal")[1].values())
        same = dict(alt=alt, alt_dh=other.head_dim, total=f"{n:,}", d=cfg.dim)
        gap = signed(f"{n - multi_total:+,}")
        words.append(T("heads_same", **same) if n == multi_total else T("heads_differ", **same, gap=gap))
    if cfg.kv_heads == cfg.num_heads > 1:  # multi-head: one key/value head would shrink W_K, W_V to D × D_H
        shared = sum(count(replace(cfg, num_kv_heads=1).to_dict(), "causal")[1].values())
        words.append(T("heads_kv", h=cfg.num_heads, fewer=f"{total - shared:,}", layers=cfg.num_layers))
    return sentences(words, lang)


# The page's inputs (widget keys sizes_<input>) → the TransformerConfig field each sets.
CONFIG_FIELDS = {
    "layers": "num_layers",
    "dim": "dim",
    "heads": "num_heads",
    "kv_heads": "num_kv_heads",
    "vocab": "vocab_size",
    "context": "max_len",
    "mlp": "mlp",
    "pos": "positions",
    "tie": "tie_embeddings",
}


def own_model(*, count: Counter = counted, lang: str = "en", **inputs: int | str | bool) -> Custom:
    """:func:`custom` for the causal model the page's inputs describe (:data:`CONFIG_FIELDS`); key/value heads 0
    (the default): as many as H, so that H changes alone (a fixed 12 refused H = 8)."""
    fields = {CONFIG_FIELDS[k]: v for k, v in inputs.items()}
    if fields.get("num_kv_heads") == 0:
        fields["num_kv_heads"] = None  # the config's multi-head: one key/value head per query head
    return custom(TransformerConfig(**fields), count, lang=lang)


# "A model of your own": GPT-2 small's shape by default. Bounds keep a count on the meta device instant.
OWN_MODEL = Section(
    PAGE,
    "sizes",
    (
        Number("layers", 1, 256, 12),
        Number("dim", 1, 65_536, 768),
        Number("heads", 1, 256, 12),
        Number("kv_heads", 0, 256, 0, help="kv_heads_help"),  # 0: as many as H; fewer, dividing H: grouped-query
        Number("vocab", 1, 1_000_000, 50_257),
        Number("context", 1, 1_000_000, 1024),
        Choice("mlp", ("mlp", "swiglu"), "mlp"),
        Choice("pos", ("learned", "sinusoidal"), "learned", label="positions"),
        Switch("tie", True),
    ),
    compute=own_model,
)
