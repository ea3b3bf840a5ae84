"""The cost of attention (lecture §4.3–4.5, §9.6): FLOPs of the four matmuls, measured memory and time of
naive, tiled ("flash") and PyTorch attention, and the tiled kernel opened tile by tile."""

import time

import numpy as np
import pandas as pd
import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import cost, flash_steps, memory
from tx_explorer.viz import cost as vcost
from tx_explorer.viz import style

T = ui.texts("cost_of_attention")
DEV = ui.device()
ON_GPU = DEV.type == "cuda"
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
FLOPS_NS = [2**p for p in range(4, 17)]  # 16 … 65 536 tokens for the stacked bar
CURVE_NS = np.unique(np.geomspace(64, 131_072, 48).astype(int))  # analytic lines reach past the lecture's N
AXIS_N = T("axis_n")


@st.cache_data(show_spinner=False, max_entries=512)
def measured(
    method: str, n: int, heads: int, head_dim: int, repeats: int, block: int, device: str, dtype: str
) -> cost.Measurement:
    """Median time and peak memory of one forward pass; cached, so pressing again costs nothing."""
    return cost.measure(
        method, n, heads=heads, head_dim=head_dim, repeats=repeats, block_size=block, device=device, dtype=dtype
    )


def run_measurements(
    methods: list[str], ns: list[int], heads: int, head_dim: int, repeats: int, block: int, dtype: str
) -> dict:
    """Every (method, N) with a progress bar; naive stops at the first N the memory guard refuses, and no run
    starts that is predicted to end after the time budget (the server is shared; reruns cancel between runs)."""
    runs, refused, over_budget = [], None, None
    deadline = time.monotonic() + cost.MEASURE_BUDGET_S
    last: dict[str, cost.Measurement] = {}
    bar = st.progress(0.0)
    jobs = [(m, n) for n in ns for m in methods]
    for i, (method, n) in enumerate(jobs):
        bar.progress(i / len(jobs), text=T("progress", method=method, n=f"{n:,}", i=i + 1, total=len(jobs)))
        if method == "naive":
            if refused:
                continue
            try:
                memory.check_naive_fits(n, heads, head_dim, itemsize=ITEMSIZE[dtype], device=DEV)
            except memory.MemoryBudgetError as exc:
                refused = str(exc)
                continue
        if time.monotonic() + cost.predicted_seconds(last.get(method), n) > deadline:
            over_budget = min(n, over_budget or n)
            continue
        last[method] = measured(method, n, heads, head_dim, repeats, block, str(DEV), dtype)
        runs.append(last[method])
    bar.empty()
    return {"runs": runs, "refused": refused, "over_budget": over_budget}


st.title(T("title"))
st.markdown(T("intro"))

# ---- 1. the four matrix multiplications -----------------------------------------------------------------------
st.header(T("matmul_header"))
st.markdown(T("matmul_intro"))
c = st.columns(3)
n = c[0].number_input(T("n"), 1, 10_000_000, 1024, key="cost_n")
d = c[1].number_input(T("d"), 1, 65_536, 512, key="cost_d")
h = c[2].number_input(T("h"), 1, 1024, 8, key="cost_h")
with ui.friendly_errors():
    products = cost.four_matmuls(n, d, h)
    total = sum(mm.flops for mm in products)
    quad = sum(mm.flops for mm in products if mm.quadratic)
    st.dataframe(
        pd.DataFrame(
            {
                T("col_step"): [T(f"mm_{mm.key}") for mm in products],
                T("col_product"): [f"{list(mm.left)} · {list(mm.right)} → {list(mm.out)}" for mm in products],
                T("col_flops"): [f"{mm.flops:,}" for mm in products],
                T("col_share"): [f"{100 * mm.flops / total:.1f}%" for mm in products],
            }
        ),
        hide_index=True,
    )
    st.markdown(
        T(
            "flops_summary",
            n=f"{n:,}",
            total=cost.format_si(total),
            share=f"{100 * quad / total:.0f}%",
            cross=f"{int(cost.crossover_n(d)):,}",
        )
    )
    flops = cost.flops_by_n(FLOPS_NS, d, h)
    fig = vcost.flops_bars(
        FLOPS_NS,
        {T(f"mm_{k}"): v for k, v in flops.items()},
        cost.crossover_n(d),
        title=T("flops_title"),
        crossover_label=T("crossover_label"),
        x_title=AXIS_N,
        y_title=T("axis_share"),
    )
    ui.show_figure(fig, "cost_flops", np.column_stack([FLOPS_NS, *flops.values()]))  # N, then the 4 products

