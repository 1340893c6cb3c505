"""Typed, validated configuration for every stage (pydantic), YAML presets and ``key=value`` overrides."""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from crabrec.errors import CrabError, clip

PRESETS = ("quick", "paper")
Schedule = Literal["linear", "cosine", "plateau", "inverse_sqrt"]
Share = Annotated[float, Field(ge=0, le=1)]
QUANTIZED, KMEANS, RQVAE = ("rqkmeans", "balanced", "rqvae"), ("rqkmeans", "balanced"), ("rqvae",)


def speed_only(default: Any, **kw: Any) -> Any:
    """A setting that changes how fast a stage runs, never what it produces: left out of every stage's cache key."""
    return Field(default, json_schema_extra={"speed_only": True}, **kw)


def only_if(choice: str, values: tuple[str, ...], *args: Any, **kw: Any) -> Any:
    """A setting that matters only when its section's ``choice`` is one of ``values`` (e.g. the RQ-VAE settings under
    ``quantizer: rqvae``): under another choice no stage reads it, so it is in no stage's cache key."""
    return Field(*args, json_schema_extra={"only_if": [choice, list(values)]}, **kw)


def keyed_when_set(default: Any, *, before: Any = None, **kw: Any) -> Any:
    """A setting added after results were cached: it is in a stage's cache key only when it differs from the value
    that reproduces what came before (``before``; the default when not given), so results cached before it stay
    valid under that value, and a new default that changes results re-runs them."""
    extra = {"when_set": True} if before is None else {"when_set": True, "before": before}
    return Field(default, json_schema_extra=extra, **kw)


class Strict(BaseModel):
    """Base model: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: Any) -> Any:
        """``epochs: yes`` is a slip, not 1 epoch: a number setting refuses true/false (pydantic would read 1/0)."""
        annotation = cls.model_fields[info.field_name].annotation
        if isinstance(value, bool) and _numeric(annotation):
            raise ValueError("expected a number, not true/false")
        if isinstance(value, list) and any(isinstance(v, bool) for v in value) and _numeric_list(annotation):
            raise ValueError("expected a list of numbers, not true/false")
        if isinstance(value, int | float) and not isinstance(value, bool) and takes_text(annotation):
            return str(value)  # ``name: 2024`` is the name "2024" (YAML reads a number)
        return value


def _members(annotation: Any) -> list[Any]:
    """The types a field's value may take: ``Annotated`` constraints stripped, a union (``int | None``) split, None
    left out."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _members(args[0])
    if origin in (Union, UnionType):
        return [m for a in args if a is not type(None) for m in _members(a)]
    return [annotation]


def _numeric(annotation: Any) -> bool:
    """Whether a field takes a number (int or float, possibly optional or constrained) and no flag, so that true/false
    there can only be a slip."""
    members = _members(annotation)
    return any(m in (int, float) for m in members) and not any(m in (bool, Any) for m in members)


def takes_text(annotation: Any) -> bool:
    """Whether a field takes text and nothing else (a string, perhaps optional, or one of some words)."""
    members = _members(annotation)
    words = (get_origin(m) is Literal and all(isinstance(a, str) for a in get_args(m)) for m in members)
    return bool(members) and all(m is str or word for m, word in zip(members, words))


def _numeric_list(annotation: Any) -> bool:
    """Whether a field may hold a list of numbers."""
    return any(get_origin(m) is list and _numeric(get_args(m)[0]) for m in _members(annotation) if get_args(m))


Month = Annotated[str, StringConstraints(pattern=r"^\d{4}-(0[1-9]|1[0-2])$")]  # YYYY-MM


