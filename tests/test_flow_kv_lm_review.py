"""A student's review of the information-flow, KV-cache and language-model pages at their edges: verdicts on
tied or empty evidence, counts of one in English, "New tokens" 0, split bytes under the route graph. Function
level, on the bundled tiny models."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tx_explorer import models
from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.views import flow, texts
from tx_explorer.views import kv_cache as kvv
from tx_explorer.views import language_model as lmv

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread

ONE_PLURAL = re.compile(r"(?<![\d.,])1 (?:[a-z]+ )?(?:tokens|positions|nodes|edges|rows)\b")


@pytest.fixture(scope="module")
def llama():
    return hs.text_model(models.load_model("tiny-llama"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_edge_verdict_names_no_leader_among_tied_weights(lang) -> None:
    """At query 0 every head puts weight 1 on key 0: "the largest weight is H0's … would have pointed at the wrong
    head" was a verdict on a tie."""
    T = texts("flow", lang)
    said = flow._verdict(T, np.ones(9), np.array([0.1, -0.2, 0.3, 0, 0, 0, 0, 0, -4.0]), "Δ logit")
    assert said == T("tied_weight", tied=9, heads=9, weight_head=0, weight="1.000", effect_head=8,
                     effect="−4.000", metric="Δ logit")  # fmt: skip
    tied_effect = flow._verdict(T, np.array([0.9, 0.1]), np.zeros(2), "Δ logit")
    assert tied_effect.startswith(T("tied_effect", tied=2, heads=2, metric="Δ logit", effect="+0.000")[:12])
    assert flow._verdict(T, np.array([0.9, 0.1]), np.array([1.0, 0.5]), "m") == T(
        "agree", weight_head=0, weight="0.900", effect_head=0, effect="+1.000", metric="m"
    )


def test_edge_verdict_says_which_two_it_compares() -> None:
    """Only weight and effect are compared: "三者一致" (all three agree) claimed the write norm too."""
    for key in ("agree", "disagree"):
        assert "三者" not in texts("flow", "zh")(key, weight_head=0, weight="", effect_head=1, effect="", metric="")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_graph_counts_of_one_are_singular(lang) -> None:
    T = texts("flow", lang)
    said = T("graph_counts", **{k: flow._count(T, k, 1) for k in ("nodes", "attn", "residual", "mlp")})
    assert not ONE_PLURAL.search(said), said
    assert "1 attention edge," in said if lang == "en" else "1 条注意力边" in said
    many = T("graph_counts", **{k: flow._count(T, k, 2) for k in ("nodes", "attn", "residual", "mlp")})
    assert "2 attention edges" in many if lang == "en" else "2 条注意力边" in many


def test_route_explains_split_bytes(llama) -> None:
    """Chinese in a byte-level tokenizer labels the graph's axis \\xe4 \\xbd …: the page says what they are."""
    an = flow.analyse(llama, "你好")
    notes = flow.route(llama, an, lang="zh").notes
    assert texts("common", "zh")("split_bytes") in notes
    assert (
        texts("common", "en")("split_bytes") not in flow.route(llama, flow.analyse(llama, "hello you"), lang="en").notes
    )


def test_no_new_tokens_writes_none(llama) -> None:
    """ "New tokens" 0 decoded one token anyway (the same as 1)."""
    prompt = kvv.prompt_ids(llama, "The cache keeps")
    none, one = (kv.decode(llama.model, prompt, n) for n in (0, 1))
    assert none.ids == prompt and len(one.ids) == len(prompt) + 1
    assert [s.position for s in none.steps] == list(range(len(prompt)))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_reused_step_is_said_in_the_singular(llama, lang) -> None:
    """A prompt sharing only its first token with the last one: "Steps 0–0 … the same 1 tokens"."""
    first = kv.decode(llama.model, [40, 73, 65], 1)
    again = kv.decode(llama.model, [40, 65, 73], 1, reuse=first)
    assert again.reused == 1
    note = kvv.decoded(llama, again, lang=lang).prompt_note
    assert note == texts("kv_cache", lang)("reused_prompt_one")
    assert "0–0" not in note and not ONE_PLURAL.search(note)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_token_text_gets_no_verdicts(llama, lang) -> None:
    """One token: "the largest weight on a future token: 0" and "the logits of the first 1 positions … exactly zero"
    were green verdicts on nothing (no future token, no appended text)."""
    T = texts("language_model", lang)
    r = lmv.read(llama, "a")
    assert len(r.tokens) == 1
    c = lmv.causal(r, lang=lang)
    assert not c.checked and (c.check, c.prefix) == (T("mask_check_one"), T("prefix_single"))
    title = lmv.embeddings(r, llama.config.dim, lang=lang).figure.layout.title.text
    assert not ONE_PLURAL.search(title), title


def test_two_token_prefix_is_one_position(llama) -> None:
    r = lmv.read(llama, "a b")
    assert (len(r.tokens), r.prefix_len) == (2, 1)
    c = lmv.causal(r)
    assert c.checked and "the first position's logits" in c.prefix and not ONE_PLURAL.search(c.prefix), c.prefix


@pytest.mark.parametrize(("reply", "shown"), [("\n\n", "↵↵"), ("  ", "␣␣"), (" the keys\n", "the keys↵")])
def test_a_continuation_of_blanks_is_shown_not_emptied(reply, shown) -> None:
    """A continuation of newlines was stripped before they became ↵, so the page printed "****" (empty bold)."""
    assert kvv._one_line(reply) == shown
