"""Long-context attention atlas: every head's habits over thousands of tokens, from tiles, never an
N × N map; an exact block of weights on demand and a needle test."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import atlas
from tx_explorer.views import atlas as view

T = ui.texts("atlas")
LANG = ui.lang()
STATS = (
    r"\mathrm{first}_i = a_{i,0} \qquad H_i = -\sum_{j \le i} a_{ij} \log a_{ij} \qquad "
    r"\mathrm{local}_i = \sum_{i - j < w} a_{ij} \qquad \bar d_i = \sum_{j \le i} a_{ij}\,(i - j) \qquad "
    r"\mathrm{received}_j = \sum_{i \ge j} a_{ij}"
)
TWO_PASSES = r"a_{ij} = \exp\bigl(s_{ij} - \mathrm{lse}_i\bigr), \qquad \mathrm{lse}_i = \log \sum_{j \le i} e^{s_{ij}}"


@st.cache_resource(show_spinner=False)
def _results() -> dict:
    """Results shared by every session, the last few (SmolLM2's statistics at 8k tokens are 44 MB)."""
    return {}


@st.cache_resource(show_spinner=False, max_entries=1)
def on_gpu(name: str):
    """The chosen model copied to the GPU once per process for the atlas's jobs (the shared copy stays on the CPU)."""
    return view.moved(ui.cached_model(name), ui.device())


def pooled(key: tuple, work, *, run: bool = True):
    """``work(report)`` on the shared job pool (queued, progress, cancelled when the visitor leaves), memoised for
    every session; with ``run=False`` only a result already there (None otherwise)."""
    store = _results()
    if key not in store and run:
        with st.empty():  # run_job's place: the fragment's later elements keep theirs
            result = ui.run_job(work, label=T("working"), key=key)
        if len(store) >= 8:
            store.pop(next(iter(store)))  # the oldest first
        store[key] = result
    return store.get(key)


def text_ids(name: str, tm) -> tuple[list[int], int]:
    """The chosen text's token ids (the corpus's, after a hint, while no text is pasted or uploaded) and the window."""
    c = st.columns([1, 1, 1])
    source = c[0].radio(T("source"), view.SOURCES, format_func=lambda s: T(f"source_{s}"), key="atlas_source")
    window = int(c[2].number_input(T("window"), 1, 4096, 64, key="atlas_window", help=T("window_help")))
    tokens = min(view.DEFAULT_TOKENS, tm.max_len)
    if source == "corpus":
        tokens = c[1].number_input(T("tokens"), 16, tm.max_len, tokens, step=256, key=f"atlas_tokens_{name}")
    elif source == "paste":
        text = st.text_area(T("text"), "", max_chars=400_000, key="atlas_text", height=150, help=T("text_help"))
        if text.strip():
            return view.source_ids(tm, "paste", text=text), window
        st.info(T("paste_hint", n=tokens))
    else:
        upload = ui.file_uploader(T("upload"), types=["txt"], key="atlas_upload", help=T("text_help"))
        if upload is not None:
            return view.source_ids(tm, "upload", upload=upload.getvalue()), window
        st.info(T("upload_hint", n=tokens))
    return view.source_ids(tm, "corpus", tokens=int(tokens)), window


def head_choice(name: str, picked: list | None, focus: tuple[int, int], tm) -> tuple[int, int]:
    """The head opened below: a click on the grid, else the number boxes (first: the strongest sink)."""
    keys = (f"atlas_layer_{name}", f"atlas_head_{name}")
    if picked and picked != st.session_state.get("atlas_picked"):
        st.session_state["atlas_picked"] = picked
        st.session_state.update(zip(keys, map(int, picked)))
    for key, value in zip(keys, focus):
        st.session_state.setdefault(key, int(value))
    c = st.columns(2)
    layer = c[0].number_input(T("layer"), 0, len(tm.model.blocks) - 1, key=keys[0])
    head = c[1].number_input(T("head"), 0, tm.config.num_heads - 1, key=keys[1])
    return int(layer), int(head)


@st.fragment
def atlas_page(name: str) -> None:
    ui.keep_open("atlas_open_block", "atlas_open_needle")  # through runs stopped early by a bad text
    with ui.friendly_errors():
        tm = on_gpu(name) if ui.device().type == "cuda" else ui.cached_model(name)
        st.caption(ui.architecture_caption(tm) + " · " + T("context", n=tm.max_len))
        st.markdown(view.dense_maps(tm, lang=LANG))
        ids, window = text_ids(name, tm)
        key = ("atlas", name, hash(tuple(ids)), len(ids), window)
        stats = pooled(key, lambda report: view.compute(tm, ids, window=window, lang=LANG, report=report))
        st.caption(T("read", n=len(ids), layers=stats.first.shape[0], heads=stats.first.shape[1]))

        ui.section(T, "grid", STATS, level="subheader")
        statistic = st.radio(
            T("statistic"), atlas.STATS, format_func=lambda s: T(f"stat_{s}"), horizontal=True, key="atlas_stat"
        )
        result = view.overview(stats, statistic, global_layers=tm.config.global_layers, lang=LANG)
        picked = ui.show_result(result, clickable=True)
        if kinds := view.layer_kinds(tm, stats, lang=LANG):  # Gemma 3's local and global layers
            st.markdown(kinds)
        st.caption(T("click_hint"))
        layer, head = head_choice(name, picked, view.focus(stats), tm)
        ui.show(view.head_along(stats, statistic, layer, head, lang=LANG))

        if box := ui.lazy_section(T, "block", TWO_PASSES, key="atlas_open_block"):
            with box:  # its inputs and weights inside the opened box, under its intro
                c = st.columns(3)
                side = int(c[2].number_input(T("size"), 1, atlas.MAX_DENSE, min(64, len(ids)), key="atlas_size"))
                r0 = int(c[0].number_input(T("row_start"), 0, len(ids) - 1, max(0, len(ids) - side), key="atlas_r0"))
                c0 = int(c[1].number_input(T("col_start"), 0, len(ids) - 1, 0, key="atlas_c0"))
                run = lambda report: view.exact_block(tm, ids, stats, layer, head, r0, c0, side)  # noqa: E731
                found = pooled(("atlas_block", *key, layer, head, r0, c0, side), run)  # numbers, worded per run
                ui.show_result(view.block(found, lang=LANG))

        if box := ui.lazy_section(T, "needle", key="atlas_open_needle"):
            with box:
                st.markdown(view.needle_reads(tm, lang=LANG))
                sentence = st.text_input(T("needle_sentence"), T("needle_default"), max_chars=500, key="atlas_needle")
                c = st.columns([5, 2, 3])  # "Expected answer" on one line at 1100 px
                question = c[0].text_input(T("needle_question"), T("question_default"), max_chars=500, key="atlas_q")
                answer = c[1].text_input(T("needle_answer"), T("answer_default"), max_chars=100, key="atlas_a")
                depth = c[2].slider(T("depth"), 0, 100, 50, step=5, format="%d%%", key="atlas_depth") / 100
                asked = (sentence, question, answer, depth)
                clicked = st.button(T("needle_run"), key="atlas_needle_run")
                run = lambda report: view.plant_needle(tm, ids, *asked, lang=LANG, report=report)  # noqa: E731
                # numbers under a key without the language: a switch re-words the result, no click needed again
                if (found := pooled(("atlas_needle", *key, *asked), run, run=clicked)) is not None:
                    ui.show_result(view.needle(found, lang=LANG))


st.title(ui.page_title("atlas"))
st.markdown(T("intro"))
model = ui.text_model_picker(T("model"), "atlas_model", kind="causal")
if model is None:
    st.stop()
atlas_page(model)
