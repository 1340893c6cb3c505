"""TIGER+PPD+RR (ours, a combination over the other backbone): RR's re-ranking over TIGER+PPD's beams, as PPD+RR is
over PPD's on MOR."""

from __future__ import annotations

from crabrec.methods.ppd import READS
from crabrec.methods.rr import reranking

METHOD = reranking(
    "tiger-ppd-rr",
    "TIGER+PPD+RR (ours)",
    "tiger-ppd",
    ("data", "tokenize", "train", "evaluate", "tiger", "tiger-eval", "tiger-ppd"),
    READS,
    section="ppd",
    knob="ppd.tau",
    grid=(0.25, 0.5, 0.75),
    describe="TIGER+PPD+RR (ours): RR's re-ranking, tuned on validation, over TIGER+PPD's beams",
    base="tiger",
)
