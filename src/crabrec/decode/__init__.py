"""Constrained decoding over semantic IDs."""
