"""What a page picks from: the compute device, the shared models, a text model (registered, cached or a folder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st
import torch

from tx_explorer import data, locales, model_cache, models, paths
from tx_explorer.errors import InputError
from tx_explorer.ui.sections import optional
from tx_explorer.ui.text import error_text, escape_markdown, texts
from tx_explorer.ui.url_state import restore_language
from tx_explorer.views import Text


@st.cache_resource(show_spinner=False)
def device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def cached_model(name: str) -> Any:
    """A registered model by name, or a checkpoint folder by its path, loaded once per server process.

    Every session shares the object, so it is made read-only: each module in it in eval mode, no gradients.
    Registered models live in the process-wide :mod:`tx_explorer.model_cache` (every one fits, < 0.5 GB in
    all), which ``serve.py`` fills in the background at server start.
    """
    return model_cache.shared_model(name) if name in models.REGISTRY else _checkpoint(name)


def bundled(name: str, T: Text) -> Any | None:
    """The bundled model ``name`` (:func:`cached_model`), or None after the page's warning ``no_bundle`` (its files
    not built, or damaged): the page goes on without the sections that need it."""
    return optional(lambda: cached_model(name), models.BundleError, lambda e: T("no_bundle", message=str(e)))


@st.cache_resource(show_spinner=False, max_entries=2)  # a visitor's checkpoints may be gigabytes: keep the last two
def _checkpoint(folder: str) -> Any:
    """A checkpoint folder, checked against the allowed roots again, then loaded whole or not at all."""
    return model_cache.read_only(paths.open_checkpoint(folder))


FOLDER = "\0folder"  # the picker's "a checkpoint folder" choice: no registered name or path contains a NUL


# Where a listed checkpoint was found (paths.Cached.where) → the words its choice is labelled with.
FOUND_IN = {"hf_cache": "model_cached", "root": "model_in_root"}


@st.cache_data(ttl=30, show_spinner=False)  # a directory scan: cheap, but not on every rerun
def _cached_checkpoints(kind: str | None) -> dict[str, paths.Cached]:
    return {str(c.path): c for c in paths.cached_checkpoints() if kind is None or c.kind == kind}


def text_model_picker(
    label: str,
    key: str,
    *,
    kind: str | None = None,
    help: str | None = None,
    where: Any = st,
    extra: Sequence[str] = (),
) -> str | None:
    """A text page's model choice: registered models, checkpoints in the local Hugging Face cache and GGUF files in
    the operator's folders (each labelled with where it is), or a typed folder or GGUF file.

    ``where`` holds the selectbox (a column); the folder's text box goes below. Returns a name for
    :func:`cached_model` (a registered name or a checkpoint folder), or None after a message while the chosen
    folder is not typed yet or lies outside the allowed roots (:mod:`tx_explorer.paths`).
    """
    T = texts("common")
    cached = _cached_checkpoints(kind)
    options = [*models.available_models("text", kind=kind), *extra, *cached, FOLDER]  # extra: e.g. tiny-moe

    labels = {path: T(FOUND_IN[c.where], repo=c.repo) for path, c in cached.items()}
    labels[FOLDER] = T("model_folder_option")
    choice = where.selectbox(label, options, key=key, help=help, format_func=lambda o: labels.get(o, o))
    if choice != FOLDER:
        return choice
    from tx_explorer.interop import checkpoint, gguf  # the loader's own lists, read once a path is to be typed

    what = T(
        "model_folder_help",
        types=", ".join(checkpoint.FAMILIES),
        gguf=", ".join(gguf.ARCHITECTURES),
        variable=paths.ENV_ROOTS,
    )
    typed = st.text_input(T("model_folder"), key=f"{key}_folder", max_chars=4096, help=what)
    if not typed.strip():
        st.info(T("model_folder_empty"))
        return None
    try:
        return str(paths.allowed_folder(typed))
    except InputError as exc:
        st.error(T("error_input", message=escape_markdown(error_text(exc))))
        return None


def _precision(T, weights: str) -> str:
    """The weights' precision in words; for bfloat16 with what it cost when last measured (data.bf16_cost)."""
    if weights != "bfloat16":
        return T(f"arch_weights_{weights}")
    cost = data.bf16_cost()
    return T(
        "arch_weights_bfloat16",
        model=cost["model"],
        logprob=f"{cost['logprob_top1']:.2f}",
        weight=f"{cost['map']:.2f}",
        agree=f"{cost['agree']:.0%}",
    )


