"""crabrec: generative recommendation with semantic IDs and CRAB codebook rebalancing."""

__version__ = "0.1.0"


def load(run_dir, method: str = "mor", *, beam: int | None = None):
    """A trained method of a run, ready to recommend: see :func:`crabrec.recommender.load`."""
    from crabrec.recommender import load as load_run

    return load_run(run_dir, method, beam=beam)
