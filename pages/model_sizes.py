"""Model sizes (lecture §5.4): where the parameters are, counted two ways, next to the published figures."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.config import TransformerConfig
from tx_explorer.views import model_sizes as view

T = ui.texts("model_sizes")
LANG = ui.lang()


@st.cache_data(max_entries=32, show_spinner=False)
def counted(cfg: dict, kind: str, decoder_layers: int | None = None) -> view.Counts:
    """(formula, sum(p.numel()) on the meta device) for one config."""
    return view.counted(cfg, kind, decoder_layers)


st.title(ui.page_title("model_sizes"))
st.markdown(T("intro"))
st.latex(view.LATEX)

ui.section(T, "table")
with ui.friendly_errors():
    rows, compare = view.lecture_table(counted, lang=LANG)
    st.dataframe(rows, hide_index=True)
    st.markdown(T("table_notes") + "\n\n" + T("not_measured"))
    ui.show(compare)

# The two sections with inputs are fragments: a change reruns only its own section; each is drawn when scrolled to.


@ui.below_fold("model_sizes_breakdown", height=730)
def breakdown_section() -> None:
    ui.section(T, "breakdown")
    share = st.toggle(T("share"), value=True, key="sizes_share")
    with ui.friendly_errors():
        ui.show(view.breakdown(share, counted, lang=LANG))


@ui.below_fold("model_sizes_custom", height=950)
def custom_section() -> None:
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
        mine = view.custom(cfg, counted, lang=LANG)
        c = st.columns(3)
        c[0].metric(T("total"), view.fmt(mine.total), help=f"{mine.total:,}")
        c[1].metric(T("rule"), view.fmt(mine.rule), help=T("rule_help"))
        c[2].metric(T("head_dim"), mine.head_dim)
        (st.success if mine.ok else st.error)(mine.check)
        ui.show(mine.parts)


breakdown_section()
custom_section()
