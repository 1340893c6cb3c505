"""Generative recommenders over semantic IDs."""
