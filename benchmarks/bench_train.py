"""Where each training stage's time goes, and how much of the device's arithmetic it uses (CPU or GPU).

    python benchmarks/bench_train.py [runs/office-quick] [--stages train,tiger,sasrec,rw,d2lr,finetune] [--steps 20]
        [--set train.hidden=384 --set train.layers=4 ...] [--trace N] [--json OUT.json] [--and RUN --stages ...]

``RUN`` is a finished run (``crabrec run``): each stage runs in a scratch run that links RUN's data, SIDs and trained
MOR (nothing upstream is recomputed, RUN is never written), exactly as the pipeline runs it, under
:func:`crabrec.train.profile.profile_training`: one warm-up step whose forward and backward arithmetic is counted
(``FlopCounterMode``), ``--steps`` timed steps split into batch building, forward, backward and optimizer (the device
synchronised at each phase's edges), and one validation. A compiled model (``--set train.compile=true``) is timed
compiled: the steps that compile it come after the counted one and are not timed. An epoch is projected as the mean
step x the epoch's steps + the validation. The peak is this device's own measured matrix-product rate (fp32 on the
CPU, bf16 on CUDA, where training runs in bf16), so "of peak" is the model FLOP utilisation: the counted step's
arithmetic per input position times the timed steps' tokens, padding left out (``positions / token`` is what padding
adds; a packed batch padded for CUDA graphs computes about 1.7 positions per token). ``--set`` changes the
config as ``crabrec`` does (``train.*`` also reaches RW, D²LR and the CRAB fine-tune, which train the MOR decoder).
Each ``--and`` starts another measurement with its own arguments in the same process (one start-up and one peak
measurement for all). ``--cudnn-attention`` lets one measurement's attention use cuDNN's kernel (which crabrec turns
off on CUDA). ``--trace N`` then runs N more steps (not timed) under ``torch.profiler`` and prints, per step, the
operator calls, kernel launches, how long the device was busy and the heaviest operators: a GPU step far longer than
its device time is bound by the host issuing work, not by the arithmetic.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

STAGES = ("train", "tiger", "sasrec", "rw", "d2lr", "finetune")
LABEL = {"train": "MOR", "tiger": "TIGER", "sasrec": "SASRec", "rw": "RW", "d2lr": "D²LR", "finetune": "CRAB fine-tune"}


def matmul_peak(device: str, n: int = 0, repeats: int = 20) -> float:
    """FLOP/s of an ``n``-cubed matrix product on ``device`` (bf16 on CUDA, fp32 on the CPU): the best of
    ``repeats``. On the CPU 1024 reaches the rate of 2048 (within the host's noise) in a quarter of the time."""
    cuda = device.startswith("cuda")
    n = n or (8192 if cuda else 1024)
    dtype = torch.bfloat16 if cuda else torch.float32
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for i in range(repeats + 2):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        if cuda:
            torch.cuda.synchronize()
        if i >= 2:  # two warm-ups
            best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def profile_stage(base: Path, stage: str, sets: list[str], steps: int, scratch: Path, trace: int = 0) -> dict[str, Any]:
    from crabrec.analyses import link_base
    from crabrec.config import deep_merge, load_config, parse_overrides
    from crabrec.pipeline import RunContext
    from crabrec.stages import preflight, registry
    from crabrec.train.profile import ProfileDone, profile_training

    location = {"runs_dir": str(scratch), "name": stage}
    cfg = load_config(str(base / "config.yaml"), deep_merge(parse_overrides(sets), location))
    link_base(base, cfg.run_dir)
    ctx = RunContext(config=cfg, stages=registry(), force={stage})
    ctx.ensure("data")
    preflight(ctx)
    for dep in ctx.needs(stage):  # upstream stages (CRAB's rebalance, say) are not part of the profile
        ctx.ensure(dep)
    with profile_training(steps, trace_steps=trace) as prof, contextlib.suppress(ProfileDone):
        ctx.ensure(stage)
    if not prof.timed:
        raise SystemExit(f"{stage}: no step was profiled (an epoch of fewer than 2 steps?)")
    out = {"steps_per_epoch": prof.steps_per_epoch, "rows_per_epoch": prof.rows_per_epoch, **prof.summary()}
    out["graphs"] = prof.graphs  # cuda_graphs: graphs recorded, steps replayed, steps run eagerly (empty: off)
    return {**out, "trace": prof.ops} if trace else out


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, nargs="?", default=Path("runs/office-quick"))
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--cudnn-attention", action="store_true",
                    help="let attention use cuDNN's kernel in this measurement, as PyTorch would choose")  # fmt: skip
    ap.add_argument("--trace", type=int, default=0, metavar="N",
                    help="then trace N more steps with torch.profiler: operator calls, kernel launches, device busy "
                         "time and the top operators per step")  # fmt: skip
    args = ap.parse_args(argv)
    args.stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in args.stages if s not in STAGES]
    if unknown:
        ap.error(f"--stages: unknown {', '.join(unknown)}; expected some of {', '.join(STAGES)}")
    return args


def split_measurements(argv: list[str]) -> list[list[str]]:
    """The command line cut at each ``--and``: one argument list per measurement."""
    groups: list[list[str]] = [[]]
    for word in argv:
        if word == "--and":
            groups.append([])
        else:
            groups[-1].append(word)
    return groups


