"""How many of a packed MOR's training steps a CUDA graph replays, over whole trainings (counted on the CPU).

    python benchmarks/graph_shapes.py [runs/office-quick] [--batches 256,2048] [--epochs 1,2,10,30]

A recorded graph is bound to its batch's shape, and packed batches (chains of users, ``train.packing: packed``)
change shape from batch to batch. This replays the training's own batch plans (``packed_batcher`` with the padding
``cuda_graphs`` uses, seeded as the run's training) through :class:`crabrec.train.graphs.StepGraphs` with a recorder
that records nothing, so that each step is counted as training counts it: eager, recorded at its shape's second sight,
then replayed. Nothing is trained and no GPU is needed: the counts are the ones a GPU run of the same plans makes. It
prints, per batch size and number of epochs, the graphs recorded, the share of steps replayed, and the padded tokens
per real token (the arithmetic the padding adds). ``benchmarks/bench_train.py`` times the first epoch only, so its
replayed share is this table's one-epoch row.
"""

from __future__ import annotations

import argparse

import torch
import yaml


def count(rows, epochs: int) -> tuple[int, int, int, float]:
    """(graphs, replayed, eager, padded tokens per real token) of ``epochs`` epochs of ``rows``'s plans."""
    from crabrec.train.graphs import StepGraphs
    from crabrec.train.profile import input_tokens

    nothing = torch.zeros(())
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    engine = StepGraphs(lambda batch, update=True: nothing, model, optimizer, recorder=record_nothing)
    padded = real = 0
    for epoch in range(1, epochs + 1):
        for index in rows.plan(epoch):
            batch = rows.make(index)
            positions, tokens = input_tokens(batch)  # as bench_train.py counts them
            padded, real = padded + positions, real + tokens
            engine({"shape": torch.empty(batch["ids"].shape)})  # what a graph's key holds: the batch's shapes
    summary = engine.summary()
    return summary["graphs"], summary["replayed"], summary["eager"], padded / max(real, 1)


def record_nothing(engine, static):
    """A recorder that keeps no graph: the replay does nothing (the counts are what is measured)."""
    return (lambda: None), torch.zeros(())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", default="runs/office-quick")
    ap.add_argument("--batches", default="256,2048", help="rows per step (train.batch_size), comma-separated")
    ap.add_argument("--epochs", default="1,2,10,30", help="epochs counted, comma-separated")
    args = ap.parse_args()
    from crabrec.models.backbone import decoder_io
    from crabrec.runfiles import RunFiles
    from crabrec.train.decoder import GRAPH_PAD, packed_batcher
    from crabrec.train.loop import Rows

    files = RunFiles(args.run)
    seed = int(yaml.safe_load(files.config.read_text())["seed"])  # the train stage's seed: the run's
    tokens = decoder_io(files.load_codebook()).tokens
    train = files.load_splits().train
    print(f"{args.run}: {len(train):,} training rows; padding to {GRAPH_PAD} (chains, tokens), as cuda_graphs pads")
    print("\n| rows / step | epochs | steps | graphs recorded | steps replayed | padded tokens / real token |")
    print("|---|---|---|---|---|---|")
    for batch in (int(b) for b in args.batches.split(",")):
        rows = Rows(*packed_batcher(train, tokens, batch, seed, GRAPH_PAD))
        for epochs in (int(e) for e in args.epochs.split(",")):
            graphs, replayed, eager, pad = count(rows, epochs)
            steps = replayed + eager
            share = f"{replayed:,} ({replayed / steps:.0%})"
            print(f"| {batch:,} | {epochs} | {steps:,} | {graphs} | {share} | {pad:.2f} |")


if __name__ == "__main__":
    main()
