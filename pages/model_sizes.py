"""Model sizes (lecture §5.4): where the parameters are, counted two ways, next to the published figures."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import params
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.viz import bars as vb

T = ui.texts("model_sizes")


@st.cache_data(max_entries=32, show_spinner=False)
def counted(cfg: dict, kind: str, decoder_layers: int | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(formula, sum(p.numel()) on the meta device) for one config."""
    c = TransformerConfig.from_dict(cfg)
    return params.count_params(c, kind, decoder_layers), params.measure(params.build_on_meta(c, kind, decoder_layers))


def fmt(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


st.title(ui.page_title("model_sizes"))
st.markdown(T("intro"))
st.latex(
    r"N\approx\underbrace{12\,L\,D^2}_{\text{blocks: }4D^2\text{ attention}+8D^2\text{ MLP}}"
    r"+\underbrace{V D}_{\text{token embedding}}+\underbrace{T D}_{\text{learned positions}}"
)

st.header(T("table_header"))
st.markdown(T("table_intro"))
with ui.friendly_errors():
    rows = []
    for p in params.LECTURE_TABLE:
        row = p.model.lower().replace(" ", "_").replace("-", "")  # original_transformer, gpt2, gpt3
        formula, measured = counted(p.config.to_dict(), p.kind, p.decoder_layers)
        exact = sum(measured.values())
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
                T("col_published"): f"{fmt(p.published_params)} ({T(f'source_{row}')})",
                T("col_config"): T(
                    f"config_{p.kind}",
                    layers=p.config.num_layers,
                    dec=p.decoder_layers or 0,
                    dim=p.config.dim,
                    heads=p.config.num_heads,
                    vocab=p.config.vocab_size,
                    context=p.config.max_len,
                ),
                T("col_counted"): f"{exact:,}",
                T("col_check"): "✓" if formula == measured else "✗",
            }
        )
    st.dataframe(rows, hide_index=True)
    st.markdown(T("table_notes"))
    fig = vb.log_bars(
        [p.model for p in params.LECTURE_TABLE],
        {
            T("series_lecture"): [p.lecture_params for p in params.LECTURE_TABLE],
            T("series_published"): [p.published_params for p in params.LECTURE_TABLE],
            T("series_counted"): [
                sum(counted(p.config.to_dict(), p.kind, p.decoder_layers)[1].values()) for p in params.LECTURE_TABLE
            ],
        },
        title=T("compare_title"),
        y_title=T("parameters"),
    )
    ui.show_figure(fig, "sizes_compare")

st.header(T("breakdown_header"))
st.markdown(T("breakdown_intro"))
share = st.toggle(T("share"), value=True, key="sizes_share")
with ui.friendly_errors():
    named = {k: (v, "encoder" if k.startswith("bert") else "causal") for k, v in PRESETS.items()}
    parts = {k: counted(cfg.to_dict(), kind)[1] for k, (cfg, kind) in named.items()}
    fig = vb.stacked_parts(
        list(parts),
        {T(f"part_{p}"): [parts[m][p] for m in parts] for p in params.PARTS},
        title=T("breakdown_title"),
        share=share,
        x_title=T("share_axis") if share else T("parameters"),
    )
    ui.show_figure(fig, "sizes_breakdown", {m: list(v.values()) for m, v in parts.items()})

st.header(T("custom_header"))
st.markdown(T("custom_intro"))
c = st.columns(4)
layers = c[0].number_input(T("layers"), 1, 256, 12, key="sizes_layers")
dim = c[1].number_input(T("dim"), 1, 65_536, 768, key="sizes_dim")
heads_n = c[2].number_input(T("heads"), 1, 256, 12, key="sizes_heads")
vocab = c[3].number_input(T("vocab"), 1, 1_000_000, 50_257, key="sizes_vocab")
c = st.columns(4)
context = c[0].number_input(T("context"), 1, 1_000_000, 1024, key="sizes_context")
mlp = c[1].selectbox(T("mlp"), ("mlp", "swiglu"), format_func=lambda m: T(f"mlp_{m}"), key="sizes_mlp")
positions = c[2].selectbox(
    T("positions"), ("learned", "sinusoidal"), format_func=lambda p: T(f"pos_{p}"), key="sizes_pos"
)
tie = c[3].toggle(T("tie"), value=True, key="sizes_tie")
with ui.friendly_errors():
    cfg = TransformerConfig(
        vocab_size=int(vocab),
        max_len=int(context),
        dim=int(dim),
        num_layers=int(layers),
        num_heads=int(heads_n),
        mlp=mlp,
        positions=positions,
        tie_embeddings=tie,
    )
    formula, measured = counted(cfg.to_dict(), "causal")
    total = sum(measured.values())
    c = st.columns(3)
    c[0].metric(T("total"), fmt(total), help=f"{total:,}")
    c[1].metric(T("rule"), fmt(params.rule_of_thumb(cfg)), help=T("rule_help"))
    c[2].metric(T("head_dim"), cfg.head_dim)
    if formula == measured:
        st.success(T("check_ok", total=f"{total:,}"))
    else:
        st.error(T("check_bad", formula=f"{sum(formula.values()):,}", measured=f"{total:,}"))
    by_part = {T(f"part_{p}"): [measured[p]] for p in params.PARTS}
    fig = vb.stacked_parts([T("your_model")], by_part, title=T("custom_title"), share=False, x_title=T("parameters"))
    ui.show_figure(fig, "sizes_custom", {"formula": list(formula.values()), "measured": list(measured.values())})
