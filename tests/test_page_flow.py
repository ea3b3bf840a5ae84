"""AppTest: the information-flow page — the route graph, an edge's three views and a node's read-out on first
load, a click on an edge or a node (as Streamlit reports it) opening that one, the threshold, a post-norm model's
refusal, a sandwich-norm model's routes with the statement that its output norms are frozen, 中文, and the locale
entries."""

from __future__ import annotations

import base64
import re
import string
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer import locales, models
from tx_explorer.views import flow as view

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ("fig_flow_graph", "fig_flow_edge", "fig_flow_views", "fig_flow_lens")


def chart_keys(at) -> list[str]:
    from streamlit.elements.lib.utils import user_key_from_element_id

    return [user_key_from_element_id(e.proto.id) or "" for e in at.get("plotly_chart")]


@pytest.fixture(scope="module")
def page():
    return open_page("flow")


def test_first_load_draws_the_graph_an_edge_and_a_node(page) -> None:
    assert_clean(page)
    assert page.selectbox(key="flow_model").value == view.default_model()
    assert view.default_model() in models.available_models("text", kind="causal")
    assert chart_keys(page) == list(CHARTS)
    graph = plotly_specs(page)[0]
    assert "predicts" in graph["layout"]["title"]["text"]
    assert "<br>" not in graph["layout"]["title"]["text"]  # wrapped to the page's width, not a column's (review)
    clickable = [d for d in graph["data"] if d.get("customdata")]
    assert {d["customdata"][0][0] for d in clickable} == {"edge", "node"}
    captions = [c.value.replace("\\", "") for c in page.caption]
    exact = next(c for c in captions if "rebuild the model's own residual stream" in c)
    relative = re.search(r"at most (\S+) of the largest", exact).group(1)
    assert float(relative.replace("−", "-")) < 1e-5  # the computed check, not a typed number
    assert any("Spearman" in c for c in captions)
    assert len(page.table) == 2  # the heads' three views and the node's logit attribution, whole (few rows)


def test_a_click_on_an_edge_or_a_node_opens_it(page) -> None:
    graph = plotly_specs(page)[0]
    points = {d["customdata"][0][0]: d["customdata"] for d in graph["data"] if d.get("customdata")}
    edge, node = points["edge"][-1], points["node"][-1]
    # What ui.show_figure receives from the browser's selection: the clicked point's customdata.
    page.session_state["flow_picked"] = None
    page.session_state["flow_edge"] = (
        (page.selectbox(key="flow_model").value, page.text_area(key="flow_text").value, len_of(page) - 1),
        tuple(edge[1:]),
    )
    page.run()
    assert_clean(page)
    layer, _, key = edge[1:]
    assert plotly_specs(page)[1]["layout"]["title"]["text"].startswith(f"Block {layer}: {key}:")
    context = page.session_state["flow_edge"][0]
    page.session_state["flow_node"] = (context, tuple(node[1:]))
    page.run()
    assert_clean(page)
    title = plotly_specs(page)[3]["layout"]["title"]["text"].replace("<br>", " ")  # long titles wrap
    assert f"block {node[2]} · {node[3]}:" in title or f"final residual · {node[3]}:" in title, title


def len_of(page) -> int:
    return int(re.search(r"at all (\d+) positions", " ".join(c.value for c in page.caption)).group(1))


def length(array) -> int:
    """A Plotly JSON array's length: a list, or a typed array ``{"dtype", "bdata"}`` (how numpy arrays travel)."""
    if isinstance(array, dict):
        return len(base64.b64decode(array["bdata"])) // np.dtype(array["dtype"]).itemsize
    return len(array)


def test_a_higher_threshold_keeps_fewer_edges(page) -> None:
    count = lambda: sum(  # noqa: E731  (x0, x1, a break) per edge
        length(d["x"]) // 3 for d in plotly_specs(page)[0]["data"] if d.get("mode") == "lines"
    )
    page.slider(key="flow_threshold").set_value(0.01).run()
    low = count()
    page.slider(key="flow_threshold").set_value(0.1).run()
    assert_clean(page)
    assert count() < low
    page.slider(key="flow_threshold").set_value(0.04).run()


