"""TIGER's per-level output layer: the softmax of decoder position l runs over SID level l only, the projection is
untied from the input embeddings, and a saved model loads back as the same model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crabrec.config import TigerSection

SIZES = [8, 8, 3]
SMALL = dict(d_model=32, layers=2, heads=2, d_kv=16, ff=64, dropout=0.0, user_bins=5, init="random")


def level_model(seed: int = 1):
    from crabrec.models.tiger import build_tiger

    return build_tiger(SIZES, TigerSection(**SMALL, head="level"), seed=seed).eval()


def batch(seed: int = 0):
    from crabrec.models.decoder import N_SPECIAL

    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(N_SPECIAL, N_SPECIAL + sum(SIZES), (4, 6)))
    codes = np.stack([rng.integers(0, s, 4) for s in SIZES], axis=1)
    labels = torch.from_numpy(codes + N_SPECIAL + np.cumsum([0, *SIZES[:-1]]))
    return ids, torch.ones_like(ids), labels, codes


def test_level_loss_is_the_cross_entropy_of_each_level_on_its_own_tokens():
    model = level_model()
    ids, mask, labels, codes = batch()
    out = model(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
    hidden = out.decoder_hidden_states[-1]  # after the final norm: what the projection reads
    full = model.lm_head(hidden)  # no d_model^-0.5 scaling: the projection is untied
    start = 2 + np.cumsum([0, *SIZES[:-1]])
    nll = []
    for level, size in enumerate(SIZES):  # by hand: a softmax over this level's slice only
        logp = torch.log_softmax(full[:, level, start[level] : start[level] + size], dim=-1)
        nll.append(-logp[torch.arange(4), torch.from_numpy(codes[:, level])])
    torch.testing.assert_close(out.loss, torch.stack(nll).mean(), rtol=1e-5, atol=1e-6)
    # every logit outside the position's level is the minimum: a whole-row softmax is the level's own
    for level, size in enumerate(SIZES):
        row = out.logits[:, level]
        inside = torch.zeros(row.shape[-1], dtype=torch.bool)
        inside[start[level] : start[level] + size] = True
        assert (row[:, ~inside] == torch.finfo(row.dtype).min).all()
        torch.testing.assert_close(row.log_softmax(-1)[:, inside], full[:, level, inside].log_softmax(-1))


def test_a_compiled_tiger_trains_on_the_level_loss_through_the_compiled_forward(monkeypatch):
    """Under ``tiger.compile`` the model is torch.compile's wrapper, which is no LevelT5 and holds it as ``_orig_mod``:
    the loss is still the per-level one (not the whole-vocabulary forward), reached through the wrapper's call (so
    that the compiled code runs it). A plain wrapper of the same shape stands in for tracing, which takes long."""
    from crabrec.models.tiger import LevelT5, tiger_loss

    model = build_small().eval()
    compiled = torch.compile(model, backend="eager")  # not called: building it traces nothing
    assert compiled._orig_mod is model and not isinstance(compiled, LevelT5)

    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self._orig_mod, self.calls = inner, []

        def forward(self, **kwargs):
            self.calls.append(sorted(kwargs))
            return self._orig_mod(**kwargs)

    called, level_loss = [], LevelT5.level_loss
    monkeypatch.setattr(LevelT5, "level_loss", lambda self, *a: called.append(1) or level_loss(self, *a))
    ids, mask, labels, _ = batch()
    wrapper = Wrapper(model)
    got = tiger_loss(wrapper, {"ids": ids, "mask": mask, "labels": labels})
    assert called and wrapper.calls == [["attention_mask", "input_ids", "labels", "per_level_loss"]]
    torch.testing.assert_close(got, model(input_ids=ids, attention_mask=mask, labels=labels).loss, rtol=1e-6, atol=1e-6)


def test_training_loss_from_the_levels_logits_equals_the_forwards_loss_and_gradients():
    from crabrec.models.decoder import IGNORE
    from crabrec.models.tiger import tiger_loss

    model = build_small(dropout=0.2).train()  # dropout on: both paths draw the same masks in the same order
    ids, mask, labels, _ = batch()
    mask[0, 4:] = 0
    labels[1, 2] = IGNORE  # ignored positions count in neither path
    grads = []
    for loss_of in (lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss,
                    lambda: tiger_loss(model, {"ids": ids, "mask": mask, "labels": labels})):  # fmt: skip
        torch.manual_seed(7)
        model.zero_grad()
        loss = loss_of()
        loss.backward()
        grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (want, want_grads), (got, got_grads) = grads
    assert want.item() > 0
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for a, b in zip(want_grads, got_grads):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def build_small(**change):
    from crabrec.models.tiger import build_tiger

    return build_tiger(SIZES, TigerSection(**(SMALL | change), head="level"), seed=1)


def test_level_head_is_untied_and_trains_apart_from_the_embeddings():
    model = level_model()
    assert model.lm_head.weight is not model.shared.weight
    assert model.encoder.embed_tokens.weight is model.shared.weight
    assert not model.config.scale_decoder_outputs
    ids, mask, labels, _ = batch()
    model.train()
    model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    user_rows = model.shared.weight.grad[2 + sum(SIZES) :]
    assert model.lm_head.weight.grad.abs().sum() > 0
    assert user_rows.abs().sum() == 0  # user tokens are neither inputs here nor targets at any level


def test_level_tied_head_is_the_input_embeddings_with_each_levels_own_softmax():
    """``tiger.head=level-tied``: the output projection is the embedding table itself (one tensor, trained by both
    ends), scaled by d^-1/2 as T5's tied output; the loss is still each level's cross-entropy on its own tokens."""
    from crabrec.models.tiger import TiedLevelT5, build_tiger, tiger_loss

    model = build_tiger(SIZES, TigerSection(**SMALL, head="level-tied"), seed=1).eval()
    assert isinstance(model, TiedLevelT5) and model.lm_head.weight is model.shared.weight
    ids, mask, labels, codes = batch()
    out = model(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
    full = out.decoder_hidden_states[-1] * 32**-0.5 @ model.shared.weight.T
    start = 2 + np.cumsum([0, *SIZES[:-1]])
    nll = [
        -torch.log_softmax(full[:, level, start[level] : start[level] + size], -1)[torch.arange(4), codes[:, level]]
        for level, size in enumerate(SIZES)
    ]
    torch.testing.assert_close(out.loss, torch.stack(nll).mean(), rtol=1e-5, atol=1e-6)
    loss = tiger_loss(model, {"ids": ids, "mask": mask, "labels": labels})
    torch.testing.assert_close(loss, out.loss, rtol=1e-5, atol=1e-6)
    loss.backward()
    unread = np.setdiff1d(np.arange(2, 2 + sum(SIZES)), ids.numpy())  # SID rows no input reads
    assert len(unread) and (model.shared.weight.grad[torch.from_numpy(unread)].abs().sum(1) > 0).all()


@pytest.mark.parametrize(
    "head,ffn", [("level", "relu"), ("tied", "relu"), ("level", "gated-gelu"), ("level-tied", "relu")]
)
def test_saved_tiger_loads_back_as_the_same_model(tmp_path, head, ffn):
    from crabrec.models.tiger import build_tiger
    from crabrec.rankers import load_generator
    from crabrec.sid.codebook import Codebook

    rng = np.random.default_rng(0)
    codes = np.unique(np.stack([rng.integers(0, s, 40) for s in SIZES], axis=1), axis=0)
    cb = Codebook(codes=codes, sizes=SIZES, item_ids=[str(i) for i in range(len(codes))])
    model = build_tiger(SIZES, TigerSection(**SMALL, head=head, ffn=ffn), seed=3).eval()
    model.save_pretrained(tmp_path)
    loaded = load_generator(tmp_path, cb)
    assert type(loaded) is type(model)
    ids, mask, labels, _ = batch(1)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, labels=labels)
        got = loaded(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.equal(want.logits, got.logits) and torch.equal(want.loss, got.loss)


def harness_export():
    """``benchmarks/tiger_reference/export.py``, imported from its file (the benchmarks are not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "tiger_reference" / "export.py"
    spec = importlib.util.spec_from_file_location("tiger_export", path)
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    return export


def test_reference_harness_rebuilds_each_users_training_sequence():
    """``benchmarks/tiger_reference/export.py`` hands cornac each user's sequence; its prefixes are our rows."""
    from crabrec.data.dataset import Samples

    export = harness_export()
    seqs = {7: [4, 1, 3, 9], 2: [5, 6]}
    users, hist, targets = [], [], []
    for u, seq in seqs.items():
        for t in range(1, len(seq)):
            users.append(u), hist.append(seq[:t]), targets.append(seq[t])
    rows = Samples.from_rows(users, hist, targets, max_history=2)  # windows cut to 2: rebuilt from the targets
    got_users, flat, offsets = export.training_sequences(rows)
    assert got_users.tolist() == [7, 2]
    assert [flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == [seqs[7], seqs[2]]
    rows.history[2, 0] = 0  # a row that is not a window of its user's sequence is refused
    with pytest.raises(SystemExit):
        export.training_sequences(rows)


def test_reference_harness_exports_an_ids_only_run_with_a_zero_embedding_column(ids_run, tmp_path):
    """Imported SIDs without item text (Beauty's ids): the bundle still holds the run's split and SIDs."""
    from crabrec.runfiles import RunFiles

    assert not (ids_run / "embeddings.npy").exists()
    bundle = tmp_path / "bundle.npz"
    assert harness_export().main([str(ids_run), str(bundle)]) == 0
    got = np.load(bundle)
    codebook = RunFiles(ids_run).load_codebook()
    assert np.array_equal(got["codes"], codebook.codes)
    assert got["embeddings"].shape == (len(codebook.codes), 1) and not got["embeddings"].any()
    assert len(got["test_target"]) == len(RunFiles(ids_run).load_splits().test.target)


def test_tiger_trains_with_its_own_seed_on_the_runs_semantic_ids(tiny_run, tmp_path):
    """``--set tiger.seed=N`` on a copy of a finished run: only TIGER re-trains (the cached SIDs are kept), and its
    weights differ from the run's TIGER (another initialisation and batch order)."""
    import shutil

    from safetensors.torch import load_file

    from .conftest import TINY, cli

    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run, symlinks=True)
    sids = (run / "sid" / "codebook.json").read_bytes()
    before = load_file(str(next((tiny_run / "models" / "tiger").rglob("model.safetensors"))))
    assert cli(["run", str(run), *TINY, "--until", "tiger", "--set", "tiger.seed=11"])[0] == 0
    assert (run / "sid" / "codebook.json").read_bytes() == sids
    after = load_file(str(next((run / "models" / "tiger").rglob("model.safetensors"))))
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def centroids(seed: int = 0, dim: int = 6) -> list[np.ndarray]:
    """Per-level centroids of a codebook of ``SIZES``; the last level's are all equal (a dedup level's)."""
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(SIZES[0], dim)), 0.3 * rng.normal(size=(SIZES[1], dim)), np.zeros((SIZES[2], dim))]


