"""RQ-VAE (docs/METHOD.md, "Semantic IDs"): MLP encoder/decoder, k-means-initialised residual codebooks, STE training.

Loss = MSE(decoder(Σ x_q), x) + mean over levels of [MSE(x_q, sg[r]) + β·MSE(sg[x_q], r)].
The trained model is saved as safetensors so per-item latent residuals can be recomputed (CRAB needs them).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from crabrec.config import TokenizeConfig
from crabrec.io import atomic_path, write_text
from crabrec.progress import progress as progress_bar
from crabrec.sid.rq_kmeans import Quantized, kmeans


def mlp(dims: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        lin = nn.Linear(a, b)
        nn.init.xavier_normal_(lin.weight)
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class RQVAE(nn.Module):
    def __init__(self, in_dim: int, hidden: list[int], latent: int, levels: int, codebook_size: int, beta: float):
        super().__init__()
        self.config = {
            "in_dim": in_dim,
            "hidden": list(hidden),
            "latent": latent,
            "levels": levels,
            "codebook_size": codebook_size,
            "beta": beta,
        }
        self.encoder = mlp([in_dim, *hidden, latent])
        self.decoder = mlp([latent, *reversed(hidden), in_dim])
        self.codebooks = nn.ParameterList([nn.Parameter(torch.zeros(codebook_size, latent)) for _ in range(levels)])
        self.beta = beta

    def quantize(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """-> (codes [B, L], straight-through x_q sum, residual at each level's input, codebook+commitment loss)."""
        residual = z
        total = torch.zeros_like(z)
        codes, residuals, losses = [], [], []
        for book in self.codebooks:
            residuals.append(residual)
            idx = torch.cdist(residual, book).argmin(1)
            xq = book[idx]
            losses.append(
                nn.functional.mse_loss(xq, residual.detach())
                + self.beta * nn.functional.mse_loss(xq.detach(), residual)
            )
            xq_st = residual + (xq - residual).detach()
            total = total + xq_st
            residual = residual - xq.detach()
            codes.append(idx)
        return torch.stack(codes, 1), total, residuals, torch.stack(losses).mean()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encoder(x)
        _, zq, _, q_loss = self.quantize(z)
        recon = self.decoder(zq)
        return nn.functional.mse_loss(recon, x), q_loss

    @torch.no_grad()
    def kmeans_init(self, x: torch.Tensor, seed: int) -> None:
        residual = self.encoder(x)
        for level, book in enumerate(self.codebooks):
            k = book.shape[0]
            centroids, assign = kmeans(residual.numpy(), k, seed + level)
            book.copy_(torch.from_numpy(centroids))
            residual = residual - book[torch.from_numpy(assign)]

    @torch.no_grad()
    def encode_all(self, x: np.ndarray) -> Quantized:
        z = self.encoder(torch.from_numpy(np.asarray(x, np.float32)))
        codes, _, residuals, _ = self.quantize(z)
        return Quantized(
            codes=codes.numpy().astype(np.int64),
            codewords=[b.detach().numpy().copy() for b in self.codebooks],
            residuals=[r.numpy().copy() for r in residuals],
        )

    def save(self, folder: str | Path) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / "rqvae.safetensors") as tmp:
            save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(tmp))
        write_text(folder / "rqvae.json", json.dumps(self.config, indent=2))

    @classmethod
    def load(cls, folder: str | Path) -> RQVAE:
        from safetensors.torch import load_file

        folder = Path(folder)
        cfg = json.loads((folder / "rqvae.json").read_text())
        model = cls(cfg["in_dim"], cfg["hidden"], cfg["latent"], cfg["levels"], cfg["codebook_size"], cfg["beta"])
        model.load_state_dict(load_file(str(folder / "rqvae.safetensors")))
        return model


def train_rqvae(
    x: np.ndarray, cfg: TokenizeConfig, codebook_size: int, seed: int, progress: bool = True
) -> tuple[RQVAE, list[float]]:
    """Train an RQ-VAE on item embeddings (AdamW, grad-clip 1.0) with ``cfg.levels`` codebooks of ``codebook_size``
    codes and ``cfg``'s ``rqvae_*`` settings; returns the model and the per-epoch loss."""
    levels, hidden, latent, beta = cfg.levels, cfg.rqvae_hidden, cfg.rqvae_latent_dim, cfg.rqvae_beta
    epochs, lr, batch_size = cfg.rqvae_epochs, cfg.rqvae_lr, cfg.rqvae_batch_size
    torch.manual_seed(seed)
    data = torch.from_numpy(np.asarray(x, np.float32))
    model = RQVAE(data.shape[1], hidden, latent, levels, codebook_size, beta)
    gen = torch.Generator().manual_seed(seed)
    first = data[torch.randperm(len(data), generator=gen)[: max(batch_size, codebook_size)]]
    model.kmeans_init(first, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history: list[float] = []
    bar = progress_bar(range(epochs), "rq-vae", show=progress)
    for _ in bar:
        perm = torch.randperm(len(data), generator=gen)
        total, count = 0.0, 0
        for start in range(0, len(data), batch_size):
            batch = data[perm[start : start + batch_size]]
            recon, q_loss = model(batch)
            loss = recon + q_loss
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += float(loss.detach()) * len(batch)
            count += len(batch)
        history.append(total / count)
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{history[-1]:.4f}")
    model.eval()
    return model, history
