"""TIGER+RR: RR's re-ranking (IFairLRS) over TIGER's beams, α tuned on TIGER's validation beams as RR's is on MOR's:
the reranking baseline on the paper's second backbone."""

from __future__ import annotations

from crabrec.methods.rr import reranking

METHOD = reranking(
    "tiger-rr",
    "TIGER+RR",
    "tiger",
    ("data", "tokenize", "train", "evaluate", "tiger", "tiger-eval"),
    section="rr",
    knob="rr.alpha",
    grid=(0.02, 0.05, 0.1, 0.2, 0.5),  # α = 0 is TIGER's own ranking, the frontier's reference point
    describe="Reranking over TIGER's beams",
    base="tiger",
)
