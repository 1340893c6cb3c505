"""Popularity-debiasing baselines on the generative backbone (docs/METHOD.md, "Baselines"): RW, RR, D²LR."""
