"""Train the block variants side by side: ``python -m tx_explorer.train variants``.

Lecture §5.2–5.3 and §8.1–8.3 claim that Pre-Norm trains more stably than Post-Norm (most visibly when
deep), that RMSNorm drops the mean and still works, and that SwiGLU at hidden 8D/3 matches the classic
MLP's parameters and usually does better. This command checks those claims at CPU scale:

* four shallow variants (4 blocks × D 64): Post-LN, Pre-LN, Pre-RMSNorm, Pre-RMSNorm + SwiGLU;
* a deep, narrow pair (16 blocks × D 32, the same 12·L·D² non-embedding budget): Post-LN vs Pre-LN, trained
  without warm-up so that the Post-Norm difficulty (Xiong et al. 2020; Liu et al. 2020) can show.

Every variant sees the same batches (one seeded generator each, same seed), the same number of steps and the
same initialisation seed. Data, tokenizer, optimiser (AdamW, β₂ 0.95, decay on matrices), warm-up/cosine
schedule and evaluation are the language model's (:mod:`tx_explorer.train.lm`); by default the corpus is
``"stdlib"`` and the tokenizer the one in this bundle, which reproduce the bundled run. Each step records the
training loss, the learning rate, the global and per-block gradient norms (before clipping) and the
residual stream's RMS after every block; validation loss every ``--eval-every`` steps.

The bundle folder receives ``history.json`` (every step of every variant), ``summary.json`` (settings,
parameter counts, final losses, wall-clock), ``profiles.json`` (depth profiles at initialisation and after
training on one fixed batch), ``model.safetensors`` (each variant's weights under ``<variant>.``, float16),
``tokens.safetensors`` (a slice of the token stream for the page's live mini-run), ``config.json``,
``tokenizer.json`` and ``manifest.json``. The ``variants`` section of BENCHMARKS.md is rewritten.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor
from tqdm import tqdm

from tx_explorer import locales, report
from tx_explorer.analysis.norms import count_parameters, depth_profile, forward_with_stats, grad_norms
from tx_explorer.config import TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.data.tokenizer import EOT
from tx_explorer.models import WEIGHTS_DIR, verify, write_manifest
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.textmodel import TextModel, load_state, unique_state
from tx_explorer.train.lm import bundled_or_new_tokenizer, encode_stream, evaluate, lr_at, make_optimizer, windows

log = logging.getLogger("tx_explorer.train.variants")
ROOT = Path(__file__).resolve().parents[2]
BUNDLE = WEIGHTS_DIR / "variants"
RETRAIN = "python -m tx_explorer.train variants"
BUNDLE_FILES = (
    "history.json",
    "summary.json",
    "profiles.json",
    "model.safetensors",
    "tokens.safetensors",
    "config.json",
    "tokenizer.json",
    "manifest.json",
)

# Shallow: 4 blocks × D 64 (4 heads of 16). Deep: 16 blocks × D 32 (2 heads of 16) — the same 12·L·D².
SHALLOW = TransformerConfig(vocab_size=2048, max_len=64, dim=64, num_layers=4, num_heads=4)
DEEP = SHALLOW.replace(dim=32, num_layers=16, num_heads=2)


@dataclass(frozen=True)
class Settings:
    """One training recipe; ``lr_at`` and ``make_optimizer`` of the LM trainer read these fields."""

    steps: int = 160
    batch_size: int = 8
    seq_len: int = 64
    lr: float = 2e-3  # peak
    warmup: int = 30  # linear warm-up steps (0 = start at the peak)
    weight_decay: float = 0.1
    clip: float = 1.0  # max global gradient norm (measured norms are recorded before clipping)
    seed: int = 0
    eval_every: int = 40
    eval_windows: int = 16  # validation windows of seq_len tokens during training (more at the end)


@dataclass(frozen=True)
class Variant:
    """A named change to the shallow or deep base config, and to the training recipe."""

    label: str
    changes: Mapping[str, Any]  # TransformerConfig overrides
    deep: bool = False
    recipe: Mapping[str, Any] = field(default_factory=dict)  # Settings overrides


# Post-Norm blocks already end in a norm, so (as in the original Transformer and BERT) no final norm.
POST = {"norm_position": "post", "final_norm": False}
VARIANTS: dict[str, Variant] = {
    "post-ln": Variant("Post-LN", POST),
    "pre-ln": Variant("Pre-LN", {}),
    "pre-rms": Variant("Pre-RMSNorm", {"norm": "rmsnorm"}),
    "pre-rms-swiglu": Variant("Pre-RMSNorm + SwiGLU", {"norm": "rmsnorm", "mlp": "swiglu"}),
    "deep-post-ln": Variant("Deep Post-LN (16 × 32)", POST, deep=True, recipe={"warmup": 0}),
    "deep-pre-ln": Variant("Deep Pre-LN (16 × 32)", {}, deep=True, recipe={"warmup": 0}),
}


def variant_config(
    name: str, *, vocab_size: int = SHALLOW.vocab_size, max_len: int = SHALLOW.max_len
) -> TransformerConfig:
    """The :class:`TransformerConfig` of a named variant (see :data:`VARIANTS`)."""
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    v = VARIANTS[name]
    return (DEEP if v.deep else SHALLOW).replace(vocab_size=vocab_size, max_len=max_len, **v.changes)


def variant_settings(name: str, base: Settings) -> Settings:
    return replace(base, **VARIANTS[name].recipe)


def build(
    name: str, *, seed: int = 0, vocab_size: int = SHALLOW.vocab_size, max_len: int = SHALLOW.max_len
) -> CausalLM:
    """A freshly initialised variant (seeded, so every run of a variant starts from the same weights)."""
    torch.manual_seed(seed)
    return CausalLM(variant_config(name, vocab_size=vocab_size, max_len=max_len))


@dataclass(frozen=True)
class StepRecord:
    """What one optimiser step measured. Gradient norms are before clipping; RMS is of the forward pass."""

    step: int  # 1-based: the number of updates done
    lr: float
    train_loss: float
    grad_norm: float
    layer_grad_norm: list[float]  # [L]
    residual_rms: list[float]  # [L + 1]: after the embeddings, then after each block
    val_loss: float | None = None


def sample_batch(ids: Tensor, n: int, batch_size: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random windows of ``n`` tokens from ``ids [T]`` and their next tokens: ``(x, y)``, each ``[B, n]``."""
    if len(ids) < n + 2:
        raise ValueError(f"need more than {n + 1} tokens to sample windows of {n}, got {len(ids)}")
    starts = torch.randint(0, len(ids) - n - 1, (batch_size,), generator=gen)
    return torch.stack([ids[s : s + n] for s in starts]), torch.stack([ids[s + 1 : s + n + 1] for s in starts])


