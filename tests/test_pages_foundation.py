"""The four foundation pages through AppTest: first load, one interaction each, and bad input."""

import ast
import re
import string
from pathlib import Path

import pytest

from tests.conftest import assert_clean, open_page, plotly_specs, plotly_titles
from tx_explorer import locales

PAGES = ["home", "operator", "self_attention", "masks"]
ROOT = Path(__file__).resolve().parent.parent


def titles(at) -> list[str]:
    return plotly_titles(at)  # as written: a title wraps to the narrowest window's width


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def metric(at, label_start: str) -> float:
    found = [m for m in at.metric if m.label.startswith(label_start)]
    assert found, [m.label for m in at.metric]
    return float(found[0].value.replace("−", "-"))  # a true minus: 2.4e−07


# Static checks on the locale files -----------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_every_string_has_english_and_chinese_with_the_same_placeholders(page):
    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    for key, entry in locales.table(page).items():
        assert entry.get("en", "").strip() and entry.get("zh", "").strip(), key
        assert fields(entry["en"]) == fields(entry["zh"]), key


@pytest.mark.parametrize("page", PAGES)
def test_every_key_a_page_uses_exists(page):
    source = (ROOT / "pages" / f"{page}.py").read_text(encoding="utf-8")
    table = locales.table(page)
    literal = set(re.findall(r'\bT\("([a-z0-9_]+)"', source))
    assert literal and literal <= set(table), literal - set(table)
    for prefix in re.findall(r'\bT\(f"([a-z0-9_]+)\{', source):  # T(f"kind_{k}"): some key has the prefix
        assert any(k.startswith(prefix) for k in table), prefix


# First load ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_clean_with_labelled_charts(page):
    at = open_page(page)
    assert_clean(at)
    specs = plotly_specs(at)
    assert specs, "at least one chart on first load"
    for spec in specs:
        if any(trace.get("type") == "heatmap" for trace in spec["data"]):
            layout = spec["layout"]
            assert layout["xaxis"]["title"]["text"] and layout["yaxis"]["title"]["text"], layout.get("title")
    assert at.get("download_button"), "data downloads under the charts"
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert len(plotly_specs(at)) == len(specs)
    assert any("查询" in (spec["layout"]["yaxis"].get("title") or {}).get("text", "") for spec in plotly_specs(at))


# Home ----------------------------------------------------------------------------------------------------------


def lecture_map_size() -> int:
    """How many (section, page) entries pages/home.py lists in its LECTURE table."""
    tree = ast.parse((ROOT / "pages" / "home.py").read_text(encoding="utf-8"))
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "LECTURE")
    return sum(len(pages) for _, pages in ast.literal_eval(table))


def test_home_links_the_pages_and_switches_language():
    at = open_page("home")
    links = [link.proto.page for link in at.get("page_link")]
    assert {"operator", "self_attention", "masks"} <= set(links)
    planned = [m for m in at.markdown if m.value.endswith("(planned)")]
    assert len(links) + len(planned) == lecture_map_size()  # every page of the map: linked, or named as planned
    # The sidebar switch writes st.session_state["lang"] (AppTest drops sidebar widgets after switch_page).
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert at.title[0].value == "Transformer 探索器"
    assert "讲义地图" in at.header[0].value


# Attention operator --------------------------------------------------------------------------------------------


def open_sections(at, *keys: str) -> None:
    """Open sections that open on demand (lazy expanders, closed on a first visit)."""
    for key in keys:
        at.session_state[key] = True
    at.run()


def test_operator_first_visit_draws_the_steps_only():
    at = open_page("operator")
    assert len(plotly_specs(at)) == 6  # Q, K, V and E, A, Y; sections 2–4 open on demand
    open_sections(at, "op_open_qkv", "op_open_sqrt", "op_open_cross")
    assert_clean(at)
    assert len(plotly_specs(at)) == 6 + 2 + 3 + 1  # every chart of the page, as before
    same = re.search(r"with \$X\$ as its context \(§3\.1\).*largest difference \*\*([0-9.e+−-]+)\*\*", markdown(at))
    assert same and float(same.group(1).replace("−", "-")) < 1e-6  # cross-attention with context = X is self-attention


