"""Language modelling page (lecture §6): embeddings, the causal mask, the next-token distribution, per-token loss,
and step-by-step generation with the attention behind each new token."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tx_explorer import masks
from tx_explorer.analysis import lm
from tx_explorer.analysis.heads import max_tokens
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, axes, texts
from tx_explorer.viz import bars as vb
from tx_explorer.viz import charts
from tx_explorer.viz.heatmap import heatmap
from tx_explorer.viz.style import safe_labels

PAGE = "language_model"
METHODS = ("greedy", "temperature", "top_k")
TOP = 15  # next-token candidates shown
LATEX = (
    r"p(x_{t+1}\mid x_1,\dots,x_t)=\mathrm{softmax}(h_t W_{\text{head}}),"
    r"\quad W_{\text{head}}\in\mathbb{R}^{D\times V},"
    r"\qquad \mathcal{L}=-\frac{1}{N-1}\sum_{t}\ln p(x_{t+1}\mid x_{\le t})"
)


def read(tm: TextModel, text: str, k: int = TOP) -> lm.Reading:
    """Tokens, embeddings, every map, the top-k next tokens at each position and the per-token losses."""
    return lm.read(tm, text, k)


def generate(
    tm: TextModel,
    prompt: str,
    new: int = 24,
    method: str = "greedy",
    temperature: float = 0.8,
    top_k: int = 20,
    seed: int = 0,
) -> lm.Generation:
    """``new`` tokens after ``prompt`` (greedy, temperature or top-k sampling), with the maps of every step."""
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; use one of {METHODS}")
    ids = tm.encode(prompt, max_tokens(tm)).ids
    return lm.generate(
        tm,
        ids,
        new,
        greedy=method == "greedy",
        temperature=temperature,
        top_k=top_k if method == "top_k" else None,
        seed=seed,
    )


@dataclass(frozen=True)
class ChatTurn:
    """One user message as the model's chat template writes it: the text the model reads, and its tokens."""

    prompt: str
    ids: list[int]
    tokens: list[str]


def chat_turn(tm: TextModel, message: str) -> ChatTurn:
    """The template's text for one user message (its default system message included, if it writes one)."""
    prompt = tm.chat_prompt([{"role": "user", "content": message}])
    ids = tm.tokenizer.encode(prompt, add_special_tokens=False).ids
    return ChatTurn(prompt, ids, tm.labels(ids))


def chat_replies(tm: TextModel, turn: ChatTurn, new: int) -> Iterator[str]:
    """The reply as it grows, one text per new token (greedy, with our KV cache: one step per token, the prompt
    read once), ending at the template's end-of-turn token. A text is held back while it ends inside a character
    (a Chinese character is several byte tokens)."""
    out: list[int] = []
    shown = ""
    for token in tm.stream(turn.ids, new, stop=tm.special_ids):
        if token in tm.special_ids:
            break
        out.append(token)
        text = tm.decode(out)
        if not text.endswith("\ufffd") and text != shown:
            yield text
            shown = text


def tied(tm: TextModel) -> bool:
    """Whether the model's output layer is its embedding matrix (the embeddings section says which)."""
    return lm.tied_output(tm)


def embeddings(r: lm.Reading, dim: int, *, lang: str = "en") -> Panel:
    """Each token's embedding row."""
    T = texts(PAGE, lang)
    rows = [f"{t} (id {i})" for t, i in zip(safe_labels(r.tokens), r.ids)]  # a token such as <b> stays text
    fig = charts.signed_heatmap(
        r.embeddings,
        rows,
        [str(d) for d in range(r.embeddings.shape[1])],
        title=T("embed_title", n=len(r.tokens), dim=dim),
        x_title=T("dims"),
        y_title=T("tokens_axis"),
    )
    return Panel("lm_embed", fig, r.embeddings)


@dataclass(frozen=True)
class Causal:
    mask: Panel
    weights: Panel  # one head's weights: zero above the diagonal
    check: str  # the largest weight above the diagonal over every layer and head
    prefix: str  # the prefix's logits alone vs inside the whole text (§6: training and inference agree)


def causal(r: lm.Reading, layer: int = 0, head: int = 0, *, lang: str = "en") -> Causal:
    """The causal mask beside one head's weights, and the check over all heads."""
    T, ax, toks = texts(PAGE, lang), axes(lang), safe_labels(r.tokens)
    mask = masks.causal(len(r.tokens)).float().numpy()
    w = r.maps[layer, head]
    leak = lm.above_diagonal_max(r.maps)
    return Causal(
        Panel("lm_mask", heatmap(mask, toks, toks, title=T("mask_title"), **ax), mask),
        Panel("lm_weights", heatmap(w, toks, toks, title=T("weights_title", layer=layer, head=head), **ax), w),
        T("mask_check", value=f"{leak:.1e}", layers=r.maps.shape[0], heads=r.maps.shape[1]),
        T(
            prefix_verdict(r.prefix_delta, r.prefix_scale, r.maps.shape[0]),
            k=r.prefix_len,
            n=len(r.tokens),
            value=f"{r.prefix_delta:.1e}",
            relative=f"{r.prefix_delta / max(r.prefix_scale, 1e-30):.1e}",
        ),
    )


