"""What a head does: ablation, activation patching, a sub-layer logit lens, a head taxonomy with
attention sinks, and attribution beside attention, for every text model."""

import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import head_science as hs
from tx_explorer.views import head_science as view
from tx_explorer.views import model_facts

T = ui.texts("head_science")
LANG = ui.lang()
VIEWS = ("importance", "patching", "lens", "taxonomy", "attribution")
INPUTS = {  # each view's own widgets (a key ending in "_" stands for every key it begins)
    "importance": "hs_text hs_heldout hs_mode",
    "patching": "hs_example hs_clean_ hs_corrupt_ hs_a_ hs_b_",
    "lens": "hs_text hs_quantity",
    "taxonomy": "hs_text hs_score",
    "attribution": "hs_text",
}


def text_model(name: str):
    return hs.text_model(ui.cached_model(name))


@st.cache_resource(show_spinner=False)
def _store(kind: str) -> dict:
    """Each view's numbers, or ("patterns") one head's pattern per model, text and head, kept apart so that clicks
    through heads never evict an ablation; shared by every session and both languages: keyed without the language,
    so that a switch only rewords them (st.cache_data would replay the progress bar's calls on a hit)."""
    return {}


def memo(key: tuple, compute, kind: str = "results", most: int = 24):
    store = _store(kind)
    if key not in store:
        if len(store) >= most:
            store.pop(next(iter(store)))  # the oldest first
        store[key] = compute()
    return store[key]


def pooled(key: tuple, work):
    """``work(tick)``, a long job (every head ablated or patched), on the shared job pool: memoised for every
    session, and identical requests in flight share one job. ``tick(fraction, what)`` reports its progress."""

    def job(report):  # on a pool worker
        return work(lambda fraction, what: report(min(1.0, fraction), T("progress", what=what)))

    with st.empty():  # run_job's place, also on a memoised answer: the fragment's later elements keep their places
        return memo(key, lambda: ui.run_job(job, label=T("progress", what=""), key=key))


@st.fragment
def views(name: str) -> None:
    """The chosen view: its inputs, and the switch between views, rerun only this."""
    choice = st.segmented_control(
        T("view"), VIEWS, default="importance", required=True, format_func=lambda v: T(f"view_{v}"), key="hs_view"
    )
    st.markdown(T(f"{choice}_intro"))
    ui.keep_inputs(INPUTS, choice)  # what was typed in another view is still there when it comes back

    with ui.friendly_errors():
        tm = text_model(name)
        st.caption(ui.architecture_caption(tm))
        if choice == "patching":
            pairs = hs.example_pairs(name, tm)
            c = st.columns([1, 2, 2])
            k = c[0].selectbox(
                T("example"), range(len(pairs)), format_func=lambda i: T("example_n", n=i + 1), key="hs_example"
            )
            clean = c[1].text_input(T("clean"), pairs[k].clean, max_chars=2000, key=f"hs_clean_{name}_{k}")
            corrupt = c[2].text_input(T("corrupt"), pairs[k].corrupt, max_chars=2000, key=f"hs_corrupt_{name}_{k}")
            answers = None
            if tm.kind == "causal":
                c = st.columns(2)
                default = pairs[k].answers or ("", "")
                a = c[0].text_input(
                    T("answer_clean"), default[0], max_chars=50, key=f"hs_a_{name}_{k}", help=T("answer_help")
                )
                b = c[1].text_input(T("answer_corrupt"), default[1], max_chars=50, key=f"hs_b_{name}_{k}")
                answers = (a, b) if a.strip() and b.strip() else None
            run = lambda tick: view.patching_numbers(tm, clean, corrupt, answers, progress=tick)  # noqa: E731
            ui.show_result(view.patching_words(tm, pooled(("patching", name, clean, corrupt, answers), run), lang=LANG))
        else:
            text = st.text_area(T("text"), T("text_default"), max_chars=20_000, key="hs_text", height=80)
            if not text.strip():
                st.warning(T("empty"))
                return
            if choice == "importance":
                c = st.columns(2)
                held = model_facts.say("head_science", "heldout_help", tm, LANG)  # the windows, to this model
                heldout = c[0].toggle(T("heldout"), key="hs_heldout", help=held)
                mode = c[1].radio(
                    T("mode"),
                    ("zero", "mean"),
                    format_func=lambda m: T(f"mode_{m}"),
                    horizontal=True,
                    key="hs_mode",
                )
                run = lambda tick: view.importance_numbers(tm, text, heldout=heldout, mode=mode, progress=tick)  # noqa: E731
                numbers = pooled(("importance", name, text, heldout, mode), run)
                result = view.importance_words(tm, numbers, lang=LANG)
                picked = ui.show_result(result, clickable=True)
                keys = (f"hs_layer_{name}", f"hs_head_{name}")
                if picked and picked != st.session_state.get("hs_picked"):  # a new click opens that cell's head
                    st.session_state["hs_picked"] = picked
                    st.session_state.update(zip(keys, map(int, picked)))
                for key, value in zip(keys, result.focus):
                    st.session_state.setdefault(key, int(value))  # first the head with the largest effect
                st.subheader(T("pattern_header"))
                st.caption(T("click_hint"))
                c = st.columns(2)
                layer = c[0].number_input(T("layer"), 0, len(tm.model.blocks) - 1, key=keys[0])
                head = c[1].number_input(T("head"), 0, tm.config.num_heads - 1, key=keys[1])
                at = (name, text, int(layer), int(head))  # 64 KB at 128 tokens: a language switch only redraws
                pattern = memo(at, lambda: view.pattern_numbers(tm, *at[1:]), "patterns", 64)
                panel = view.pattern_words(pattern, lang=LANG)
                ui.show_figure(panel.figure, panel.key, panel.data)
            elif choice == "lens":
                options = view.LENS_QUANTITIES if tm.kind == "causal" else ("cosine",)
                option = st.radio(
                    T("quantity"), options, format_func=lambda q: T(f"quantity_{q}"), horizontal=True, key="hs_quantity"
                )
                numbers = memo(("lens", name, text), lambda: view.lens_numbers(tm, text))  # every quantity's
                ui.show_result(view.lens_words(tm, numbers, option, lang=LANG))
            elif choice == "taxonomy":
                option = st.radio(
                    T("score"), hs.SCORES, format_func=lambda s: T(f"score_{s}"), horizontal=True, key="hs_score"
                )
                numbers = memo(("taxonomy", name, text), lambda: view.taxonomy_numbers(tm, text))  # every score's
                ui.show_result(view.taxonomy_words(tm, numbers, option, lang=LANG))
            else:
                numbers = memo(("attribution", name, text), lambda: view.attribution_numbers(tm, text))
                ui.show_result(view.attribution_words(tm, numbers, lang=LANG))


st.title(ui.page_title("head_science"))
st.markdown(T("intro"))
# A bundled model first: ablating SmolLM2's 270 heads takes minutes on 2 cores (it stays one click away).
st.session_state.setdefault("hs_model", next(n for n in models.available_models("text") if models.REGISTRY[n].bundled))
name = ui.text_model_picker(T("model"), "hs_model", extra=models.available_models("moe"))
if name is None:
    st.stop()
views(name)
