"""The settings of a training run: :class:`TrainConfig` (node classification) and :class:`EmbeddingConfig`
(the same task on learnable node embeddings). Flags and the training YAML use the same names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from graphstore.client.training.amp import AMP_DTYPES

MODELS = ("sage", "mlp")
RELATIONAL_MODELS = ("rgcn", "mlp")
REGULARIZERS = ("basis", "bdd", "none")
EVAL_MODES = ("sampled", "layerwise")
DEVICES = ("cpu", "cuda", "auto")
FEATURE_NORMS = ("none", "row")
PROGRESS_MODES = ("auto", "on", "off")
PLACEMENTS = ("none", "device", "pinned")
DIST_BACKENDS = ("auto", "nccl", "gloo")
FEATURE_DTYPES = {
    "auto": None,
    "stored": None,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass
class TrainConfig:
    """Settings of one training run (flags and the training YAML use the same names, dashes or not).

    Attributes:
        graph_name: the partitioned graph's name.
        part_config: the partition config (NAME.json); required for standalone mode.
        fanouts: neighbors sampled per layer, input layer first (DGL's convention).
        batch_size: training seeds per mini-batch.
        hidden: hidden width.
        layers: number of GNN (or MLP) layers; must equal ``len(fanouts)`` for the GNN.
        dropout: dropout between layers.
        lr: Adam learning rate of the dense parameters.
        weight_decay: Adam weight decay.
        epochs: training epochs.
        seed: seeds model initialization, shuffling and neighbor sampling (reproducible runs).
        device: ``cpu``, ``cuda`` (``cuda:LOCAL_RANK``), ``cuda:N`` or ``auto``.
        amp: ``none``, ``fp16`` (autocast + GradScaler) or ``bf16`` (autocast).
        eval_every: validation accuracy every N epochs (0: only at the end).
        eval_mode: ``sampled`` (mini-batch inference over the evaluated nodes) or ``layerwise`` (exact
            GraphSAGE inference, layer by layer over every node).
        eval_fanouts: fanouts of sampled inference (default: the training fanouts).
        eval_batch_size: seeds per inference mini-batch.
        eval_max_nodes: evaluate on a seeded random subset of at most this many nodes per mask.
        model: ``sage`` (GraphSAGE) or ``mlp`` (features only).
        aggregator: SAGEConv aggregator (``mean``, ``gcn``, ``pool``).
        prefetch: mini-batches prepared ahead by the loader (0: none, everything in this thread).
        num_workers: loader threads.
        placement: where the loaders hold the co-located partitions for sampling and gathering on the
            device: ``none`` (on the CPU, then the batch is moved), ``device`` (in the device's memory)
            or ``pinned`` (pinned host memory the GPU reads, DGL's ``use_uva``); see
            :class:`~graphstore.client.DistNodeDataLoader`.
        feature_dtype: the type input features are held and delivered in with a placement: ``auto`` (the
            AMP type under ``fp16`` / ``bf16``, else the stored type), ``stored``, ``float32``,
            ``bfloat16`` or ``float16``.
        cache_remote_features: the share (0..1) of the other partitions' nodes whose input features
            the training loader keeps on its device (:class:`~graphstore.client.RemoteFeatureCache`).
        dist_backend: the trainer group's backend: ``auto`` (NCCL for GPU trainers, gloo for CPU
            ones), ``nccl`` or ``gloo`` (e.g. several trainers sharing one GPU, which NCCL refuses).
        feat_name, label_name: node data holding the features and the labels.
        target_ntype: on a typed graph, the node type whose nodes are classified (None: a homogeneous
            graph).
        feat_norm: ``none`` or ``row`` (divide each feature row by its L1 norm).
        save_model: where rank 0 saves the trained model's state dict ('' to skip; default: next to
            the partition config, else the current folder).
        metrics_json: where rank 0 writes the run's figures as JSON (optional).
        progress: ``auto`` (a tqdm bar on rank 0 when it writes to a terminal), ``on`` or ``off``.
        num_threads: torch's intra-op threads; default: the CPUs divided among the trainers of this
            host (``LOCAL_WORLD_SIZE``), so co-located trainers do not oversubscribe the cores.
    """

    graph_name: str = ""
    part_config: str | None = None
    fanouts: list[int] = field(default_factory=lambda: [10, 25])
    batch_size: int = 1024
    hidden: int = 256
    layers: int = 2
    dropout: float = 0.5
    lr: float = 0.003
    weight_decay: float = 0.0
    epochs: int = 10
    seed: int = 0
    device: str = "cpu"
    amp: str = "none"
    eval_every: int = 1
    eval_mode: str = "sampled"
    eval_fanouts: list[int] | None = None
    eval_batch_size: int = 4096
    eval_max_nodes: int | None = None
    model: str = "sage"
    aggregator: str = "mean"
    prefetch: int = 2
    num_workers: int = 1
    placement: str = "none"
    feature_dtype: str = "auto"
    cache_remote_features: float = 0.0
    dist_backend: str = "auto"
    feat_name: str = "feat"
    feat_norm: str = "none"
    label_name: str = "label"
    target_ntype: str | None = None
    save_model: str | None = None
    metrics_json: str | None = None
    progress: str = "auto"
    num_threads: int | None = None

    # The models a run of this config can train.
    models: ClassVar[tuple[str, ...]] = MODELS

    def validate(self) -> None:
        """Check the settings.

        Raises:
            ValueError: naming the setting and its value.
        """
        if not self.graph_name:
            raise ValueError("graph_name is required (--graph-name)")
        if not self.fanouts or any(int(f) < -1 for f in self.fanouts):
            raise ValueError(f"fanouts must be a non-empty list of ints >= -1, got {self.fanouts}")
        if self.model not in self.models:
            raise ValueError(f"model must be one of {self.models}, got {self.model!r}")
        if self.model != "mlp" and self.layers != len(self.fanouts):
            raise ValueError(f"layers ({self.layers}) must equal the number of fanouts {self.fanouts}")
        if self.eval_fanouts is not None and len(self.eval_fanouts) != len(self.fanouts):
            raise ValueError(f"eval_fanouts {self.eval_fanouts} must have one entry per layer like fanouts")
        if self.amp not in AMP_DTYPES:
            raise ValueError(f"amp must be one of {sorted(AMP_DTYPES)}, got {self.amp!r}")
        if self.eval_mode not in EVAL_MODES:
            raise ValueError(f"eval_mode must be one of {EVAL_MODES}, got {self.eval_mode!r}")
        if self.device not in DEVICES and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be cpu, cuda, cuda:N or auto, got {self.device!r}")
        if self.feat_norm not in FEATURE_NORMS:
            raise ValueError(f"feat_norm must be none or row, got {self.feat_norm!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {self.placement!r}")
        if self.feature_dtype not in FEATURE_DTYPES:
            raise ValueError(
                f"feature_dtype must be one of {tuple(FEATURE_DTYPES)}, got {self.feature_dtype!r}"
            )
        if self.dist_backend not in DIST_BACKENDS:
            raise ValueError(f"dist_backend must be one of {DIST_BACKENDS}, got {self.dist_backend!r}")
        if not 0.0 <= self.cache_remote_features <= 1.0:
            raise ValueError(f"cache_remote_features must be in [0, 1], got {self.cache_remote_features}")
        if self.progress not in PROGRESS_MODES:
            raise ValueError(f"progress must be auto, on or off, got {self.progress!r}")
        for name in ("batch_size", "hidden", "layers", "epochs", "eval_batch_size", "num_workers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.eval_every < 0 or self.prefetch < 0:
            raise ValueError(f"eval_every and prefetch must be >= 0, got {self.eval_every}, {self.prefetch}")

    def validates_after(self, epoch: int) -> bool:
        """Whether validation accuracy is measured after ``epoch`` (0-based): every ``eval_every`` epochs,
        except after the last one, which the final evaluation covers."""
        last = epoch == self.epochs - 1
        return bool(self.eval_every) and (epoch + 1) % self.eval_every == 0 and not last

    def loader_placement(self) -> dict:
        """The loaders' ``placement`` and ``feature_dtype`` arguments of this run."""
        if self.placement == "none":
            return {}
        dtype = FEATURE_DTYPES[self.feature_dtype]
        if self.feature_dtype == "auto":
            dtype = AMP_DTYPES[self.amp]
        return {"placement": self.placement, "feature_dtype": dtype}

    def model_input_dtype(self) -> torch.dtype:
        """The type the model reads its input features in: the AMP type when the loaders deliver the
        features in it (no cast back and forth), else float32."""
        delivered = self.loader_placement().get("feature_dtype")
        amp_dtype = AMP_DTYPES[self.amp]
        return amp_dtype if amp_dtype is not None and delivered == amp_dtype else torch.float32

    def training_fanouts(self) -> list[int]:
        """The fanouts of the training sampler: the MLP needs no neighbors, so a one-layer sample of
        fanout 0 gives it blocks of the seeds only."""
        return [0] if self.model == "mlp" else list(self.fanouts)

    def inference_fanouts(self) -> list[int]:
        """The fanouts of sampled inference: ``eval_fanouts``, else the training fanouts."""
        return [0] if self.model == "mlp" else list(self.eval_fanouts or self.fanouts)


@dataclass
class EmbeddingConfig(TrainConfig):
    """:class:`TrainConfig` plus the settings of learnable node embeddings (a ``DistEmbedding`` row per
    node, read by GraphSAGE in place of the features and updated by ``SparseAdagrad``).

    Attributes:
        emb_dim: width of a node's embedding row.
        sparse_lr: SparseAdagrad learning rate of the embedding rows.
        init_scale: rows start uniform in ``[-init_scale, init_scale]`` (seeded).
        freeze_embeddings: never update the rows (the random-embedding baseline).
        embedding_name: the table's name on the servers.
    """

    emb_dim: int = 64
    sparse_lr: float = 0.05
    init_scale: float = 0.1
    freeze_embeddings: bool = False
    embedding_name: str = "node_emb"

    def validate(self) -> None:
        """Check the settings (those of :class:`TrainConfig` too).

        Raises:
            ValueError: naming the setting and its value.
        """
        super().validate()
        if self.model != "sage":
            raise ValueError(f"learned embeddings train GraphSAGE only, got model {self.model!r}")
        if self.eval_mode != "sampled":
            raise ValueError(f"learned embeddings are evaluated by sampled inference, got {self.eval_mode!r}")
        if self.emb_dim < 1 or self.sparse_lr <= 0 or self.init_scale <= 0:
            raise ValueError(
                f"emb_dim, sparse_lr and init_scale must be positive, got {self.emb_dim}, "
                f"{self.sparse_lr}, {self.init_scale}"
            )


@dataclass
class RGCNConfig(TrainConfig):
    """:class:`TrainConfig` for entity classification on a typed graph with a relational GCN: the nodes
    of ``target_ntype`` are classified, node types with ``feat_name`` read it, the others get a learnable
    ``DistEmbedding`` row per node (``SparseAdagrad``), and ``model`` is ``rgcn`` or ``mlp`` (the target
    type's features only).

    Attributes:
        num_bases: bases (or blocks, for ``bdd``) of the relation weights' decomposition.
        regularizer: ``basis``, ``bdd`` or ``none`` (a full weight per relation).
        sparse_lr: SparseAdagrad learning rate of the embedding rows.
        init_scale: embedding rows start uniform in ``[-init_scale, init_scale]`` (seeded).
        embedding_name: prefix of the embedding tables' names on the servers.
    """

    model: str = "rgcn"
    target_ntype: str | None = "paper"
    fanouts: list[int] = field(default_factory=lambda: [10, 10])
    hidden: int = 64
    dropout: float = 0.2
    lr: float = 0.01
    epochs: int = 4
    num_bases: int = 4
    regularizer: str = "basis"
    sparse_lr: float = 0.05
    init_scale: float = 0.1
    embedding_name: str = "rgcn_emb"

    models: ClassVar[tuple[str, ...]] = RELATIONAL_MODELS

    def validate(self) -> None:
        """Check the settings (those of :class:`TrainConfig` too).

        Raises:
            ValueError: naming the setting and its value.
        """
        super().validate()
        if not self.target_ntype:
            raise ValueError("target_ntype is required: the node type to classify (--target-ntype)")
        if self.eval_mode != "sampled":
            raise ValueError(f"a relational model is evaluated by sampled inference, got {self.eval_mode!r}")
        if self.regularizer not in REGULARIZERS:
            raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {self.regularizer!r}")
        if self.num_bases < 1 or self.sparse_lr <= 0 or self.init_scale <= 0:
            raise ValueError(
                f"num_bases, sparse_lr and init_scale must be positive, got {self.num_bases}, "
                f"{self.sparse_lr}, {self.init_scale}"
            )
