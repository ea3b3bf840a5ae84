"""Chat templates: the Jinja text a model file carries to turn a conversation into the one string it was tuned on.

An instruction-tuned model saw every conversation written one way (SmolLM2: ChatML, ``<|im_start|>user …
<|im_end|>``); the template in its file writes a list of messages that way, ending with the opening of the
assistant's turn. A template is code from a file, so it runs in Jinja's immutable sandbox (no attribute access
to Python internals, no mutation), as transformers renders them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import islice
from typing import Any

from jinja2 import Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from tx_explorer.errors import InputError

ROLES = ("system", "user", "assistant")


def _raise(message: str) -> None:
    raise TemplateError(message)


@cache
def _compile(template: str) -> Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise  # templates call it to refuse a conversation they cannot write
    return env.from_string(template)


def checked(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``messages`` as ``[{"role", "content"}]``, each role one of :data:`ROLES` and each content non-empty text.

    Raises:
        InputError: ``chat_empty`` for no message or an empty one, ``chat_role`` for an unknown role.
    """
    out = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise InputError("chat_role", role=str(role), roles=", ".join(ROLES))
        if not isinstance(content, str) or not content.strip():
            raise InputError("chat_empty")
        out.append({"role": role, "content": content})
    if not out:
        raise InputError("chat_empty")
    return out


def render(
    template: str, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True, **special: Any
) -> str:
    """The conversation written as the template writes it; ``special`` are the names templates use
    (``bos_token``, ``eos_token``).

    Raises:
        InputError: ``chat_template`` when the template does not compile or refuses the conversation.
    """
    msgs = checked(messages)
    try:
        return _compile(template).render(messages=msgs, add_generation_prompt=add_generation_prompt, **special)
    except TemplateError as e:  # SecurityError, a syntax error, or the template's own raise_exception
        raise InputError("chat_template", reason=str(e)) from None


def _finder(texts: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern finding any of ``texts``, the longest first as a tokenizer matches them; None for none."""
    longest = sorted(set(texts), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, longest))) if longest else None


def _placeholders(n: int, avoid: str) -> list[str]:
    """``n`` characters of Unicode's private use plane 15, none of them in ``avoid``."""
    used = set(avoid)
    return list(islice((c for c in map(chr, range(0xF0000, 0xFFFFE)) if c not in used), n))


@dataclass(frozen=True)
class Typed:
    """What a user types, read by a model's tokenizer as the characters typed: the text of a marker in a message (a
    typed ``<|im_end|>``, Qwen3's ``<think>``) is ``<``, ``|``, ``im`` … and neither ends its turn, opens another nor
    starts the model's reasoning, while the chat template's own markers stay the tokens the model was tuned on.

    A marker is a special token, or an added token that is not special but whose text the chat template writes
    (Qwen3's ``<think>``, ``<tool_call>``; Gemma 3's ``<start_of_image>``). Gemma's other non-special added tokens,
    ``<table>``, ``<b>`` and runs of spaces, are how its tokenizer reads those characters in any text: typed, they
    stay the tokens that ordinary text gives, as in the model's training."""

    whole: Tokenizer  # the model's own: parses its markers (shared by every session, so never switched)
    plain: Tokenizer  # its twin that reads their text as text (``encode_special_tokens``, the markers made special)
    pattern: re.Pattern[str] | None  # finds a marker's text, the longest first as the tokenizer matches it
    special: frozenset[int]  # the markers' ids
    controls: re.Pattern[str] | None  # finds a special token's text: what a reply's text cannot hold as a marker

    @classmethod
    def of(cls, tokenizer: Tokenizer, template: str | None = None) -> Typed:
        """``tokenizer``'s reading of typed text; ``template``: the chat template, whose non-special added tokens
        are markers too."""
        added = tokenizer.get_added_tokens_decoder().items()
        special = {i: t.content for i, t in added if t.special}
        markers = special | {i: t.content for i, t in added if t.content.strip() and t.content in (template or "")}
        spec = json.loads(tokenizer.to_str())
        for token in spec["added_tokens"]:  # the markers made special: encode_special_tokens reads their text as text
            token["special"] = token["special"] or token["id"] in markers
        plain = Tokenizer.from_str(json.dumps(spec))
        plain.encode_special_tokens = True
        return cls(tokenizer, plain, _finder(markers.values()), frozenset(markers), _finder(special.values()))

    def ids(self, text: str) -> list[int]:
        """``text`` as typed, in token ids: no marker parsed."""
        return self.plain.encode(text, add_special_tokens=False).ids

    def markers(self, text: str) -> tuple[str, ...]:
        """The markers' text found in ``text``, each once, in the order typed."""
        return tuple(dict.fromkeys(self.pattern.findall(text))) if self.pattern else ()

    def _typed(self, message: Mapping[str, str]) -> re.Pattern[str] | None:
        """What of ``message`` reads as typed: every marker's text in what a user or system wrote; in a reply, only
        a special token's (the reply ended at the first one the model wrote), its non-special markers read as the
        model wrote them, and as its template reads them (Qwen3's drops a ``<think>…</think>`` before a reply)."""
        return self.controls if message["role"] == "assistant" else self.pattern

    def conversation(self, write: Callable[[list[dict[str, str]]], str], messages: list[dict[str, str]]) -> list[int]:
        """``messages`` as ``write`` (a chat template) writes them, in token ids: its markers the tokens the model
        was tuned on, each message read as typed.

        A conversation without a marker's text in it gives exactly the ids of the written text encoded whole (what
        ``apply_chat_template(..., tokenize=True)`` gives). Otherwise each such text in the messages is swapped for a
        private-use character before the template writes them; the written text is encoded whole, and each stretch
        between two markers that holds a swapped character is encoded again, the typed characters put back, by the
        plain twin: the same splitting, a marker's text read as text."""
        finds = [self._typed(m) for m in messages]
        typed = list(dict.fromkeys(t for m, f in zip(messages, finds) if f for t in f.findall(m["content"])))
        if not typed:
            return self.whole.encode(write(messages), add_special_tokens=False).ids
        marks = dict(zip(typed, _placeholders(len(typed), "".join(m["content"] for m in messages))))
        swapped = [
            f.sub(lambda x: marks[x.group()], m["content"]) if f else m["content"] for m, f in zip(messages, finds)
        ]
        text = write([{**m, "content": c} for m, c in zip(messages, swapped)])
        back = {ord(c): t for t, c in marks.items()}
        enc = self.whole.encode(text, add_special_tokens=False)
        ids: list[int] = []
        run: list[int] = []  # the ids since the last marker
        start = 0  # where the text they were read from begins
        for i, (a, b) in [*zip(enc.ids, enc.offsets), (None, (len(text), len(text)))]:
            if i is not None and i not in self.special:
                run.append(i)
                continue
            piece = text[start:a]
            typed_piece = piece.translate(back)  # the characters typed, where a marker's text was swapped
            ids += run if typed_piece == piece else self.ids(typed_piece)
            if i is not None:
                ids.append(i)
            run, start = [], b
        return ids