FLOAT32_EPS = 2.0**-23  # float32's relative rounding step


def prefix_verdict(delta: float, scale: float, layers: int) -> str:
    """The locale key for the prefix check: exactly zero, float32 rounding, or not. Rounding of products of another
    length compounds layer by layer, so the bound grows with depth: 8 ε₃₂ per layer of the largest logit (4 layers:
    3.8e-6; SmolLM2's 30: 2.9e-5, where 2–3e-6 is measured)."""
    if delta == 0:
        return "prefix_exact"
    return "prefix_close" if delta <= 8 * FLOAT32_EPS * layers * scale else "prefix_moved"


@dataclass(frozen=True)
class NextToken:
    candidates: Panel  # the top candidates, the actual next token highlighted
    actual: str | None  # the token that follows in the text (None at its end)
    loss: float | None  # −ln p(actual)

    @property
    def probability(self) -> float | None:
        return None if self.loss is None else float(np.exp(-self.loss))


def next_token(r: lm.Reading, position: int | None = None, *, lang: str = "en") -> NextToken:
    """The top candidates for the token after ``position`` (default: the last) and the actual one's loss."""
    T, toks, n = texts(PAGE, lang), safe_labels(r.tokens), len(r.tokens)
    pos = n - 1 if position is None else position
    if not 0 <= pos < n:
        raise ValueError(f"position {pos} is outside the text's {n} tokens")
    actual = r.ids[pos + 1] if pos + 1 < n else None
    hit = [i for i, t in enumerate(r.top_ids[pos]) if t == actual]
    fig = vb.topk_bars(
        r.top_labels[pos],
        r.top_probs[pos],
        title=T("next_title", token=toks[pos], pos=pos),
        highlight=hit[0] if hit else None,
        x_title=T("probability"),
    )
    follows = actual is not None
    return NextToken(
        Panel("lm_next", fig, r.top_probs[pos]),
        r.tokens[pos + 1] if follows else None,
        float(r.losses[pos]) if follows else None,
    )


def losses(r: lm.Reading, *, lang: str = "en") -> tuple[dict[str, str], Panel] | None:
    """Mean loss and perplexity, and each token's loss (None for a single token: nothing is predicted)."""
    T = texts(PAGE, lang)
    if len(r.tokens) < 2:
        return None
    mean = float(r.losses.mean())
    labels = [f"{i}: {t}" for i, t in enumerate(r.tokens)]
    fig = charts.bars(
        labels[1:], {T("loss"): r.losses}, title=T("loss_title"), x_title=T("predicted"), y_title=T("nats")
    )
    return {T("mean_loss"): f"{mean:.3f}", T("perplexity"): f"{np.exp(mean):.1f}"}, Panel("lm_loss", fig, r.losses)


def generation(
    g: lm.Generation, step: int = 1, layer: int = 0, head: int | None = None, *, lang: str = "en"
) -> tuple[Panel, Panel]:
    """Where generated token ``step`` looked (one head, or the mean of the heads), and every new token's row."""
    T = texts(PAGE, lang)
    maps = g.maps[layer].mean(axis=0) if head is None else g.maps[layer, head]
    row = g.prompt_len + step - 2  # the position whose prediction produced generated token `step`
    gen_toks = safe_labels(g.tokens)
    ctx = [f"{i}: {t}" for i, t in enumerate(g.tokens[: row + 1])]
    fig = charts.bars(
        ctx,
        {T("weight"): maps[row, : row + 1]},
        x_title=T("context"),
        y_title=T("weight"),
        title=T("gen_step_title", token=gen_toks[row + 1], step=step),
    )
    rows_new = maps[g.prompt_len - 1 : -1]
    grid = heatmap(
        rows_new,
        [f"→ {t}" for t in gen_toks[g.prompt_len :]],
        gen_toks,
        title=T("gen_map_title"),
        x_title=T("context"),
        y_title=T("generated"),
    )
    return Panel("lm_gen_step", fig, maps[row, : row + 1]), Panel("lm_gen_map", grid, rows_new)


def corpus_mb(name: str) -> str:
    """A bundled model's training text in MB, from its training record (the intro states it)."""
    from tx_explorer import model_cache  # the registry loads every family: imported when the page asks

    return f"{model_cache.shared_model(name).info['corpus']['characters'] / 1e6:.1f}"