# ---- 2. memory and time, measured ---------------------------------------------------------------------------------
st.header(T("mem_header"))
st.markdown(T("mem_intro"))
c = st.columns(6)
heads = c[0].number_input(T("heads"), 1, 64, 8, key="cost_heads")
head_dim = c[1].number_input(T("head_dim"), 1, 256, 64, key="cost_head_dim")
block = c[2].selectbox(T("block"), [32, 64, 128, 256], index=2, key="cost_block")
max_n = c[3].selectbox(T("max_n"), [2**p for p in range(8, 16 if ON_GPU else 15)], index=3, key="cost_max_n")
repeats = c[4].number_input(T("repeats"), 1, 9, 3, key="cost_repeats")
dtype = c[5].selectbox(T("dtype"), ["float32", "float16", "bfloat16"] if ON_GPU else ["float32"], key="cost_dtype")
itemsize = ITEMSIZE[dtype]

methods = list(cost.METHODS)
with ui.friendly_errors():
    backends = cost.sdpa_backends(DEV, dtype)
    if ON_GPU:  # each usable backend gets its own curve
        methods += [f"sdpa:{b}" for b, ok in backends.items() if ok]
    with st.expander(T("backends_header"), expanded=ON_GPU):
        st.markdown(T("backends_intro"))
        st.dataframe(
            pd.DataFrame({T("col_backend"): list(backends), T("col_usable", dtype=dtype): list(backends.values())}),
            hide_index=True,
        )

params = (heads, head_dim, block, max_n, repeats, dtype, str(DEV))
st.caption(T("measure_hint", max_n=f"{max_n:,}"))
if st.button(T("measure"), type="primary", key="cost_measure"):
    with ui.friendly_errors():
        ns = [2**p for p in range(7, int(np.log2(max_n)) + 1)]
        st.session_state["cost_results"] = {
            "params": params,
            **run_measurements(methods, ns, heads, head_dim, repeats, block, dtype),
        }

result = st.session_state.get("cost_results")
result = result if result and result["params"] == params else None
runs = result["runs"] if result else []
by_method = {m: [r for r in runs if r.method == m] for m in methods if any(r.method == m for r in runs)}
with ui.friendly_errors():
    lines = cost.memory_lines(CURVE_NS, heads, head_dim, block_size=block, itemsize=itemsize)
    lecture = cost.memory_lines([cost.LECTURE_N], cost.LECTURE_H, head_dim, block_size=block, itemsize=itemsize)
    lecture = {m: float(v[0]) for m, v in lecture.items()}
    total_mem = memory.total_bytes(DEV)
    fig = vcost.memory_curves(
        {m: (CURVE_NS, v) for m, v in lines.items()},
        {m: (np.array([r.n for r in rs]), np.array([r.peak_bytes for r in rs])) for m, rs in by_method.items()},
        device_bytes=total_mem,
        device_label=T("device_gpu" if ON_GPU else "device_ram", size=memory.format_bytes(total_mem)),
        extrapolated={
            T("lecture_point", method=m, size=memory.format_bytes(lecture[m])): (cost.LECTURE_N, lecture[m])
            for m in ("naive", "flash")
        },
        title=T("memory_title"),
        analytic_label=T("analytic"),
        measured_label=T("measured"),
        x_title=AXIS_N,
        y_title=T("axis_bytes"),
    )
    ui.show_figure(fig, "cost_memory", np.column_stack([CURVE_NS, *lines.values()]))  # N, naive, flash, sdpa
    st.markdown(
        T(
            "lecture_note",
            head_dim=head_dim,
            naive=memory.format_bytes(lecture["naive"]),
            flash=memory.format_bytes(lecture["flash"]),
        )
    )
    if result and result["refused"]:
        st.info(T("refused", message=result["refused"]))
    if result and result.get("over_budget"):
        st.info(T("over_budget", n=f"{result['over_budget']:,}", seconds=cost.MEASURE_BUDGET_S))
    if by_method:
        series = {m: (np.array([r.n for r in rs]), np.array([r.seconds for r in rs])) for m, rs in by_method.items()}
        fig = vcost.time_curves(series, title=T("time_title"), x_title=AXIS_N, y_title=T("axis_seconds"))
        ui.show_figure(fig, "cost_time", cost.results_matrix(runs, list(by_method)))
        top = max((r.n for r in by_method.get("naive", [])), default=None)
        mem_x = cost.ratio(runs, top, "naive", "flash", "peak_bytes") if top else None
        time_x = cost.ratio(runs, top, "flash", "sdpa") if top else None
        if mem_x and time_x:
            st.markdown(T("ratio_note", n=f"{top:,}", mem=f"{mem_x:.1f}", time=f"{time_x:.1f}"))
        st.subheader(T("results"))
        st.dataframe(
            pd.DataFrame(
                {
                    T("col_n"): [r.n for r in runs],
                    T("col_method"): [r.method for r in runs],
                    T("col_ms"): [round(1000 * r.seconds, 2) for r in runs],
                    T("col_peak"): [memory.format_bytes(r.peak_bytes) for r in runs],
                }
            ),
            hide_index=True,
        )

