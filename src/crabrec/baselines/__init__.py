"""Popularity-debiasing baselines on the generative backbone (METHOD_SPEC §5): RW, RR, D²LR."""
