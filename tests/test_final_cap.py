"""Gemma 2's final soft cap c·tanh(z/c) in the analyses (issue 41): the logit lens, the attribution's objective,
a rerun from a layer, the sink-window losses and the norm lab's block-by-block forward read their probabilities
through ``CausalLM.logits``, so on a random Gemma 2 folder (a cap small enough to bite) they are the model's own."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.test_architectures import FINAL_CAP, TINY, saved
from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis import norm_lab
from tx_explorer.interop.checkpoint import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")
N = 12


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory, one_thread):
    folder, _ = saved(tmp_path_factory.mktemp("gemma2-cap"), "gemma2")
    return load_checkpoint(folder)


@pytest.fixture(scope="module")
def ids() -> list[int]:
    return torch.randint(0, TINY["vocab_size"], (N,), generator=torch.Generator().manual_seed(3)).tolist()


@pytest.fixture(scope="module")
def own(gemma2, ids) -> torch.Tensor:
    """The model's forward: capped logits ``[N, V]``; the cap must bite, or the test proves nothing."""
    with torch.no_grad():
        logits = gemma2.model(torch.tensor([ids]))[0]
        uncapped = gemma2.model.head(gemma2.model.hidden(gemma2.model.embed(torch.tensor([ids])), gemma2.mask(N), None))
    assert gemma2.config.final_softcap == FINAL_CAP and float(uncapped.abs().max()) > FINAL_CAP
    return logits


def test_logits_are_the_head_then_the_cap(gemma2, ids, own):
    with torch.no_grad():
        hidden = gemma2.model.hidden(gemma2.model.embed(torch.tensor([ids])), gemma2.mask(N), None)[0]
        torch.testing.assert_close(gemma2.model.logits(hidden), own)
        torch.testing.assert_close(FINAL_CAP * torch.tanh(gemma2.model.head(hidden) / FINAL_CAP), own)


def test_the_logit_lens_ends_on_the_models_distribution(gemma2, ids, own):
    lens = hs.logit_lens(gemma2, ids)
    assert lens.final_max_diff < 1e-5
    assert float(lens.kl_to_final[-1].max()) < 1e-6
    top = own.softmax(-1).topk(hs.TOP_K, dim=-1)
    torch.testing.assert_close(torch.from_numpy(lens.top_probs[-1]), top.values)


def test_the_attributions_objective_is_the_models_probability(gemma2, ids, own):
    found = hs.attribution(gemma2, ids, steps=2, points=3, random_orders=1)
    last = own[-1].clone()
    last[list(gemma2.special_ids)] = -torch.inf  # the attribution's target: the most likely ordinary token
    target = int(last.argmax())
    assert found.f_input == pytest.approx(float(own[-1].softmax(-1)[target]), abs=1e-6)


def test_a_rerun_and_the_sink_windows_read_the_capped_logits(gemma2, ids, own):
    with torch.no_grad():
        x = gemma2.model.embed(torch.tensor([ids]))
        torch.testing.assert_close(hs.rerun(gemma2, 0, x, last_only=True)[0, 0], own[-1])
    window = 4
    losses = hs.sink_windows(gemma2, ids, window).losses
    want = F.cross_entropy(own[window:-1], torch.tensor(ids[window + 1 :])).item()
    assert losses["full"] == pytest.approx(want, abs=1e-5)


def test_the_norm_labs_forward_is_the_models(gemma2, ids, own):
    with torch.no_grad():
        logits, _ = norm_lab.forward_with_stats(gemma2.model, torch.tensor([ids]))
    torch.testing.assert_close(logits[0], own)
