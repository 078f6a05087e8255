"""The training loop's building blocks, for scripts that train a GNN on a graphstore graph.

``examples/train_dist.py`` (GraphSAGE node classification), ``examples/train_embedding.py`` (the same
task on learnable node embeddings) and ``examples/train_rgcn.py`` (entity classification on a typed
graph) are built from these pieces; a script of one's own can be too:

- :mod:`~graphstore.client.training.arguments`: the shared flags and a config from flags + training YAML;
- :mod:`~graphstore.client.training.config`: :class:`TrainConfig`, :class:`EmbeddingConfig`,
  :class:`RGCNConfig`;
- :mod:`~graphstore.client.training.process`: device, threads, seeds, trainer group, graph, and the
  one-line end of a script whose server is lost;
- :mod:`~graphstore.client.training.task`: classes, training nodes, evaluated nodes;
- :mod:`~graphstore.client.training.models`: GraphSAGE / MLP from the config, DDP wrapping;
- :mod:`~graphstore.client.training.relational`: the relational GCN (and MLP) of a typed graph, with
  learnable embedding rows for its featureless node types (``examples/train_rgcn.py``);
- :mod:`~graphstore.client.training.features`, :mod:`~graphstore.client.training.amp`: the model's
  input and mixed precision;
- :mod:`~graphstore.client.training.epoch`: the training loader and one epoch;
- :mod:`~graphstore.client.training.evaluation`: sampled and layer-wise inference;
- :mod:`~graphstore.client.training.summary`, :mod:`~graphstore.client.training.report`: epoch records,
  results, the model file, the metrics JSON and the final ``test accuracy: X.XXXX`` line;
- :mod:`~graphstore.client.training.teardown`: the end of a run (rank 0's report, then every trainer).

It uses only the public names of :mod:`graphstore.client`.
"""

from graphstore.client.training.amp import AMP_DTYPES, autocast_context, make_grad_scaler
from graphstore.client.training.arguments import (
    add_common_arguments,
    add_embedding_arguments,
    add_rgcn_arguments,
    argument_parser,
    build_config,
    config_from_args,
    load_training_yaml,
    parse_int_list,
)
from graphstore.client.training.collectives import all_reduce_max, all_reduce_sum, rank_and_world
from graphstore.client.training.config import (
    EVAL_MODES,
    MODELS,
    RELATIONAL_MODELS,
    EmbeddingConfig,
    RGCNConfig,
    TrainConfig,
)
from graphstore.client.training.epoch import EpochStats, make_train_loader, train_epoch
from graphstore.client.training.evaluation import (
    InputFn,
    evaluate,
    evaluate_sampled,
    layerwise_inference,
)
from graphstore.client.training.features import (
    batch_labels,
    feature_width,
    model_input,
    nbytes,
    prepare_features,
)
from graphstore.client.training.models import MLP, build_model, make_sampler, unwrap_model, wrap_model
from graphstore.client.training.process import (
    TrainerProcess,
    init_process_group,
    open_graph,
    resolve_device,
    run_main,
    set_threads,
    setup_trainer,
)
from graphstore.client.training.relational import EntityClassifier, RelationalInput, build_relational_model
from graphstore.client.training.report import default_model_path, report_run, save_model
from graphstore.client.training.summary import (
    epoch_line,
    epoch_record,
    reduce_cache_stats,
    reduce_epoch,
    summarize_run,
)
from graphstore.client.training.task import NodeTask, load_task, mask_nodes
from graphstore.client.training.teardown import finish_run, finish_training

__all__ = [
    "AMP_DTYPES",
    "EVAL_MODES",
    "MLP",
    "MODELS",
    "RELATIONAL_MODELS",
    "EmbeddingConfig",
    "EntityClassifier",
    "EpochStats",
    "InputFn",
    "NodeTask",
    "RGCNConfig",
    "RelationalInput",
    "TrainConfig",
    "TrainerProcess",
    "add_common_arguments",
    "add_embedding_arguments",
    "add_rgcn_arguments",
    "all_reduce_max",
    "all_reduce_sum",
    "argument_parser",
    "autocast_context",
    "batch_labels",
    "build_config",
    "build_model",
    "build_relational_model",
    "config_from_args",
    "default_model_path",
    "epoch_line",
    "epoch_record",
    "evaluate",
    "evaluate_sampled",
    "feature_width",
    "finish_run",
    "finish_training",
    "init_process_group",
    "layerwise_inference",
    "load_task",
    "load_training_yaml",
    "make_grad_scaler",
    "make_sampler",
    "mask_nodes",
    "model_input",
    "nbytes",
    "open_graph",
    "parse_int_list",
    "prepare_features",
    "rank_and_world",
    "reduce_cache_stats",
    "reduce_epoch",
    "report_run",
    "resolve_device",
    "run_main",
    "save_model",
    "set_threads",
    "setup_trainer",
    "summarize_run",
    "train_epoch",
    "make_train_loader",
    "unwrap_model",
    "wrap_model",
]
