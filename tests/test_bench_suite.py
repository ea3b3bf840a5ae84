"""The benchmark suite's own logic (no timing is asserted anywhere): verdicts, where sections go, coverage of
every page of app.py, the per-session memory arithmetic and the BertViz table's fallback."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from benchmarks import FILE_ENV, browser, heads_payload, kv_cache, pages, sections, verdict, write_section
from benchmarks import __main__ as dispatcher
from harness.browser import app_pages


def test_verdict_says_met_or_missed_by_how_much():
    assert verdict(120.0, 300.0) == "met (180 ms under)"
    assert verdict(450.0, 300.0) == "missed by 150 ms (1.50×)"
    assert verdict(12.5, 10.0, "s") == "missed by 2.5 s (1.25×)"
    assert verdict(10.0, 10.0, "s").startswith("met")


def test_sections_go_to_the_scratch_file_when_asked(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch.md"
    monkeypatch.setenv(FILE_ENV, str(scratch))
    write_section("pages", "smoke numbers")
    assert "smoke numbers" in scratch.read_text()
    monkeypatch.delenv(FILE_ENV)
    explicit = tmp_path / "explicit.md"
    write_section("pages", "other", explicit)
    assert "other" in explicit.read_text() and "other" not in scratch.read_text()


def test_every_page_of_the_app_has_an_interaction_and_a_browser_input():
    stems = {Path(p).stem for p in app_pages()}
    assert set(pages.INTERACTIONS) == stems
    assert set(browser.INPUTS) == stems
    assert all(i.page == page for page, rows in pages.INTERACTIONS.items() for i in rows)


def test_dispatcher_runs_the_new_benchmarks_but_not_the_bertviz_child():
    names = dispatcher._modules()
    assert {"attention", "browser", "heads_payload", "pages", "sections"} <= set(names)
    assert "_bertviz" not in names


def test_per_session_memory_is_the_growth_after_the_first_session():
    rows = [(0, {"VmRSS": 300.0}), (1, {"VmRSS": 700.0}), (2, {"VmRSS": 712.0}), (4, {"VmRSS": 736.0})]
    assert browser.per_session_mb(rows) == 12.0
    assert browser.per_session_mb(rows[:2]) is None
    own = browser.status_mb(os.getpid())
    assert 0 < own["VmRSS"] <= own["VmHWM"]


def test_bertviz_table_falls_back_to_the_recorded_figures():
    ours = [(32, 0.5, 1_000_000, 1), (128, 1.5, 1_000_000, 1), (512, 2.5, 10_000_000, 1)]
    fallback = heads_payload.table(ours, None)
    assert "| 53.0 MB | 53×" in fallback[3] and "—" in fallback[3]
    assert "time ≤ 1 s: missed by 0.5 s" in fallback[3] and "bytes ≤ 2 MB: met" in fallback[3]
    measured = {
        "rows": [
            {"tokens": n, "forward_s": 0.1, "build_s": 1.0, "bytes": 4e6 * (i + 1), "runs": 1}
            for i, n in enumerate(heads_payload.SIZES)
        ]
    }
    row = heads_payload.table(ours, measured)[2]
    assert "0.10 + 1.00 s" in row and "| 4.0 MB | 4× |" in row and row.endswith("| — |")


def test_every_page_interaction_runs_and_returns_serialisable_figures(one_thread):
    """The benchmark calls the pages' library functions directly: it must keep up when they change."""
    rows = [i for group in pages.INTERACTIONS.values() for i in group if i.models != ("minilm-l6",)]
    loaded = {name: pages.load(name) for name in sorted({n for i in rows for n in i.models})}
    for it in rows:
        result = it.run(loaded)
        assert result.figures and result.detail, it.page
        assert all(len(pages.pio.to_json(f, validate=False)) > 100 for f in result.figures), it.page


def test_kv_cache_benchmark_decodes_the_same_tokens_both_ways_and_counts_the_cache():
    from tx_explorer.config import PRESETS
    from tx_explorer.modules.transformer import CausalLM

    torch.manual_seed(0)
    lm = CausalLM(PRESETS["tiny-llama"]).eval()
    prompt = torch.randint(0, lm.cfg.vocab_size, (1, 8))
    full, _, no_bytes = kv_cache.decode(lm, prompt, 20, cached=False)
    cached, _, nbytes = kv_cache.decode(lm, prompt, 20, cached=True)
    assert full == cached and len(full) == 20 and full[:8] == prompt[0].tolist() and no_bytes == 0
    cfg = lm.cfg  # the last token is never run, so 19 rows of keys and values per layer, float32
    assert nbytes == 2 * cfg.num_layers * cfg.kv_heads * cfg.head_dim * 4 * 19
    rows = [{"total": 64, "full": 6.0, "cached": 2.0, "bytes": nbytes}]
    assert "| 64 | 32 | 6.00 | 2.00 | 3.0× |" in kv_cache.section(rows, "tiny-llama", 3)


