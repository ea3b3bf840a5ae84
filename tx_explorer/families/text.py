"""A text model as the pages see it: our module (decoder or encoder), its tokenizer, and its context.

:class:`TextModel` is the adapter every text page works through, whatever the family: the bundled
``tiny-gpt`` (causal, byte-level BPE), GPT-2 (causal, byte-level BPE) or a BERT encoder such as MiniLM
(WordPiece, ``[CLS]``/``[SEP]``), all running in our :class:`~tx_explorer.modules.transformer.CausalLM` /
``Encoder``. It tokenises with truncation to the context (and says so), runs the model with an optional
:class:`~tx_explorer.trace.Trace`, and hands out each layer's attention module with its input for the
lenses that need value vectors (norm-weighted attention, the query/key inspector).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor, nn

from tx_explorer.bundle import read_bundle, verify
from tx_explorer.config import TransformerConfig
from tx_explorer.data import chat
from tx_explorer.data.tokenizer import EOT, byte_level_label, piece_label
from tx_explorer.edit import Edit
from tx_explorer.errors import InputError
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.transformer import CausalLM, Stack, next_token
from tx_explorer.trace import Trace

RETRAIN_TINY_GPT = "python -m tx_explorer.train lm --preset tiny"
PREFILL = 256  # prompt tokens read per step when decoding with the KV cache
RETRAIN_TINY_LLAMA = "python -m tx_explorer.train lm --preset tiny-llama"  # with tiny-gpt's tokenizer


@dataclass(frozen=True)
class Encoded:
    """A tokenised input: ids, display labels, which tokens are special, and whether the text was cut."""

    ids: list[int]
    tokens: list[str]  # display labels ("▁the" for byte-level " the"; WordPiece pieces as they are)
    special: list[bool]  # [CLS], [SEP], <|endoftext|> …
    truncated: bool  # the text was longer than the context and its end was cut
    num_tokens: int  # tokens before truncation

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class TextModel:
    """Model + tokenizer + context length. ``kind`` is "causal" (GPT) or "encoder" (BERT); eval mode, no grad."""

    name: str
    model: Stack
    tokenizer: Tokenizer
    kind: Literal["causal", "encoder"]
    max_len: int
    special_tokens: Sequence[str] = ()
    byte_level: bool = False  # byte-level BPE: labels decode the byte alphabet ("Ġthe" → "▁the")
    info: dict[str, Any] = field(default_factory=dict)  # training summary, provenance
    chat_template: str | None = None  # Jinja text that writes a conversation as the model was tuned on (chat)
    bos: str | None = None  # the file's begin/end-of-text tokens, as templates name them
    eos: str | None = None

    def __post_init__(self) -> None:
        self.model.eval().requires_grad_(False)
        vocab = self.tokenizer.get_vocab()
        self.special_ids = frozenset(vocab[t] for t in self.special_tokens if t in vocab)

    @property
    def config(self) -> TransformerConfig:
        return self.model.cfg

    def label(self, token: str) -> str:
        """The display label of one token string."""
        if token in self.special_tokens:
            return token
        return byte_level_label(token) if self.byte_level else piece_label(token)

    def encode(self, text: str, limit: int | None = None) -> Encoded:
        """Tokenise ``text``, keeping at most ``max_len`` tokens, or ``limit`` if smaller (a page's cap).

        An encoder keeps its closing special token (``[SEP]``) when the text is cut.

        Raises:
            ValueError: when the text is empty or only whitespace.
        """
        if not text or not text.strip():
            raise InputError("text_empty")
        keep = self.max_len if limit is None else min(limit, self.max_len)
        enc = self.tokenizer.encode(text)
        ids, toks = list(enc.ids), list(enc.tokens)
        n = len(ids)
        if n > keep:
            tail = 1 if ids[-1] in self.special_ids else 0
            ids = ids[: keep - tail] + ids[n - tail :]
            toks = toks[: keep - tail] + toks[n - tail :]
        return Encoded(
            ids=ids,
            tokens=[self.label(t) for t in toks],
            special=[i in self.special_ids for i in ids],
            truncated=n > keep,
            num_tokens=n,
        )

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def labels(self, ids: Sequence[int]) -> list[str]:
        """Display labels for token ids (e.g. generated ones)."""
        return [self.label(self.tokenizer.id_to_token(i) or "") for i in ids]

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]], *, opening: bool = True) -> str:
        """The conversation as the model's own chat template writes it, ending where the assistant's turn begins
        (``opening``, the template's generation prompt) or, without, where the last message ends.

        Raises:
            InputError: ``chat_no_template`` for a model without one; see :func:`tx_explorer.data.chat.render`.
        """
        if not self.chat_template:
            raise InputError("chat_no_template", model=self.name)
        specials = dict(bos_token=self.bos or "", eos_token=self.eos or "")
        return chat.render(self.chat_template, messages, add_generation_prompt=opening, **specials)

    @cached_property
    def typed(self) -> chat.Typed:
        """What a user types, read as typed (:class:`tx_explorer.data.chat.Typed`): made once per model."""
        return chat.Typed.of(self.tokenizer, self.chat_template)

    def chat_ids(self, messages: Sequence[Mapping[str, Any]], *, opening: bool = True) -> list[int]:
        """:meth:`chat_prompt` in token ids, each message read as typed: a typed ``<|im_end|>`` forges no turn."""
        return self.typed.conversation(lambda msgs: self.chat_prompt(msgs, opening=opening), list(messages))

    @torch.no_grad()
    def stream(
        self,
        ids: Sequence[int],
        max_new_tokens: int,
        *,
        greedy: bool = True,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        stop: frozenset[int] = frozenset(),
        cache: KVCache | None = None,
        trace: Trace | None = None,
    ) -> Iterator[int]:
        """Continue ``ids`` token by token with our KV cache (§6.3): the prompt is read once, then each new token
        is one step over the cached keys and values. Yields each new id; ends after ``max_new_tokens`` or after a
        token in ``stop``.

        ``cache``: a cache that already holds ``ids[: cache.seen]`` (an earlier turn of a conversation), so only
        the rest is read; it is filled further (the caller keeps it for the next turn). ``trace``: the passes whose
        logits give the yielded tokens record their attention in it, one query row each: the prompt's last token
        is then read alone (a row, not the prompt's N × N maps), then each step.

        Raises:
            InputError: for an empty prompt, or one that leaves no room for ``max_new_tokens`` in the context.
        """
        if not isinstance(self.model, CausalLM):
            raise InputError("not_causal_lm", model=self.name)
        if not ids:
            raise InputError("prompt_empty")
        if not 1 <= max_new_tokens <= self.max_len - len(ids):
            raise InputError("new_tokens_range", limit=max(self.max_len - len(ids), 0), value=max_new_tokens)
        cache = KVCache() if cache is None else cache
        if not 0 <= cache.seen < len(ids):
            raise ValueError(f"the cache holds {cache.seen} tokens: a prefix of the {len(ids)} given, not all")
        device = next(self.model.parameters()).device
        gen = torch.Generator(device=device).manual_seed(seed)
        end = len(ids) - (trace is not None)  # the prompt's tokens read untraced
        hidden = None
        for start in range(cache.seen, end, PREFILL):  # in pieces (never 8k tokens' scores at once), no LM head:
            hidden = self.model.states(self._batch(ids[start : min(start + PREFILL, end)]), cache=cache)
        if trace is not None:
            logits = self.model(self._batch(ids[-1:]), cache=cache, trace=trace)[:, -1]
        else:  # the last row's logits alone: a piece's [256, V] were 268 MB for Gemma 3, one row read
            logits = self.model.logits(hidden[:, -1:])[:, -1]  # (1, V)
        for step in range(max_new_tokens):
            token = next_token(logits, greedy=greedy, temperature=temperature, top_k=top_k, generator=gen)  # (1, 1)
            yield int(token)
            if int(token) in stop or step == max_new_tokens - 1:
                return
            logits = self.model(token, cache=cache, trace=trace)[:, -1]

    def chat(self, messages: Sequence[Mapping[str, Any]], max_new_tokens: int = 64, **sampling: Any) -> str:
        """The model's reply to ``messages`` (``[{"role": "user", "content": "…"}]``), greedy unless ``sampling``
        says otherwise (``greedy=False, temperature=…, top_k=…, seed=…``); see :meth:`stream`."""
        out = [t for t in self.stream(self.chat_ids(messages), max_new_tokens, stop=self.special_ids, **sampling)]
        return self.tokenizer.decode(out, skip_special_tokens=True).strip()

    def _batch(self, ids: Sequence[int]) -> Tensor:
        return torch.tensor([list(ids)], dtype=torch.long, device=next(self.model.parameters()).device)

    @torch.no_grad()
    def run(self, ids: Sequence[int], trace: Trace | None = None) -> Tensor:
        """One sequence through the model: logits ``[1, N, V]`` (causal) or hidden states ``[1, N, D]`` (encoder).

        Raises:
            ValueError: when ``ids`` are longer than the context.
        """
        return self.model(self._batch(ids), trace=trace)

    @torch.no_grad()
    def states(
        self, ids: Sequence[int], trace: Trace | None = None, *, edit: Edit | None = None, cache: KVCache | None = None
    ) -> Tensor:
        """One sequence's last hidden states ``[N, D]``: a causal model's stack up to its final norm, before the LM
        head (its V logits per token are what a run for maps, records or states alone need not pay for: SmolLM2 at 11
        tokens, 39 of its 160 ms), an encoder's output. ``edit`` as the model's forward takes it (``Edit().record()``
        to capture heads and residuals); ``cache`` (a decoder's) holds the tokens before ``ids``, as in the forward."""
        batch = self._batch(ids)
        if self.kind == "causal":
            return self.model.states(batch, trace, cache=cache, edit=edit)[0]
        if cache is not None:
            raise TypeError(f"{self.name} is an encoder: every token reads every other, no cache holds a prefix")
        return self.model(batch, trace=trace, edit=edit)[0]

    def maps(self, ids: Sequence[int], labels: Sequence[str] | None = None) -> Trace:
        """One sequence through the model for its trace alone (:meth:`states`), ``labels`` on every record."""
        trace = Trace()
        self.states(ids, trace)
        if labels is not None:
            trace.label(labels)
        return trace

    def attention(self, enc: Encoded) -> tuple[Tensor, Trace]:
        """``(output, trace)`` with the encoded tokens attached to every record as labels."""
        trace = Trace()
        out = self.run(enc.ids, trace=trace)
        trace.label(enc.tokens)
        return out, trace

    def mask(self, n: int) -> Tensor | None:
        """The attention mask the model applies to ``n`` tokens, on its device, as its stack builds it: causal
        (within a sliding window: Mistral), an encoder's band, or None when every key is visible."""
        return self.model.mask(n, next(self.model.parameters()).device)

    def attention_module(self, layer: int) -> MultiHeadAttention:
        return self.model.blocks[layer].attn

    @torch.no_grad()
    def attention_inputs(self, ids: Sequence[int]) -> list[Tensor]:
        """The tensor each layer's self-attention receives, ``[1, N, D]`` per layer.

        Pre-norm and sandwich blocks feed ``norm1(x)``, post-norm blocks ``x`` itself
        (``TransformerBlock.attention_input``).
        """
        x = self.model.embed(self._batch(ids))
        mask = self.mask(len(ids))
        inputs = []
        for block in self.model.blocks:
            inputs.append(block.attention_input(x))
            x = block(x, mask)
        return inputs


def unique_state(model: nn.Module) -> dict[str, Tensor]:
    """The state dict without aliases: a tied LM head shares the embedding, and safetensors stores it once."""
    seen: set[int] = set()
    out = {}
    for name, t in model.state_dict().items():
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            out[name] = t
    return out


TENSORS_NAMED = 5  # a refusal names this many missing or left-over tensors, then "…"


def load_state(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Load ``state`` strictly, except for weights tied to one that was loaded (the LM head)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"head.weight"} if getattr(getattr(model, "cfg", None), "tie_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise InputError("weights_not_fit", absent=_named(set(missing) - tied), extra=_named(unexpected))


def _named(tensors: Collection[str]) -> str:
    """A refusal's list of tensor names: the first :data:`TENSORS_NAMED`, then "…"; "—" for none."""
    found = sorted(tensors)
    return ", ".join(found[:TENSORS_NAMED]) + (" …" if len(found) > TENSORS_NAMED else "") if found else "—"


def write_runs(out: Path, summary: dict, runs: dict[str, dict], weights: dict[str, Tensor]) -> None:
    """The files of a bundle of models trained side by side, as :func:`load_run` reads them: ``summary.json``,
    ``config.json`` (each run's config from ``runs``, a part of the summary) and ``model.safetensors`` (every
    run's weights under its ``<name>.`` prefix)."""
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "config.json").write_text(json.dumps({k: v["config"] for k, v in runs.items()}, indent=1) + "\n")
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))


def load_run(folder: Path, runs: dict[str, dict], name: str, what: str) -> CausalLM:
    """One of several models trained side by side and stored in one ``model.safetensors``, each under the prefix
    ``<name>.``, its config at ``runs[name]["config"]``; ``what`` names a run in the error ("scheme", "variant")."""
    if name not in runs:
        raise KeyError(f"{what} {name!r} is not in the bundle; it has {', '.join(runs)}")
    prefix = f"{name}."
    state = {
        k[len(prefix) :]: v.float()
        for k, v in load_file(str(Path(folder) / "model.safetensors")).items()
        if k.startswith(prefix)
    }
    model = CausalLM(TransformerConfig.from_dict(runs[name]["config"]))
    load_state(model, state)
    return model


@dataclass(frozen=True)
class SideBySide:
    """A bundle of small models trained side by side (block variants, position schemes), as a page reads it:
    ``summary.json`` (its ``runs`` key lists the runs with their configs and results) and the folder."""

    summary: dict
    folder: Path
    runs: ClassVar[str]  # the summary's key of the runs, which also names one in errors: "variants", "schemes"

    @property
    def names(self) -> list[str]:
        return list(self.summary[self.runs])

    def run(self, name: str) -> CausalLM:
        """One run's trained model (:func:`load_run`)."""
        return load_run(self.folder, self.summary[self.runs], name, self.runs.removesuffix("s"))

    @classmethod
    def read(cls, folder: Path, retrain: str, **more: str) -> Any:
        """Verify the bundle's checksums, then read ``summary.json`` and the ``more`` JSON files (field → file);
        weights load per run, on demand."""
        folder = Path(folder)
        verify(folder, retrain)
        read = lambda name: json.loads((folder / name).read_text())  # noqa: E731
        return cls(summary=read("summary.json"), folder=folder, **{k: read(f) for k, f in more.items()})


def load_tiny_gpt(folder: Path) -> TextModel:
    """Registry loader for ``tiny-gpt``: verified safetensors weights, config.json, tokenizer.json, training.json."""
    return load_causal_bundle(folder, RETRAIN_TINY_GPT)


def load_tiny_llama(folder: Path) -> TextModel:
    """Registry loader for ``tiny-llama`` (rotary, grouped-query, RMSNorm, SwiGLU), a bundle like tiny-gpt's."""
    return load_causal_bundle(folder, RETRAIN_TINY_LLAMA)


def load_causal_bundle(folder: Path, retrain: str) -> TextModel:
    """A bundled :class:`CausalLM` with its byte-level BPE; ``retrain`` is the command a damaged bundle names."""
    folder = Path(folder)
    state, config = read_bundle(folder, retrain)
    info = json.loads((folder / "training.json").read_text())
    return bundled_causal(folder, CausalLM(TransformerConfig.from_dict(config)), state, folder.name, info)


def bundled_causal(
    folder: Path, model: nn.Module, state: dict, name: str, info: dict | None = None, *, max_len: int | None = None
) -> TextModel:
    """``model`` with ``state`` loaded, and the byte-level BPE of the bundle in ``folder`` (``tokenizer.json``);
    ``max_len`` defaults to ``model.cfg.max_len`` (a :class:`CausalLM`'s context)."""
    load_state(model, state)
    return TextModel(
        name=name,
        model=model,
        tokenizer=Tokenizer.from_file(str(folder / "tokenizer.json")),
        kind="causal",
        max_len=model.cfg.max_len if max_len is None else max_len,
        special_tokens=(EOT,),
        byte_level=True,
        info=info or {},
    )