def test_codebook_embeddings_keep_each_levels_geometry_at_t5s_spread():
    from crabrec.models.tiger import codebook_embeddings

    cw = centroids()
    table = codebook_embeddings(cw, SIZES, d_model=8, seed=0).astype(np.float64)
    assert table.shape == (sum(SIZES), 8)
    start = 0
    for level, size in enumerate(SIZES[:2]):
        rows = table[start : start + size]
        centred = cw[level] - cw[level].mean(axis=0)
        pca = rows[:, :6]  # d_model 8 > width 6: the PCA coordinates, then two random columns
        assert pca.std() == pytest.approx(1.0)
        spread = np.sqrt((centred**2).mean())  # a full-rank PCA is a rotation: it keeps every inner product
        np.testing.assert_allclose(pca @ pca.T, centred @ centred.T / spread**2, atol=1e-5)
        start += size
    assert np.isnan(table[-SIZES[2] :]).all()  # the constant level: no geometry to keep


def test_codebook_embeddings_of_fewer_centroids_than_axes_fill_the_rest_with_draws():
    """A small catalogue's codebook: 19 centroids of width 40 span at most 19 principal axes, fewer than d_model 32.
    Every level's rows are still d_model wide: the 19 principal coordinates (a rotation of the centred centroids),
    then N(0, 1) draws. (They were 19 wide, and stacking them with the dedup level's 32-wide rows failed.)"""
    from crabrec.models.tiger import codebook_embeddings

    cw = centroids(dim=40)
    table = codebook_embeddings(cw, SIZES, d_model=32, seed=0).astype(np.float64)
    axes = sum(SIZES)
    assert table.shape == (axes, 32) and np.isnan(table[-SIZES[2] :]).all()
    start = 0
    for level, size in enumerate(SIZES[:2]):
        rows, centred = table[start : start + size], cw[level] - cw[level].mean(axis=0)
        spread = np.sqrt((centred**2).sum() / (size * axes))  # the projection's standard deviation
        np.testing.assert_allclose(rows[:, :axes] @ rows[:, :axes].T, centred @ centred.T / spread**2, atol=1e-5)
        assert np.isfinite(rows[:, axes:]).all() and rows[:, axes:].std() > 0.5  # the draws
        start += size


