"""How long ``compile: true`` takes to compile an LLM backbone's training step, and what its steps cost after:
crabrec's block-by-block compilation against the whole model compiled as one graph, side by side with the eager step.

    python benchmarks/bench_compile.py [--backbone backbones/smollm2-135m] [--rows 8] [--backend inductor]

Each variant runs in a fresh process with an empty inductor cache (a warm cache would hide the compilation), on the
same rows: MOR's prompt rows as :func:`crabrec.models.decoder.target_loss` trains on them, forward, backward and an
AdamW update, at token lengths 96, 96, 128, 112, 112, 96, 128. The first step compiles, the third compiles again for
a new length (then with dynamic shapes), the rest run what was compiled. A step's loss is compared with the eager
run's: the same rows, weights and updates, so the losses differ only by the compiled code's rounding.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

LENGTHS = (96, 96, 128, 112, 112, 96, 128)
VARIANTS = ("eager", "blocks", "whole")
LABEL = {
    "eager": "eager (no compilation)",
    "blocks": "blocks, one at a time (crabrec's `compile: true`)",
    "whole": "the whole model as one graph (`torch.compile(model)`)",
}


def prompt_rows(base: int, length: int, rows: int):
    """``rows`` random prompt rows of ``length`` tokens (``ids, mask, labels``): half left-padded by 8 tokens, a
    3-token answer labelled at the end; the same for the same length."""
    import torch

    from crabrec.models.decoder import IGNORE

    g = torch.Generator().manual_seed(length)
    ids = torch.randint(0, base, (rows, length), generator=g)
    mask = torch.ones_like(ids)
    mask[: rows // 2, :8] = 0
    labels = torch.full((rows, length), IGNORE)
    labels[:, -4:] = ids[:, -4:]
    return ids, mask, labels


def child(backbone: Path, variant: str, rows: int, backend: str) -> dict:
    """One variant's steps, timed (this process's dynamo and inductor caches start empty)."""
    import torch
    from torch._dynamo.utils import counters

    from crabrec.models.backbone import load_backbone
    from crabrec.models.decoder import target_loss
    from crabrec.train.compiling import compile_blocks

    torch.manual_seed(0)
    with warnings.catch_warnings():  # transformers' note on how the new SID rows are initialised
        warnings.simplefilter("ignore")
        model, _, base = load_backbone(backbone, [256, 256, 256], seed=0)
    model.train()
    if variant == "blocks":
        compile_blocks(model, backend)
    elif variant == "whole":
        model = torch.compile(model, backend=backend)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    steps, graphs = [], counters["stats"]["unique_graphs"]
    for length in LENGTHS:
        batch = prompt_rows(base, length, rows)
        start = time.perf_counter()
        loss = target_loss(model, *batch, width=3)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        steps.append({"length": length, "s": time.perf_counter() - start, "loss": float(loss)})
    return {"variant": variant, "steps": steps, "graphs": int(counters["stats"]["unique_graphs"] - graphs)}


def run(backbone: Path, variant: str, rows: int, backend: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        cmd = [sys.executable, __file__, "--child", variant, "--backbone", str(backbone), "--rows", str(rows),
               "--backend", backend]  # fmt: skip
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{variant}: failed\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: dict[str, dict]) -> str:
    ref = [s["loss"] for s in results["eager"]["steps"]]
    lines = [
        "| variant | first step (s) | new length (s) | steady step (s) | compiled to steady | graphs | loss vs eager |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        s = r["steps"]
        steady = sum(x["s"] for x in s[3:]) / len(s[3:])
        extra = s[0]["s"] + s[2]["s"] - 2 * steady  # time the two compiling steps took beyond a step's own
        diff = max(abs(x["loss"] - y) for x, y in zip(s, ref))
        lines.append(
            f"| {LABEL[name]} | {s[0]['s']:.1f} | {s[2]['s']:.1f} | {steady:.2f} | "
            f"{'–' if name == 'eager' else f'{extra:.0f} s'} | {r['graphs']} | {diff:.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backbone", type=Path, default=Path("backbones/smollm2-135m"))
    ap.add_argument("--rows", type=int, default=8, help="rows a step (the compilation does not depend on it)")
    ap.add_argument("--backend", default="inductor", help="torch.compile backend (eager: dynamo's tracing alone)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="which to run (eager is the loss reference)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.backbone, args.child, args.rows, args.backend)))
        return
    if not (args.backbone / "config.json").is_file():
        raise SystemExit(f"{args.backbone}: no backbone there (make backbone converts SmolLM2-135M into it)")
    variants = ["eager", *(v for v in args.variants.split(",") if v != "eager")]
    results = {v: run(args.backbone, v, args.rows, args.backend) for v in variants}
    print(f"{args.backbone.name}, {args.rows} rows a step, lengths {', '.join(map(str, LENGTHS))}, "
          f"backend {args.backend}, an empty inductor cache per variant\n")  # fmt: skip
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
