"""Prose that knows its model (issue 40): every sentence a page writes about "the model" is formatted from the
selected model's facts (:mod:`tx_explorer.views.model_facts`), so none describes another model.

Each string of ``model_facts.PROSE`` and each sentence of the facts is rendered for every text model the pages
offer, in both languages, and read for: another model's name, the norm the model does not have, heads with their
own ``W_K, W_V`` on a grouped-query model (or sharing on one without), a token cap other than the one the pages
apply, a training corpus the record does not hold, and English in the 中文 text.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from tests.zh_text import english_words, spaced_chinese
from tx_explorer import locales, model_cache, models
from tx_explorer.analysis.heads import max_tokens
from tx_explorer.families.text import TextModel
from tx_explorer.views import model_facts

ROOT = Path(__file__).resolve().parent.parent
# Every text model of the text pages' pickers (the MoE one is offered beside them); GPT-2 where it is cached.
MODELS = sorted(
    {"tiny-gpt", "tiny-llama", "tiny-moe", "smollm2-135m-instruct", "minilm-l6"}
    | {*models.available_models("text"), *models.available_models("moe")}
)
SHORT = {"smollm2-135m-instruct": "SmolLM2", "minilm-l6": "MiniLM", "gpt2": "GPT-2"}  # how prose names them
TEXT_NAMES = {*SHORT, *(n for n, e in models.REGISTRY.items() if e.family in ("text", "moe"))}
OTHER_NORM = {"layernorm": "RMSNorm", "rmsnorm": "LayerNorm"}
OWN_KV = re.compile(r"own \$?W_Q\$?, \$?W_K|自己的 \$W_Q\$、\$W_K\$")  # every head with its own K and V
SHARED_KV = re.compile(r"shar|共享|共用|grouped-query|分组查询|multi-query|多查询")


def text_model(name: str) -> TextModel:
    loaded = model_cache.shared_model(name)
    return getattr(loaded, "text", loaded)  # the MoE bundle's model is its TextModel


def rendered(tm: TextModel, lang: str) -> dict[str, str]:
    """``{where: text}``: every PROSE string the model's pages show (a page's own numbers given as 7), and the
    facts' sentences."""
    out = {}
    for page, (kind, keys) in model_facts.PROSE.items():
        if kind and tm.kind != kind:
            continue  # the page does not offer it
        for key in keys:
            fields = {f for _, f, _, _ in string.Formatter().parse(locales.text(page, key, lang)) if f}
            own = {f: "7" for f in fields - set(model_facts.Facts.__dataclass_fields__)}
            out[f"{page}.{key}"] = model_facts.say(page, key, tm, lang, **own)
    facts = model_facts.facts(tm, lang)
    out |= {f"facts.{k}": getattr(facts, k) for k in ("why", "corpus", "heldout", "qkv")}
    return out


def problems(tm: TextModel, where: str, text: str, lang: str) -> list[str]:
    """What ``text`` says that ``tm`` contradicts."""
    cfg, found = tm.config, []
    for other in TEXT_NAMES:
        if other != tm.name:
            found += [f"names {n}" for n in {other, SHORT.get(other, other)} if n.lower() in text.lower()]
    if OTHER_NORM[cfg.norm] in text:
        found.append(f"says {OTHER_NORM[cfg.norm]}: {tm.name} uses {model_facts.NORMS[cfg.norm]}")
    if cfg.kv_heads < cfg.num_heads and OWN_KV.search(text):
        found.append(f"every head with its own W_K, W_V: {cfg.num_heads} heads share {cfg.kv_heads}")
    if cfg.kv_heads == cfg.num_heads and SHARED_KV.search(text):
        found.append("heads sharing key/value heads: each has its own")
    if lang == "zh":
        found += [f"English {w}" for w in english_words(text, prose=True)]
        found += [f"a space between Chinese characters: {s!r}" for s in spaced_chinese(text)]
    return [f"{where} ({lang}): {p} in {text!r}" for p in found]


@pytest.mark.parametrize("name", MODELS)
def test_each_page_s_prose_describes_the_model_selected(name):
    tm = text_model(name)
    found = [p for lang in locales.LANGUAGES for k, v in rendered(tm, lang).items() for p in problems(tm, k, v, lang)]
    assert not found, "\n".join(found)

    en, facts = rendered(tm, "en"), model_facts.facts(tm)
    assert tm.name in facts.qkv and tm.name in facts.corpus
    if 1 < tm.config.kv_heads < tm.config.num_heads:  # grouped: the sentence counts the groups
        assert f"its {facts.kv} key/value heads" in facts.qkv
    corpus = tm.info.get("corpus")  # our training record; a pretrained model's files hold none
    if corpus:
        assert f"{corpus['characters'] / 1e6:.2f} MB" in facts.corpus and "trained by this project" in facts.corpus
        own = corpus["sha256"] == json.loads(model_facts.HELDOUT_FILE.read_text(encoding="utf-8"))["corpus_sha256"]
        assert ("own training corpus (never trained on)" in facts.heldout) == own
    else:
        assert "not trained by this project" in facts.corpus and "not " in facts.heldout
    if tm.kind == "causal":
        assert f"after {model_facts.NORMS[tm.config.norm]}" in en["block_roles.stage_norm"]


