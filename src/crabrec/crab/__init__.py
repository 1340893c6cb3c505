"""CRAB: codebook rebalancing (stage 1) and hierarchical semantic alignment (stage 2)."""
