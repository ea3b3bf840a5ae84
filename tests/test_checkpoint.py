"""``tx_explorer.models.load_checkpoint``: a checkpoint folder on disk, as a user has one, opened offline.

Folders are written by ``transformers``' own ``save_pretrained`` (tests/checkpoints.py) and loaded exactly as a
user would: one call with the folder path. Logits (BERT: hidden states) must equal transformers'; every bad
folder must give a clear :class:`InputError` before any tensor is read.
"""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from tests.checkpoints import FAMILIES, hf_model, write_checkpoint
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.interop import checkpoint
from tx_explorer.interop.llama import causal_lm_from_llama
from tx_explorer.models import load_checkpoint
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}
TEXT = "The cat sat on the mat; rotary heads share their keys."


def _reference(hf, family: str, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        out = hf(torch.tensor([ids]))
    return out.last_hidden_state if family == "bert" else out.logits


@pytest.mark.parametrize("family", FAMILIES)
def test_a_saved_checkpoint_loads_with_the_same_outputs_as_transformers(tmp_path, family):
    hf = write_checkpoint(tmp_path, family)
    model = load_checkpoint(tmp_path)
    assert isinstance(model, TextModel)
    assert model.kind == ("encoder" if family == "bert" else "causal")
    assert model.info["model_type"] == family and model.name == tmp_path.name
    enc = model.encode(TEXT)
    assert len(enc) > 10 and not enc.truncated
    trace = Trace()
    got = model.run(enc.ids, trace)
    torch.testing.assert_close(got, _reference(hf, family, enc.ids), **TOL)
    assert len(list(trace)) == 2  # every layer's attention is visible to the pages
    if family == "bert":
        assert enc.special[0] and enc.special[-1] and enc.tokens[0] == "[CLS]"
    else:
        assert model.byte_level and "<|endoftext|>" in model.special_tokens


def test_a_sharded_checkpoint_loads_from_its_index(tmp_path):
    hf = write_checkpoint(tmp_path, "llama", max_shard_size="20KB")
    shards = sorted(tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 2 and (tmp_path / "model.safetensors.index.json").is_file()
    model = load_checkpoint(tmp_path)
    ids = model.encode(TEXT).ids
    torch.testing.assert_close(model.run(ids), _reference(hf, "llama", ids), **TOL)


@pytest.mark.parametrize(
    ("family", "dtype", "name"), [("qwen2", torch.bfloat16, "BF16"), ("mistral", torch.float16, "F16")]
)
def test_half_precision_weights_are_upcast_on_the_cpu(tmp_path, family, dtype, name):
    hf = write_checkpoint(tmp_path, family, dtype=dtype)  # the reference holds the same rounded weights in float32
    model = load_checkpoint(tmp_path)
    assert model.info["stored_dtypes"] == [name]
    assert {p.dtype for p in model.model.parameters()} == {torch.float32}
    ids = model.encode(TEXT).ids
    torch.testing.assert_close(model.run(ids), _reference(hf, family, ids), **TOL)


# ---------------------------------------------------------------------------------------------------------
# Bad folders: a clear message (English and 中文), raised before the weights are read.


def _break(tmp_path, how: str) -> None:
    """Damage a fresh Llama checkpoint folder in one way."""
    if how == "no config":
        (tmp_path / "config.json").unlink()
    elif how == "bad config":
        (tmp_path / "config.json").write_text("{not json")
    elif how == "t5":
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"model_type": "t5"}))
    elif how == "rope scaling":
        cfg = json.loads((tmp_path / "config.json").read_text())
        cfg["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0}
        (tmp_path / "config.json").write_text(json.dumps(cfg))
    elif how == "no tokenizer":
        (tmp_path / "tokenizer.json").unlink()
    elif how == "bad tokenizer":
        (tmp_path / "tokenizer.json").write_text('{"model": 3}')
    elif how == "no weights":
        (tmp_path / "model.safetensors").unlink()
    elif how == "pickle only":
        (tmp_path / "model.safetensors").unlink()
        (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04 never unpickled")
    elif how == "truncated":
        data = (tmp_path / "model.safetensors").read_bytes()
        (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    elif how == "bad entry":
        header = b'{"model.norm.weight": {"dtype": "F32", "shape": [4]}}'
        (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    elif how == "int8":
        save_file(
            {"model.embed_tokens.weight": torch.zeros(4, 4, dtype=torch.int8)}, str(tmp_path / "model.safetensors")
        )
    elif how == "too few layers":
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 3}))
    elif how == "small vocab":
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"vocab_size": 100}))


BROKEN = {  # how → (locale key, a phrase the English message contains)
    "no config": ("checkpoint_missing_file", "config.json is missing"),
    "bad config": ("checkpoint_corrupt", "config.json is corrupt"),
    "t5": ("checkpoint_architecture", "bert, gpt2, llama, qwen2, mistral"),
    "rope scaling": ("checkpoint_variant", "llama3"),
    "no tokenizer": ("checkpoint_missing_file", "tokenizer.json is missing"),
    "bad tokenizer": ("checkpoint_corrupt", "tokenizer.json is corrupt"),
    "no weights": ("checkpoint_missing_file", "*.safetensors is missing"),
    "pickle only": ("checkpoint_pickle", "pytorch_model.bin"),
    "truncated": ("checkpoint_corrupt", "model.safetensors is corrupt"),
    "garbage": ("checkpoint_corrupt", "no valid safetensors header"),
    "bad entry": ("checkpoint_corrupt", "bad header entry"),
    "int8": ("checkpoint_dtype", "I8"),
    "too few layers": ("checkpoint_weights", "missing"),
    "small vocab": ("checkpoint_weights", "size mismatch"),
}


