"""What the packaged SmolLM2-135M-Instruct shows that our tiny models cannot: named induction, previous- and
duplicate-token heads, an attention sink that moves to whatever token comes first, and StreamingLLM's window
observation; each computed here from the model, as the pages compute it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import models
from tx_explorer.analysis import head_science as hs
from tx_explorer.errors import InputError
from tx_explorer.model_cache import shared_model

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = (
    "The cat sat on the mat. It was a sunny day, and the children played in the garden while their parents "
    "talked about the weather, the news and the price of bread. Later, everyone went inside for dinner."
)


@pytest.fixture(scope="module")
def tm():
    assert "smollm2-135m-instruct" in models.available_models("text", kind="causal"), "make run installs it"
    return shared_model("smollm2-135m-instruct")


def test_the_taxonomy_finds_real_induction_previous_and_duplicate_heads(tm):
    r = hs.taxonomy(tm, tm.encode(TEXT).ids)
    best = hs.strongest(r.scores["induction"], k=3)
    assert best[0][2] >= 0.5, best  # the bar; tiny-gpt's best is 0.03
    assert [b[2] for b in best] == sorted((b[2] for b in best), reverse=True)
    assert best[0][:2] == tuple(int(i) for i in np.unravel_index(r.scores["induction"].argmax(), r.sinks.shape))
    assert hs.strongest(r.scores["previous"], k=1)[0][2] >= 0.5
    assert r.sinks.any()  # heads that put half their attention or more on the first token


def test_sink_windows_measures_the_first_token_three_ways(tm):
    ids = tm.encode(TEXT).ids
    w = hs.sink_windows(tm, ids, window=8)
    assert w.share.shape == w.share_dropped.shape == (tm.config.num_layers,)
    assert w.scored == len(ids) - 9
    assert set(w.losses) == {"full", "window", "window_sink"}
    # The full-mask loss is the model's own loss on those positions (the masks change nothing else).
    with torch.no_grad():
        logits = tm.model(torch.tensor([ids]))[0, 8:-1]
    full = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[9:])).item()
    assert w.losses["full"] == pytest.approx(full, abs=1e-4)
    # A window one short of the text evicts only the first token from the one query scored: keeping it back
    # restores the full mask exactly.
    edge = hs.sink_windows(tm, ids[:12], window=10)
    assert edge.scored == 1 and edge.losses["window_sink"] == pytest.approx(edge.losses["full"], abs=1e-5)
    assert edge.losses["window"] != pytest.approx(edge.losses["full"], abs=1e-5)
    with pytest.raises(InputError):
        hs.sink_windows(tm, ids[:5], window=8)