def train_steps(
    model: CausalLM, train_ids: Tensor, settings: Settings, *, val_pairs: Sequence[tuple[Tensor, Tensor]] = ()
) -> Iterator[StepRecord]:
    """Train ``model`` in place, yielding a :class:`StepRecord` after every step.

    The batch sequence depends only on ``settings.seed``, so variants trained with equal settings see
    identical data. A non-finite loss ends the run after its record (the run has diverged).
    """
    opt = make_optimizer(model, settings)
    gen = torch.Generator().manual_seed(settings.seed)
    model.train()
    for step in range(settings.steps):
        lr = lr_at(step, settings)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = sample_batch(train_ids, settings.seq_len, settings.batch_size, gen)
        logits, rms = forward_with_stats(model, x)
        loss = model.loss(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        total, per_layer = grad_norms(model)
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
        opt.step()
        done = step + 1
        finite = math.isfinite(loss.item())
        val = None
        if val_pairs and finite and (done % settings.eval_every == 0 or done == settings.steps):
            val = evaluate(model, list(val_pairs))
        yield StepRecord(done, lr, loss.item(), total, per_layer, rms.tolist(), val)
        if not finite:
            return


def live_run(
    names: Sequence[str],
    train_ids: Tensor,
    settings: Settings,
    *,
    time_budget: float = 30.0,
    should_stop: Callable[[], bool] = lambda: False,
    vocab_size: int = SHALLOW.vocab_size,
) -> Iterator[tuple[str, StepRecord]]:
    """Train fresh copies of ``names`` in lock-step with one recipe (one step each in turn), yielding ``(name, record)``.

    Stops after ``settings.steps`` steps, when ``time_budget`` seconds have passed, or as soon as
    ``should_stop()`` is true — so a page can draw the curves as they grow and cancel at any time.
    """
    if not names:
        raise ValueError("choose at least one variant to train")
    runs = {
        name: train_steps(
            build(name, seed=settings.seed, vocab_size=vocab_size, max_len=settings.seq_len), train_ids, settings
        )
        for name in names
    }
    deadline = time.monotonic() + time_budget
    while runs:
        for name in list(runs):
            if should_stop() or time.monotonic() > deadline:
                return
            record = next(runs[name], None)
            if record is None:
                del runs[name]
                continue
            yield name, record


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tx_explorer.train variants", description=__doc__.splitlines()[0])
    d = Settings()
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-len", type=int, default=d.seq_len, help="context of every variant")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (all variants)")
    p.add_argument(
        "--warmup", type=int, default=d.warmup, help="warm-up of the shallow variants (the deep pair has none)"
    )
    p.add_argument("--eval-every", type=int, default=d.eval_every)
    p.add_argument("--eval-windows", type=int, default=d.eval_windows)
    p.add_argument("--final-windows", type=int, default=128, help="validation windows for the final loss")
    p.add_argument("--live-tokens", type=int, default=100_000, help="training tokens shipped for the page's mini-run")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: these tiny models gain nothing from more, "
        "and on a shared CPU extra threads spin-wait)",
    )
    # The bundled run used the stdlib corpus and the tokenizer tiny-gpt had then, kept in this bundle.
    p.add_argument(
        "--corpus", default="stdlib", choices=sorted(corpus.SOURCES), help="text source (tx_explorer.data.corpus)"
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        default=WEIGHTS_DIR / "variants" / "tokenizer.json",
        help="reuse this tokenizer when it exists (else train one on the corpus, as the LM trainer does)",
    )
    p.add_argument("--out", type=Path, default=BUNDLE, help="bundle folder")
    p.add_argument(
        "--benchmarks",
        type=Path,
        default=ROOT / "BENCHMARKS.md",
        help="file whose variants section is rewritten ('' = none)",
    )
    return p.parse_args(argv)


