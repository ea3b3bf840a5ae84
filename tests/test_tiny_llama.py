"""The bundled tiny-llama: today's recipe (rotary, grouped-query, RMSNorm, SwiGLU) trained like tiny-gpt."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch

from tx_explorer import models
from tx_explorer.config import PRESETS
from tx_explorer.modules.cache import KVCache
from tx_explorer.train import lm as train_lm

BUNDLE = models.WEIGHTS_DIR / "tiny-llama"
ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")

built = pytest.mark.skipif(not (BUNDLE / "manifest.json").is_file(), reason="tiny-llama is not built yet")


def test_preset_is_tiny_gpt_sized_in_todays_recipe():
    cfg, gpt = PRESETS["tiny-llama"], PRESETS["tiny"]
    assert (cfg.positions, cfg.norm, cfg.mlp, cfg.bias) == ("rotary", "rmsnorm", "swiglu", False)
    assert (cfg.num_heads, cfg.kv_heads) == (4, 2)
    assert (cfg.vocab_size, cfg.max_len, cfg.dim, cfg.num_layers) == (
        gpt.vocab_size,
        gpt.max_len,
        gpt.dim,
        gpt.num_layers,
    )


def test_the_recorded_retrain_command_parses_to_tiny_gpts_tokenizer_and_its_own_folders():
    argv = shlex.split(models.REGISTRY["tiny-llama"].retrain)
    assert argv[:4] == ["python", "-m", "tx_explorer.train", "lm"]
    args = train_lm.parse_args(argv[4:])
    assert args.out == BUNDLE and args.run_dir.name == "lm-tiny-llama"
    assert args.tokenizer == models.WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"
    tiny = train_lm.parse_args(["--preset", "tiny"])  # tiny-gpt itself: its own folder, a new tokenizer
    assert tiny.out == models.WEIGHTS_DIR / "tiny-gpt" and str(tiny.tokenizer) in ("", ".")


def _summary(preset: str, loss: float) -> dict:
    return {
        "preset": preset,
        "config": PRESETS[preset].to_dict(),
        "parameters": 1000,
        "steps": 10,
        "planned_steps": 10,
        "batch_size": 2,
        "seed": 0,
        "tokens_seen": 2560,
        "train_tokens": 1280,
        "val_tokens": 100,
        "val_loss": loss,
        "bigram": {"val_loss": 4.5, "val_ppl": 90.0, "k": 0.1},
        "corpus": {"source": "x", "documents": 3, "characters": 1e6, "python": "3.11"},
        "minutes": 1.0,
        "cpu_minutes": 1.0,
        "threads": 1,
    }


def test_the_benchmark_section_puts_tiny_llama_beside_tiny_gpt_and_says_which_wins(tmp_path):
    path = tmp_path / "B.md"
    train_lm.update_benchmarks(path, _summary("tiny", 4.0))
    gpt_section = path.read_text()
    reference = json.loads((models.WEIGHTS_DIR / "tiny-gpt" / "training.json").read_text())
    train_lm.update_benchmarks(path, _summary("tiny-llama", reference["val_loss"] + 0.25))
    text = path.read_text()
    assert gpt_section in text  # tiny-gpt's own section is kept as it was
    section = text.split("<!-- lm-tiny-llama:start -->")[1]
    assert f"{reference['val_loss']:.3f}" in section and "4 heads sharing 2 key/value heads" in section
    assert "tiny-gpt is better by 0.250 nats" in section and "rotary positions, rmsnorm, swiglu" in section


@built
def test_bundle_loads_with_grouped_heads_and_tiny_gpts_tokenizer():
    tm = models.load_model("tiny-llama")
    assert tm.kind == "causal" and tm.config.kv_heads == 2 and tm.attention_module(0).groups == (0, 0, 1, 1)
    assert (BUNDLE / "tokenizer.json").read_bytes() == (models.WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json").read_bytes()
    assert set(p.name for p in BUNDLE.iterdir()) == set(train_lm.BUNDLE_FILES)
    info = tm.info
    assert info["val_loss"] < info["bigram"]["val_loss"] and info["cpu_minutes"] <= 20
    section = (ROOT / "BENCHMARKS.md").read_text().split("<!-- lm-tiny-llama:start -->")[1]
    assert f"{info['val_loss']:.3f}" in section.split("<!-- lm-tiny-llama:end -->")[0]


@built
def test_trained_model_decodes_the_same_with_its_cache():
    tm = models.load_model("tiny-llama")
    ids = torch.tensor([tm.encode("The module reads a line of text and returns it.").ids])  # (1, N)
    full = tm.model(ids)
    cache = KVCache()
    steps = [tm.model(ids[:, :5], cache=cache)] + [
        tm.model(ids[:, i : i + 1], cache=cache) for i in range(5, ids.shape[1])
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-4, atol=1e-4)
