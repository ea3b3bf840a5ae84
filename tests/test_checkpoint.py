"""``tx_explorer.models.load_checkpoint``: a checkpoint folder on disk, as a user has one, opened offline.

Folders are written by ``transformers``' own ``save_pretrained`` (tests/checkpoints.py) and loaded exactly as a
user would: one call with the folder path. Logits (BERT: hidden states) must equal transformers'; every bad
folder must give a clear :class:`InputError` before any tensor is read.
"""

from __future__ import annotations

import json
import pickle
import struct

import pytest
import torch
from safetensors.torch import save_file

from tests.checkpoints import FAMILIES, hf_model, write_checkpoint
from tests.zh_text import english_words
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.interop import checkpoint
from tx_explorer.interop.llama import causal_lm_from_llama
from tx_explorer.models import load_checkpoint
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}
TEXT = "The cat sat on the mat; rotary heads share their keys."


REASONS = ("reason", "missing")  # the fields that hold a message of their own, never a name or a number


def _values(exc: InputError) -> list[str]:
    """The values an error's message quotes (file and tensor names, numbers …), its reason's included."""
    out = []
    for key, value in exc.params.items():
        if isinstance(value, InputError):
            out += _values(value)
        elif key not in REASONS:  # a reason given as text is read, not taken out
            out += [str(value), repr(value)]
    return out


def english_in_chinese(exc: InputError) -> list[str]:
    """The English words of ``exc``'s Chinese message, once the names and numbers it quotes are taken out: a reason
    left in English (a parser's words, a raw string) shows up here."""
    message = exc.message("zh")
    for value in sorted(_values(exc), key=len, reverse=True):  # "a.gguf" before "a"
        message = message.replace(value, " ")
    # A reason goes in full-width brackets ("已损坏或不完整（…）"), which prose lets through as a gloss: read it.
    return english_words(message.replace("（", " ").replace("）", " "), prose=True)


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
        (tmp_path / "config.json").write_text('{"model_type": "llama",\n  "hidden_size": 64,')
    elif how == "config not utf-8":
        (tmp_path / "config.json").write_bytes(b'{"model_type": "llama\xff"}')
    elif how == "config list":
        (tmp_path / "config.json").write_text("[1, 2]")
    elif how == "t5":
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"model_type": "t5"}))
    elif how == "rope scaling":
        cfg = json.loads((tmp_path / "config.json").read_text())
        cfg["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0}
        (tmp_path / "config.json").write_text(json.dumps(cfg))
    elif how in CONFIG_EDITS:
        cfg = json.loads((tmp_path / "config.json").read_text()) | CONFIG_EDITS[how]
        (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not DROP}))
    elif how == "no tokenizer":
        (tmp_path / "tokenizer.json").unlink()
    elif how == "bad tokenizer":
        (tmp_path / "tokenizer.json").write_text('{"model": 3}')
    elif how == "tokenizer not utf-8":
        (tmp_path / "tokenizer.json").write_bytes(b"\xff\xfe{")
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
    elif how == "a million layers":
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 1_000_000}))
    elif how == "small vocab":
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"vocab_size": 100}))


