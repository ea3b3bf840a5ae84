"""The language-model page's chat on SmolLM2, turn by turn: each turn read whole, or after the conversation kept in
our KV cache (``lm.Prefixes``, what the page does), with what each reply token read taken from a traced pass over
the conversation, or from the rows the cached steps recorded (what the page does).

Three turns of the page's default settings (greedy, at most 48 new tokens), the page's default message first.
Reported per turn, medians of ``--repeats`` conversations (each from an empty cache): the prompt's tokens and how
many the kept cache served, the wall time to the reply's first token (what a visitor waits before text appears) and
to the end of the turn (the reply and what it read). Both ways must write the same replies (checked).

``python -m benchmarks chat [--repeats 3] [--threads 1] [--no-write]``
"""

from __future__ import annotations

import statistics
import time

from benchmarks import parse, parser, publish, with_machine
from tx_explorer import locales
from tx_explorer.analysis import lm
from tx_explorer.model_cache import shared_model
from tx_explorer.trace import Trace
from tx_explorer.views import language_model as view

MODEL = "smollm2-135m-instruct"
NEW = 48  # the page's default limit of new tokens
WAYS = ("whole", "kept")  # each turn's prompt read whole, or after the conversation kept in the cache
MESSAGES = (locales.text("language_model", "chat_default", "en"), "And of Italy?", "Which of the two is larger?")


def turn(tm, prompt: lm.ChatPrompt, kept: lm.Prefixes | None) -> tuple[lm.Reply, int, float, float]:
    """One turn: ``(reply, tokens served by the kept cache, s to the first token, s to the turn's end)``."""
    start = time.perf_counter()
    cache, trace = (kept.cache_for(prompt.ids), Trace()) if kept is not None else (None, None)
    served, first = (cache.seen if cache is not None else 0), None
    for reply in view.chat_replies(tm, prompt, NEW, cache=cache, trace=trace):  # noqa: B007 (the last is kept)
        first = first or time.perf_counter() - start
    if kept is not None:
        kept.keep([*prompt.ids, *reply.ids], cache)
        lm.reply_attention(tm, prompt, reply, trace)
    else:  # the conversation traced in one pass, for its rows at the steps that produced the reply
        tm.maps([*prompt.ids, *reply.ids]).stack()[:, 0, :, len(prompt.ids) - 1 :]
    return reply, served, first, time.perf_counter() - start


def conversation(tm, kept: lm.Prefixes | None) -> list[tuple[lm.Reply, int, int, float, float]]:
    turns, out = [], []
    for message in MESSAGES:
        prompt = view.chat_prompt(tm, turns, message, NEW)
        reply, served, first, whole = turn(tm, prompt, kept)
        turns.append(view.Turn(message, reply.text, reply.stop, NEW))
        out.append((reply, len(prompt.ids), served, first, whole))
    return out


def measure(repeats: int) -> list[dict]:
    tm = shared_model(MODEL)
    conversation(tm, None)  # warm-up: the first pass of a process pays for allocations
    runs = {way: [conversation(tm, lm.Prefixes() if way == "kept" else None) for _ in range(repeats)] for way in WAYS}
    rows = []
    for i in range(len(MESSAGES)):
        whole, kept = runs["whole"][0][i], runs["kept"][0][i]
        if whole[0].ids != kept[0].ids:
            raise RuntimeError(f"turn {i + 1}: the kept cache wrote another reply than the prompt read whole")
        median = lambda way, k, i=i: statistics.median(r[i][k] for r in runs[way]) * 1000  # noqa: E731
        rows.append(
            {
                "turn": i + 1,
                "prompt": kept[1],
                "served": kept[2],
                "reply": len(kept[0].ids),
                **{f"{way}_first": median(way, 3) for way in WAYS},
                **{f"{way}_turn": median(way, 4) for way in WAYS},
            }
        )
    return rows


def section(rows: list[dict], repeats: int, command: str) -> str:
    lines = [
        "## Chat: a turn read after the conversation kept in the KV cache",
        "",
        f"Command: `{command}`. {MODEL}, greedy, at most {NEW} new tokens, three turns ("
        + ", ".join(f"“{m}”" for m in MESSAGES)
        + f"), wall-clock medians of {repeats} conversations each from an empty cache. *Whole*: each turn's prompt "
        "read from its first token, and what the reply tokens read taken from one traced pass over the conversation "
        "(the page until this change). *Kept*: the conversation so far served by the cache kept after the last turn "
        "(`lm.Prefixes`: only what follows it is read; the prompt's last token alone, traced) and the reply tokens' "
        "rows recorded by the cached steps (the page now). Both ways wrote the same replies (checked); the rows "
        "agree within float16 (tests/test_lm.py).",
        "",
        "| turn | prompt tokens | served by the kept cache | reply tokens | first token, whole | first token, kept "
        "| turn, whole | turn, kept | turn: kept / whole |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['turn']} | {r['prompt']} | {r['served']} | {r['reply']} | {r['whole_first']:,.0f} ms | "
            f"{r['kept_first']:,.0f} ms | {r['whole_turn']:,.0f} ms | {r['kept_turn']:,.0f} ms | "
            f"{r['kept_turn'] / r['whole_turn']:.2f} |"
        )
    return with_machine(lines)


def main(argv: list[str] | None = None) -> None:
    args, command = parse(parser("chat", __doc__, repeats=3, threads=1), argv)
    publish("chat", section(measure(args.repeats), args.repeats, command), no_write=args.no_write)


if __name__ == "__main__":
    main()
