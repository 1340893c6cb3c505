"""PPD+RR (ours, a combination): RR's re-ranking over PPD's beams. PPD brings long-tail items into the beam that MOR's
search prunes; RR's group penalty, tuned on PPD's validation beams, then corrects what exposure gap is left."""

from __future__ import annotations

from crabrec.methods.ppd import READS
from crabrec.methods.rr import reranking

METHOD = reranking(
    "ppd-rr",
    "PPD+RR (ours)",
    "ppd",
    ("data", "tokenize", "train", "evaluate", "ppd"),
    READS,
    section="ppd",
    knob="ppd.tau",
    grid=(0.25, 0.5, 0.75),
    backbone=True,
    describe="PPD+RR (ours): RR's re-ranking, tuned on validation, over PPD's beams",
)