@contextlib.contextmanager
def cudnn_attention(allowed: bool):
    """Within the block, attention may use cuDNN's kernel as PyTorch would choose (``CRABREC_CUDNN_ATTENTION``; crabrec
    turns it off on CUDA), also after an earlier measurement in this process turned it off."""
    if not allowed:
        yield
        return
    os.environ["CRABREC_CUDNN_ATTENTION"] = "1"
    if torch.cuda.is_available():
        torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        yield
    finally:
        del os.environ["CRABREC_CUDNN_ATTENTION"]


def measure(args: argparse.Namespace, device: str, name: str, peak: float) -> None:
    """Profile ``args.stages`` on ``args.run``; print the table and write ``args.json`` if given."""
    results = {}
    with tempfile.TemporaryDirectory() as scratch, cudnn_attention(args.cudnn_attention):
        for stage in args.stages:
            results[stage] = profile_stage(args.run, stage, args.sets, args.steps, Path(scratch), args.trace)
    print(
        f"{name}; measured matmul peak {peak / 1e9:.0f} GFLOP/s ({'bf16' if device == 'cuda' else 'fp32'}); "
        f"{args.steps} timed steps per stage; --set {' '.join(args.sets) or '(none)'}"
        + ("; cuDNN's attention allowed" if args.cudnn_attention else "")
    )
    print(
        "| stage | step (ms) | batch | forward | backward | optimizer | other | rows/s | tokens/s | positions / token "
        "| GFLOP/s | "
        "of peak (step) | of peak (forward + backward) | validation (s) | epoch (s, projected) | page faults / step |"
    )
    print("|---" * 16 + "|")
    for stage, r in results.items():
        step = r["step_s"]
        share = " | ".join(f"{100 * r[f'{k}_s'] / step:.0f}%" for k in ("batch", "forward", "backward", "optimizer"))
        print(
            f"| {LABEL[stage]} | {1000 * step:.1f} | {share} | {100 * r['other_s'] / step:.0f}% "
            f"| {r['rows_per_s']:,.0f} | {r['tokens_per_s']:,.0f} | {r.get('padding', 1.0):.2f} "
            f"| {r['flop_per_s'] / 1e9:,.1f} "
            f"| {100 * r['flop_per_s'] / peak:.1f}% | {100 * r['fwd_bwd_flop_per_s'] / peak:.1f}% "
            f"| {r['validation_s']:.1f} | {r['epoch_s']:.1f} | {r['page_faults_per_step']:,.0f} |"
        )
    for stage, r in results.items():
        if r.get("graphs"):
            g = r["graphs"]
            print(
                f"\n{LABEL[stage]}, cuda_graphs: {g['graphs']} graphs recorded; {r['replayed_steps']} of the timed "
                f"steps replayed, at {1000 * r['replayed_step_s']:.1f} ms a step "
                f"({r['replayed_rows_per_s']:,.0f} rows/s); {g['eager']} steps eager in all"
            )
        if r.get("compiled"):
            print(
                f"\n{LABEL[stage]}, compiled: {r['compile_warmup_steps']} steps compiling before the timed ones "
                f"(not timed); {r['compilations_in_timed_steps']} graphs compiled during the timed steps"
            )
    for stage, r in results.items():
        if r.get("trace"):
            print_trace(LABEL[stage], r["trace"], 1000 * r["step_s"])
        elif args.trace:
            print(f"\n{LABEL[stage]}: nothing traced (the epoch ended with the timed steps: lower --steps)")
    if args.json:
        facts = {
            "device": name,
            "peak_flop_per_s": peak,
            "sets": args.sets,
            "cudnn_attention": args.cudnn_attention,
            "stages": results,
        }
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(facts, indent=1))
        tmp.replace(args.json)


def print_trace(label: str, t: dict[str, Any], step_ms: float) -> None:
    """One stage's trace: what a step is made of, and its heaviest operators."""
    busy = t["device_busy_ms"]
    steps = f"{t['traced_steps']} traced step{'' if t['traced_steps'] == 1 else 's'}"
    print(
        f"\n{label}, {steps}, per step: {t['aten_calls']:,.0f} operator calls, "
        f"{t['kernel_launches']:,.0f} kernel launches, device busy {busy:.1f} ms of a {step_ms:.1f} ms step "
        f"({100 * busy / max(step_ms, 1e-9):.0f}%), host time in operators {t['host_ms']:.1f} ms"
    )
    print("| operator | calls / step | host ms / step | device ms / step |")
    print("|---|---|---|---|")
    for op in t["top"]:
        print(f"| {op['name']} | {op['calls']:.0f} | {op['host_ms']:.2f} | {op['device_ms']:.2f} |")


def main(argv: list[str] | None = None) -> None:
    from crabrec.progress import NORMAL, set_verbosity

    set_verbosity(NORMAL)  # as the CLI: off a terminal, no bars (the backbone's weight loading)
    measurements = [parse(words) for words in split_measurements(sys.argv[1:] if argv is None else argv)]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    peak = matmul_peak(device)
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    for args in measurements:
        measure(args, device, name, peak)


if __name__ == "__main__":
    main()
