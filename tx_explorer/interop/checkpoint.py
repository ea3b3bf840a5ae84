"""Open a checkpoint folder from disk as a :class:`~tx_explorer.families.text.TextModel` (never a download).

A folder holds ``config.json``, its weights as ``model.safetensors`` (or shards listed in
``model.safetensors.index.json``) and a ``tokenizer.json``, as ``save_pretrained`` writes them. The config's
``model_type`` picks the family (BERT, GPT-2, Llama, Qwen2, Mistral, Qwen3, Phi-3, OLMo 2, Gemma 2, Gemma 3,
gpt-oss) and its key map into our modules.

Everything that can be checked without the weights is checked first: the config, the tokenizer, every
safetensors header (only its JSON, read from the file's first bytes), and the memory the weights need against
the memory available. Only then are the tensors read; a failure anywhere raises an
:class:`~tx_explorer.errors.InputError` and returns nothing half-built. Pickles (``pytorch_model.bin``) are
never opened: unpickling can run code. On the CPU the weights are float32 where the memory allows and bfloat16
otherwise (or the ``dtype`` asked for), converted tensor by tensor; on a GPU they keep the stored precision.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.interop import bert, gemma2, gemma3, gpt2, gpt_oss, llama, olmo2, phi3, qwen3
from tx_explorer.interop.common import available_memory, cast, check_layers, checked_config, corrupt
from tx_explorer.interop.gguf import PRECISIONS, build_in_place, choose_dtype, load_gguf
from tx_explorer.modules.transformer import Stack

INDEX = "model.safetensors.index.json"
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}
# model_type → (kind, our module from (config dict, state dict)); the names a user is told are supported.
FAMILIES: dict[str, tuple[str, Callable[[Mapping[str, Any], Mapping[str, Tensor]], Stack]]] = {
    "bert": ("encoder", bert.encoder_from_state),
    "gpt2": ("causal", gpt2.causal_lm_from_state),
    "llama": ("causal", llama.causal_lm_from_state),
    "qwen2": ("causal", llama.causal_lm_from_state),
    "mistral": ("causal", llama.causal_lm_from_state),
    "gemma3_text": ("causal", gemma3.causal_lm_from_state),
    "qwen3": ("causal", qwen3.causal_lm_from_state),
    "gemma2": ("causal", gemma2.causal_lm_from_state),
    "phi3": ("causal", phi3.causal_lm_from_state),
    "olmo2": ("causal", olmo2.causal_lm_from_state),
    "gpt_oss": ("causal", gpt_oss.causal_lm_from_state),
}
CONFIG_CHECKS = {  # the rest: llama.config_from_llama
    "bert": bert.config_from_bert,
    "gpt2": gpt2.config_from_gpt2,
    "gemma3_text": gemma3.config_from_gemma3,
    "qwen3": qwen3.config_from_qwen3,
    "gemma2": gemma2.config_from_gemma2,
    "phi3": phi3.config_from_phi3,
    "olmo2": olmo2.config_from_olmo2,
    "gpt_oss": gpt_oss.config_from_gpt_oss,
}


# Where the tokenizers library's parser stopped, as it says it: "… at line 1 column 12".
TOKENIZER_AT = re.compile(r"at line (\d+) column (\d+)")


def _json_object(text: bytes | str, file: str) -> dict[str, Any]:
    """The JSON object ``text`` holds; where it is not one, ``checkpoint_corrupt`` giving the parser's line and
    column as fields (its own words are English)."""
    try:
        data = json.loads(text)
    except UnicodeDecodeError:
        raise corrupt(file, InputError("corrupt_not_utf8")) from None
    except json.JSONDecodeError as e:
        raise corrupt(file, InputError("corrupt_json", line=e.lineno, column=e.colno)) from None
    if not isinstance(data, dict):
        raise corrupt(file, InputError("corrupt_not_object"))
    return data


def _read_json(folder: Path, name: str) -> dict[str, Any]:
    path = folder / name
    if not path.is_file():
        raise InputError("checkpoint_missing_file", file=name, folder=str(folder))
    return _json_object(path.read_bytes(), name)


def read_header(path: Path) -> dict[str, dict[str, Any]]:
    """The tensors a safetensors file declares (name → dtype, shape, offsets), checked against the file size.

    Reads only the 8-byte length and the JSON header after it, never the tensor data."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < n <= size - 8:
            raise corrupt(path.name, InputError("corrupt_no_header"))
        header = _json_object(f.read(n), path.name)
    header.pop("__metadata__", None)
    data = size - 8 - n
    for name, t in header.items():
        try:
            dtype, (begin, end), shape = t["dtype"], t["data_offsets"], t["shape"]
            fits = 0 <= begin <= end <= data
        except (KeyError, TypeError, ValueError):
            raise corrupt(path.name, InputError("corrupt_tensor_entry", tensor=name)) from None
        if dtype not in DTYPES:
            raise InputError("checkpoint_dtype", file=path.name, tensor=name, dtype=dtype)
        if not fits or end - begin != math.prod(shape) * DTYPES[dtype].itemsize:
            raise corrupt(path.name, InputError("corrupt_past_end", tensor=name))
    return header


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files holding the weights: the shards of the index, or ``model.safetensors``."""
    if (folder / INDEX).is_file():
        weight_map = _read_json(folder, INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise corrupt(INDEX, InputError("field_missing", field="weight_map"))
        shards = sorted(set(weight_map.values()))
        for shard in shards:
            if not (folder / shard).is_file():
                raise InputError("checkpoint_missing_file", file=shard, folder=str(folder))
        return [folder / s for s in shards]
    files = sorted(folder.glob("*.safetensors"))
    if files:
        return files
    pickles = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt*"))
    if pickles:
        raise InputError("checkpoint_pickle", files=", ".join(pickles))
    raise InputError("checkpoint_missing_file", file="*.safetensors", folder=str(folder))


# Where transformers saves a chat template (newest first): its own file, or a key of a JSON file beside the tokenizer
CHAT_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


def _optional_json(path: Path) -> dict[str, Any]:
    """A JSON object from an optional file, {} where it is missing or unreadable: the template and the begin/end
    tokens serve the chat alone, which then says where it looked, so they never stop the model from loading."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _chat(folder: Path) -> dict[str, str | None]:
    """The folder's chat template (:data:`CHAT_FILES`; a list of named templates gives its "default") and the
    begin/end-of-text tokens the template names, from ``tokenizer_config.json`` (a string or an AddedToken's dict)."""
    config = _optional_json(folder / "tokenizer_config.json")
    try:
        template = (folder / CHAT_FILES[0]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        template = _optional_json(folder / CHAT_FILES[1]).get("chat_template") or config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": …}, {"name": "tool_use", …}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    token = lambda t: t.get("content") if isinstance(t, dict) else t  # noqa: E731
    bos, eos = (token(config.get(k)) for k in ("bos_token", "eos_token"))
    return {
        "chat_template": template if isinstance(template, str) and template.strip() else None,
        "bos": bos if isinstance(bos, str) else None,
        "eos": eos if isinstance(eos, str) else None,
    }


def _tokenizer(folder: Path) -> Tokenizer:
    if not (folder / "tokenizer.json").is_file():
        raise InputError("checkpoint_missing_file", file="tokenizer.json", folder=str(folder))
    try:
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as e:  # the Rust parser raises its own exception type for any malformed file
        at = TOKENIZER_AT.search(str(e))  # its words are English: only where it stopped is told
        if at is None:
            raise corrupt("tokenizer.json", InputError("corrupt_tokenizer")) from None
        raise corrupt(
            "tokenizer.json", InputError("corrupt_tokenizer_at", line=int(at[1]), column=int(at[2]))
        ) from None
    tok.no_padding()
    tok.no_truncation()  # TextModel.encode truncates to the context and reports it
    return tok


def _check_config(config: dict[str, Any]) -> tuple[str, TransformerConfig]:
    """The family of ``config.json`` and the configuration read from it; refuses other architectures and variants
    our modules do not implement."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise InputError("checkpoint_architecture", found=str(family), supported=", ".join(FAMILIES))
    return family, checked_config(family, CONFIG_CHECKS.get(family, llama.config_from_llama), config, "config.json")


def is_gguf(path: Path) -> bool:
    """Whether the file at ``path`` begins with GGUF's magic bytes (files need no ``.gguf`` name to be one)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def load_checkpoint(
    folder: str | Path,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    memory: int | None = None,
) -> TextModel:
    """Load a BERT, GPT-2, Llama, Qwen2, Mistral, Qwen3, Phi-3, OLMo 2, Gemma 2, Gemma 3 or gpt-oss checkpoint
    folder into our modules, as a :class:`TextModel`; or a GGUF file (llama, qwen2, qwen3, mistral, gemma3) through
    :func:`tx_explorer.interop.gguf.load_gguf`, in ``dtype`` within ``memory`` bytes (see there).

    Raises:
        InputError: (a ``ValueError``) for a missing folder or file, corrupt JSON/safetensors/tokenizer, an
            unsupported architecture or variant, pickle-only weights, or weights that would not fit in memory.
    """
    folder, device = Path(folder).expanduser(), torch.device(device)
    try:
        is_file, is_dir = folder.is_file(), folder.is_dir()
    except OSError:  # a name longer than the file system takes (errno 36): no such folder either
        raise InputError("checkpoint_not_folder", folder=str(folder)) from None
    if is_file and (folder.suffix == ".gguf" or is_gguf(folder)):  # or an extension-less Ollama blob
        return load_gguf(folder, device=device, dtype=dtype, memory=memory)
    if not is_dir:
        raise InputError("checkpoint_not_folder", folder=str(folder))
    config = _read_json(folder, "config.json")
    family, cfg = _check_config(config)
    tokenizer = _tokenizer(folder)
    headers = {path: read_header(path) for path in weight_files(folder)}
    check_layers(cfg.num_layers, (name for header in headers.values() for name in header), "config.json")
    tensors = [t for header in headers.values() for t in header.values()]
    stored = sum(t["data_offsets"][1] - t["data_offsets"][0] for t in tensors)
    numel = sum(math.prod(t["shape"]) for t in tensors)
    dtypes = sorted({t["dtype"] for t in tensors})
    if device.type != "cpu" and dtype is None:  # a GPU keeps the stored precision (when the file has one)
        dtype = DTYPES[dtypes[0]] if len(dtypes) == 1 and DTYPES[dtypes[0]] in PRECISIONS else torch.float32
    if device.type != "cpu":
        choose_dtype({d: numel * d.itemsize for d in PRECISIONS}, available_memory(device), dtype, str(device))
    # On the CPU the file's tensors and the model's, converted one by one (the model takes them: build_in_place);
    # float32 where that fits, else bfloat16.
    free = available_memory(torch.device("cpu")) if memory is None else memory
    dtype = choose_dtype({d: stored + numel * d.itemsize for d in PRECISIONS}, free, dtype)
    state: dict[str, Tensor] = {}
    for path in headers:
        try:
            state |= load_file(str(path))
        except SafetensorError:  # its words are English; read_header has checked what can be told
            raise corrupt(path.name, InputError("corrupt_safetensors")) from None
    for key in state:  # one at a time: each stored tensor is freed as its converted copy replaces it
        state[key] = state[key].to(dtype)
    kind, build = FAMILIES[family]
    model = build_in_place(build, config, state)
    if tokenizer.get_vocab_size(with_added_tokens=True) > model.cfg.vocab_size:
        raise InputError(
            "checkpoint_vocab", tokens=tokenizer.get_vocab_size(with_added_tokens=True), rows=model.cfg.vocab_size
        )
    model = cast(model.to(device), dtype)
    decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
    return TextModel(
        name=folder.name,
        model=model,
        tokenizer=tokenizer,
        kind=kind,
        max_len=model.cfg.max_len,
        special_tokens=tuple(t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special),
        byte_level="ByteLevel" in json.dumps(decoder),
        info={
            "source": str(folder),
            "model_type": family,
            "stored_dtypes": dtypes,
            "dtype": str(dtype).removeprefix("torch."),
        },
        **_chat(folder),
    )
