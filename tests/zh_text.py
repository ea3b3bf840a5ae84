"""Finding English in the 中文 interface: the words a Chinese page may keep, and the checks that use them.

Shared by the fast AppTest check (``test_zh_interface.py``) and the layout check's 中文 run in the browser
(``layout_check.py``); :func:`spaced_chinese` by the locale files' check (``test_prose_models.py``).
A Latin word of three letters or more is English unless it is on :data:`ALLOWED` (model and method names,
technical terms the Chinese text keeps on purpose: token, patch, block, query, key, softmax …; units, file
formats) or is a code identifier (``num_heads``, ``W_Q``, ``float32``). User text (tokens in quotes, tick labels,
cell labels in ``customdata``), code, LaTeX and Plotly placeholders are not read.

Figures are read strictly. Prose (``prose=True``) also lets through what Chinese technical writing keeps in its
original form: names and titles (a capitalised word: Vaswani, *Attention Is All You Need*, GShard), italics
(variables, paper titles) and a gloss in full-width brackets right after Chinese (“教师强制（teacher forcing）”).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tx_explorer import models

ALLOWED = {
    # models, methods, people (citations keep the author's name), libraries
    *"""transformer transformers gpt bert minilm vit moe mixtral mistral llama longformer bahdanau vaswani cho
    sutskever radford brown kaplan dosovitskiy fedus jiang shazeer zhang sennrich hinton adamw timm imagenet pytorch
    torch cuda cpu gpu numpy plotly streamlit huggingface mae bleu gru rnn cnn lstm alibi rope gqa mqa jensen shannon
    flashattention sdpa naive flash math efficient memory-efficient cudnn tiny gpt-2 gpt-3 t5""".split(),
    # layers and functions, as the lecture writes them
    *"""softmax layernorm rmsnorm batchnorm swiglu glu gelu relu silu swish sigmoid tanh mlp ffn qkv sin cos sincos
    diag exp log log-sum-exp max min argmax top one-hot jacobian rms norm pre post rollout router embedding logit
    logits inf nan""".split(),
    # technical terms the Chinese interface keeps in English (beside or inside Chinese text)
    *"""token tokens patch patches block query key value batch mask prompt seq2seq encoder decoder cls bos eos pad unk
    start stop z-loss meta docstring""".split(),
    # units, formats, dtypes
    *"""nat nats gib mib kib flops bytes png jpg jpeg gif webp bmp csv npy rgb rgba cmyk exif bpe wordpiece float
    float32 float16 bfloat16 fp32 fp16 bf16 int64""".split(),
    *(name.lower() for name in models.REGISTRY),  # model names: tiny-gpt, vit-shapes, seq2seq-attention …
}
WORD = re.compile(r"(?<![\\\w])[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*")  # not after a backslash (\\xNN)
UNREAD = [
    re.compile(r"%\{[^}]*\}"),  # Plotly placeholders
    re.compile(r"<[^>]*>"),  # Plotly markup
    re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’"),  # quoted user text (tokens, sentences)
    re.compile(r"▁[^\s()（）,，;；]*"),  # a token shown with its leading-space mark: logit(▁name)
    re.compile(r"`[^`]*`"),  # code
    re.compile(r"\$[^$]*\$"),  # LaTeX
    re.compile(r"https?://\S+"),
    re.compile(r"[\w./-]+\.(?:json|safetensors|toml|py|csv|npy|png|txt)\b"),  # file names
]
PROSE = [
    re.compile(r"(?<![*\w])\*(?!\*)[^*\n]+\*(?!\*)"),  # *italics*: variables, paper titles
    re.compile(r"(?<=[\u3400-\u9fff])（[^（）]*）"),  # a gloss right after Chinese: 教师强制（teacher forcing）
]


def english_words(text: str, *, prose: bool = False) -> list[str]:
    """The words of ``text`` that are English and not on the allow-list (see the module's docstring)."""
    for pattern in UNREAD + (PROSE if prose else []):
        text = pattern.sub(" ", text)
    found = []
    for word in WORD.findall(text):
        parts = [word, *word.split("-")]
        if len(word) < 3 or any(c.isdigit() or c == "_" for c in word) or word.lower() in ALLOWED:
            continue
        if prose and any(c.isupper() for c in word):  # a name or a title
            continue
        if all(len(p) < 3 or p.lower() in ALLOWED for p in parts[1:]):
            continue
        found.append(word)
    return found


HAN = "\u3400-\u9fff"
SPACED = re.compile(f"[{HAN}] +[{HAN}]")


def spaced_chinese(text: str) -> list[str]:
    """Each space between two Chinese characters in ``text`` (with the characters): Chinese writes none, so one
    is left over from an edit ("讲义说 自注意力 是"). Code, LaTeX, quoted text and placeholders are not read."""
    for pattern in [*UNREAD, re.compile(r"\{[^{}]*\}")]:
        text = pattern.sub("_", text)  # not a space: what stood there does not join its neighbours
    return SPACED.findall(text)


def figure_texts(spec: dict) -> Iterator[tuple[str, str]]:
    """(where, text) for every word a figure shows besides its data labels: title, axis and colour-bar titles,
    legend names, annotations, hover templates."""
    layout = spec.get("layout", {})

    def title(node) -> str:
        return (node.get("text") or "") if isinstance(node, dict) else (node or "")

    yield "title", title(layout.get("title"))
    for name, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", name) and isinstance(axis, dict):
            yield name, title(axis.get("title"))
    for note in layout.get("annotations") or []:
        yield "annotation", note.get("text") or ""
    for trace in spec.get("data", []):
        if trace.get("showlegend", True) is not False:
            yield "legend", trace.get("name") or ""
        hover = trace.get("hovertemplate")
        for h in hover[:3] if isinstance(hover, list) else [hover]:
            yield "hover", h or ""
        for bar in (trace.get("colorbar"), (trace.get("marker") or {}).get("colorbar")):
            if bar:
                yield "colorbar", title(bar.get("title"))


def english_in_figure(spec: dict) -> list[str]:
    """``where: text [words]`` for each piece of a figure's text with English in it."""
    return [
        f"{where}: {text!r} {words}" for where, text in figure_texts(spec) if text and (words := english_words(text))
    ]
