"""Accuracy (HR@K, NDCG@K) and popularity-bias metrics (GU, MGU@K, DGU@K, token-group GU)."""

from crabrec.metrics.fairness import group_unfairness, popular_share
from crabrec.metrics.ranking import ranking_metrics

__all__ = ["group_unfairness", "popular_share", "ranking_metrics"]