def _round(values: Sequence[float | None], digits: int = 5) -> list[float | None]:
    """Significant digits only: the history stays small. Non-finite values become None (JSON has no NaN)."""
    return [None if v is None or not math.isfinite(v) else float(f"{v:.{digits}g}") for v in values]


def history_table(records: Sequence[StepRecord]) -> dict[str, list]:
    """Column-wise history (what ``history.json`` stores per variant)."""
    return {
        "step": [r.step for r in records],
        "lr": _round([r.lr for r in records], 4),
        "train_loss": _round([r.train_loss for r in records]),
        "val_step": [r.step for r in records if r.val_loss is not None],
        "val_loss": _round([r.val_loss for r in records if r.val_loss is not None]),
        "grad_norm": _round([r.grad_norm for r in records], 4),
        "layer_grad_norm": [_round(r.layer_grad_norm, 4) for r in records],
        "residual_rms": [_round(r.residual_rms, 4) for r in records],
    }


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.time()
    base = Settings(
        steps=args.steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        lr=args.lr,
        warmup=args.warmup,
        seed=args.seed,
        eval_every=args.eval_every,
        eval_windows=args.eval_windows,
    )

    docs = corpus.documents(args.corpus)
    parts = corpus.split(docs)
    tok = bundled_or_new_tokenizer(
        args.tokenizer, parts.train, SHALLOW.vocab_size, "python -m tx_explorer.train variants"
    )
    vocab = tok.get_vocab_size()
    train_ids, val_ids = encode_stream(tok, parts.train), encode_stream(tok, parts.val)
    val_pairs = windows(val_ids, args.seq_len)
    probe = torch.Generator().manual_seed(args.seed + 1)
    probe_x, probe_y = sample_batch(val_ids, args.seq_len, args.batch_size, probe)  # one fixed batch for depth profiles
    log.info("corpus: %d / %d train / val tokens, vocabulary %d", len(train_ids), len(val_ids), vocab)

    history, results, profiles, weights = {}, {}, {}, {}
    for name in args.variants:
        settings = variant_settings(name, base)
        model = build(name, seed=settings.seed, vocab_size=vocab, max_len=settings.seq_len)
        init = depth_profile(model, probe_x, probe_y)
        start = time.time()
        records = []
        bar = tqdm(
            train_steps(model, train_ids, settings, val_pairs=val_pairs[: settings.eval_windows]),
            total=settings.steps,
            desc=name,
            unit="step",
        )
        for record in bar:
            records.append(record)
            bar.set_postfix(loss=f"{record.train_loss:.3f}", grad=f"{record.grad_norm:.2f}")
        diverged = not math.isfinite(records[-1].train_loss)
        final_val = float("nan") if diverged else evaluate(model, val_pairs[: args.final_windows])
        profiles[name] = {"init": init, "final": depth_profile(model, probe_x, probe_y)}
        history[name] = history_table(records)
        cfg = model.cfg
        results[name] = {
            "label": VARIANTS[name].label,
            "config": cfg.to_dict(),
            "settings": asdict(settings),
            "parameters": count_parameters(model),
            "non_embedding_parameters": count_parameters(model, non_embedding=True),
            "final_val_loss": _round([final_val])[0],
            "final_train_loss_avg20": _round([sum(r.train_loss for r in records[-20:]) / len(records[-20:])])[0],
            "max_grad_norm": _round([max(r.grad_norm for r in records)])[0],
            "diverged_at": records[-1].step if diverged else None,
            "seconds": round(time.time() - start, 1),
        }
        weights.update({f"{name}.{k}": v.half() for k, v in unique_state(model).items()})
        log.info("%s: val %.3f after %d steps (%.0f s)", name, final_val, records[-1].step, results[name]["seconds"])

    summary = {
        "variants": results,
        "validation_tokens_final": min(len(val_pairs), args.final_windows) * args.seq_len,
        "train_tokens": len(train_ids),
        "corpus": corpus.describe(docs, args.corpus),
        "tokenizer": args.tokenizer.name if args.tokenizer.is_file() else "trained by this run (tiny-gpt's was absent)",
        "threads": torch.get_num_threads(),
        "minutes": round((time.time() - t0) / 60, 2),
        "command": " ".join([RETRAIN, *(argv or [])]),
    }
    write_bundle(
        args.out,
        summary=summary,
        history=history,
        profiles=profiles,
        weights=weights,
        tokenizer=tok,
        live_tokens={"train": train_ids[: args.live_tokens], "val": val_ids[: args.live_tokens // 10]},
    )
    if str(args.benchmarks):
        update_benchmarks(args.benchmarks, {**summary, "profiles": profiles})
    log.info("bundle written to %s in %.1f min", args.out, summary["minutes"])


def write_bundle(
    out: Path,
    *,
    summary: dict,
    history: dict,
    profiles: dict,
    weights: dict[str, Tensor],
    tokenizer: Tokenizer,
    live_tokens: dict[str, Tensor],
) -> None:
    """Write the bundle files (replacing only our own) and the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_FILES:
        (out / name).unlink(missing_ok=True)
    (out / "history.json").write_text(json.dumps(history, separators=(",", ":")) + "\n")
    (out / "profiles.json").write_text(json.dumps(profiles, separators=(",", ":")) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "config.json").write_text(
        json.dumps({k: v["config"] for k, v in summary["variants"].items()}, indent=1) + "\n"
    )
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
    save_file({k: v.to(torch.int16).contiguous() for k, v in live_tokens.items()}, str(out / "tokens.safetensors"))
    tokenizer.save(str(out / "tokenizer.json"))
    write_manifest(out)


@dataclass(frozen=True)
class Results:
    """The shipped variants bundle as the page reads it."""

    summary: dict
    history: dict
    profiles: dict
    folder: Path

    @property
    def names(self) -> list[str]:
        return list(self.summary["variants"])

    def label(self, name: str) -> str:
        return self.summary["variants"][name]["label"]

    def tokens(self, split: str = "train") -> Tensor:
        """The shipped slice of the token stream (for the live mini-run), as int64."""
        return load_file(str(self.folder / "tokens.safetensors"))[split].long()

    def text_model(self, name: str) -> TextModel:
        """A trained variant with the shared tokenizer, ready for :meth:`TextModel.attention`."""
        if name not in self.summary["variants"]:
            raise KeyError(f"variant {name!r} is not in the bundle; it has {', '.join(self.names)}")
        prefix = f"{name}."
        state = {
            k[len(prefix) :]: v.float()
            for k, v in load_file(str(self.folder / "model.safetensors")).items()
            if k.startswith(prefix)
        }
        model = CausalLM(TransformerConfig.from_dict(self.summary["variants"][name]["config"]))
        load_state(model, state)
        return TextModel(
            name=name,
            model=model,
            tokenizer=Tokenizer.from_file(str(self.folder / "tokenizer.json")),
            kind="causal",
            max_len=model.cfg.max_len,
            special_tokens=(EOT,),
            byte_level=True,
        )


def load_results(folder: Path = BUNDLE) -> Results:
    """Verify the bundle's checksums, then read its JSON files (weights load lazily per variant)."""
    folder = Path(folder)
    verify(folder, RETRAIN)
    read = lambda n: json.loads((folder / n).read_text())  # noqa: E731
    return Results(
        summary=read("summary.json"), history=read("history.json"), profiles=read("profiles.json"), folder=folder
    )


RMS_TOLERANCE = 0.02  # nats: "still works" = no worse than LayerNorm by more than this


def _loss(r: dict) -> float:
    """Final validation loss; a diverged run (None) counts as infinitely bad."""
    return math.inf if r["final_val_loss"] is None else r["final_val_loss"]


def _gap(runs: dict, pre: str, post: str) -> float:
    return _loss(runs[post]) - _loss(runs[pre])


# claim → (the variants it reads, the test on their summaries). Losses are final validation losses.
CLAIMS: dict[str, tuple[tuple[str, ...], Callable[[dict], bool]]] = {
    "pre_beats_post": (("pre-ln", "post-ln"), lambda r: _loss(r["pre-ln"]) < _loss(r["post-ln"])),
    "deep_pre_beats_post": (
        ("deep-pre-ln", "deep-post-ln"),
        lambda r: _loss(r["deep-pre-ln"]) < _loss(r["deep-post-ln"]),
    ),
    "gap_grows_with_depth": (
        ("pre-ln", "post-ln", "deep-pre-ln", "deep-post-ln"),
        lambda r: _gap(r, "deep-pre-ln", "deep-post-ln") > _gap(r, "pre-ln", "post-ln"),
    ),
    "rms_matches_ln": (("pre-rms", "pre-ln"), lambda r: _loss(r["pre-rms"]) <= _loss(r["pre-ln"]) + RMS_TOLERANCE),
    "swiglu_same_params": (
        ("pre-rms-swiglu", "pre-rms"),
        lambda r: (
            abs(r["pre-rms-swiglu"]["non_embedding_parameters"] - r["pre-rms"]["non_embedding_parameters"])
            <= 0.01 * r["pre-rms"]["non_embedding_parameters"]
        ),
    ),
    "swiglu_beats_mlp": (("pre-rms-swiglu", "pre-rms"), lambda r: _loss(r["pre-rms-swiglu"]) < _loss(r["pre-rms"])),
}


def claims(summary: dict) -> list[dict[str, Any]]:
    """Check the lecture's claims on the run's numbers: ``{key, holds, variants, losses, params}``.

    Claims whose variants were not all trained are left out.
    """
    runs = summary["variants"]
    return [
        {
            "key": key,
            "holds": bool(test(runs)),
            "variants": list(names),
            "losses": {n: runs[n]["final_val_loss"] for n in names},
            "params": {n: runs[n]["non_embedding_parameters"] for n in names},
        }
        for key, (names, test) in CLAIMS.items()
        if all(n in runs for n in names)
    ]


def _fmt_loss(loss: float | None) -> str:
    return "diverged" if loss is None else f"{loss:.3f}"


def update_benchmarks(path: Path, summary: dict) -> None:
    """Rewrite only the text between ``<!-- variants:start -->`` and ``<!-- variants:end -->``."""
    runs = summary["variants"]
    rows = []
    for name, r in runs.items():
        c, s = r["config"], r["settings"]
        val = _fmt_loss(r["final_val_loss"]) if not r["diverged_at"] else f"diverged at step {r['diverged_at']}"
        g = summary["profiles"][name]["final"]["grad_norm"] if "profiles" in summary else None
        rows.append(
            f"| {r['label']} | {c['num_layers']} × {c['dim']} | {r['non_embedding_parameters']:,} / {r['parameters']:,} | "
            f"{s['lr']:g}, warm-up {s['warmup']} | {val} | {r['final_train_loss_avg20']:.3f} | {r['max_grad_norm']:.3g} | "
            f"{'—' if g is None else f'{g[0]:.2g} / {g[-1]:.2g}'} | {r['seconds']:.0f} s |"
        )
    s0 = next(iter(summary["variants"].values()))["settings"]
    body = "\n".join(
        [
            "## Block variants: Post-LN vs Pre-LN, LayerNorm vs RMSNorm, MLP vs SwiGLU",
            "",
            f"Same data (identical batches), seed {s0['seed']}, {s0['steps']} steps × {s0['batch_size']} × {s0['seq_len']} tokens, "
            f"AdamW with clipping at {s0['clip']:g}. Validation loss in nats per token on "
            f"{summary['validation_tokens_final']:,} held-out tokens; train loss averaged over the last 20 steps; "
            "gradient norm measured before clipping; first/last-block gradient norms on one fixed held-out batch.",
            "",
            "| variant | blocks × D | parameters (non-embedding / all) | peak lr, warm-up | validation loss | train loss | max grad norm "
            "| grad norm, first / last block, after training | time |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Claims of the lecture, checked on these numbers (a claim that does not hold at this scale says so):",
            "",
            *[
                f"- {locales.text('norms', 'claim_' + c['key'], 'en')}: **{'holds' if c['holds'] else 'does not hold'}** ("
                + "; ".join(
                    f"{runs[n]['label']} {_fmt_loss(c['losses'][n])}, {c['params'][n]:,} non-embedding parameters"
                    for n in c["variants"]
                )
                + ")"
                for c in claims(summary)
            ],
            "",
            f"Whole run: {summary['minutes']:.1f} min wall-clock on this machine's CPU ({summary['threads']} thread(s), shared "
            f"with other jobs). Rebuild: `{summary['command']}`.",
        ]
    )
    report.write_section(path, "variants", body)