def test_operator_scaling_width_and_replacing_k_or_v():
    at = open_page("operator")
    open_sections(at, "op_open_qkv")
    assert "**0.354**" in markdown(at)  # 1/√8
    assert any(t.startswith("E = QKᵀ/√D [4 × 6]") for t in titles(at))
    assert metric(at, r"$\max\lvert A") == 0.0 and metric(at, r"$\max\lvert Y") > 0  # new V: same weights, new output
    at.toggle(key="scaled").set_value(False).run()
    assert_clean(at)
    assert "**1.000**" in markdown(at)
    assert any(t.startswith("E = QKᵀ [4 × 6]") for t in titles(at))
    at.slider(key="d").set_value(32).run()
    assert "Q [4 × 32]" in titles(at)
    at.radio(key="replace").set_value("K").run()
    assert_clean(at)
    assert metric(at, r"$\max\lvert A") > 0  # new K: new weights


def test_operator_bad_input_reaches_the_user_as_messages():
    at = open_page("operator")
    open_sections(at, "op_open_sqrt", "op_open_cross")
    at.radio(key="source").set_value("edit").run()
    assert_clean(at)
    assert "Q [2 × 3]" in titles(at) and "A = softmax(E) [2 × 3]" in titles(at)
    at.text_area(key="text_Q").set_value("1 2 0\n3 x 1").run()
    assert not at.exception
    assert any("row 2: 'x' is not a number" in e.value for e in at.error)
    at.text_area(key="text_Q").set_value("1 2").run()  # D = 2 against K's D = 3
    assert not at.exception
    assert any("must share their last dimension" in e.value for e in at.error)
    assert plotly_specs(at), "the √D curves and cross-attention still render"
    at.number_input(key="cross_dim").set_value(10).run()
    assert not at.exception
    assert any("does not divide" in e.value for e in at.error)
    at.text_area(key="text_Q").set_value("1 0 0").run()
    at.number_input(key="cross_heads").set_value(5).run()
    assert_clean(at)
    assert "output $Y$ [3, 10]" in markdown(at)  # 3 queries, 7 context vectors: one output per query


# Self-attention and position -----------------------------------------------------------------------------------


def test_self_attention_shuffle_positions_and_word_order():
    at = open_page("self_attention")
    assert len(plotly_specs(at)) == 4  # the shuffle's four maps; word order and encodings open on demand
    open_sections(at, "sa_open_order", "sa_open_enc")
    assert len(plotly_specs(at)) == 4 + 1 + 2
    assert metric(at, "max |F") < 1e-5 and at.success
    assert metric(at, "Positions: none") < 1e-5  # dog bites man = man bites dog, as sets
    assert metric(at, "Positions: sinusoidal") > 1e-3 and metric(at, "Positions: learned") > 1e-3
    before = [m.value for m in at.markdown if m.value.startswith("Shuffled order")]
    at.button(key="shuffle").click().run()
    after = [m.value for m in at.markdown if m.value.startswith("Shuffled order")]
    assert before != after and metric(at, "max |F") < 1e-5
    at.selectbox(key="positions").set_value("sinusoidal").run()
    assert_clean(at)
    assert metric(at, "max |F") > 1e-3 and at.info
    assert any("sine/cosine" in m.value for m in at.markdown)
    at.radio(key="enc_source").set_value("learned").run()
    assert_clean(at)
    assert any("Before training" in m.value for m in at.markdown)


def test_self_attention_bad_input_reaches_the_user_as_messages():
    at = open_page("self_attention")
    open_sections(at, "sa_open_order", "sa_open_enc")
    at.text_input(key="sentence_b").set_value("cat bites man").run()
    assert not at.exception
    assert any("same words" in e.value for e in at.error)
    at.number_input(key="heads").set_value(3).run()
    assert not at.exception
    assert any("does not divide" in e.value for e in at.error)
    at.number_input(key="dim").set_value(15).run()  # 3 heads divide 15, but sinusoids need an even width
    at.selectbox(key="positions").set_value("sinusoidal").run()
    assert not at.exception
    assert any("the width D must be even; D = 15 is odd" in e.value for e in at.error)


# Masks ---------------------------------------------------------------------------------------------------------


def gallery_checks(at) -> list:
    """The gallery's verdicts (the real model's section below has its own)."""
    return [s for s in at.success if "hidden (query, key)" in s.value]


def hidden_counts(at) -> list[int]:
    return [int(re.search(r"all (\d+) hidden", s.value).group(1)) for s in gallery_checks(at)]


def open_tab(at, kind: str) -> None:
    """Choose a mask kind's tab: the tabs are lazy, only the open one computes and draws."""
    at.session_state["mask_kind"] = locales.text("masks", f"kind_{kind}", "en")
    at.run()