def architecture_caption(tm: Any) -> str:
    """The model's card in one line: how a text model's blocks are built, in words (positions, K/V sharing, window,
    norm and MLP kinds), and the precision its weights were read in where a checkpoint records it
    (``info["dtype"]``: float32 where it fit in the memory left, else bfloat16, with what bfloat16 costs)."""
    cfg, weights = tm.config, tm.info.get("dtype")
    T = texts("common")
    heads, kv = cfg.num_heads, cfg.kv_heads
    sharing = "mha" if kv == heads else "mqa" if kv == 1 else "gqa"
    parts = [
        _positions(T, cfg),
        T(f"arch_{sharing}", heads=heads, kv=kv),
        *([_window(T, cfg)] if cfg.sliding_window else []),
        *([T("arch_qk_norm")] if cfg.qk_norm else []),
        *([T("arch_sinks")] if cfg.attention_sinks else []),
        T(f"arch_norm_{cfg.norm}"),
        T(f"arch_mlp_{cfg.mlp}"),
        *([_precision(T, weights)] if weights else []),
    ]
    return " · ".join(parts)


def _local_layers(cfg: Any) -> list[int]:
    return [i for i, kind in enumerate(cfg.layer_types or ()) if kind == "sliding"]


def _positions(T: Any, cfg: Any) -> str:
    """Rotary's θ, per kind of layer where local layers turn by their own (Gemma 3: 10,000 local, 1,000,000 global)."""
    local = _local_layers(cfg)
    if cfg.positions == "rotary" and local and cfg.rope_local_theta not in (None, cfg.rope_theta):
        return T("arch_positions_rotary_local", local=cfg.rope_local_theta, theta=cfg.rope_theta)
    return T(f"arch_positions_{cfg.positions}", theta=cfg.rope_theta)


def _window(T: Any, cfg: Any) -> str:
    """The window: on every layer (Mistral), or on the local layers, the global ones named (Gemma 3)."""
    if cfg.layer_types is None:
        return T("arch_window", window=cfg.sliding_window)
    local = _local_layers(cfg)
    full = [str(i) for i in range(cfg.num_layers) if i not in local]
    key = "arch_window_local" + "_one" * (len(local) == 1) + "_global" * (len(full) == 1)  # "1 local layer"
    return T(key, window=cfg.sliding_window, n=len(local), full=", ".join(full))


def _relabel_choices() -> None:
    """Every kept choice assigned its own value again, as the language changes.

    A selectbox or multiselect keeps showing the labels it was drawn with when only its ``format_func`` changes (a
    page switched to 中文 still read "None" where its options said 无); a value assigned through Session State is sent
    to the browser again, in the new labels. Only plain values are assigned: a button's, an upload's or a data
    editor's state cannot be (Streamlit refuses it), and it has no label to change."""
    plain = (str, int, float)
    for key, value in list(st.session_state.items()):
        items = value if isinstance(value, list | tuple) else [value]
        if key != "lang" and all(isinstance(v, plain) and not isinstance(v, bool) for v in items):
            st.session_state[key] = value


def sidebar() -> None:
    """Language switch, compute device and torch version (shown on every page). The language comes from the URL
    when a reload or a shared link brings one (:mod:`~tx_explorer.ui.url_state`)."""
    restore_language()  # before the switch is drawn and the first text is looked up in it
    T = texts("common")
    with st.sidebar:
        st.radio(
            T("language"),
            options=list(locales.LANGUAGES),
            format_func=locales.LANGUAGES.get,
            key="lang",
            horizontal=True,
            on_change=_relabel_choices,
        )
        dev = device()
        name = f"CUDA ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "CPU"
        st.caption(T("device", device=name) + " · " + T("torch", version=torch.__version__))