st.subheader(T("guard_header"))
st.markdown(T("guard_intro", itemsize=itemsize, fraction=f"{memory.DEFAULT_FRACTION:.0%}"))
c = st.columns(2)
guard_n = c[0].number_input(T("guard_n"), 1, 10_000_000, 65_536, key="cost_guard_n")
guard_h = c[1].number_input(T("guard_h"), 1, 1024, 8, key="cost_guard_h")
with ui.friendly_errors():
    try:
        need = memory.check_naive_fits(guard_n, guard_h, head_dim, itemsize=itemsize, device=DEV)
        st.success(
            T(
                "guard_ok",
                n=f"{guard_n:,}",
                h=guard_h,
                need=memory.format_bytes(need),
                free=memory.format_bytes(memory.available_bytes(DEV)),
            )
        )
    except memory.MemoryBudgetError as exc:
        st.warning(str(exc))

# ---- 3. tile by tile ----------------------------------------------------------------------------------------------
st.header(T("tile_header"))
st.markdown(T("tile_intro"))
st.latex(
    r"\begin{aligned} m' &= \max\big(m,\ \mathrm{rowmax}(S_{ij})\big), \qquad S_{ij} = Q_i K_j^\top / \sqrt{D_H} \\ "
    r"\ell' &= e^{m - m'}\,\ell + \mathrm{rowsum}\big(e^{S_{ij} - m'}\big) \\ "
    r"\tilde O' &= e^{m - m'}\,\tilde O + e^{S_{ij} - m'}\,V_j \\ "
    r"O_i &= \tilde O / \ell, \qquad L_i = m + \log \ell \end{aligned}"
)
st.markdown(T("tile_outro"))
c = st.columns(4)
tile_n = c[0].number_input(T("tile_n"), 1, flash_steps.MAX_TRACE_N, 12, key="cost_tile_n")
tile_b = c[1].number_input(T("tile_block"), 1, flash_steps.MAX_TRACE_N, 4, key="cost_tile_b")
causal = c[2].checkbox(T("tile_causal"), value=True, key="cost_tile_causal")
seed = c[3].number_input(T("tile_seed"), 0, 10_000, 0, key="cost_tile_seed")
with ui.friendly_errors():
    tr = flash_steps.trace_example(n=tile_n, d=4, block_size=tile_b, causal=causal, seed=seed)
    fig = vcost.tile_grid(
        tr.status,
        [T("status_skipped"), T("status_partial"), T("status_full")],
        block_q=tr.block_q,
        block_k=tr.block_k,
        title=T("grid_title", computed=tr.computed_tiles, total=tr.status.size),
        x_title=T("axis_key_tile"),
        y_title=T("axis_query_tile"),
    )
    ui.show_figure(fig, "cost_tiles", tr.status)
    cols = [T("after_tile", j=j) for j in range(tr.m.shape[1])]
    rows = [T("row", i=i) for i in range(tr.m.shape[0])]
    axes = {"x_title": T("axis_steps"), "y_title": ui.axes()["y_title"]}
    c = st.columns(2)
    with c[0]:
        fig = vcost.running_stat_map(tr.m, rows, cols, title=T("m_title"), colorscale=style.DIVERGING, zmid=0.0, **axes)
        ui.show_figure(fig, "cost_running_max", tr.m)
    with c[1]:
        fig = vcost.running_stat_map(tr.l, rows, cols, title=T("l_title"), **axes)
        ui.show_figure(fig, "cost_running_sum", tr.l)
    st.markdown(T("max_diff", diff=tr.max_abs_diff))