@pytest.mark.parametrize("how", list(BROKEN))
def test_a_broken_folder_gives_a_clear_message(tmp_path, how, monkeypatch):
    write_checkpoint(tmp_path, "llama")
    _break(tmp_path, how)
    key, phrase = BROKEN[how]
    with pytest.raises(InputError) as info:
        load_checkpoint(tmp_path)
    assert isinstance(info.value, ValueError) and info.value.key == key
    assert phrase in str(info.value)
    assert info.value.message("zh") != str(info.value)  # a Chinese message exists


def test_a_missing_shard_is_named(tmp_path):
    write_checkpoint(tmp_path, "qwen2", max_shard_size="20KB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(InputError, match=shard.name):
        load_checkpoint(tmp_path)


def test_not_a_folder(tmp_path):
    with pytest.raises(InputError, match="is not a folder"):
        load_checkpoint(tmp_path / "nowhere")


def test_weights_that_would_not_fit_are_refused_from_the_headers_alone(tmp_path, monkeypatch):
    hf = write_checkpoint(tmp_path, "mistral", dtype=torch.bfloat16)
    numel = sum(p.numel() for p in hf.parameters())  # tied: the embedding is stored once, and it is untied here
    # the bf16 file's tensors and their copy in the model: in float32, or in bfloat16 when float32 does not fit
    need = {"float32": numel * 2 + numel * 4, "bfloat16": numel * 2 + numel * 2}

    def never(*args, **kwargs):
        raise AssertionError("tensors were read before the memory check")

    monkeypatch.setattr(checkpoint, "load_file", never)
    monkeypatch.setattr(checkpoint, "available_memory", lambda device: need["bfloat16"] - 1)
    with pytest.raises(InputError) as info:
        load_checkpoint(tmp_path)
    assert info.value.key == "checkpoint_too_big"
    assert info.value.params == {k: f"{n / 2**30:.2f} GiB" for k, n in need.items()} | {
        "available": f"{(need['bfloat16'] - 1) / 2**30:.2f} GiB",
        "device": "cpu",
    }
    monkeypatch.setattr(checkpoint, "available_memory", lambda device: need["bfloat16"])
    with pytest.raises(AssertionError, match="memory check"):  # enough memory: it goes on to read the tensors
        load_checkpoint(tmp_path)


def test_the_pages_per_layer_inputs_and_mask_reproduce_a_windowed_gqa_models_attention(tmp_path):
    """The lenses re-run one layer's attention from ``attention_inputs`` and ``mask``: with Mistral's window and
    grouped K/V heads that must give the maps of the full forward pass."""
    write_checkpoint(tmp_path, "mistral")
    model = load_checkpoint(tmp_path)
    ids = model.encode(TEXT).ids
    trace = Trace()
    model.run(ids, trace)
    mask = model.mask(len(ids))
    assert int(mask[-1].sum()) == model.config.sliding_window < len(ids)
    for layer, (record, x) in enumerate(zip(trace, model.attention_inputs(ids), strict=True)):
        again = Trace()
        with torch.no_grad():
            model.attention_module(layer)(x, mask=mask, trace=again)
        torch.testing.assert_close(next(iter(again)).weights, record.weights)
        assert record.meta["kv_heads"] == 2


def test_half_precision_on_a_gpu_keeps_the_rotary_frequencies_float32():
    """On CUDA the stored bf16 is kept; the cast (tried here on the CPU) must not round θ^(−2i/Dh) or positions."""
    ours = causal_lm_from_llama(hf_model("llama", max_position_embeddings=512))
    idx = torch.randint(0, 300, (1, 300))  # positions past 256, which bf16 cannot all represent
    with torch.no_grad():
        full = ours(idx)
        half = checkpoint.cast(ours, torch.bfloat16)(idx)
    assert ours.blocks[0].attn.position.angles(torch.arange(300), torch.bfloat16).dtype == torch.float32
    assert ours.blocks[0].attn.qkv.weight.dtype == torch.bfloat16 and half.dtype == torch.bfloat16
    assert (half.float() - full).abs().max() < 0.05 * full.abs().max()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_half_precision_weights_stay_half_on_a_gpu(tmp_path):
    hf = write_checkpoint(tmp_path, "qwen2", dtype=torch.bfloat16)
    model = load_checkpoint(tmp_path, device="cuda")
    assert {p.dtype for p in model.model.parameters()} == {torch.bfloat16}
    ids = model.encode(TEXT).ids
    torch.testing.assert_close(model.run(ids).float().cpu(), _reference(hf, "qwen2", ids), atol=0.05, rtol=0.05)


def test_a_tokenizer_larger_than_the_embedding_is_refused(tmp_path):
    write_checkpoint(tmp_path, "gpt2", vocab_size=200)  # the tokenizer has more ids than the embedding rows
    with pytest.raises(InputError, match="only 200 rows") as info:
        load_checkpoint(tmp_path)
    assert info.value.key == "checkpoint_vocab"
