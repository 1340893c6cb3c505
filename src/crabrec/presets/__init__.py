"""YAML presets shipped with crabrec (``quick`` for the CPU, ``paper`` for a GPU)."""