def test_a_text_edited_at_its_end_is_analysed_from_the_edit(page, monkeypatch) -> None:
    """The page hands the earlier text's analysis on (its shared start is not rerun, tests/test_flow.py holds the
    numbers): the edited text's graph, its rebuild check within float32's rounding, then the first text again
    (still kept: not analysed again)."""
    handed, analyse = [], view.analyse
    monkeypatch.setattr(
        view, "analyse", lambda tm, text, earlier=None: handed.append(earlier) or analyse(tm, text, earlier)
    )
    box = page.text_area(key="flow_text")
    first = box.value
    for text, last in ((first.rstrip(". ") + " returns", "returns"), (first, None)):
        box.set_value(text).run()
        assert_clean(page)
        title = plotly_specs(page)[0]["layout"]["title"]["text"]
        assert f"Routes to position {len_of(page) - 1} " in title and (last is None or last in title), title
        exact = next(c.value.replace("\\", "") for c in page.caption if "rebuild the model's own" in c.value)
        assert float(re.search(r"at most (\S+) of the largest", exact).group(1).replace("−", "-")) < 1e-5
    assert [earlier is not None for earlier in handed] == [True]


def test_the_text_shown_again_is_the_one_its_edit_starts_from(page, monkeypatch) -> None:
    """The page keeps its last two analyses by use, not by age: the first text shown again after another (kept, not
    analysed) is the newest, so its edit starts from it. Kept by age, the edit started from the other text, and the
    text on screen was the next one dropped (the test above failed when another module had analysed the default
    text earlier in the same process)."""
    box = page.text_area(key="flow_text")
    first = box.value
    for text in ("Short text.", "Another short text.", first, "Short text.", first):  # the last: kept, not analysed
        box.set_value(text).run()
    n_first = len_of(page)
    handed, analyse = [], view.analyse
    monkeypatch.setattr(
        view, "analyse", lambda tm, text, earlier=None: handed.append(earlier) or analyse(tm, text, earlier)
    )
    box.set_value(first.rstrip(". ") + " returns").run()
    assert_clean(page)
    assert [len(earlier.ids) for earlier in handed] == [n_first]
    box.set_value(first).run()


def test_a_position_beyond_the_text_is_refused_then_recovers(page) -> None:
    page.number_input(key="flow_target").set_value(-128).run()
    assert page.error and "outside the text" in page.error[0].value
    page.number_input(key="flow_target").set_value(2).run()
    assert_clean(page)
    assert "Routes to position 2 " in plotly_specs(page)[0]["layout"]["title"]["text"]
    page.number_input(key="flow_target").set_value(-1).run()


def test_every_text_model_of_the_registry(page) -> None:
    """Pre-norm models draw their routes (tiny-moe's experts included), Gemma 3 too, saying that its output norms
    are frozen at this run; a post-norm one is refused with a statement."""
    for name in [*models.available_models("text"), *models.available_models("moe")]:
        page.selectbox(key="flow_model").set_value(name).run()
        assert_clean(page)
        if name == "minilm-l6":
            assert not plotly_specs(page) and "is post-norm" in page.info[0].value
            continue
        assert chart_keys(page) == list(CHARTS), name
        frozen = [i.value for i in page.info if "frozen at this run" in i.value]
        assert bool(frozen) == (name == "gemma3-270m"), name  # the only sandwich-norm model of the registry
    page.selectbox(key="flow_model").set_value(view.default_model()).run()


def test_chinese(page) -> None:
    page.session_state["lang"] = "zh"
    page.run()
    assert_clean(page)
    assert "预测" in plotly_specs(page)[0]["layout"]["title"]["text"]
    assert any("秩相关" in c.value for c in page.caption)
    page.session_state["lang"] = "en"
    page.run()


def test_locale_entries_are_complete_and_used_keys_exist() -> None:
    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    table = locales.table("flow")
    for key, entry in table.items():
        assert entry["en"].strip() and entry["zh"].strip() and fields(entry["en"]) == fields(entry["zh"]), key
    used = set()
    for source in (ROOT / "pages" / "flow.py", ROOT / "tx_explorer" / "views" / "flow.py"):
        text = source.read_text(encoding="utf-8")
        used |= set(re.findall(r'\bT\(\s*"([a-z0-9_]+)"', text))
        used |= {f"{p}_header" for p in re.findall(r'ui\.section\(T, "(\w+)"', text)}
    assert used <= set(table), used - set(table)
