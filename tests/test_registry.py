"""The registry and the bundles: families, pickers by family, one checksum pass per load, tampering refused."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch

from tx_explorer import bundle, models
from tx_explorer.families.circuit import CircuitBundle
from tx_explorer.families.images import ImageClassifier
from tx_explorer.families.moe import MoEBundle
from tx_explorer.families.positions import Results as PositionResults
from tx_explorer.families.text import TextModel
from tx_explorer.families.translation import Translator
from tx_explorer.families.variants import Results

TYPES = {
    "text": TextModel,
    "moe": MoEBundle,
    "translation": Translator,
    "image": ImageClassifier,
    "variants": Results,
    "positions": PositionResults,
    "circuit": CircuitBundle,
}
BUNDLED = [n for n in models.available_models() if models.REGISTRY[n].bundled]  # built here (present)


def test_every_entry_names_its_family_and_text_models_their_kind():
    for name, entry in models.REGISTRY.items():
        assert entry.family in TYPES, name
        assert (entry.kind in ("causal", "encoder")) == (entry.family in ("text", "circuit")), (
            name
        )  # circuit: a causal LM
    assert models.available_models("variants") == ["variants"]  # the norms page's bundle is registered too


def test_pickers_ask_by_family_and_keep_their_default_first():
    text = models.available_models("text")
    assert text[:3] == ["smollm2-135m-instruct", "tiny-gpt", "tiny-llama"]  # the real LLM first, where installed
    assert set(models.available_models("text", kind="causal")) <= set(text)
    preloaded = [n for n in models.REGISTRY if models.REGISTRY[n].preload]
    assert preloaded == ["smollm2-135m-instruct"] and not models.REGISTRY[preloaded[0]].bundled
    assert all(models.REGISTRY[n].kind == "encoder" for n in models.available_models("text", kind="encoder"))
    assert models.available_models("image")[0] == "vit-shapes"
    assert [models.REGISTRY[n].kind for n in models.available_models("translation")] == [
        "fixed",
        "attention",
        "transformer",
    ]
    assert models.available_models("moe") == ["tiny-moe"]
    assert sorted(models.available_models()) == sorted(n for f in TYPES for n in models.available_models(f))


@pytest.mark.parametrize("name", BUNDLED)
def test_a_load_checks_each_file_once_and_returns_its_familys_object(name, monkeypatch):
    hashed: Counter[str] = Counter()
    real = bundle.sha256
    monkeypatch.setattr(bundle, "sha256", lambda path: hashed.update([Path(path).name]) or real(path))
    loaded = models.load_model(name)
    manifest = json.loads((models.WEIGHTS_DIR / name / bundle.MANIFEST).read_text())
    assert hashed == Counter(set(manifest))  # every file of the manifest, each exactly once
    assert isinstance(loaded, TYPES[models.REGISTRY[name].family])


@pytest.mark.parametrize("name", BUNDLED)
def test_every_family_loader_refuses_a_tampered_bundle_and_names_the_rebuild(name, tmp_path, monkeypatch):
    shutil.copytree(models.WEIGHTS_DIR / name, tmp_path / name)
    config = tmp_path / name / "config.json"
    config.write_text(config.read_text().replace("1", "2", 1))
    monkeypatch.setattr(models, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(models.BundleError, match=r"config\.json does not match its checksum.*python -m tx_explorer"):
        models.load_model(name)


def test_bundles_round_trip_and_an_unknown_name_is_a_key_error(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3)}
    bundle.save_bundle(tmp_path / "b", state, {"dim": 3}, extra={"note": "x"})
    assert set(json.loads((tmp_path / "b" / bundle.MANIFEST).read_text())) == {
        "model.safetensors",
        "config.json",
        "extra.json",
    }
    read, config = bundle.read_bundle(tmp_path / "b")
    assert torch.equal(read["w"], state["w"]) and config == {"dim": 3}
    (tmp_path / "b" / "extra.json").unlink()
    with pytest.raises(bundle.BundleError, match=r"extra\.json is missing\. Rebuild it with: make b"):
        bundle.read_bundle(tmp_path / "b", "make b")
    with pytest.raises(KeyError, match="unknown model 'nope'"):
        models.load_model("nope")
