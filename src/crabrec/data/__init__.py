"""Data layer: loaders per on-disk layout, k-core, splits into samples, item popularity and groups."""

from crabrec.data.dataset import Dataset, Samples, Splits
from crabrec.data.loaders import load_dataset
from crabrec.data.popularity import Popularity, compute_popularity
from crabrec.data.splits import make_splits

__all__ = [
    "Dataset",
    "Popularity",
    "Samples",
    "Splits",
    "compute_popularity",
    "load_dataset",
    "make_splits",
]
