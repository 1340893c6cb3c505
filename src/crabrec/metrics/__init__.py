"""Accuracy (HR@K, NDCG@K) and popularity-bias metrics (GU, MGU@K, DGU@K, token-group GU)."""

from crabrec.metrics.fairness import group_unfairness, popular_share
from crabrec.metrics.ranking import ranking_metrics

HEADLINE = ("HR@10", "NDCG@10", "MGU@10", "DGU@10")  # the four numbers every method is compared on

__all__ = ["HEADLINE", "group_unfairness", "popular_share", "ranking_metrics"]
