"""Semantic IDs: quantizers (RQ-KMeans, balanced RQ-KMeans, RQ-VAE), collision handling and the Codebook."""

from crabrec.sid.codebook import Codebook, parse_index

__all__ = ["Codebook", "parse_index"]
