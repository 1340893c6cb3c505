"""crabrec: generative recommendation with semantic IDs and CRAB codebook rebalancing."""

__version__ = "0.1.0"
