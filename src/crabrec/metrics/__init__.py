"""Accuracy (HR@K, NDCG@K) and popularity-bias metrics (GU, MGU@K, DGU@K, token-group GU)."""

from crabrec.metrics.fairness import coverage, group_unfairness, popular_share
from crabrec.metrics.ranking import group_hit_rate, ranking_metrics

HEADLINE = ("HR@10", "NDCG@10", "MGU@10", "DGU@10")  # the four numbers every method is compared on

BEYOND = ("coverage@10", "tail_HR@10")  # what a method's exposure shift buys: catalogue coverage, tail users served

__all__ = ["BEYOND", "HEADLINE", "coverage", "group_hit_rate", "group_unfairness", "popular_share", "ranking_metrics"]
