"""Which fused attention kernels a CUDA run may use.

PyTorch's ``scaled_dot_product_attention`` may pick cuDNN's kernel on Hopper GPUs. cuDNN builds an execution plan for
each new input shape, and crabrec's batches change shape from step to step (packed rows of varying length, prompts
grouped by length, beams of varying width). On an H200 that planning took most of a training step: the packed MOR
(h384 × 4, batch 256) stepped in 180.7 ms with cuDNN allowed and in 43.9 ms without it
(``benchmarks/bench_train.py``, the same machine and call; see docs/results/gpu.md). Flash, memory-efficient and
math attention stay available, and PyTorch picks among them as usual. ``CRABREC_CUDNN_ATTENTION=1`` (or ``true``,
``yes``) in the environment leaves cuDNN's kernel allowed (to compare, or where a later cuDNN plans faster).
"""

from __future__ import annotations


def skip_cudnn_attention() -> None:
    """Keep ``scaled_dot_product_attention`` off cuDNN's kernel in this process (CUDA only; a no-op on the CPU)."""
    import torch

    from crabrec.config import env_flag

    if env_flag("CRABREC_CUDNN_ATTENTION"):
        return  # asked for
    if torch.cuda.is_available():
        torch.backends.cuda.enable_cudnn_sdp(False)
