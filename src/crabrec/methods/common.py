"""Stage builders the methods share: the test evaluation and the validation of a method's ranker, and decoder
training."""

from __future__ import annotations

from typing import Any

from crabrec.pipeline import RunContext, Stage

EVAL_ARTIFACTS = ("metrics.json", "rankings.parquet")
EVAL_READS = ("evaluate", "seed")  # the seed: the bootstrap resamples of the CIs against MOR


def eval_needs(method: str, needs: tuple[str, ...]) -> tuple[str, ...]:
    """A method's evaluation also needs MOR's (its change against MOR, with CIs, is part of its metrics)."""
    from crabrec.evaluation import BASE

    return needs if method == BASE or "evaluate" in needs else (*needs, "evaluate")


def versus_of(method: str) -> tuple[str, str] | None:
    """The model ``method`` is based on, if not MOR, and what that model ranks (``Method.base``, its ``sids``): what
    its evaluation compares it with besides MOR."""
    from crabrec.evaluation import BASE
    from crabrec.methods import get

    base = get(method).base
    return None if base == BASE else (base, get(base).sids)


def eval_stage(name: str, method: str, needs: tuple[str, ...], ranker, reads: tuple[str, ...] = ()) -> Stage:
    """Stage ``name``: ``ranker(files, cfg)`` (the method's :class:`~crabrec.rankers.Ranker`) ranks the test rows;
    ``reads``: the settings the ranker itself reads (a decoding-time method's)."""

    def run(ctx: RunContext) -> dict[str, Any]:
        from crabrec.evaluation import evaluate_ranker

        ranked = ranker(ctx.files, ctx.cfg)
        return evaluate_ranker(ctx.files, method, ranked, ctx.cfg.evaluate, ctx.cfg.seed, versus_of(method))

    return Stage(
        name=name,
        fn=run,
        reads=(*EVAL_READS, *reads),
        needs=eval_needs(method, needs),
        artifacts=tuple(f"models/{method}/{a}" for a in EVAL_ARTIFACTS),
        describe=f"{method}: rank the test rows -> metrics.json, rankings.parquet",
        distributed=True,
    )


def ranker_validation(method: str, ranker):
    """``validate(files, cfg, rows)`` of a method: its ranker over the validation rows (``rows``: the first N,
    None = all) scored like the test (HR@10, NDCG@10, MGU@10, DGU@10)."""

    def validate(files, cfg, rows: int | None) -> dict[str, float]:
        return validation_metrics(files, ranker(files, cfg), rows, f"{method}: validation")

    return validate


def validation_metrics(files, ranked, rows: int | None, desc: str) -> dict[str, float]:
    """``ranked`` (a :class:`~crabrec.rankers.Ranker`) over the first ``rows`` validation rows (None = all; sharded
    under a launcher), scored like the test: HR@10, NDCG@10, MGU@10, DGU@10."""
    from crabrec.decode.rank import score_rankings
    from crabrec.evaluation import rank_sharded
    from crabrec.metrics import HEADLINE
    from crabrec.runfiles import first_rows

    valid = first_rows(files.load_splits().valid, rows)
    items, _ = rank_sharded(ranked, valid, desc)
    pop = files.load_popularity()
    m = score_rankings(items, valid, pop.group, pop.popular, pop.n_groups, ranked.trie, [10], [10])
    return {k: m[k] for k in HEADLINE}


def train_from_scratch(ctx: RunContext, method: str, loss_fn=None) -> dict[str, Any]:
    """The MOR decoder (or ``train.backbone``) trained on the base codebook into ``models/<method>/``."""
    from crabrec.train.decoder import initial_decoder, train_decoder

    cfg, seed = ctx.cfg.train, ctx.cfg.seed
    codebook = ctx.files.load_codebook()
    model, io, export = initial_decoder(codebook, cfg, seed)
    out = ctx.files.model_dir(method)
    splits = ctx.files.load_splits()
    policy = ctx.checkpoint_policy()
    return train_decoder(model, io, codebook, splits, cfg, out, seed, loss_fn, export=export, **policy)


def train_stage(
    name: str, method: str, fn, reads: tuple[str, ...], describe: str, needs=("data", "tokenize"), revision: int = 0
) -> Stage:
    """Stage ``name``: ``fn`` trains ``method`` into ``models/<method>/`` (weights + ``train_summary.json``);
    ``revision``: :attr:`Stage.revision`."""
    artifacts = (f"models/{method}/model/model.safetensors", f"models/{method}/train_summary.json")
    return Stage(
        name=name,
        fn=fn,
        reads=reads,
        needs=needs,
        artifacts=artifacts,
        describe=describe,
        distributed=True,
        revision=revision,
    )
