"""One training loop (HF accelerate) with pluggable losses."""
