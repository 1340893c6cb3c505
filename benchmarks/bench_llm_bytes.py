"""The bytes one training step of MOR on an LLM backbone moves through memory, operator by operator, as a GPU runs
it eagerly under bf16 autocast: counted on the CPU with fake tensors (shapes and dtypes only, no arithmetic).

    python benchmarks/bench_llm_bytes.py [--backbone backbones/smollm2-135m] [--rows 128] [--length 120]

On an H100 the SmolLM2-135M step is bound by memory traffic, not arithmetic: its matrix products take 20 of its 122
device milliseconds, and elementwise operators and dtype copies most of the rest (docs/results/gpu.md). This counts
that traffic without a GPU, so a change can be judged before a GPU is lent. It runs the forward and backward pass of
:func:`crabrec.models.decoder.target_loss` on ``--rows`` prompt rows of ``--length`` tokens (a 4-token answer) and
counts every operator with the bytes of the tensors it reads and writes. Views are free. A norm run through
:func:`crabrec.models.backbone.fuse_rms_norms` is counted as the one fused kernel CUDA runs for it (forward, it reads
the activation and writes its result; backward, it reads the gradient and the activation and writes the input's
gradient), since the CPU computes it as separate operators. The tensors sit on a fake CPU device, so autocast's CPU
lists apply; for a Llama they cast the same operators as CUDA's (the matrix products; the norms upcast by
themselves). Four variants: the frozen weights in float32 (the default) or bfloat16 (``train.backbone_dtype``),
each with crabrec's norms and LoRA branches and as transformers and peft run them (``plain``).
"""

from __future__ import annotations

import argparse
import collections
import types
import warnings
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

FREE = {  # metadata and views: no bytes move
    "view", "_unsafe_view", "t", "transpose", "expand", "as_strided", "slice", "select", "unsqueeze", "squeeze",
    "permute", "reshape", "alias", "detach", "split", "split_with_sizes", "unbind", "_reshape_alias", "empty",
    "empty_strided", "new_empty_strided", "empty_like", "device", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "dim", "is_contiguous", "size", "stride", "numel", "lift_fresh",
}  # fmt: skip
MATMUL = {"mm", "addmm", "bmm", "baddbmm"}


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


class ByteCount(TorchDispatchMode):
    """Per operator (name and output dtype): calls and bytes read + written. ``add`` counts a fused kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()
        self.bytes: collections.Counter[str] = collections.Counter()
        self.paused = 0

    def add(self, name: str, nbytes: int) -> None:
        self.calls[name] += 1
        self.bytes[name] += nbytes

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if self.paused or name in FREE:
            return out
        tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
        dtypes = sorted({dtype_name(t) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)})
        self.add(f"{name} ({', '.join(dtypes)})", sum(t.numel() * t.element_size() for t in tensors))
        return out


def fused_norm_counted(counter: ByteCount):
    """The fused norm's forward, counted as CUDA's one kernel each way (the CPU's operators inside are not)."""

    class Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps):
            counter.paused += 1
            try:
                y = torch.nn.functional.rms_norm(x.detach(), weight.shape, weight.detach(), eps)
            finally:
                counter.paused -= 1
            ctx.save_for_backward(x, weight)
            ctx.eps = eps
            rows = x.numel() // x.shape[-1]
            counter.add(f"fused rms_norm ({dtype_name(x)})", 2 * x.nbytes + 4 * rows)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, weight = ctx.saved_tensors
            counter.paused += 1
            try:
                with torch.enable_grad():
                    xx = x.detach().requires_grad_(True)
                    y = torch.nn.functional.rms_norm(xx, weight.shape, weight.detach(), ctx.eps)
                    (gx,) = torch.autograd.grad(y, xx, grad)
            finally:
                counter.paused -= 1
            rows = x.numel() // x.shape[-1]
            counter.add(f"fused rms_norm backward ({dtype_name(x)})", 3 * x.nbytes + 4 * rows)
            return gx, None, None

    def forward(module, x):
        if x.dtype != module.weight.dtype:
            return module.unfused_forward(x)
        return Norm.apply(x, module.weight, module.rms_eps)

    return forward


def load(backbone: Path, dtype: str):
    from crabrec.models.backbone import load_backbone

    with warnings.catch_warnings():  # transformers' note on how the new SID rows are initialised
        warnings.simplefilter("ignore")
        model, _, base = load_backbone(backbone, [256, 256, 256], seed=0, dtype=dtype)
    return model.train(), base


