"""The process-wide model cache: one read-only object per name, one load even when threads ask at once (its
filling by ``serve.py``'s warm-up is in test_serve.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
import torch

from tx_explorer import model_cache, models, ui


class Fake:
    """A loaded model as the families return one: a network kept on an attribute."""

    def __init__(self) -> None:
        self.model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1))


def counting_cache(delay_s: float = 0.0) -> tuple[model_cache.ModelCache, Counter]:
    calls: Counter[str] = Counter()

    def load(name: str) -> Fake:
        calls[name] += 1
        time.sleep(delay_s)  # a slow load: other threads arrive while it runs
        return Fake()

    return model_cache.ModelCache(load), calls


def test_the_same_object_every_time_one_load_per_name():
    cache, calls = counting_cache()
    a, b = cache.get("a"), cache.get("b")
    assert cache.get("a") is a and cache.get("b") is b and a is not b
    assert calls == {"a": 1, "b": 1}
    assert cache.loaded() == ["a", "b"]


def test_threads_asking_at_once_share_one_load():
    cache, calls = counting_cache(delay_s=0.2)
    start = threading.Barrier(8)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(cache.get("m"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls["m"] == 1
    assert len(got) == 8 and all(g is got[0] for g in got)


def test_a_failed_load_is_not_cached():
    attempts = []

    def load(name: str) -> Fake:
        attempts.append(name)
        if len(attempts) == 1:
            raise models.BundleError("missing")
        return Fake()

    cache = model_cache.ModelCache(load)
    with pytest.raises(models.BundleError):
        cache.get("m")
    assert isinstance(cache.get("m"), Fake) and attempts == ["m", "m"]


def test_cached_models_are_read_only():
    cache, _ = counting_cache()
    net = cache.get("m").model
    assert not any(m.training for m in net.modules())
    assert not any(p.requires_grad for p in net.parameters())
    assert any(True for _ in net.parameters())


def test_the_app_reads_registered_models_from_the_shared_cache():
    assert ui.cached_model("tiny-gpt") is model_cache.shared_model("tiny-gpt")
