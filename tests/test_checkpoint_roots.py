"""Folders a visitor types are opened only inside the allowed roots (tx_explorer.paths), with one refusal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tx_explorer import paths
from tx_explorer.errors import InputError
from tx_explorer.interop import checkpoint


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """An allowed root, an HF cache, and a folder outside both (with a file in it)."""
    allowed, cache, outside = tmp_path / "allowed", tmp_path / "hf" / "hub", tmp_path / "outside"
    for d in (allowed / "model", cache, outside / "model"):
        d.mkdir(parents=True)
    (outside / "model" / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv(paths.ENV_ROOTS, str(allowed))
    monkeypatch.setenv(paths.ENV_CONFIG, str(tmp_path / "absent.toml"))
    return {"allowed": allowed, "cache": cache, "outside": outside}


def refusal(text: str) -> str:
    with pytest.raises(InputError) as e:
        paths.allowed_folder(text)
    assert e.value.key == "folder_not_allowed"
    return e.value.message("en")


def test_folders_inside_a_root_are_allowed_with_their_real_path(roots):
    assert paths.allowed_folder(str(roots["allowed"] / "model")) == (roots["allowed"] / "model").resolve()
    assert paths.allowed_folder(str(roots["allowed"])) == roots["allowed"].resolve()  # the root itself
    assert paths.allowed_folder(f"  {roots['cache']}  ") == roots["cache"].resolve()  # the HF cache; spaces trimmed
    # A folder not made yet inside a root is allowed here; the loader then says it is not a folder.
    assert paths.allowed_folder(str(roots["allowed"] / "later")) == (roots["allowed"] / "later").resolve()


def test_outside_paths_get_one_message_whether_or_not_they_exist(roots):
    outside = roots["outside"]
    messages = {
        refusal(str(outside / "model")),  # exists
        refusal(str(outside / "model" / "config.json")),  # a file that exists
        refusal(str(outside / "nothing-here")),  # does not exist
        refusal("/etc"),
        refusal("/no/such/folder"),
        refusal(""),
        refusal("   "),
        refusal("relative/folder"),
        refusal("bad\x00name"),
        refusal("x" * 5000),
    }
    assert len(messages) == 1
    (message,) = messages
    assert str(outside) not in message and "nothing-here" not in message and paths.ENV_ROOTS in message
    assert "无法打开" in InputError("folder_not_allowed", variable=paths.ENV_ROOTS).message("zh")


def test_dot_dot_out_of_a_root_is_refused(roots):
    escape = f"{roots['allowed']}/../outside/model"
    assert os.path.isdir(escape)  # the path exists: .. climbs out of the root
    refusal(escape)
    refusal(f"{roots['allowed']}/model/../../outside")
    # .. that stays inside is fine
    assert paths.allowed_folder(f"{roots['allowed']}/model/../model") == (roots["allowed"] / "model").resolve()


def test_a_symlink_inside_a_root_pointing_outside_is_refused(roots, monkeypatch):
    link = roots["allowed"] / "link"
    link.symlink_to(roots["outside"] / "model", target_is_directory=True)
    refusal(str(link))
    refusal(str(link / "config.json"))
    # and a symlinked root is followed: its real folder is the root
    alias = roots["outside"].parent / "alias"
    alias.symlink_to(roots["allowed"], target_is_directory=True)
    monkeypatch.setenv(paths.ENV_ROOTS, str(alias))
    assert paths.allowed_folder(str(roots["allowed"] / "model")) == (roots["allowed"] / "model").resolve()
    assert paths.allowed_folder(str(alias / "model")) == (roots["allowed"] / "model").resolve()


def test_roots_from_the_config_file_and_a_list_in_the_environment(roots, tmp_path, monkeypatch):
    second = tmp_path / "second"
    second.mkdir()
    refusal(str(second))
    monkeypatch.setenv(paths.ENV_ROOTS, f"{roots['allowed']}{os.pathsep}{os.pathsep}{second}")  # an empty entry
    assert paths.allowed_folder(str(second)) == second.resolve()

    monkeypatch.setenv(paths.ENV_ROOTS, "")
    refusal(str(second))
    config = tmp_path / "tx.toml"
    config.write_text(f'[tx_explorer]\nmodel_roots = ["{second}"]\n')
    monkeypatch.setenv(paths.ENV_CONFIG, str(config))
    assert paths.allowed_folder(str(second)) == second.resolve()
    config.write_text("[tx_explorer]\nmodel_roots = 3\n")  # malformed: ignored, nothing opens
    refusal(str(second))
    config.write_text("not = [toml")
    refusal(str(second))


def test_open_checkpoint_refuses_before_reading_anything(roots, monkeypatch):
    def never(*a, **k):
        raise AssertionError("the loader must not be reached")

    monkeypatch.setattr(checkpoint, "load_checkpoint", never)
    with pytest.raises(InputError, match="cannot be opened"):
        paths.open_checkpoint(str(roots["outside"] / "model"))


def _snapshot(cache: Path, repo: str, rev: str, model_type: str, files=("model.safetensors", "tokenizer.json")):
    folder = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / rev
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    for name in files:
        (folder / name).write_bytes(b"")
    return folder


def test_the_cache_lists_supported_snapshots_with_weights_and_a_tokenizer(roots):
    cache = roots["cache"]
    qwen = _snapshot(cache, "Qwen/Qwen2-0.5B", "abc", "qwen2")
    _snapshot(cache, "Qwen/Qwen2-0.5B", "old", "qwen2")
    (cache / "models--Qwen--Qwen2-0.5B" / "refs").mkdir()
    (cache / "models--Qwen--Qwen2-0.5B" / "refs" / "main").write_text("abc\n")
    bert = _snapshot(cache, "sentence-transformers/all-MiniLM-L6-v2", "r1", "bert")
    _snapshot(cache, "openai/clip", "r1", "clip")  # unsupported architecture
    _snapshot(cache, "someone/pickles", "r1", "llama", files=("pytorch_model.bin", "tokenizer.json"))
    _snapshot(cache, "someone/no-tokenizer", "r1", "llama", files=("model.safetensors",))
    broken = _snapshot(cache, "someone/broken", "r1", "llama")
    (broken / "config.json").write_text("[not an object")
    (cache / "models--empty").mkdir()
    found = paths.cached_checkpoints()
    assert [(c.repo, c.path, c.kind) for c in found] == [
        ("Qwen/Qwen2-0.5B", qwen, "causal"),
        ("sentence-transformers/all-MiniLM-L6-v2", bert, "encoder"),
    ]
    assert all(paths.allowed_folder(str(c.path)) == c.path.resolve() for c in found)


def test_supported_families_match_the_loader():
    assert paths.SUPPORTED == {name: kind for name, (kind, _) in checkpoint.FAMILIES.items()}


def test_hf_cache_location_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert paths.hf_hub_cache() == tmp_path / "home" / "hub"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.hf_hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"


def test_gguf_files_are_listed_from_the_cache_and_the_roots_and_open_only_inside(roots):
    from tests.checkpoints import write_gguf

    snapshot = roots["cache"] / "models--Org--Tiny-GGUF" / "snapshots" / "r1"
    snapshot.mkdir(parents=True)
    in_cache = snapshot / "tiny-q8_0.gguf"
    write_gguf(in_cache, "qwen2", "Q8_0")
    (roots["allowed"] / "model" / "blob").write_bytes(in_cache.read_bytes())  # Ollama-style: no extension
    in_root = roots["allowed"] / "model" / "tiny.gguf"
    in_root.write_bytes(in_cache.read_bytes())
    (roots["outside"] / "secret.gguf").write_bytes(in_cache.read_bytes())
    found = [(c.repo, c.path, c.kind, c.where) for c in paths.cached_checkpoints()]
    assert found == [
        ("Org/Tiny-GGUF/tiny-q8_0.gguf", in_cache, "causal", "hf_cache"),  # labelled by where each one is
        ("model/tiny.gguf", in_root, "causal", "root"),
    ]
    assert refusal(str(roots["outside"] / "secret.gguf")) == refusal(str(roots["outside"] / "nothing.gguf"))
    tm = paths.open_checkpoint(str(roots["allowed"] / "model" / "blob"))  # recognised by its magic, not its name
    assert tm.info["model_type"] == "qwen2" and tm.kind == "causal"


def test_damaged_gguf_files_are_not_listed_until_they_are_whole(roots):
    """A GGUF file whose header fails the loader's check (cut short, not GGUF at all) would fail only once picked: it
    is left out of the list, from its header alone, and listed once it is whole (its size and time checked anew)."""
    from tests.checkpoints import write_gguf
    from tx_explorer.interop import gguf

    snapshot = roots["cache"] / "models--Org--Cut-GGUF" / "snapshots" / "r1"
    snapshot.mkdir(parents=True)
    good = roots["allowed"] / "good.gguf"
    write_gguf(good, "qwen2", "Q8_0")
    whole = good.read_bytes()
    cut, in_cache, fake = roots["allowed"] / "model" / "cut.gguf", snapshot / "cut.gguf", roots["allowed"] / "fake.gguf"
    for path in (cut, in_cache):
        path.write_bytes(whole[: len(whole) // 2])
    fake.write_bytes(b"PK\x03\x04" + whole[4:])
    for path in (cut, in_cache, fake):
        with pytest.raises(InputError) as e:
            gguf.read_header(path)  # what picking it would have said
        assert e.value.key == "checkpoint_corrupt"
    assert [c.path for c in paths.cached_checkpoints()] == [good]
    cut.write_bytes(whole)  # the copy finished: another size and time, read again
    assert [c.path for c in paths.cached_checkpoints()] == [good, cut]