def test_chat_benchmark_serves_a_later_turn_from_the_kept_cache_with_the_same_reply():
    """benchmarks/chat.py's turn, both ways, on tiny-gpt with a ChatML-shaped template (its one special token as the
    turn marker): the second turn's prompt is served by the first's kept cache and writes the reply read whole."""
    import dataclasses

    from benchmarks import chat
    from tx_explorer import models
    from tx_explorer.analysis import lm
    from tx_explorer.views import language_model as view

    template = (
        "{% for m in messages %}<|endoftext|>{{ m['role'] }}\n{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|endoftext|>assistant\n{% endif %}"
    )
    tm = dataclasses.replace(models.load_model("tiny-gpt"), chat_template=template)
    kept, turns = lm.Prefixes(), []
    for message in ("the list of files", "and the folder"):
        prompt = view.chat_prompt(tm, turns, message, chat.NEW)
        (whole, _, _, _), (reply, served, first, end) = chat.turn(tm, prompt, None), chat.turn(tm, prompt, kept)
        assert whole.ids == reply.ids and 0 < first <= end
        turns.append(view.Turn(message, reply.text, reply.stop, chat.NEW))
    assert served > len(view.chat_prompt(tm, [], "the list of files", chat.NEW).ids)
    row = {"turn": 2, "prompt": 59, "served": 44, "reply": 7, "whole_first": 269.0, "kept_first": 169.0}
    text = chat.section([{**row, "whole_turn": 833.0, "kept_turn": 519.0}], 3, "python -m benchmarks chat")
    assert "| 2 | 59 | 44 | 7 | 269 ms | 169 ms | 833 ms | 519 ms | 0.62 |" in text


def test_load_finds_the_class_size_where_p95_passes_5_s_and_reports_every_page():
    """benchmarks/load.py's arithmetic on made-up sessions: p95 by connected sessions, the first step past 5 s
    (steps with under 5 inputs ignored), light and heavy pages apart, a failure listed."""
    from benchmarks import load

    light = load.SessionResult(0, "masks", False, first_run_s=1.0, answers=[(0.5, 3)] * 6 + [(6.0, 25)] * 6)
    heavy = load.SessionResult(1, "multihead", True, first_run_s=2.0, answers=[(1.0, 8)] * 6 + [(9.0, 15)] * 6)
    lost = load.SessionResult(2, "operator", False, failure="TimeoutError: first run")
    res = load.LoadResult([light, heavy, lost], 5.0, 60.0, 30.0, 900.0, 800.0, {"masks": (0.02, 0.1)})
    assert [(hi, n) for hi, n, _ in res.by_size()] == [(10, 12), (20, 6), (30, 6)]
    assert res.passes() == 20 and res.passes(10.0) is None
    assert res.inputs == 24 and res.problems == ["session 2 (operator): TimeoutError: first run"]
    text = load.section([res], "python -m benchmarks load", "machine", 5.0, 60.0, "")
    assert "p95 passes 5 s at 11–20 connected sessions" in text
    assert "| masks | sentence | 1 |" in text and "| operator | D slider | 1 |" in text


def test_sections_table_flags_a_slow_opening_only_without_a_progress_bar():
    O, Row = sections.Opening, sections.Row
    slow = Row("seq2seq", "Heads", "s2s_open_sv", [O(6.0, False), O(0.3, False), O(0.5, False)])
    barred = Row("cost_of_attention", "IO", "cost_open_io", [O(3.8, True), O(1.2, False)])
    failed = Row("norms", "Live", "norms_open_live", [O(None, False, "Timeout"), O(0.4, False)])
    assert [sections.needs_fixing(r) for r in (slow, barred, failed)] == [True, False, True]
    assert slow.second().seconds == 0.4 and sections._bar(barred) == "first open"
    rows = sections.table([slow, barred, failed])
    assert "| 15.61 s | 6.00 s | 0.40 s | missed by 4.0 s (3.00×) | no |" in rows[2]  # before the fix, first, second
    assert "failed (Timeout)" in rows[4] and "not measured" in rows[4]
