"""AppTest: the multi-head, language-model and model-size pages, on first load, after interactions and on bad input."""

from __future__ import annotations

import re

import pytest
from conftest import assert_clean, open_page, plotly_specs
from streamlit.runtime.state.common import user_key_from_element_id

from tx_explorer import locales, models

LONG = "All work and no play makes the parser a dull boy. " * 200  # 10 000 characters
SCRIPT = "<script>alert('x')</script> <b>bold</b> & done"
EMOJI = "Parsing 🤗 emoji 🚀 and 漢字 works too."


def _codes(at) -> list[str]:
    return [c.value for c in at.code]


def _strip(at) -> list[str]:
    """The tokens of the page's first code block, a strip of ‹token› ‹token› … (views.token_strip)."""
    return re.findall(r"‹(.*?)›(?= ‹|$)", _codes(at)[0])


@pytest.fixture(scope="module")
def multihead():
    return open_page("multihead")


LM_SECTIONS = ("lm_open_embed", "lm_open_loss", "lm_open_gen")  # open on demand (lazy expanders)


@pytest.fixture(scope="module")
def language_model():
    """The language-model page with every section open."""
    at = open_page("language_model")
    for key in LM_SECTIONS:
        at.session_state[key] = True
    return at.run()


VIEW_CHARTS = {"grid": 1, "head": 2, "search": 5, "compare": 7, "qk": 6}  # the figures each view shows


def test_multihead_first_load(multihead) -> None:
    assert_clean(multihead)
    specs = plotly_specs(multihead)
    assert len(specs) == 1  # only the chosen view (the grid) is built and sent
    grid = specs[0]["data"][0]
    assert grid["type"] == "image" and grid["source"].startswith("data:image/png;base64,")  # quantised thumbnails
    default = models.available_models("text")[0]  # the real LLM, SmolLM2, where its package is installed
    assert multihead.selectbox(key="mh_model").value == default == "smollm2-135m-instruct"
    assert {"tiny-gpt", "tiny-llama"} <= set(multihead.selectbox(key="mh_model").options)


@pytest.mark.parametrize("view", list(VIEW_CHARTS))
def test_multihead_builds_only_the_chosen_view(multihead, view: str) -> None:
    multihead.segmented_control(key="mh_view").set_value(view).run()
    assert_clean(multihead)
    assert len(plotly_specs(multihead)) == VIEW_CHARTS[view]


@pytest.mark.parametrize("lens", ["norm", "rollout"])
def test_multihead_lenses(multihead, lens: str) -> None:
    multihead.segmented_control(key="mh_view").set_value("head").run()
    raw = plotly_specs(multihead)[0]["data"][0]["z"]
    multihead.radio(key="mh_lens").set_value(lens).run()
    assert_clean(multihead)
    assert plotly_specs(multihead)[0]["data"][0]["z"] != raw
    multihead.radio(key="mh_lens").set_value("raw").run()


def test_multihead_heads_and_inspector(multihead) -> None:
    multihead.segmented_control(key="mh_view").set_value("compare").run()
    multihead.selectbox(key="mh_a").set_value(3)
    multihead.selectbox(key="mh_b").set_value(7)
    multihead.radio(key="mh_metric").set_value("previous").run()
    assert_clean(multihead)
    multihead.segmented_control(key="mh_view").set_value("head").run()
    multihead.selectbox(key="mh_focus").set_value(2).run()
    assert_clean(multihead)
    multihead.segmented_control(key="mh_view").set_value("qk").run()
    multihead.selectbox(key="qk_head").set_value(2)
    multihead.selectbox(key="qk_query").set_value(0).run()
    assert_clean(multihead)
    assert len(multihead.table) == 1  # the four matrix multiplications
    check = next(m.value for m in multihead.markdown if "checked (§2.4)" in m.value)  # k = x·W_K, v = x·W_V
    assert "float32 rounding" in check and "Query heads 0, 1, 2 all read these columns" in check  # SmolLM2's group 0
    dims = [s["layout"]["xaxis"] for s in plotly_specs(multihead) if "d0" in s["layout"]["xaxis"].get("ticktext", [])]
    assert len(dims) == 4 and all(x["ticktext"][:2] == ["d0", "d4"] for x in dims)  # 64 dims, every 4th: no overlap
    multihead.segmented_control(key="mh_view").set_value("grid").run()


