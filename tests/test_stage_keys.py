"""Stage cache keys: a stage is re-run when a setting it reads changes, and only then."""

from __future__ import annotations

from crabrec.config import load_config
from crabrec.pipeline import RunContext
from crabrec.stages import registry

TRAINED = ("train", "tiger", "sasrec", "rw", "d2lr", "finetune")


def keys(**overrides) -> dict[str, str]:
    ctx = RunContext(config=load_config(overrides=overrides), stages=registry())
    return {name: ctx.key(name) for name in ctx.stages}


def test_validation_sample_size_is_part_of_every_trained_stage_key():
    base, other = keys(), keys(train={"valid_samples": 4905})
    assert all(base[name] != other[name] for name in TRAINED)
    assert all(base[name] == other[name] for name in ("data", "embed", "tokenize", "rebalance"))


def test_a_new_codebook_reruns_what_uses_semantic_ids_but_not_sasrec():
    base, other = keys(), keys(tokenize={"levels": 2})
    assert base["sasrec"] == other["sasrec"] and base["embed"] == other["embed"]
    assert all(base[name] != other[name] for name in ("tokenize", "train", "evaluate", "tiger", "rebalance", "report"))
