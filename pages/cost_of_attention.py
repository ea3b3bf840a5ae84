"""The cost of attention (lecture §4.3–4.5, §9.6): FLOPs of the four matmuls, measured memory and time of naive,
tiled and PyTorch attention, the tiled kernel tile by tile. Sections are fragments, the last three open on demand."""

import functools

import pandas as pd
import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import cost, memory
from tx_explorer.views import cost_of_attention as view
from tx_explorer.views import flash_io as io_view
from tx_explorer.views import mixers as mix_view

T, F, M = ui.texts("cost_of_attention"), ui.texts("flash_io"), ui.texts("mixers")
LANG, DEV = ui.lang(), ui.device()
ON_GPU = DEV.type == "cuda"


@st.cache_data(show_spinner=False, max_entries=512)  # shared by every session, the pool's workers too
def measured(method: str, n: int, **kwargs) -> cost.Measurement:
    return cost.measure(method, n, **kwargs)


@st.fragment
def matmul_section() -> None:
    ui.section(T, "matmul")
    source = st.selectbox(T("shape_from"), view.shape_sources(), format_func=view.shape_label(LANG), key="cost_shape")
    cfg = None
    with ui.friendly_errors(), st.spinner(T("shape_loading")):  # a model's config: the loaded model's, once a server
        cfg = view.read_shape(source, st.session_state, lambda name: ui.cached_model(name).config)
    values = ui.inputs(view.MATMULS, T, columns=5)
    with ui.friendly_errors():
        mm = view.MATMULS.compute(**values, model=(source, cfg) if cfg else None, lang=LANG)
        st.dataframe(pd.DataFrame(mm.rows), hide_index=True)
        st.markdown(mm.summary)
        ui.show(mm.flops)
        st.markdown(mm.sharing_note)  # under its own heading
        st.table(mm.sharing, hide_index=True)  # four rows whose labels hold maths (a grid shows none)


@ui.below_fold("cost_memory", height=1360)
def memory_section() -> None:
    ui.section(T, "mem")
    c = [*st.columns(3), *st.columns(3)]  # two rows: six to a row wrap the English labels at 1100 px
    heads = c[0].number_input(T("heads"), 1, 64, 8, key="cost_heads")
    head_dim = c[1].number_input(T("head_dim"), 1, 256, 64, key="cost_head_dim")
    block = c[2].selectbox(T("block"), [32, 64, 128, 256], index=2, key="cost_block")
    max_n = c[3].selectbox(T("max_n"), [2**p for p in range(8, 16 if ON_GPU else 15)], index=3, key="cost_max_n")
    repeats = c[4].number_input(T("repeats"), 1, 9, 3, key="cost_repeats")
    dtype = c[5].selectbox(T("dtype"), ["float32", "float16", "bfloat16"] if ON_GPU else ["float32"], key="cost_dtype")
    with ui.friendly_errors():
        methods, usable = view.backends(DEV, dtype, lang=LANG)
        ui.keep_open("cost_backends")  # keyed: its label changes with the language, an opened list stays open
        with st.expander(T("backends_header"), expanded=ON_GPU, key="cost_backends", on_change="rerun"):
            st.markdown(T("backends_intro"))
            st.dataframe(pd.DataFrame(usable), hide_index=True)
    params = (heads, head_dim, block, max_n, repeats, dtype, str(DEV))
    st.caption(T("measure_hint", max_n=f"{max_n:,}"))
    if st.button(T("measure"), type="primary", key="cost_measure"):
        kw = dict(heads=heads, head_dim=head_dim, repeats=repeats, block=block, dtype=dtype, device=DEV)
        sweep = functools.partial(view.sweep, methods=methods, max_n=max_n, measure=measured, lang=LANG, **kw)
        with ui.friendly_errors():
            # numbers only (worded below): sessions in either language pressing at once share one sweep
            found = ui.run_job(sweep, label=T("measure"), key=("cost_sweep", *params, *methods))
            st.session_state["cost_results"] = {"params": params, "found": found}

    found = r["found"] if (r := st.session_state.get("cost_results")) and r["params"] == params else None
    with ui.friendly_errors():
        cv = view.curves(heads, head_dim, block, dtype, DEV, found.runs if found else (), lang=LANG)
        ui.show(cv.memory)
        st.markdown(cv.lecture_note)
        for note in view.found_notes(found, lang=LANG):
            st.info(note)
        if cv.time is not None:
            ui.show(cv.time)
            if cv.ratio_note:
                st.markdown(cv.ratio_note)
            st.subheader(T("results"))
            st.dataframe(pd.DataFrame(cv.results), hide_index=True)

    st.subheader(T("guard_header"))
    st.markdown(T("guard_intro", itemsize=view.ITEMSIZE[dtype], fraction=f"{memory.DEFAULT_FRACTION:.0%}"))
    c = st.columns(2)
    guard_n = c[0].number_input(T("guard_n"), 1, 10_000_000, 65_536, key="cost_guard_n")
    guard_h = c[1].number_input(T("guard_h"), 1, 1024, 8, key="cost_guard_h")
    with ui.friendly_errors():
        fits, verdict = view.guard(guard_n, guard_h, head_dim, dtype, DEV, lang=LANG)
        (st.success if fits else st.warning)(verdict)