def _shape(array: list | dict) -> str:
    """The shape of an array as Plotly gets it: nested lists (viz.sent), or a typed array too large for lists
    (``{"dtype", "bdata", "shape"}``, no shape when 1-D)."""
    import base64

    import numpy as np

    if isinstance(array, list):
        return ", ".join(map(str, np.shape(array)))
    return array.get("shape") or str(len(base64.b64decode(array["bdata"])) // np.dtype(array["dtype"]).itemsize)


def _search(at, **widgets) -> None:
    """Open the head search and set its widgets (key → value), then run."""
    at.segmented_control(key="mh_view").set_value("search")
    for key, value in widgets.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception


def test_multihead_search_ranks_every_head_by_a_query_and_a_key(multihead) -> None:
    n = len(_strip(multihead))
    _search(multihead, mh_search="pair", mh_query=n - 1, mh_key=3, mh_skip=True)
    assert_clean(multihead)
    table = multihead.table[0].value
    assert len(table) == 10 and table.iloc[:, 1].is_monotonic_decreasing  # the ten best of 270 heads
    best = table.iloc[0, 0]
    assert any(c.value.startswith("Best head: layer") for c in multihead.caption)
    specs = plotly_specs(multihead)
    heat = specs[1]["data"]  # the text, then every head's weight as a layers × heads heatmap with click markers
    assert _shape(heat[0]["z"]) == "30, 9" and _shape(heat[1]["customdata"]) == "270, 2"  # [layer, head] each
    assert any(best in t for t in heat[1]["text"])
    assert specs[0]["data"][0]["type"] == "bar" and _shape(specs[0]["data"][0]["customdata"]) == str(n)  # tokens
    assert specs[0]["layout"]["title"]["text"].count(" H") == 3  # the text through the three best heads, averaged
    multihead.selectbox(key="mh_through").select_index(1).run()  # the best head alone
    assert plotly_specs(multihead)[0]["layout"]["title"]["text"].count(" H") == 1
    multihead.selectbox(key="mh_through").select_index(0).run()
    _search(multihead, mh_query=2, mh_key=3)  # a key after the query
    assert any("cannot look ahead" in e.value for e in multihead.error)
    assert len(plotly_specs(multihead)) == 1  # the text stays, to pick another token
    multihead.session_state["mh_asked"] = {"mh_view": "head", "mh_layer": 17, "mh_head": 3}  # what a click asks
    multihead.run()
    assert multihead.segmented_control(key="mh_view").value == "head"
    assert "Layer 17, head 3" in plotly_specs(multihead)[0]["layout"]["title"]["text"]
    _search(multihead, mh_query=n - 1)
    assert_clean(multihead)


def test_multihead_repeat_puts_an_induction_head_on_top_on_smollm2(multihead) -> None:
    multihead.toggle(key="mh_repeat").set_value(True)
    _search(multihead, mh_search="pattern", mh_pattern="induction", mh_skip=True)
    assert_clean(multihead)
    tokens = _strip(multihead)
    assert tokens[: len(tokens) // 2] == tokens[len(tokens) // 2 + 1 :]  # written twice, a newline between
    said = next(c.value for c in multihead.caption if c.value.startswith("Best head for"))
    assert float(said.rstrip(".").split("scoring ")[1]) >= 0.8, said  # the bar
    assert any("after the first copy" in c.value for c in multihead.caption)
    multihead.toggle(key="mh_repeat").set_value(False).run()
    assert_clean(multihead)


def test_multihead_compare_draws_every_number_as_a_layers_by_heads_heatmap(multihead) -> None:
    multihead.segmented_control(key="mh_view").set_value("compare").run()
    for metric in ("entropy", "induction"):
        multihead.radio(key="mh_metric").set_value(metric).run()
        assert_clean(multihead)
        heat = plotly_specs(multihead)[0]["data"]
        assert heat[0]["type"] == "heatmap" and _shape(heat[0]["z"]) == "30, 9"
        assert _shape(heat[1]["customdata"]) == "270, 2"
        assert "key/value head" in heat[1]["text"][0]


def _columns_around(node, key: str, columns: int = 1) -> int | None:
    """How many columns share the row of the chart ``fig_<key>`` (1: the chart is not in a row of columns)."""
    if getattr(node, "type", "") == "plotly_chart" and node.proto.id.endswith(f"fig_{key}"):
        return columns
    kids = getattr(node, "children", None) or {}
    row = sum(type(k).__name__ == "Column" for k in kids.values())
    for kid in kids.values():
        if (found := _columns_around(kid, key, row if type(kid).__name__ == "Column" else columns)) is not None:
            return found
    return None


def test_multihead_compares_two_heads_at_half_the_page_each(multihead) -> None:
    """Three maps a row left each 50 px of plot beside its labels and colour bar, its key labels one block."""
    multihead.segmented_control(key="mh_view").set_value("compare").run()
    assert_clean(multihead)
    for key in ("mh_pair_a", "mh_pair_b", "mh_pair_diff"):
        assert _columns_around(multihead._tree, key) == 2, key


@pytest.mark.parametrize("text", ["", "   \n  "])
def test_multihead_empty_input_warns(multihead, text: str) -> None:
    multihead.text_area(key="mh_text_example_code").set_value(text).run()
    assert not multihead.exception and not multihead.error
    assert any("empty" in w.value for w in multihead.warning)


def test_multihead_long_input_is_truncated_with_notice(multihead) -> None:
    from tx_explorer.analysis.heads import max_tokens
    from tx_explorer.model_cache import shared_model

    multihead.text_area(key="mh_text_example_code").set_value(LONG).run()
    assert_clean(multihead)
    cap = max_tokens(shared_model(multihead.selectbox(key="mh_model").value))  # SmolLM2's 270 heads: 373
    assert cap == 373
    assert any(f"only the first {cap} tokens" in w.value for w in multihead.warning)
    assert len(_strip(multihead)) == cap


def test_multihead_html_and_emoji_are_literal(multihead) -> None:
    for text in (SCRIPT, EMOJI):
        multihead.text_area(key="mh_text_example_code").set_value(text).run()
        assert_clean(multihead)
    multihead.text_area(key="mh_text_example_code").set_value(SCRIPT).run()
    tokens = _strip(multihead)
    assert "".join(tokens).replace("▁", " ") == SCRIPT  # every character shown, in a code block, never rendered
    assert all("<script>" not in m.value for m in multihead.markdown)


@pytest.mark.skipif("minilm-l6" not in models.available_models("text"), reason="MiniLM package not installed")
def test_multihead_encoder_with_special_tokens_hidden() -> None:
    at = open_page("multihead")
    at.selectbox(key="mh_model").set_value("minilm-l6").run()
    assert_clean(at)
    assert _strip(at)[0] == "[CLS]"
    full = plotly_specs(at)[0]
    at.toggle(key="mh_hide").set_value(True).run()
    assert_clean(at)
    hidden = plotly_specs(at)[0]
    assert hidden["layout"]["xaxis"]["tickvals"] != full["layout"]["xaxis"]["tickvals"] or hidden != full
    at.text_area(key="mh_text_example_code").set_value(LONG).run()  # 2 000+ WordPiece tokens → 512
    assert_clean(at)
    assert any("only the first 512 tokens" in w.value for w in at.warning)
    assert "max-pooled" in plotly_specs(at)[0]["layout"]["title"]["text"]
    for view, budget in (("grid", 1e6), ("head", 4e6), ("compare", 4e6), ("qk", 2e6)):  # bytes of chart JSON
        at.segmented_control(key="mh_view").set_value(view).run()
        assert_clean(at)
        sent = sum(len(el.proto.spec.encode()) for el in at.get("plotly_chart"))
        assert sent <= budget, f"{view}: {sent / 1e6:.1f} MB of chart data at 512 tokens"


def test_language_model_first_visit_draws_the_open_sections_only() -> None:
    at = open_page("language_model")
    assert_clean(at)
    assert len(plotly_specs(at)) == 3  # the mask, its weights, the next token; the rest opens on demand
    assert not at.get("expander")[0].children  # embeddings: closed, nothing computed or sent


def test_language_model_first_load(language_model) -> None:
    assert_clean(language_model)
    assert len(plotly_specs(language_model)) >= 6  # embeddings, mask, weights, next token, losses, generation ×2
    assert any(": 0." in s.value for s in language_model.success)  # nothing above the diagonal: an exact 0
    assert any("does not change what came before" in s.value for s in language_model.success)  # §6, prefix


def test_perplexity_is_written_as_maths_with_the_pages_word_for_loss() -> None:
    """$e^{\\text{loss}}$ in KaTeX, its exponent the word each language calls the loss (损失 in 中文, not English):
    review 3."""
    for lang in ("en", "zh"):
        word = locales.text("language_model", "loss", lang)
        assert f"$e^{{\\text{{{word}}}}}$" in locales.text("language_model", "loss_intro", lang)


def _chat(lang: str = "en"):
    at = open_page("language_model")
    at.session_state["lang"] = lang
    at.session_state["lm_open_chat"] = True
    return at.run()


def _turns(at) -> list[str]:
    """The conversation's messages as the page shows them: user, reply, user, reply …"""
    return [el.value for m in at.get("chat_message") for el in m.children.values() if el.type in ("text", "code")]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_language_model_chat_answers_the_default_message_and_says_why_it_stopped(lang: str) -> None:
    at = _chat(lang)
    assert_clean(at)
    turns = _turns(at)
    assert len(turns) == 2 and "Paris" in turns[1]  # "The capital of France is Paris."
    prompt, tokens = _codes(at)[-2:]  # what the model read for the last reply, as text and as tokens
    assert prompt.startswith("<|im_start|>system") and prompt.rstrip().endswith("<|im_start|>assistant")
    assert tokens.split(" ")[0] == "‹<|im_start|>›"
    stop = {"en": "Stopped by the model", "zh": "由模型停止"}[lang]
    assert any(stop in c.value for c in at.caption)
    assert {"fig_lm_chat_read", "fig_lm_chat_rows"} <= set(_chart_keys(at))  # what a reply token read
    at.run()
    assert _turns(at) == turns  # a rerun shows the conversation again without a new turn


def _chart_keys(at) -> list[str]:
    return [user_key_from_element_id(el.proto.id) or "" for el in at.get("plotly_chart")]


def test_language_model_chat_keeps_two_turns_reads_the_first_and_says_the_limit_stopped_the_second() -> None:
    at = _chat()
    first = _turns(at)
    at.slider(key="lm_chat_new").set_value(5)
    at.text_input(key="lm_chat").set_value("Tell me a long story about a lighthouse keeper.").run()
    assert_clean(at)
    turns = _turns(at)
    assert turns[:2] == first and len(turns) == 4 and turns[2].startswith("Tell me a long story")
    assert any("Stopped by the model" in c.value for c in at.caption)  # the first reply, still said
    assert any("Stopped at the limit of 5 new tokens" in c.value for c in at.caption)
    prompt = _codes(at)[-2]
    assert "Paris" in prompt and prompt.count("<|im_start|>user") == 2  # the first turn is part of the prompt
    said = next(c.value for c in at.caption if "were served by the cache" in c.value)  # but kept, not read again
    served, read = map(int, re.match(r"(\d+) of them were served .*; (\d+) were read", said).groups())
    assert served > prompt.count("<|im_start|>") * 2 and 0 < read < served  # every earlier turn, your message anew
    shares = [m.value for m in at.metric]
    assert len(shares) == 3 and all(v.endswith("%") for v in shares)
    at.selectbox(key="lm_chat_token").set_value(4)  # the fifth reply token: a step that read the reply so far
    at.selectbox(key="lm_chat_layer").set_value(3)
    at.selectbox(key="lm_chat_head").set_value(2).run()
    assert_clean(at)
    assert [m.value for m in at.metric] != shares
    at.button(key="lm_chat_clear").click().run()  # a new conversation: nothing kept, an empty box, no error
    assert_clean(at)
    assert _turns(at) == [] and at.text_input(key="lm_chat").value == "" and not at.metric
    at.text_input(key="lm_chat").set_value("Name a colour.").run()
    assert_clean(at)
    assert len(_turns(at)) == 2 and "Paris" not in _codes(at)[-2]
    at.text_input(key="lm_chat").set_value("").run()
    assert_clean(at)  # an empty message: what to do next, in the user's language, not an error
    assert any("Write a message" in i.value for i in at.info)


def test_language_model_chat_samples_the_same_reply_with_the_same_seed() -> None:
    at = _chat()
    at.radio(key="lm_chat_method").set_value("top_k").run()  # temperature and k are live for top-k only
    at.slider(key="lm_chat_temp").set_value(1.5)
    at.number_input(key="lm_chat_seed").set_value(11)
    at.slider(key="lm_chat_new").set_value(12)
    replies = []
    for _ in range(2):  # the same message opening a new conversation: the same prompt, the same seed
        at.button(key="lm_chat_clear").click().run()
        at.text_input(key="lm_chat").set_value("Write a haiku about rain.").run()
        assert_clean(at)
        replies.append(_turns(at)[-1])
    assert replies[0] == replies[1]
    at.number_input(key="lm_chat_seed").set_value(12)
    at.button(key="lm_chat_clear").click().run()
    at.text_input(key="lm_chat").set_value("Write a haiku about rain.").run()
    assert _turns(at)[-1] != replies[0]  # another seed, another reply: the check above can fail


def test_language_model_chat_drops_the_oldest_turns_and_says_so() -> None:
    from tx_explorer.views.language_model import Turn

    at = open_page("language_model")
    long = "The lighthouse keeper wrote down every ship that passed the rocks at night. " * 6
    at.session_state["lm_chat_turns"] = {
        "smollm2-135m-instruct": [Turn(f"Story {i}: {long}", long, "end_of_turn", 48) for i in range(3)]
    }
    at.session_state["lm_open_chat"] = True
    at.session_state["lm_chat_sent"] = "What is the capital of France?"  # the default message: answered
    at.run()
    at.text_input(key="lm_chat").set_value("Which ship came last?").run()
    assert_clean(at)
    said = [w.value for w in at.warning]
    assert any("the oldest 2 turns are left out" in w for w in said), said
    prompt = _codes(at)[-2]
    assert "Story 2" in prompt and "Story 1" not in prompt and len(_turns(at)) == 8  # all four shown, two read


def test_language_model_prefix_invariance_in_chinese() -> None:
    at = open_page("language_model")
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert any("追加 token 不会改变前面的结果" in s.value for s in at.success)


def test_language_model_generation_controls(language_model) -> None:
    at = language_model
    first = _codes(at)[-1]
    at.radio(key="lm_method").set_value("top_k").run()  # k is disabled until top-k is chosen
    at.number_input(key="lm_topk").set_value(5)
    at.number_input(key="lm_seed").set_value(3).run()
    assert_clean(at)
    again = _codes(at)[-1]
    at.run()
    assert _codes(at)[-1] == again  # same seed, same text
    at.radio(key="lm_method").set_value("greedy").run()
    assert _codes(at)[-1] == first  # the default is greedy
    at.slider(key="lm_step").set_value(5)
    at.selectbox(key="lm_gen_head").set_value(1)
    at.slider(key="lm_pos").set_value(1).run()
    assert_clean(at)


def test_language_model_generated_token_keeps_its_nearest_value(language_model) -> None:
    """Lowering "New tokens" below the "Generated token" shown moves it to the nearest one left, and a change that
    leaves it in range keeps it (review B: both reset it to 1, since a slider whose bounds change starts anew)."""
    at = language_model
    at.slider(key="lm_step").set_value(at.slider(key="lm_new").value).run()
    at.slider(key="lm_new").set_value(5).run()
    assert_clean(at)
    assert at.slider(key="lm_step").value == 5
    at.slider(key="lm_new").set_value(12).run()
    assert at.slider(key="lm_step").value == 5
    at.slider(key="lm_new").set_value(24).run()


def test_language_model_generation_fits_a_short_context(tmp_path, monkeypatch) -> None:
    """A checkpoint of 16 tokens' context and a 40-word text (review B): "New tokens" tops at 15 and starts at 8,
    and the prompt keeps its last 8 tokens to make room, as the page says; no error naming max_new_tokens."""
    from tests.checkpoints import write_checkpoint
    from tx_explorer import paths, ui

    folder = tmp_path / "roots" / "qwen-ctx16"
    write_checkpoint(folder, "qwen2", max_position_embeddings=16)
    monkeypatch.setenv(paths.ENV_ROOTS, str(tmp_path / "roots"))
    monkeypatch.setenv(paths.ENV_CONFIG, str(tmp_path / "absent.toml"))
    text = " ".join(["The cat sat on the mat because it was tired."] * 4)  # 40 words
    at = open_page("language_model", lm_model=ui.FOLDER, lm_model_folder=str(folder), lm_open_gen=True, lm_text=text)
    assert_clean(at)
    new = at.slider(key="lm_new")
    assert (new.max, new.value) == (15, 8)
    said = [w.value for w in at.warning]
    assert any("only the first 16 tokens are used" in w for w in said), said
    assert any("only the last 8 prompt tokens are kept to make room for 8 new ones" in w for w in said), said
    new.set_value(15).run()  # the top: one prompt token left
    assert_clean(at)
    assert any("to make room for 15 new ones" in w.value for w in at.warning)


def test_language_model_says_a_base_model_has_no_chat_and_names_one_that_has() -> None:
    """A base model (Gemma 3 270M, tiny-gpt) has no chat template: the chat section's heading stays, with a line
    saying why there is no chat and which loaded model has one (review B: the section vanished without a word)."""
    at = open_page("language_model", lm_model="tiny-gpt")  # as Gemma 3 270M, in a fraction of the time
    assert_clean(at)
    assert locales.text("language_model", "chat_header") in [h.value for h in at.header]
    said = next(i.value for i in at.info if "no chat template" in i.value)
    assert said.startswith("tiny-gpt has no chat template") and said.endswith(": smollm2-135m-instruct.")
    assert "lm_open_chat" not in at.session_state  # no section to open: nothing to chat with


# Empty, blank, emoji and every other odd text are rows of tests/test_bad_input.py; these check what only this page
# shows: the prompt cut to make room for new tokens, markup decoded literally, a one-token prompt.
@pytest.mark.parametrize("text", [LONG, SCRIPT, "a"])
def test_language_model_bad_inputs(language_model, text: str) -> None:
    at = language_model
    at.text_area(key="lm_text").set_value(text).run()
    assert_clean(at)
    if text == LONG:
        from tx_explorer.analysis.heads import max_tokens
        from tx_explorer.model_cache import shared_model

        cap = max_tokens(shared_model(at.selectbox(key="lm_model").value))
        assert any(f"only the first {cap} tokens" in w.value for w in at.warning)
        assert any("last" in w.value for w in at.warning)  # the prompt is cut to make room for new tokens
    if text == SCRIPT:
        assert "<script>" in _codes(at)[-1]  # the decoded prompt, literally


def test_model_sizes_speaks_chinese_in_its_formula_chart_and_prose() -> None:
    """The zh page had the formula's braces, a bar's name and a list run into its sentence in English form."""
    from tx_explorer.views import model_sizes as sizes

    formula = sizes.latex("zh")
    assert not re.search(r"blocks|attention|embedding|positions", formula) and "注意力" in formula
    _, compare = sizes.lecture_table(lang="zh")
    assert compare.figure.data[0].x[0] == "原始 Transformer"
    _, words = sizes.since_2017(lang="zh")
    assert "有偏差的（实际计数 ÷ 公式）有：" in words
    assert "SmolLM2-135M（2024）：0.889；Gemma 3 270M（2025）：1.133。" in words
    assert "对Transformer" not in words
    assert "blocks: " in sizes.latex("en")


def test_model_sizes_page() -> None:
    at = open_page("model_sizes")
    assert_clean(at)
    assert len(plotly_specs(at)) >= 3
    assert any("124,439,808" in s.value for s in at.success)  # the default custom model has GPT-2 small's shape
    table = at.table[0].value  # a table wraps its long cells: a grid cut the configuration and hid our count
    assert list(table.iloc[:, -1]) == ["✓", "✓", "✓"] and "Our exact count" in table.columns
    blocks, fits = at.dataframe[0].value, at.dataframe[1].value  # §5.4: identical blocks; one formula since 2017
    assert len(set(blocks.iloc[:, 1])) == 1 and set(blocks.iloc[:, 2]) == {"✓"} and float(blocks.iloc[1, 3]) > 0
    assert list(fits.iloc[:, -1]) == ["1.000", "1.333", "1.000", "1.000", "0.889", "1.133"]
    at.number_input(key="sizes_heads").set_value(7).run()  # 768 is not divisible by 7
    assert not at.exception
    assert any("divide" in e.value for e in at.error)
    at.number_input(key="sizes_heads").set_value(12)
    at.selectbox(key="sizes_mlp").set_value("swiglu")
    at.toggle(key="sizes_tie").set_value(False)
    at.toggle(key="sizes_share").set_value(False).run()
    assert_clean(at)