@pytest.mark.parametrize("name", MODELS)
def test_the_cap_said_is_the_cap_applied_with_its_reason(name):
    tm = text_model(name)
    facts = model_facts.facts(tm)
    long_text = "the quick brown fox jumps over the lazy dog " * 2000  # far beyond every context
    kept = len(tm.encode(long_text, max_tokens(tm)).ids)  # what analysis.heads and analysis.lm keep
    assert facts.cap == f"{kept:,}"  # 8,192: separated as every count on the pages
    said = model_facts.say("multihead", "truncated", tm, n=20_000)
    assert f"at most {kept:,} fit" in said
    if kept < tm.max_len:  # cut below the context: the context is said, and the reason is not the context
        assert f"context is {tm.max_len:,}" in said and model_facts.cap(tm)[1] != "cap_context"
    else:
        assert model_facts.cap(tm)[1] == "cap_context" and "512" not in said.replace(f"{kept:,}", "")


def test_the_checks_catch_the_sentences_issue_40_found():
    """The old sentences, rendered for a grouped-query RMSNorm model, are each caught."""
    tm = text_model("tiny-llama")
    bad = {
        "intro": "The model here is **tiny-gpt**, 6.32 MB of English prose.",
        "stage": "after LayerNorm",
        "heads": "each with its own $W_Q, W_K, W_V$",
        "zh": "讲义说 自注意力 是 token 之间唯一的信息通道，默认 model 是",
    }
    for where, text in bad.items():
        assert problems(tm, where, text, "zh" if where == "zh" else "en"), where
    assert len(problems(tm, "zh", bad["zh"], "zh")) == 3  # two spaces, one English word
    assert problems(text_model("tiny-gpt"), "heads", "4 query heads share 2 key/value heads", "en")


def test_every_prose_string_is_shown_through_the_facts():
    """Each page of PROSE formats its strings with the facts (its page or its view calls model_facts), and each
    key is one the page's locale file holds."""
    for page, (_, keys) in model_facts.PROSE.items():
        source = "".join(
            p.read_text(encoding="utf-8")
            for p in (ROOT / "pages" / f"{page}.py", ROOT / "tx_explorer" / "views" / f"{page}.py")
            if p.exists()
        )
        assert "model_facts" in source, page
        prefixes = re.findall(r'f"([a-z_]+)\{', source)  # T(f"stage_{s}", **facts)
        for key in keys:
            assert key in locales.table(page), (page, key)
            assert f'"{key}"' in source or any(key.startswith(p) for p in prefixes), (page, key)


def test_no_chinese_string_puts_a_space_between_two_chinese_characters():
    found = [
        f"{path.stem}.{key}: {s!r}"
        for path in sorted((ROOT / "tx_explorer" / "locales").glob("*.json"))
        for key, entry in json.loads(path.read_text(encoding="utf-8")).items()
        for s in spaced_chinese(entry.get("zh", ""))
    ]
    assert not found, "\n".join(found)
    assert spaced_chinese("讲义说 自注意力 是 token") == ["说 自", "力 是"]
    assert not spaced_chinese("自注意力是 token 之间 $a b$ “猫 狗” `x y`")  # Latin, LaTeX, quotes, code


def test_the_model_card_names_local_and_global_layers_qk_norm_and_sinks():
    """The line under a model's name says what today's attention does there: Gemma 3's local layers (their window
    and their own rotary θ) and global ones by index, QK-norm, gpt-oss's sinks; a Llama-like model says none of it."""
    from types import SimpleNamespace

    from tx_explorer.config import PRESETS
    from tx_explorer.ui.pickers import architecture_caption

    kinds = ("sliding", "sliding", "full", "sliding", "sliding", "full")
    gemma = PRESETS["tiny-llama"].replace(
        num_layers=6, layer_types=kinds, sliding_window=512, rope_theta=1e6, rope_local_theta=1e4, qk_norm=True
    )
    card = architecture_caption(SimpleNamespace(config=gemma, info={}))
    assert "θ = 10,000 on the local layers, 1,000,000 on the global ones" in card
    assert "a sliding window of 512 tokens on 4 local layers; the global layers (2, 5) see every" in card
    assert "QK-norm" in card and "sinks" not in card
    sinks = architecture_caption(SimpleNamespace(config=PRESETS["tiny-llama"].replace(attention_sinks=True), info={}))
    assert "attention sinks" in sinks and "QK-norm" not in sinks
    plain = architecture_caption(SimpleNamespace(config=PRESETS["tiny-llama"], info={}))
    assert "local" not in plain and "QK-norm" not in plain and "sinks" not in plain and "θ = 10,000)" in plain