def test_codebook_init_sets_the_sid_rows_and_keeps_the_rest_of_t5s_draw():
    from crabrec.errors import CrabError
    from crabrec.models.decoder import N_SPECIAL
    from crabrec.models.tiger import build_tiger, codebook_embeddings

    cw = centroids()
    random = build_tiger(SIZES, TigerSection(**SMALL), seed=5).shared.weight.detach()
    model = build_tiger(SIZES, TigerSection(**{**SMALL, "init": "codebook"}), seed=5, codewords=cw)
    weight = model.shared.weight.detach()
    want = torch.from_numpy(codebook_embeddings(cw, SIZES, SMALL["d_model"], seed=5))
    first, last = N_SPECIAL, N_SPECIAL + SIZES[0] + SIZES[1]
    torch.testing.assert_close(weight[first:last], want[: SIZES[0] + SIZES[1]])
    assert torch.equal(weight[:first], random[:first])  # specials
    assert torch.equal(weight[last:], random[last:])  # the constant level and the user tokens
    assert model.encoder.embed_tokens.weight is model.shared.weight
    with pytest.raises(CrabError, match="no centroids"):
        build_tiger(SIZES, TigerSection(**{**SMALL, "init": "codebook"}), seed=5)
    # auto: the centroids where the codebook has them, T5's draw where it has none (imported SIDs without vectors)
    auto = TigerSection(**{**SMALL, "init": "auto"})
    assert torch.equal(build_tiger(SIZES, auto, seed=5, codewords=cw).shared.weight, model.shared.weight)
    assert torch.equal(build_tiger(SIZES, auto, seed=5).shared.weight, random)
    flat = [np.zeros((s, 6)) for s in SIZES]
    assert torch.equal(build_tiger(SIZES, auto, seed=5, codewords=flat).shared.weight, random)