def _as_word(value: Any) -> Any:
    """A YAML scalar as the text a table cell would hold: ``true``, ``4``, ``2.5``; a string as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


class DataConfig(Strict):
    """Where the data comes from and how it is split into (history -> next item) samples."""

    format: Literal[
        "auto",
        "lcrec",
        "minionerec",
        "recbole",
        "table",
        "movielens",
        "mind",
        "netflix",
        "amazon14",
        "amazon18",
        "amazon23",
    ] = Field("auto", description="the on-disk layout of `path` (--format); auto = detected from the files")
    path: str | None = Field(None, description="dataset directory or file; None = the embedded Office dataset")
    name: str | None = Field(None, description="file stem inside `path` (e.g. 'Office'); inferred when unique")
    item_table: str | None = Field(
        None, description="table format: the item table (CSV/TSV/JSON lines/Parquet; --items)"
    )
    user_col: str = Field(
        "user", description="table and RecBole formats: the user column (the default: detected if absent)"
    )
    item_col: str = Field(
        "item", description="table and RecBole formats: the item column (the default: detected if absent)"
    )
    time_col: str | None = Field(
        "timestamp",
        description="table and RecBole formats: the time column, Unix time or dates (the default: detected if absent, "
        "by its name, e.g. date or order_date; null = order each user's rows as they appear)",
    )
    time_format: str | None = keyed_when_set(
        None,
        description="table and RecBole formats: how the time column writes its dates, as a strftime format (e.g. "
        "'%d/%m/%Y %H:%M' or '%Y%m%d'); None = Unix time or dates detected (ISO 8601; day and month in the order "
        "the values show)",
    )
    keep_rows: dict[str, list[str]] | None = keyed_when_set(
        None,
        description="table and RecBole formats: keep only the rows whose column holds one of the values, e.g. {event: "
        "[transaction, addtocart]} (compared without case, surrounding spaces or a number's spelling), before "
        "anything else reads the rows; None = every row",
    )
    min_rating: float | None = keyed_when_set(
        None,
        description="keep only the interactions rated at least this (a table's rating column, MovieLens' and RecBole's "
        "ratings), before k-core filtering; None = every interaction, its rating ignored",
    )
    rating_col: str = keyed_when_set(
        "rating",
        description="table and RecBole formats: the rating column data.min_rating reads (the default: detected if "
        "absent: rating, score, stars, overall ...)",
    )
    columns: list[str] | None = keyed_when_set(
        None,
        description="table format: the column names of an interaction file without a header line, in file order "
        "(e.g. [user, item, rating, timestamp]); None = its first line is the header",
    )
    item_table_id_col: str | None = keyed_when_set(
        None, description="the item table's id column; None = data.item_col if there, else detected"
    )
    kcore: int = Field(5, ge=0, description="iterative k-core for users and items (0 = off)")
    recipe: Literal["auto", "tiger", "minionerec"] = Field(
        "auto",
        description="raw Amazon data: tiger (dedup, LOO) or minionerec (title filter, window, 8:1:1); "
        "auto = tiger for amazon14, minionerec otherwise",
    )
    time_window: list[Month] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="raw data: keep interactions from the first to the last month (YYYY-MM, both included); "
        "None = the recipe's (minionerec: 2016-10 to 2018-11; tiger: none)",
    )
    split: Literal["auto", "leave_one_out", "global_time", "given"] = Field(
        "auto",
        description="leave_one_out (each user's last item is test, the one before valid), global_time (two time "
        "cut-offs), given (the layout's own split); auto = given if the files have one, else the raw recipe's, else "
        "global_time with timestamps, else leave_one_out",
    )
    missing_items: Literal["error", "drop"] = keyed_when_set(
        "error",
        description="interactions with an item the item table lacks: error (name the first and count them) or drop "
        "them (the count is logged and kept in data/stats.json); tables, MovieLens, RecBole and LC-Rec layouts (raw "
        "Amazon data keeps such items with empty text)",
    )
    incomplete_rows: Literal["error", "drop"] = keyed_when_set(
        "error",
        description="tables and RecBole files: rows with an empty cell (a null, or NA, null, None ... written out) in "
        "a column crabrec reads (user, item, time, and the rating with data.min_rating): error (name the first) or "
        "drop them (the count is logged and kept in data/stats.json)",
    )
    repeats: Literal["keep", "collapse", "first"] = keyed_when_set(
        "keep",
        description="a user meeting an item again (a replay, a second purchase): keep every interaction, collapse "
        "an item repeated right after itself into one, or keep only each user's first interaction with each item; "
        "before k-core filtering (every layout that crabrec splits itself)",
    )
    max_history: int = Field(10, ge=1, description="history items a model reads before the predicted one")
    train_on_available: bool = Field(
        False, description="minionerec layout without a train split: train on the valid rows instead of failing"
    )
    n_groups: int = Field(5, ge=2, description="number of equal-size item popularity groups (MGU/DGU)")
    popular_share: float = Field(0.2, gt=0, lt=1, description="share of items flagged popular (Fig. 1)")

    @field_validator("keep_rows", mode="before")
    @classmethod
    def _values_as_words(cls, v: Any) -> Any:
        """``{event: buy}`` is ``{event: [buy]}``; a number or true/false is compared as written."""
        if not isinstance(v, dict):
            return v
        return {k: [_as_word(x) for x in (vs if isinstance(vs, list) else [vs])] for k, vs in v.items()}

    @field_validator("time_format")
    @classmethod
    def _a_date_format(cls, v: str | None) -> str | None:
        if v is not None and not re.search(r"%[a-zA-Z]", v):
            raise ValueError("expected a strftime format such as '%d/%m/%Y' (its fields written %d, %m, %Y ...)")
        return v


class EmbedConfig(Strict):
    """Item text -> vector with a frozen sentence-transformers encoder."""

    encoder: str = Field("all-MiniLM-L6-v2", description="'all-MiniLM-L6-v2' (bundled) or a local model directory")
    fields: list[str] = Field(
        default_factory=lambda: ["title", "description"],
        description="item text fields joined into the encoded text; at this default, items without any description "
        "give their title and every other field (but copies of the title and links)",
    )
    template: str | None = Field(None, description="e.g. '{title}. {brand}'; overrides `fields`")
    max_chars: int = Field(2000, ge=16, description="texts are cut to this many characters")
    batch_size: int = speed_only(64, ge=1, description="texts per encoder batch")
    normalize: bool = Field(True, description="L2-normalise the item vectors")
    device: str = speed_only("cpu", description="where the encoder runs (cpu, cuda)")


class TokenizeConfig(Strict):
    """Semantic-ID construction."""

    quantizer: Literal["rqkmeans", "rqvae", "balanced", "import"] = Field(
        "rqkmeans",
        description="rqkmeans (residual k-means), balanced (equal-size residual k-means), rqvae (a trained RQ-VAE) or "
        "import (read a MiniOneRec index.json)",
    )
    levels: int = only_if("quantizer", QUANTIZED, 3, ge=1, le=8, description="quantization levels (tokens per SID)")
    codebook_size: int = only_if("quantizer", QUANTIZED, 256, ge=2, description="codes per level")
    kmeans_iters: int = only_if("quantizer", KMEANS, 25, ge=1, description="k-means iterations per level")
    kmeans_init: Literal["kmeans++", "random"] = only_if(
        "quantizer", KMEANS, "random", description="k-means initialisation"
    )
    dedup: Literal["extra_level", "none"] = Field(
        "extra_level",
        description="items that share a SID: extra_level appends a level that tells them apart; none leaves them",
    )
    import_path: str | None = only_if("quantizer", ("import",), None, description="a MiniOneRec index.json")
    rqvae_latent_dim: int = only_if("quantizer", RQVAE, 32, ge=2, description="RQ-VAE latent width")
    rqvae_hidden: list[PositiveInt] = only_if(
        "quantizer", RQVAE, default_factory=lambda: [512, 256, 128, 64], description="RQ-VAE encoder layer widths"
    )
    rqvae_epochs: int = only_if("quantizer", RQVAE, 300, ge=1, description="RQ-VAE training epochs")
    rqvae_lr: float = only_if("quantizer", RQVAE, 1e-3, gt=0, description="RQ-VAE learning rate")
    rqvae_batch_size: int = only_if("quantizer", RQVAE, 1024, ge=1, description="RQ-VAE items per step")
    rqvae_beta: float = only_if("quantizer", RQVAE, 0.25, ge=0, description="RQ-VAE commitment-loss weight")
    item_vectors: Literal["text", "text+sasrec", "sasrec"] = only_if(
        "item_vectors",
        ("text+sasrec", "sasrec"),
        "text",
        description="what the quantizer clusters: the item-text embeddings (the paper's SIDs), those joined with the "
        "trained SASRec's item embeddings (collaborative signal; ours), or the SASRec embeddings alone (also for "
        "data without item text)",
    )

    @model_validator(mode="after")
    def _vectors_need_a_quantizer(self) -> TokenizeConfig:
        if self.item_vectors != "text" and self.quantizer not in QUANTIZED:
            raise ValueError(
                f"item_vectors={self.item_vectors} needs a quantizer that clusters vectors ({', '.join(QUANTIZED)}); "
                f"quantizer={self.quantizer} imports its SIDs"
            )
        return self


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to something other than empty, ``0``, ``false`` or ``no``
    (case and surrounding spaces ignored): how every on/off switch crabrec reads from the environment is read."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


class LoopConfig(Strict):
    """The training loop every trained method shares (each method's section carries its own copy of these)."""

    epochs: int = Field(3, ge=1, description="most training epochs (early stopping may end sooner)")
    batch_size: int = Field(128, ge=1, description="rows per step (packed: users per step scaled to match)")
    grad_accum: int = Field(1, ge=1, description="steps whose gradients are summed before one optimizer update")
    lr: float = Field(1e-3, gt=0, description="peak learning rate (AdamW)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    warmup_steps: int = Field(20, ge=0, description="linear learning-rate warm-up steps")
    schedule: Schedule = Field(
        "linear",
        description="after warm-up: linear or cosine decay to 0 over `epochs`; plateau (constant, multiplied by "
        "`plateau_factor` after every epoch that does not improve validation); inverse_sqrt (TIGER's: "
        "lr·sqrt(warmup/step)). plateau and inverse_sqrt do not depend on `epochs`",
    )
    plateau_factor: float = only_if(
        "schedule", ("plateau",), 0.5, gt=0, le=1, description="learning-rate factor per epoch without improvement"
    )
    patience: int = Field(
        2, ge=1, description="early stopping on validation NDCG@10 after this many validations without improvement"
    )
    valid_every: int = keyed_when_set(
        1,
        ge=1,
        description="validate every this many epochs, and always after the last one (the best validated epoch is "
        "kept; early stopping and the plateau schedule count validations)",
    )
    max_minutes: float | None = Field(
        None,
        gt=0,
        description="wall-clock budget: stop when it is reached, inside an epoch if need be (checked after every "
        "step; every 50 with several processes); the model where it stopped is validated, and the best validated "
        "one is kept",
    )
    compile: bool = keyed_when_set(
        False,
        description="compile the model for training with torch.compile (inductor; validation stays eager): fewer, "
        "fused kernels per step, after a compilation at the start. The model's repeated blocks (a transformer's "
        "layers) are compiled one at a time and share one compiled code. Meant for GPUs, where a step is bound by "
        "kernel launches; on the CPU it is slower (docs/results/training-profile.md). With cuda_graphs the compiled "
        "kernels are recorded in the step's graphs",
    )
    cuda_graphs: bool = keyed_when_set(
        False,
        description="on a GPU, record each batch shape's training step (forward, backward, update) as a CUDA graph "
        "and replay it with one launch: for steps bound by kernel launches (the small from-scratch models, an LLM "
        "backbone's rows). A "
        "shape's first step runs eagerly, its second is recorded; needs grad_accum 1 and one process (otherwise, "
        "and on the CPU, training runs without graphs)",
    )

    @model_validator(mode="after")
    def _graphs_without_accumulation(self) -> LoopConfig:
        if self.cuda_graphs and self.grad_accum > 1:
            raise ValueError(f"cuda_graphs=true records whole steps: it needs grad_accum=1, not {self.grad_accum}")
        return self


class TrainConfig(LoopConfig):
    """The MOR-style decoder, its training loop and the validation every trained method uses."""

    hidden: int = Field(128, ge=8, description="decoder width")
    layers: int = Field(2, ge=1, description="decoder layers")
    heads: int = Field(4, ge=1, description="attention heads (must divide hidden)")
    ff: int = Field(512, ge=8, description="feed-forward width")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout on token embeddings and residual branches")
    attention_dropout: float = Field(0.0, ge=0, lt=1, description="dropout on attention probabilities")
    label_smoothing: float = Field(0.0, ge=0, lt=1, description="label smoothing of the training cross-entropy")
    packing: Literal["rows", "packed"] = Field(
        "packed", description="packed: one sequence per user with a window mask (~8x faster); rows: one per sample"
    )
    group_by_length: bool = keyed_when_set(
        False,
        description="row form (a backbone's prompts, or packing=rows): batch rows of similar history length together "
        "(shuffled pools, as TIGER's batches), so batches carry less padding; packed chains are always grouped",
    )
    valid_samples: int = Field(
        5000, ge=1, description="validation rows scored (NDCG@10) each epoch for early stopping (every method)"
    )
    valid_beam: int = Field(20, ge=1, description="beam width of the per-epoch validation (generative methods)")
    valid_batch_size: int = speed_only(
        64, ge=1, description="validation rows per decoding batch (a GPU decodes larger batches in about the same time)"
    )
    threads: int = speed_only(0, ge=0, le=4096, description="torch threads for every stage (0 = leave as is)")
    backbone: str | None = Field(
        None, description="a local Hugging Face causal-LM folder: LoRA fine-tune it instead of the from-scratch decoder"
    )
    backbone_dtype: Literal["float32", "bfloat16"] = keyed_when_set(
        "float32",
        description="the backbone's frozen weights in float32 or bfloat16 (what LoRA and the SID rows train stays "
        "float32; the saved model is float32). bfloat16 halves their memory, and under a GPU's bf16 autocast they "
        "need no cast at each use; on a CPU it is slower",
    )

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> TrainConfig:
        return heads_divide(self, "hidden", "heads")


class SASRecSection(LoopConfig):
    """SASRec baseline (item ids, full ranking)."""

    hidden: int = Field(64, ge=8, description="item embedding and model width")
    blocks: int = Field(2, ge=1, description="self-attention blocks")
    heads: int = Field(1, ge=1, description="attention heads (must divide hidden)")
    dropout: float = Field(0.2, ge=0, lt=1, description="dropout on embeddings, attention and feed-forward")
    loss: Literal["ce", "bce"] = Field(
        "ce",
        description="ce: softmax over every item; bce: one uniformly sampled negative per sample (as the SASRec paper)",
    )
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(256, ge=1)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(0, ge=0)
    patience: int = Field(3, ge=1)

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> SASRecSection:
        return heads_divide(self, "hidden", "heads")


def heads_divide(section: Any, width: str, heads: str) -> Any:
    """Attention splits ``width`` into ``heads`` equal parts: a width they do not divide cannot be built."""
    w, h = getattr(section, width), getattr(section, heads)
    if w % h:
        raise ValueError(f"{heads}={h} must divide {width}={w} (each attention head gets {width}/{heads} dimensions)")
    return section


class TigerSection(LoopConfig):
    """TIGER baseline: T5 encoder-decoder from scratch (paper sizes: d_model 128, 4+4 layers, 6×64 heads, FFN 1024)."""

    d_model: int = Field(128, ge=8, description="model width")
    layers: int = Field(4, ge=1, description="encoder layers = decoder layers")
    heads: int = Field(6, ge=1, description="attention heads")
    d_kv: int = Field(64, ge=4, description="width of each attention head")
    ff: int = Field(1024, ge=8, description="feed-forward width")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout (T5's)")
    user_bins: int = Field(
        0, ge=0, description="hashed user tokens prepended to the encoder input (0 = none; the TIGER paper: 2000)"
    )
    head: Literal["level", "level-tied", "tied"] = Field(
        "level",
        description="output layer: level (an untied projection per SID level, softmax over that level's tokens), "
        "level-tied (the same softmax over the input embeddings of that level's tokens) or tied (T5's: the input "
        "embeddings, softmax over the whole vocabulary)",
    )
    ffn: Literal["relu", "gated-gelu"] = keyed_when_set(
        "relu", description="feed-forward block: relu (T5's, as in the TIGER paper) or gated-gelu (T5 v1.1's)"
    )
    init: Literal["auto", "random", "codebook"] = keyed_when_set(
        "auto",
        before="random",
        description="SID token embeddings at the start: codebook (each token's quantizer centroid, projected to "
        "d_model by PCA and scaled to T5's initial spread), random (T5's N(0, 1)), or auto (codebook when the "
        "codebook has centroids; imported SIDs without item vectors have none)",
    )
    batch_size: int = Field(256, ge=1)
    weight_decay: float = Field(1e-4, ge=0)
    seed: int | None = keyed_when_set(
        None,
        ge=0,
        lt=2**32,
        description="seed of TIGER's initialisation, batch order and dropout; None = the run's `seed`. Set it to "
        "train TIGER with another seed on the same semantic IDs (the run's `seed` also re-draws the IDs)",
    )


class EvalConfig(Strict):
    beam: int = Field(20, ge=1, description="beam width = length of the ranked list")
    batch_size: int = speed_only(64, ge=1, description="test rows per decoding batch")
    ks: list[PositiveInt] = Field(default_factory=lambda: [1, 3, 5, 10, 20], description="must include 10")
    fairness_ks: list[PositiveInt] = Field(default_factory=lambda: [1, 5, 10, 20], description="must include 10")
    max_samples: int | None = Field(None, ge=1, description="evaluate only the first N test rows")
    bootstrap: int = Field(
        1000,
        ge=0,
        le=100_000,
        description="paired bootstrap resamples of the test users for the 95% CIs vs MOR (0 = off)",
    )

    @field_validator("ks", "fairness_ks")
    @classmethod
    def _has_ten(cls, v: list[int]) -> list[int]:
        if 10 not in v:
            raise ValueError("must include 10 (validation, Table 1 and RR use @10)")
        return sorted(set(v))


class CrabConfig(Strict):
    """CRAB: stage 1 (rebalance: ratio … exact_limit) and stage 2 (fine-tune: gamma … init_noise)."""

    ratio: Share | list[Share] = Field(
        0.10,
        description="share of used tokens split per level (or one per level); 0 splits none, so the fine-tune runs "
        "on the unchanged codebook (a control: what the extra training alone does)",
    )
    levels: list[int] | None = Field(None, description="semantic levels to rebalance (0-based); None = all")
    max_split: int = Field(3, ge=2, description="at most this many tokens per split token (M)")
    lam: float = Field(1.0, ge=0, description="balance weight λ of the scale-free objective")
    n_init: int = Field(10, ge=1, description="restarts of the balance-regularised k-means per split token")
    max_iter: int = Field(100, ge=1, description="iterations per restart")
    exact_limit: float = Field(1e6, ge=0, description="enumerate exactly when M^J is at most this")
    gamma: float = Field(0.2, ge=0, description="weight of the hierarchical alignment loss L_T")
    normalize_lt: bool = Field(False, description="divide L_T by the number of parents")
    params: Literal["lora", "full"] = Field("lora", description="lora: LoRA on attention + SID embedding rows")
    lora_r: int = Field(8, ge=1, description="LoRA rank")
    lora_alpha: int = Field(16, ge=1, description="LoRA scale α")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the LoRA branch")
    epochs: int = Field(2, ge=1, description="fine-tuning epochs")
    lr: float = Field(5e-4, gt=0, description="fine-tuning learning rate")
    weight_decay: float = Field(0.01, ge=0, description="fine-tuning weight decay")
    keep: Literal["best", "last"] = Field(
        "last", description="the fine-tune keeps its last epoch, unvalidated, as the paper does (best: validate each)"
    )
    init_noise: float = Field(1e-3, ge=0, description="new rows = parent row + N(0, (init_noise·σ)²)")


class RunConfig(Strict):
    """One experiment: every stage's config plus the run's name and seed. These are the sections the toolkit itself
    reads; a registered method that brings a settings model (``Method.settings``) adds its own section, in the model
    :func:`run_config_model` builds from the registry (what every config is validated against)."""

    name: str = Field("office-quick", description="run name: a folder under runs_dir (no path separators)")
    runs_dir: str = Field("runs", description="the folder that holds the run folders")
    seed: int = Field(2024, ge=0, lt=2**32, description="seed of every random choice (0 ≤ seed < 2³²)")

    preset: Literal["quick", "paper", "custom"] = Field(
        "quick", description="the preset under the config files (--preset); custom: none, the files say everything"
    )
    data: DataConfig = Field(default_factory=DataConfig)
    embed: EmbedConfig = Field(default_factory=EmbedConfig)
    tokenize: TokenizeConfig = Field(default_factory=TokenizeConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    tiger: TigerSection = Field(default_factory=TigerSection)
    sasrec: SASRecSection = Field(default_factory=SASRecSection)
    crab: CrabConfig = Field(default_factory=CrabConfig)

    # the folder relative input paths are read from, and each path joined to it as written (crabrec.config_paths)
    _paths_from: str | None = PrivateAttr(None)
    _written: dict[str, tuple[str, str]] = PrivateAttr(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if not v.strip() or v in (".", "..") or any(c in v for c in "/\\\0"):
            raise ValueError("must be a plain folder name (not empty, no '/', '\\', '.' or '..')")
        return v

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name


def run_config_model() -> type[RunConfig]:
    """The run config of the registered methods: :class:`RunConfig` plus one section per method that brings its own
    settings model (``Method.section: Method.settings``)."""
    from crabrec.methods import methods

    return _with_sections(tuple((m.section, m.settings) for m in methods() if m.settings is not None))


@functools.cache
def _with_sections(sections: tuple[tuple[str, type[BaseModel]], ...]) -> type[RunConfig]:
    if not sections:
        return RunConfig
    fields: dict[str, Any] = {name: (model, Field(default_factory=model)) for name, model in sections}
    return create_model("RunConfig", __base__=RunConfig, __doc__=RunConfig.__doc__, **fields)


def leaf_keys(model: type[BaseModel] | None = None, prefix: str = "") -> dict[str, Any]:
    """Every setting as ``dotted.key -> FieldInfo`` (sections are walked, not listed); by default of the run config
    of the registered methods."""
    return _leaf_keys(model or run_config_model(), prefix)


@functools.cache
def _leaf_keys(model: type[BaseModel], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out.update(_leaf_keys(kind, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = info
    return out


# Settings that name files or folders a stage reads: the stage's cache key also holds a hash of their content, so an
# edited dataset, SID index or model folder is a new input, whatever its path.
INPUT_FILES = frozenset({"data.path", "data.item_table", "embed.encoder", "tokenize.import_path", "train.backbone"})


def is_speed_only(key: str) -> bool:
    """Whether ``key`` (dotted) only changes speed (see :func:`speed_only`)."""
    info = leaf_keys().get(key)
    return bool(info is not None and (info.json_schema_extra or {}).get("speed_only"))


def self_gated(key: str) -> bool:
    """A choice that keys results only away from its default (``only_if`` on itself, e.g. ``tokenize.item_vectors``):
    under the default it is in no cache key, yet a stage may read it to learn that it is at the default."""
    info = leaf_keys().get(key)
    extra = (info.json_schema_extra or {}) if info is not None else {}
    rule = extra.get("only_if")
    return bool(extra.get("when_set")) or (bool(rule) and rule[0] == key.rpartition(".")[2])


def applies(key: str, config: Any) -> bool:
    """Whether ``key`` matters under ``config``'s choices (see :func:`only_if`)."""
    info = leaf_keys().get(key)
    extra = (info.json_schema_extra or {}) if info is not None else {}
    rule = extra.get("only_if")
    if not rule and not extra.get("when_set"):
        return True
    section, _, name = key.rpartition(".")
    node = config
    for part in section.split(".") if section else ():
        node = getattr(node, part)
    if extra.get("when_set"):
        return getattr(node, name) != extra.get("before", info.default)
    return getattr(node, rule[0]) in rule[1]


class Overlay:
    """Read ``fields`` from ``top`` and everything else from ``base`` (e.g. CRAB's lr/epochs over MOR's loop)."""

    def __init__(self, base: Any, top: Any, fields: tuple[str, ...]) -> None:
        self._base, self._top, self._fields = base, top, fields

    def __getattr__(self, name: str) -> Any:
        return getattr(self._top if name in self._fields else self._base, name)


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping. YAML forbids it, but PyYAML keeps the last
    one silently: a second ``train:`` section would drop every setting of the first. Only ``true`` and ``false`` are
    booleans, as in YAML 1.2: ``yes``, ``no``, ``on`` and ``off`` stay words (``--set data.repeats=no`` is the word a
    user typed; a yes/no setting still reads them as true and false)."""


def _mapping_with_unique_keys(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict:
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue  # a merge (<<) or a collection as a key: construct_mapping merges, or says what is wrong
        key = loader.construct_object(key_node)
        line = first.setdefault(key, key_node.start_mark.line)
        if line != key_node.start_mark.line:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} written twice; the first is on line {line + 1}", key_node.start_mark
            )
    return loader.construct_mapping(node, deep=deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_unique_keys)
_BOOL = "tag:yaml.org,2002:bool"
_UniqueKeys.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_UniqueKeys.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


MAX_YAML_VALUES = 100_000  # values a config may hold once its aliases are expanded (a config has a few hundred)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that refuses a key written twice in one mapping, and aliases that expand to more than
    :data:`MAX_YAML_VALUES` values (nine nested aliases of nine make 387 million: checking or echoing them would
    never end), each a ``yaml.YAMLError`` with its line."""
    loader = _UniqueKeys(text)  # a SafeLoader: no Python objects
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node) -> None:
    """Refuse ``root`` when its values, every alias expanded, number more than :data:`MAX_YAML_VALUES`, or when an
    alias stands inside the node it names (a value that holds itself); each node is counted once (an alias is the
    node it names), so the check costs what the document's own nodes do."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.MappingNode):
            children = [v for pair in node.value for v in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_YAML_VALUES:
                raise yaml.constructor.ConstructorError(
                    None, None, f"its aliases expand to more than {MAX_YAML_VALUES:,} values", node.start_mark
                )
        elif id(node) not in sizes:
            if id(node) in open_nodes:
                raise yaml.constructor.ConstructorError(
                    None, None, "an alias inside the value it names", node.start_mark
                )
            open_nodes.add(id(node))
            stack.append((node, True))
            stack += [(c, False) for c in children if id(c) not in sizes]


def preset_dict(name: str) -> dict[str, Any]:
    """The YAML preset shipped with the package."""
    if name not in PRESETS:
        raise CrabError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    text = resources.files("crabrec.presets").joinpath(f"{name}.yaml").read_text()
    return load_yaml(text) or {}


def _found_only_beside(path: str, values: dict[str, Any], here: str) -> None:
    """A config file's relative input path (``data.path: ../ratings.csv``) is read from the current folder, as one
    typed on the command line: one that is not there but is there from the file's own folder is an error that says
    so (the file was probably written for paths from its folder)."""
    folder = Path(path).parent
    for key in sorted(INPUT_FILES):
        value = dotted_get(values, key)
        if not isinstance(value, str) or not value or Path(value).is_absolute() or value.startswith("~"):
            continue
        beside = folder / value
        if not Path(here, value).exists() and beside.exists():
            raise CrabError(
                f"config {path}: {key} {clip(repr(value))} is read from the current folder ({here}), where it is not; "
                f"from the config file's folder it is: write it as {clip(repr(os.path.relpath(beside, here)))}, or "
                f"run crabrec from {folder}"
            )


def _read_yaml(path: str) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir() or not p.exists():  # a pipe is read too: --config <(...)
        raise CrabError(f"config {path}: " + ("a folder, not a YAML file" if p.is_dir() else "file not found"))
    try:
        data = load_yaml(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise CrabError(f"config {path}:{where} invalid YAML ({clip(str(getattr(exc, 'problem', exc)))})") from None
    except UnicodeDecodeError as exc:
        raise CrabError(f"config {path}: not UTF-8 text (byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer too long, nesting too deep
        raise CrabError(f"config {path}: unreadable YAML ({clip(str(exc))})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CrabError(f"config {path}: expected a mapping of sections at the top level, got {type(data).__name__}")
    return data


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["data.kcore=3", "seed=7"]`` -> nested dict; values are parsed as YAML scalars."""
    pairs = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CrabError(f"override {item!r}: expected KEY=VALUE, e.g. data.kcore=3")
        try:
            value = load_yaml(raw) if raw.strip() else None
        except (yaml.YAMLError, ValueError):  # ValueError: an integer too long to convert
            value = raw
        info = leaf_keys().get(key.strip())
        if value is not None and not isinstance(value, str) and info is not None and takes_text(info.annotation):
            value = raw.strip()  # a text setting takes the text as typed: {title}, 007, 2024
        pairs.append((key.strip(), value, item))
    return nested_overrides(pairs)


def nested_overrides(pairs: Iterable[tuple[str, Any, str]]) -> dict[str, Any]:
    """``(dotted key, value, as the user gave it)`` triples -> a nested dict; a key under one that was set to a value
    is a one-line error naming what the user gave."""
    out: dict[str, Any] = {}
    for key, value, given in pairs:
        node = out
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = ".".join(parts[: depth + 1])
                raise CrabError(
                    f"override {clip(given)!r}: {where} was set to a value, so it has no key {parts[depth + 1]}"
                )
        node[parts[-1]] = value
    return out


def load_config(
    path: str | list[str] | None = None,
    overrides: dict[str, Any] | None = None,
    preset: str | None = None,
    given: dict[str, str] | None = None,
    saved: bool = False,
) -> RunConfig:
    """Preset (default quick) <- YAML file(s) <- overrides, validated into a :class:`RunConfig`. Several files are
    layered in order, each over the ones before (``--config office_llm.yaml --config smoke.yaml``). ``given`` maps
    the dotted keys of the overrides a user typed to the option that set them (``--set``, ``--data``): an invalid
    value names that option instead of the file. ``saved``: the file is a run's own ``config.yaml``, where a section
    of a method that is not installed here (a plugin's) is left out with a warning instead of refused."""
    from crabrec import config_paths

    paths = [path] if isinstance(path, str) else list(path or [])
    user: dict[str, Any] = {}
    here = os.getcwd()
    for one in paths:
        values = _read_yaml(one)
        if not saved:
            _found_only_beside(one, values, here)
        user = deep_merge(user, values)
    if saved:  # its relative paths are read from the run's base folder, those typed now from here
        user = _without_absent_sections(user, " + ".join(paths))
        folder = config_paths.saved_base(Path(paths[0]).parent, user)
        if overrides and not config_paths.same_path(folder, here):  # typed here: read from here
            overrides = copy.deepcopy(overrides)
            config_paths.anchor(overrides, here)
    else:
        folder = here
    user.pop(config_paths.KEY, None)  # a run's config.yaml given as a config file: its paths are read from here
    path = " + ".join(paths) or None
    chosen = preset or user.get("preset") or "quick"
    if chosen == "custom":
        base: dict[str, Any] = {}
    else:
        base = preset_dict(chosen)
    merged = moved_keys(deep_merge(deep_merge(base, user), overrides or {}), path or "config")
    if preset:
        merged["preset"] = preset
    merged[config_paths.KEY] = folder
    return config_paths.from_values(merged, lambda v: validate_config(v, source=path or "config", given=given))


def load_saved(
    run_dir: str | Path,
    overrides: dict[str, Any] | None = None,
    preset: str | None = None,
    given: dict[str, str] | None = None,
) -> RunConfig:
    """The run config saved in the run folder ``run_dir`` (its ``config.yaml``), with its name and folder as they are
    now (a run moved or copied keeps working), under ``overrides`` (as :func:`load_config`'s)."""
    root = Path(run_dir).resolve()
    location = {"name": root.name, "runs_dir": str(root.parent)}
    file = str(Path(run_dir) / "config.yaml")  # named as given in what it says
    return load_config(file, deep_merge(overrides or {}, location), preset, given, saved=True)


def absent_sections(data: dict[str, Any]) -> dict[str, Any]:
    """The sections of a run's saved config that no field of the run config holds: those of a method plugin that is
    not installed here."""
    fields = run_config_model().model_fields
    return {k: v for k, v in data.items() if k not in fields and k not in MOVED_SECTIONS and isinstance(v, dict)}


def _without_absent_sections(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A run's saved config without its :func:`absent_sections`, each one named in a warning (the run's
    ``config.yaml`` keeps them)."""
    import logging

    absent = absent_sections(data)
    for key in absent:
        logging.getLogger("crabrec").warning(
            "%s: section %r belongs to no method installed here (a method plugin's?); not used, kept in the file",
            source, key,
        )  # fmt: skip
    return {k: v for k, v in data.items() if k not in absent}


# Settings that moved into their method's own section (``Method.settings``): an old config still loads, with a warning.
MOVED = {
    "baselines.rr_alphas": "rr.alphas",
    "baselines.rr_ks": "rr.ks",
    "baselines.rr_max_ndcg_drop": "rr.max_ndcg_drop",
    "baselines.rr_alpha": "rr.alpha",
    "baselines.rr_valid_samples": "rr.valid_samples",
    "baselines.rw_beta": "rw.beta",
    "baselines.d2lr_alpha": "d2lr.alpha",
    "baselines.d2lr_clip": "d2lr.clip",
}


MOVED_SECTIONS = frozenset(key.partition(".")[0] for key in MOVED)


def moved_keys(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` with each moved setting (:data:`MOVED`) under its new key, a warning naming both; a ``baselines``
    key that never existed is an error naming where the section went."""
    import logging

    old = data.get("baselines")
    if old is None:
        return data
    if not isinstance(old, dict):
        raise CrabError(f"{source}: baselines: the section moved to rr, rw and d2lr (expected a mapping, got {old!r})")
    out = {k: v for k, v in data.items() if k != "baselines"}
    for key, value in old.items():
        new = MOVED.get(f"baselines.{key}")
        if new is None:
            raise CrabError(
                f"{source}: baselines.{key}: unknown key (the baselines section moved: rr.*, rw.* and d2lr.*)"
            )
        section, name = new.split(".")
        out[section] = {**(out.get(section) or {}), name: value}
        logging.getLogger("crabrec").warning("%s: baselines.%s is now %s; read as that", source, key, new)
    return out


def validate_config(data: dict[str, Any], source: str = "config", given: dict[str, str] | None = None) -> RunConfig:
    """``data`` as a :class:`RunConfig`; a problem is one line that names where the value came from: the option in
    ``given`` (dotted key -> option) that set its key, else ``source``."""
    try:
        return run_config_model().model_validate(data)
    except ValidationError as exc:
        groups: dict[str, list[str]] = {}
        for loc, text in validation_problems(exc):
            groups.setdefault(value_origin(loc, source, given or {}), []).append(text)
        raise CrabError("; ".join(f"{where}: {'; '.join(texts)}" for where, texts in groups.items())) from None


def value_origin(loc: str, source: str, given: dict[str, str]) -> str:
    """Where the value at ``loc`` came from: the option that set it (or a section above it), else ``source``; a
    section-level problem (two settings that do not go together) names ``source`` and the options inside it."""
    for key, option in given.items():
        if loc == key or loc.startswith(key + "."):
            return option
    inside = sorted({option for key, option in given.items() if key.startswith(loc + ".") or loc == "<root>"})
    return f"{source} with {', '.join(inside)}" if inside else source


def dotted_get(values: dict[str, Any], key: str) -> Any:
    """The value at dotted ``key`` of nested ``values`` (``"data.path"``), or None where there is none."""
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def dotted_set(values: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted ``key`` of nested ``values`` (its sections must exist) to ``value``."""
    *parents, leaf = key.split(".")
    node = values
    for part in parents:
        node = node[part]
    node[leaf] = value


def dotted_keys(overrides: dict[str, Any], prefix: str = "") -> list[str]:
    """Every dotted leaf key of ``overrides`` (``{"data": {"kcore": 3}}`` -> ``["data.kcore"]``; an empty mapping is a
    leaf)."""
    out: list[str] = []
    for key, value in overrides.items():
        if isinstance(value, dict) and value:
            out += dotted_keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def format_validation_error(exc: ValidationError) -> str:
    """All problems of a pydantic error on one line: ``key: what was expected (got value)``."""
    return "; ".join(text for _, text in validation_problems(exc))


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """Each problem of a pydantic error once: ``(key, "key: what was expected (got value)")``."""
    parts, seen = [], set()
    for err in exc.errors():
        # a union (e.g. one ratio or a list) reports once per branch, tagged like "constrained-float": keep the first
        path = [str(x) for x in err["loc"] if isinstance(x, int) or str(x).isidentifier()]
        loc = ".".join(path) or "<root>"
        if loc in seen:
            continue
        seen.add(loc)
        if err["type"] == "extra_forbidden":  # a mistyped section: each key under it, each with its origin and match
            inside = err.get("input")
            typo = isinstance(inside, dict) and inside and close_keys(loc)
            for key in [f"{loc}.{k}" for k in dotted_keys(inside)] if typo else [loc]:
                near = close_keys(key)
                parts.append((key, f"{key}: unknown key" + (f" (did you mean {' or '.join(near)}?)" if near else "")))
        else:
            parts.append((loc, f"{loc}: {problem(err)} (got {clip(repr(err.get('input')))})"))
    return parts


def problem(err: Any) -> str:
    """What one pydantic error says, without its ``Value error, `` prefix (our validators' words)."""
    return str(err["msg"]).removeprefix("Value error, ")


def close_keys(key: str, limit: int = 3) -> list[str]:
    """Settings a mistyped ``key`` probably meant: those ending in the same name (``user_col`` ->
    ``data.user_col``), then the closest spellings."""
    import difflib

    keys = list(leaf_keys())
    sections = {k.rpartition(".")[0] for k in keys} - {""}
    if key.rpartition(".")[0] not in sections and key not in keys:  # a mistyped section (``trian``, ``trian.lr``)
        section, _, rest = key.partition(".")
        near = difflib.get_close_matches(section, [s.partition(".")[0] for s in sections], n=1, cutoff=0.75)
        if near and rest and f"{near[0]}.{rest}" in keys:
            return [f"{near[0]}.{rest}"]
        if near:
            return near
    name = key.rpartition(".")[2]
    same_name = [k for k in keys if k.rpartition(".")[2] == name and k != key]
    close = difflib.get_close_matches(key, keys, n=limit, cutoff=0.75)
    if not same_name and not close:  # a misspelt name without its section: every key of a close name
        near = set(difflib.get_close_matches(name, [k.rpartition(".")[2] for k in keys], n=limit, cutoff=0.75))
        close = [k for k in keys if k.rpartition(".")[2] in near]
    return list(dict.fromkeys([*same_name, *close]))[:limit]