DROP = object()  # a config field taken out
CONFIG_EDITS = {  # how → the fields of config.json changed
    "heads not dividing": {"num_attention_heads": 5},  # 64 wide in heads of 8: not 5 of them
    "no heads field": {"num_attention_heads": DROP},
    "zero heads": {"num_attention_heads": 0},
    "size as text": {"hidden_size": "64"},
}
BROKEN = {  # how → (locale key, a phrase the English message contains, one the Chinese message contains)
    "no config": ("checkpoint_missing_file", "config.json is missing", "缺少 config.json"),
    "bad config": ("checkpoint_corrupt", "(not valid JSON at line 2, column 21)", "（第 2 行第 21 列不是有效的 JSON）"),
    "config not utf-8": ("checkpoint_corrupt", "its text is not UTF-8", "不是 UTF-8 编码"),
    "config list": ("checkpoint_corrupt", "it holds no JSON object", "没有 JSON 对象"),
    "t5": ("checkpoint_architecture", "bert, gpt2, llama, qwen2, mistral", "不支持 model_type 't5'"),
    "rope scaling": ("checkpoint_variant", "rotary scaling 'llama3' is not implemented", "未实现旋转位置缩放 'llama3'"),
    "heads not dividing": (
        "checkpoint_variant",
        "head_dim=8 differs from hidden_size / num_attention_heads = 64/5",
        "64/5：本项目的注意力把模型宽度平均分给各个头",
    ),
    "no heads field": ("checkpoint_corrupt", "num_attention_heads is missing", "缺少 num_attention_heads"),
    "zero heads": ("checkpoint_corrupt", "text, `null` or zero", "文本、`null` 或 0"),
    "size as text": ("checkpoint_corrupt", "text, `null` or zero", "文本、`null` 或 0"),
    "no tokenizer": ("checkpoint_missing_file", "tokenizer.json is missing", "缺少 tokenizer.json"),
    "bad tokenizer": ("checkpoint_corrupt", "at line 1, column 12", "第 1 行第 12 列"),
    "tokenizer not utf-8": ("checkpoint_corrupt", "cannot read it as a tokenizer", "无法把它读作分词器"),
    "no weights": ("checkpoint_missing_file", "*.safetensors is missing", "缺少 *.safetensors"),
    "pickle only": ("checkpoint_pickle", "pytorch_model.bin", "pytorch_model.bin"),
    "truncated": ("checkpoint_corrupt", "model.safetensors is corrupt", "超出了文件末尾"),
    "garbage": ("checkpoint_corrupt", "no valid `safetensors` header", "没有有效的 `safetensors` 文件头"),
    "bad entry": ("checkpoint_corrupt", "bad header entry", "文件头条目有误"),
    "int8": ("checkpoint_dtype", "I8", "I8"),
    "too few layers": (
        "checkpoint_weights",
        "config.json asks for 3 layers, but the weights hold the tensors of 2",
        "config.json 要求 3 层，但权重中只有 2 层的张量",
    ),
    # refused before any block is built (it took 10 GB and minutes building empty blocks)
    "a million layers": ("checkpoint_weights", "asks for 1000000 layers", "要求 1000000 层"),
    "small vocab": ("checkpoint_weights", "size mismatch", "的形状不符：文件中的张量为 [300, 64]，模型需要 [100, 64]"),
}


@pytest.mark.parametrize("how", list(BROKEN))
def test_a_broken_folder_gives_a_clear_message(tmp_path, how, monkeypatch):
    write_checkpoint(tmp_path, "llama")
    _break(tmp_path, how)
    key, phrase, chinese = BROKEN[how]
    with pytest.raises(InputError) as info:
        load_checkpoint(tmp_path)
    assert isinstance(info.value, ValueError) and info.value.key == key
    assert phrase in str(info.value)
    assert chinese in info.value.message("zh"), info.value.message("zh")
    assert not english_in_chinese(info.value), info.value.message("zh")  # the reason in Chinese too
    again = pickle.loads(pickle.dumps(info.value))  # as a worker process or a cache hands it back
    assert (type(again), again.message("zh"), str(again)) == (
        type(info.value),
        info.value.message("zh"),
        str(info.value),
    )


def test_a_missing_shard_is_named(tmp_path):
    write_checkpoint(tmp_path, "qwen2", max_shard_size="20KB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(InputError, match=shard.name):
        load_checkpoint(tmp_path)


def test_not_a_folder(tmp_path):
    with pytest.raises(InputError, match="is not a folder"):
        load_checkpoint(tmp_path / "nowhere")
    with pytest.raises(InputError, match="is not a folder"):  # a name past the file system's 255 bytes: OSError
        load_checkpoint(tmp_path / ("a" * 300))


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
