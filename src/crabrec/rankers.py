"""Rankers: a saved model of a run that turns (history -> ?) rows into a ranked list of items.

Every method's test evaluation, its validation, ``crabrec.load`` and ``crabrec serve`` rank through the ranker its
registry entry builds (``Method.ranker``), so what a user gets from the API is exactly what ``evaluate`` scored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from crabrec.data.dataset import Samples
from crabrec.errors import CrabError
from crabrec.progress import library_bars_off
from crabrec.runfiles import load_checked


class Ranker(Protocol):
    """``rank(rows)`` -> ``(items [N, width], scores [N, width])``, best first (-1 = an empty slot)."""

    width: int  # the length of every ranked list: the beam of a generative model
    block: int  # rows it decodes together (sharded evaluation splits the rows into whole blocks)

    def rank(self, rows: Samples, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]: ...


class LeavesOut(Protocol):
    """A ranker that can leave items out of every list itself (crabrec's own can); for one without the method, or
    whose method returns False, :class:`~crabrec.recommender.Recommender` has each row exclude them, as a history's
    own items are (correct too, but every row then carries them)."""

    def set_unavailable(self, items: np.ndarray) -> bool:
        """From now on no list holds the items ``items`` (catalogue indices; empty: every item may come back);
        True when the ranker leaves them out itself."""


def inference_device():
    """Where saved models are evaluated: the GPU when there is one (fp32 weights, as trained), else the CPU."""
    import torch

    from crabrec.models.attention import skip_cudnn_attention

    skip_cudnn_attention()  # batches change shape from call to call: cuDNN would plan each anew
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def untrained(model_dir: Path) -> CrabError:
    """The error for ``models/<method>/model`` without a trained model: which method, and the command that trains it
    (RR and PPD rank with MOR's model, CRAB+PPD with CRAB's)."""
    name, run = model_dir.parent.name, model_dir.parent.parent.parent
    return CrabError(
        f"{run}: {name} is not trained in this run (no model in {model_dir.relative_to(run)}); "
        f"`crabrec train {run} --method {name}` trains it"
    )


def load_generator(model_dir: Path, codebook):
    """A saved decoder or TIGER model, checked against ``codebook`` (a model from another codebook is an error)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from crabrec.models.backbone import is_backbone_dir
    from crabrec.models.decoder import N_SPECIAL

    if not (model_dir / "config.json").is_file():
        raise untrained(model_dir)
    config = load_checked(model_dir / "config.json", lambda: AutoConfig.from_pretrained(model_dir))
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    size = getattr(config, "crabrec_user_offset" if seq2seq else "vocab_size", None)
    if not isinstance(size, int):
        raise CrabError(f"{model_dir / 'config.json'}: not a crabrec model config; re-run the stage that writes it")
    sid_vocab = size - N_SPECIAL
    if is_backbone_dir(model_dir):  # a pretrained backbone: its tokenizer's SID tokens are checked by generator_io
        sid_vocab = codebook.vocab_size
    if sid_vocab != codebook.vocab_size:
        raise CrabError(
            f"{model_dir}: model has {sid_vocab} SID tokens but the codebook has {codebook.vocab_size}; "
            "it was trained on another codebook"
        )
    if seq2seq:
        from crabrec.models.tiger import tiger_class

        auto = tiger_class(config)
    else:
        auto = AutoModelForCausalLM
    with library_bars_off():  # no "Loading weights" bar for our small saved models
        model = load_checked(model_dir / "model.safetensors", lambda: auto.from_pretrained(model_dir))
    return model.to(inference_device())


def generator_io(model_dir: Path, codebook):
    """How the saved model at ``model_dir`` reads SIDs (a backbone folder carries its tokenizer and prompts)."""
    from crabrec.models.backbone import decoder_io, is_backbone_dir, load_tokenizer

    return decoder_io(codebook, load_tokenizer(model_dir) if is_backbone_dir(model_dir) else None)


class GeneratorRanker:
    """A saved generative model (MOR decoder, backbone or TIGER): constrained beam search over its codebook's SIDs;
    each slot is the first item of a generated SID. ``processors(trie)`` builds the search's level processors
    (:mod:`crabrec.decode.processors`; a decoding-time method's adjustment) over the codebook's trie."""

    def __init__(self, model_dir: Path, codebook, beam: int, batch_size: int, processors=None) -> None:
        from crabrec.decode.trie import SidTrie

        self.model = load_generator(model_dir, codebook)
        self.io = generator_io(model_dir, codebook)
        self.trie = self.search = SidTrie.build(codebook)  # ``search``: the trie without the unavailable SIDs
        # a beam over all the distinct SIDs is already exhaustive: a wider one returns the same list, padded
        self.width, self.batch_size = min(beam, len(self.trie.sids)), batch_size
        self.block = batch_size
        self.processors = tuple(processors(self.trie)) if processors else ()

    def set_unavailable(self, items: np.ndarray) -> bool:
        """Take the SIDs of ``items`` out of the search's reach (a SID several items share, when any of them is out):
        the beams never enter a prefix whose every SID is out, so the lists keep their length."""
        self.search = self.trie.without(np.unique(self.trie.item_sid[items])) if len(items) else self.trie
        return True

    def rank(self, rows: Samples, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        import torch

        from crabrec.decode.rank import rank_samples

        io = self.io
        with torch.inference_mode():  # no autograd bookkeeping at all: about 6% faster than no_grad on the CPU
            return rank_samples(
                self.model, self.search, rows, io.tokens, self.width, self.batch_size,
                progress=progress, desc=desc, prompt=io.test_prompt, base=io.base,
                processors=self.processors,
            )  # fmt: skip


def generator_ranker(method: str, rebalanced: bool = False):
    """``Method.ranker`` of a generative method: ``models/<method>/model`` over the base (or CRAB's) codebook (a
    decoding-time method sets the built ranker's ``processors``, as PPD does)."""

    def build(files, cfg, beam: int | None = None) -> GeneratorRanker:
        ev = cfg.evaluate
        return GeneratorRanker(files.weights(method), files.load_codebook(rebalanced), beam or ev.beam, ev.batch_size)

    return build
