"""What a page may say about "the model", read from the selected model: its name, training text, norm, how its
heads share key/value projections, its context and the page's token cap with the cap's reason.

The one place these facts are put into words: a page's prose about its model is a locale string formatted with
:meth:`Facts.fields` (through :func:`say`), so no sentence describes one bundled model while another is selected.
:data:`PROSE` names every such string; ``tests/test_prose_models.py`` renders each for every text model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import cache

from tx_explorer.analysis.head_science import HELDOUT_FILE
from tx_explorer.analysis.heads import MAP_BUDGET, MAX_TOKENS, max_tokens
from tx_explorer.families.text import TextModel
from tx_explorer.views import texts
from tx_explorer.viz import style

PAGE = "model_facts"
NORMS = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}  # the names the lecture and the papers write
# Page → (the model kind its picker offers, or "" for every kind; the locale keys formatted with the facts).
PROSE: dict[str, tuple[str, tuple[str, ...]]] = {
    "language_model": ("causal", ("model_intro", "truncated")),
    "multihead": ("", ("model_caption", "truncated")),
    "block_roles": (
        "causal",
        ("probe_intro", "probe_intro_sandwich", "probe_intro_after", "probe_intro_post", "stage_norm", "verdict_ok"),
    ),
    "head_science": ("", ("heldout_help",)),
}


@dataclass(frozen=True)
class Facts:
    """One model's facts as the words a sentence takes (every field a string, formatted for ``lang``)."""

    model: str  # its name as the picker shows it
    norm: str  # LayerNorm or RMSNorm
    layers: str
    heads: str  # query heads per layer
    kv: str  # key/value heads per layer
    context: str  # the longest input it was built for
    cap: str  # tokens the text pages keep: the context, or fewer so that every attention map fits
    why: str  # why the cap is what it is
    corpus: str  # a sentence: what text it was trained on, from its training record, or that none is recorded
    heldout: str  # what the held-out reference windows are to this model
    qkv: str  # a sentence: which heads have their own W_Q, W_K, W_V

    def fields(self) -> dict[str, str]:
        return asdict(self)


@cache
def _heldout_corpus() -> str:
    """The SHA-256 of the corpus the held-out windows (``data/heldout_text.json``) were taken from."""
    return json.loads(HELDOUT_FILE.read_text(encoding="utf-8"))["corpus_sha256"]


def cap(tm: TextModel) -> tuple[int, str]:
    """(tokens a text page keeps with every map, the reason's key): the context, the pages' limit, or the maps'
    memory budget (:func:`tx_explorer.analysis.heads.max_tokens`)."""
    limit = max_tokens(tm)
    if tm.max_len <= limit:
        return tm.max_len, "cap_context"
    return limit, "cap_pages" if limit == MAX_TOKENS else "cap_maps"


def facts(tm: TextModel, lang: str = "en") -> Facts:
    """The facts of ``tm`` in ``lang``: read from its config and its training record, never typed."""
    T, cfg = texts(PAGE, lang), tm.config
    heads, kv = cfg.num_heads, cfg.kv_heads
    base = {"model": tm.name, "layers": str(cfg.num_layers), "heads": str(heads), "kv": str(kv)}
    limit, reason = cap(tm)
    budget = f"{MAP_BUDGET * 4 / 1e6:.0f}"  # float32 maps
    why = T(reason, **base, context=f"{tm.max_len:,}", cap=f"{limit:,}", most=f"{MAX_TOKENS:,}", mb=budget)
    corpus = tm.info.get("corpus")
    if corpus:
        packages = T("comma").join(re.findall(r"\b([a-z][\w-]*) \d[\w.]*", corpus["source"]))  # "torch 2.14.1, …"
        said = T(
            "corpus_ours_packages" if packages else "corpus_stdlib",  # data/corpus.py: the stdlib, + packages
            **base,
            mb=f"{corpus['characters'] / 1e6:.2f}",
            documents=f"{corpus['documents']:,}",
            packages=packages,
        )
    else:
        said = T("corpus_unrecorded", **base)
    own = bool(corpus) and corpus["sha256"] == _heldout_corpus()
    sharing = "qkv_mha" if kv == heads else "qkv_mqa" if kv == 1 else "qkv_gqa"
    return Facts(
        **base,
        norm=NORMS[cfg.norm],
        context=f"{tm.max_len:,}",  # 8,192 and 32,768: separated as every count on the pages
        cap=f"{limit:,}",
        why=why,
        corpus=said,
        heldout=T("heldout_own" if own else "heldout_other", **base),
        qkv=T(sharing, **base, group=str(heads // kv)),
    )


def say(page: str, key: str, tm: TextModel, lang: str = "en", **more: object) -> str:
    """The string ``key`` of ``page`` formatted with the facts of ``tm`` (and ``more``: the page's own numbers)."""
    return texts(page, lang)(key, **facts(tm, lang).fields(), **more)


def named(tm: TextModel, lang: str = "en") -> str:
    """``tm``'s name in bold with its family beside it ("**my-bert** (bert)"), or alone where the name already says
    it (a folder named after its family: "**bert**", not "**bert** (bert)")."""
    family = str(tm.info.get("model_type", tm.kind))
    key = "named" if family.lower() in tm.name.lower() else "named_family"
    return texts(PAGE, lang)(key, model=tm.name, family=family)


def layer_names(tm: TextModel, lang: str = "en") -> list[str]:
    """Each layer's name for a picker or a per-layer axis: its index, with its kind beside a global layer of a model
    of local and global layers ("5 · global"), as the layers × heads figures name their rows."""
    return style.marked([str(i) for i in range(tm.config.num_layers)], layer_marks(tm.config.global_layers, lang))


def layer_marks(global_layers: Iterable[int], lang: str = "en") -> dict[int, str]:
    """A word beside each of ``global_layers`` (a config's :attr:`~TransformerConfig.global_layers`) in a layers ×
    heads figure: Gemma 3's 5, 11 and 17 see every token, its other layers their last 512."""
    word = texts(PAGE, lang)("global_layer")
    return {layer: word for layer in global_layers}