def every_tab(at) -> list[int]:
    """Hidden counts of the six mask kinds, each tab opened in turn (the causal one first, as on a first visit)."""
    counts = []
    for kind in ("causal", "padding", "sliding_window", "prefix_lm", "block_diagonal", "custom"):
        open_tab(at, kind)
        assert_clean(at)
        assert len(gallery_checks(at)) == 1 and "exactly 0**" in gallery_checks(at)[0].value
        counts += hidden_counts(at)
    return counts


def test_masks_gallery_window_and_drawn_grid():
    at = open_page("masks")
    # the open tab's two maps and the example, then the real model's: one per kind of layer (Gemma 3's first local
    # and first global layer; one causal layer where Gemma 3 is not installed)
    assert len(gallery_checks(at)) == 1 and len(plotly_specs(at)) - 3 in (1, 2)
    # 10 tokens: causal 45 hidden; padding (7 real) 30; window 3: 100 − 27 = 73; prefix 5: 45 − 10 = 35;
    # blocks 4, 3, 3: 100 − 34 = 66; custom (causal start) 45.
    assert every_tab(at) == [45, 30, 73, 35, 66, 45]
    open_tab(at, "sliding_window")
    at.number_input(key="window_10").set_value(1).run()
    assert_clean(at)
    assert hidden_counts(at) == [90]
    # A tick drawn in the grid: the first query may now also see the last key.
    open_tab(at, "custom")
    edits = {"edited_rows": {0: {"10 tired": True}}, "added_rows": [], "deleted_rows": []}
    at.session_state["custom_causal_10"] = edits
    at.run()
    assert_clean(at)
    assert hidden_counts(at) == [44]
    # Untick the only cell of a row: that query sees nothing, and the page says so.
    at.selectbox(key="custom_start").set_value("diagonal").run()
    at.session_state["custom_diagonal_10"] = {
        "edited_rows": {0: {"1 the": False}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert_clean(at)
    assert any("rows 1 see no key" in w.value for w in at.warning)
    assert hidden_counts(at) == [91]


def test_masks_bad_input_reaches_the_user_as_messages():
    at = open_page("masks")
    open_tab(at, "custom")
    at.selectbox(key="custom_start").set_value("empty").run()
    assert not at.exception
    assert [e.value for e in at.error if "custom mask is empty" in e.value]
    open_tab(at, "block_diagonal")
    assert len(gallery_checks(at)) == 1  # the other masks are unaffected
    at.text_input(key="sizes_10").set_value("3, 3").run()
    assert not at.exception
    assert any("sum to 6 but the sequence has 10" in e.value for e in at.error)
    at.text_input(key="sentence").set_value("   ").run()
    assert not at.exception
    assert any("sentence is empty" in e.value for e in at.error)
    assert "Causal weights for “Attention is very”" in titles(at)  # the lecture's example still shows


def test_masks_tabs_keep_their_inputs_while_another_tab_is_open():
    at = open_page("masks")
    open_tab(at, "padding")
    at.number_input(key="padding_length_10").set_value(4).run()
    open_tab(at, "prefix_lm")
    at.number_input(key="prefix_10").set_value(2).run()
    open_tab(at, "causal")
    open_tab(at, "padding")
    assert at.number_input(key="padding_length_10").value == 4
    assert hidden_counts(at) == [60]  # 4 real tokens of 10: every query sees 4 keys, 10 × 6 hidden
    open_tab(at, "prefix_lm")
    assert at.number_input(key="prefix_10").value == 2


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_self_attention_maps_name_the_head_they_draw_and_render_their_notation(lang):
    import numpy as np

    from tx_explorer.views import self_attention as view

    perm = view.permutation(n=5, dim=8, heads=2, seed=0, kind="none", lang=lang)
    x, shuffled = (p.figure.layout.title.text for p in (perm.weights, perm.weights_shuffled))
    assert re.findall(r"\d+", x) == re.findall(r"\d+", shuffled) == [str(view.SHOWN_HEAD)], (x, shuffled)
    # the head drawn for σ(X) is the same head as for X: its map is X's, permuted (no positions)
    p = perm.check.perm.numpy()
    z, z_shuffled = (np.asarray(panel.figure.data[0].z) for panel in (perm.weights, perm.weights_shuffled))
    np.testing.assert_allclose(z_shuffled, z[p][:, p], atol=1e-6)
    order = view.word_order(a="dog bites man", b="man bites dog", lang=lang)
    assert "y<sub>A</sub>" in order.chart.figure.layout.yaxis.title.text
    assert not re.search(r"[A-Za-z]_[A-Za-z]", order.chart.figure.layout.yaxis.title.text)  # no raw y_A