def plain(model) -> None:
    """Undo crabrec's norms, LoRA input handling and products, and kept token indices: the model as transformers and
    peft run it."""
    for module in model.modules():
        vars(module).pop("_cast_input_dtype", None)
        vars(module).pop("get_merged_weights", None)
        if hasattr(module, "unfused_forward"):
            module.forward = module.unfused_forward
        if hasattr(module, "peft_forward"):
            module.forward = module.peft_forward


def to_fake(model, fake: FakeTensorMode) -> None:
    """Every parameter and buffer replaced by a fake tensor of its shape and dtype (tied weights stay tied)."""
    made: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for key, t in table.items():
                if t is None:
                    continue
                if id(t) not in made:
                    with fake:
                        new = torch.empty(t.shape, dtype=t.dtype)
                    made[id(t)] = torch.nn.Parameter(new, t.requires_grad) if isinstance(t, torch.nn.Parameter) else new
                table[key] = made[id(t)]


def count_step(backbone: Path, dtype: str, now: bool, rows: int, length: int, answer: int = 4) -> ByteCount:
    from crabrec.models.decoder import IGNORE, target_loss

    model, base = load(backbone, dtype)
    counter = ByteCount()
    if now:
        for module in model.modules():
            if hasattr(module, "unfused_forward"):
                module.forward = types.MethodType(fused_norm_counted(counter), module)
    else:
        plain(model)
    fake = FakeTensorMode()
    to_fake(model, fake)
    with fake:
        ids = torch.randint(0, base, (rows, length))
        pad = torch.arange(length)[None, :] < (torch.arange(rows)[:, None] % 4) * 8  # left padding, 0-24 tokens
        mask = (~pad).long()
        labels = torch.full((rows, length), IGNORE)
        labels[:, -answer:] = ids[:, -answer:]
        with counter:
            with torch.autocast("cpu", dtype=torch.bfloat16):  # the trainer's autocast
                loss = target_loss(model, ids, mask, labels, width=answer)
            loss.backward()
    return counter


def main(argv: list[str] | None = None) -> None:
    from crabrec.progress import QUIET, set_verbosity

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backbone", type=Path, default=Path("backbones/smollm2-135m"))
    ap.add_argument("--rows", type=int, default=128, help="rows a step (the paper's global batch)")
    ap.add_argument("--length", type=int, default=120, help="tokens a row, prompt and answer (Office's rows: ~120)")
    ap.add_argument("--top", type=int, default=12, help="operators listed for the first and last variant")
    args = ap.parse_args(argv)
    set_verbosity(QUIET)  # no bars, no library notes (the weights are loaded four times)
    if not (args.backbone / "config.json").is_file():
        raise SystemExit(f"{args.backbone}: no backbone there (make backbone converts SmolLM2-135M into it)")
    results = {}
    for dtype in ("float32", "bfloat16"):
        for now in (False, True):
            results[(dtype, now)] = count_step(args.backbone, dtype, now, args.rows, args.length)
    print(f"{args.backbone.name}, {args.rows} rows x {args.length} tokens, bf16 autocast, forward + backward\n")
    print("| frozen weights | norms and LoRA branches | operator calls | GB moved | matrix products | the rest |")
    print("|---|---|---|---|---|---|")
    for (dtype, now), c in results.items():
        total = sum(c.bytes.values())
        mm = sum(v for k, v in c.bytes.items() if k.split(" ")[0] in MATMUL)
        label = (
            "crabrec (fused norms, LoRA input kept and summed in its product)"
            if now
            else "plain (transformers' norms, peft's LoRA)"
        )
        print(f"| {dtype} | {label} | {sum(c.calls.values()):,} | {total / 1e9:.1f} | {mm / 1e9:.1f} | "
              f"{(total - mm) / 1e9:.1f} |")  # fmt: skip
    for key in (("float32", False), ("bfloat16", True)):
        c = results[key]
        print(f"\n{key[0]} weights, {'crabrec' if key[1] else 'plain'}: the operators that move the most bytes")
        print("| operator (output dtype) | calls | GB |")
        print("|---|---|---|")
        for name, nbytes in c.bytes.most_common(args.top):
            print(f"| {name} | {c.calls[name]:,} | {nbytes / 1e9:.2f} |")


if __name__ == "__main__":
    main()
