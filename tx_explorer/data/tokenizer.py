"""Byte-level BPE (Sennrich et al. 2016; GPT-2's byte-level variant), trained with Hugging Face ``tokenizers``.

Byte-level means the base alphabet is the 256 bytes, so any text — emoji, Chinese, HTML — encodes without
an unknown token and decodes back exactly. Merges learned on our corpus then build frequent English
pieces (" the", "tion", " function") up to ``vocab_size`` tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOT = "<|endoftext|>"  # separates documents in the training stream (id 0)


def train_bpe(texts: Iterable[str], vocab_size: int = 2048) -> Tokenizer:
    """Learn a byte-level BPE vocabulary of ``vocab_size`` tokens (including ``EOT``) from ``texts``."""
    if vocab_size < 257 + 1:
        raise ValueError(f"byte-level BPE needs vocab_size > 257 (256 bytes + {EOT}), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


@cache
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes → printable characters table (byte-level tokens are stored that way)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def byte_level_label(token: str) -> str:
    """A readable label for a byte-level token: ``Ġthe`` → ``▁the``, newline → ``↵``, one byte of a multi-byte
    character → ``\\xf0``.

    Partial bytes are not written ``<0xF0>``: Plotly would read that as an HTML tag and drop it.
    """
    table = _byte_decoder()
    if any(ch not in table for ch in token):
        return token  # a special token such as <|endoftext|>
    raw = bytes(table[ch] for ch in token)
    try:
        return _shown(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "".join(f"\\x{b:02x}" for b in raw)


_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback: <0x0A> is the byte 0x0A


def piece_label(token: str) -> str:
    """A readable label for a SentencePiece token (Gemma 3; spaces are ``▁`` already): a newline or a tab as
    :func:`byte_level_label` shows them (``↵``, ``⇥``; a blank label otherwise), a byte-fallback piece ``<0x0A>`` as
    its byte (``↵``, or ``\\xf0`` for one byte of a multi-byte character)."""
    byte = lambda m: _shown(chr(b)) if (b := int(m.group(1), 16)) < 0x80 else f"\\x{b:02x}"  # noqa: E731
    return _shown(_BYTE_PIECE.sub(byte, token))


_MARKS = {" ": "▁", "\n": "↵", "\t": "⇥", "\r": "␍"}  # a carriage return's code read like a byte's (\xf0)
# Characters a label would draw blank or not at all (SmolLM2 has tokens of \r, \x00…\x1f, \x7f and a no-break
# space): control and format characters and spaces other than " ", written as their code instead.
_UNSEEN = re.compile(r"[\x00-\x20\x7f-\xa0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]")


def _shown(text: str) -> str:
    """Whitespace a label must show: a space as ``▁``, a newline as ``↵``, a tab as ``⇥``, a carriage return as
    ``␍``; another invisible character as its code (``\\x00``, ``\\xa0``, ``\\u200b``)."""
    code = lambda c: f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"  # noqa: E731
    return _UNSEEN.sub(lambda m: _MARKS.get(m.group()) or code(m.group()), text)