def test_level_layout_starts_its_head_as_a_linear_layer_and_its_decoder_start_small():
    from crabrec.models.decoder import PAD
    from crabrec.models.tiger import DECODER_START_STD, build_tiger

    size = TigerSection(**{**SMALL, "d_model": 64}, head="level")
    sizes = [256, 256, 256, 10]
    model = build_tiger(sizes, size, seed=3)
    head, bound = model.lm_head.weight.detach(), 64**-0.5
    assert head.abs().max() <= bound  # U(-d^-1/2, d^-1/2), as nn.Linear(d, vocab) starts: std d^-1/2 / sqrt(3)
    assert head.std().item() == pytest.approx(bound / 3**0.5, rel=0.02)
    rows = model.shared.weight.detach()
    assert rows[PAD].std().item() == pytest.approx(DECODER_START_STD, rel=0.3)  # the decoder's start token
    assert rows[PAD + 1 :].std().item() == pytest.approx(1.0, rel=0.02)  # every other row keeps T5's N(0, 1)
    again = build_tiger(sizes, size, seed=3)
    assert torch.equal(again.lm_head.weight, model.lm_head.weight)
    assert torch.equal(again.shared.weight, model.shared.weight)
    assert not torch.equal(build_tiger(sizes, size, seed=4).lm_head.weight, model.lm_head.weight)


def test_inputs_padded_to_a_multiple_train_as_the_unpadded_ones():
    """tiger.cuda_graphs pads each batch's inputs to a multiple of 16 tokens (few shapes to record): the padding is
    masked, so the loss and every gradient are the unpadded batch's."""
    from crabrec.models.decoder import item_tokens
    from crabrec.models.tiger import encode_inputs, make_labels, tiger_loss

    model = build_small().train()
    offsets = np.cumsum([0, *SIZES[:-1]])  # global codebook ids, level by level
    tokens = item_tokens(np.stack([np.arange(6) % s + o for s, o in zip(SIZES, offsets)], axis=1))
    history, length = np.array([[0, 1, 2], [3, 4, 0], [5, 0, 0]]), np.array([3, 2, 1])
    user, target = np.array([0, 7, 3]), np.array([4, 5, 0])
    results = []
    for multiple in (1, 16):
        ids, mask = encode_inputs(model.config, user, history, length, tokens, multiple)
        results.append((ids.shape[1], mask.sum()))
        model.zero_grad()
        loss = tiger_loss(model, {"ids": ids, "mask": mask, "labels": make_labels(target, tokens)})
        loss.backward()
        results[-1] += (loss.detach(), [p.grad.clone() for p in model.parameters()])
    (width, ones, want, want_grads), (padded, padded_ones, got, got_grads) = results
    assert (width, padded) == (1 + 3 * 3, 16) and ones == padded_ones
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for a, b in zip(want_grads, got_grads):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