@st.fragment
def tile_section() -> None:
    if box := ui.lazy_section(T, "tile", view.TILE_LATEX, key="cost_open_tile"):
        with box:
            st.markdown(T("tile_outro"))
            values = ui.inputs(view.TILES, T)
            with ui.friendly_errors():
                tiles = view.TILES.compute(**values, lang=LANG)
                ui.show(tiles.grid)
                ui.row(tiles.running_max, tiles.running_sum)
                st.markdown(tiles.note)


@st.fragment
def io_section() -> None:  # FlashAttention's IO argument (§4.4)
    if box := ui.lazy_section(F, "io", *io_view.latex(LANG), key="cost_open_io"):
        with box:
            c = st.columns(3)
            io_d = c[0].selectbox(F("head_dim"), [32, 64, 128], index=1, key="io_d")
            io_tile = c[1].select_slider(F("tile"), io_view.TILES, value=128, key="io_tile")
            io_n = c[2].select_slider(F("n"), io_view.NS, value=4096, key="io_n")
            with ui.friendly_errors():
                fio = io_view.io(io_d, io_tile, io_n, measure=None, lang=LANG)  # the counts: drawn at once
                ui.row(fio.by_n, fio.by_tile)
                st.markdown(fio.note + "\n\n" + F("measured_intro"))
                run = functools.partial(io_view.measure_peaks, io_d, io_tile, measure=measured, lang=LANG)
                key = (io_d, io_tile)  # numbers only: worded below in the language shown, so a switch keeps them
                if peaks := ui.job_on_click(F("measure"), run, F("measuring", n=""), key=key, widget="io_measure"):
                    st.dataframe(pd.DataFrame(io_view.measured_rows(peaks, lang=LANG)), hide_index=True)
                    st.markdown(io_view.measured_note(peaks, lang=LANG))
            st.markdown(F("cpu_note"))


@st.fragment
def mixer_section() -> None:  # RNN, convolution and self-attention (§4.5)
    if box := ui.lazy_section(M, "mix", key="cost_open_mix"):
        with box:
            c = st.columns(3)
            n = c[0].selectbox(M("max_n"), mix_view.NS, index=3, key="mix_max_n")
            dim = c[1].selectbox(M("dim"), mix_view.DIMS, index=1, key="mix_dim")
            with ui.friendly_errors():
                run = functools.partial(mix_view.measure_job, max_n=n, dim=dim, device=DEV, lang=LANG)
                done = ui.job_on_click(M("measure"), run, M("progress"), key=(n, dim), widget="mix_measure", where=c[2])
                mx = mix_view.compare(done, max_n=n, dim=dim, lang=LANG)
                ui.show(mx.grid)
                st.caption(mx.check)
                st.table(mx.table)
                st.markdown(mx.note)
                ui.section(M, "fused", level="subheader")  # one [Q K V] projection or three (§3.1)
                timing = ui.once_per_server(lambda _: cost.fused_qkv_sweep(), label=M("fused_working"), key="fused")
                fused = mix_view.fused(timing, lang=LANG)
                ui.show(fused.chart)
                st.markdown(fused.note)


st.title(ui.page_title("cost_of_attention"))
st.markdown(T("intro"))
for section in (matmul_section, memory_section, tile_section, io_section, mixer_section):
    section()
