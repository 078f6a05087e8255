"""The command line of the training examples: their flags, and a run config built from defaults, the
training YAML (``--config``) and the flags given, in that order."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence
from typing import TypeVar

import yaml

from graphstore.client.training.config import TrainConfig

ConfigT = TypeVar("ConfigT", bound=TrainConfig)


def parse_int_list(text: str) -> list[int]:
    """``"10,25"`` (spaces allowed) -> ``[10, 25]``.

    Raises:
        ValueError: an item that is not an integer.
    """
    return [int(x) for x in str(text).replace(" ", "").split(",") if x]


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of every :class:`TrainConfig` setting but ``model``.

    Every default is None, so that the training YAML fills what the command line leaves out.

    Args:
        parser: the script's parser.
    """
    parser.add_argument("--config", help="training YAML (e.g. configs/train.yaml); flags override it")
    parser.add_argument("--graph-name", help="the partitioned graph's name")
    parser.add_argument("--part-config", help="partition config NAME.json (standalone mode needs it)")
    parser.add_argument(
        "--fanouts", type=parse_int_list, help="comma-separated, input layer first, e.g. 10,25"
    )
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--dropout", type=float)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--weight-decay", type=float)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--device", help="cpu | cuda | cuda:N | auto")
    parser.add_argument("--amp", help="none | fp16 | bf16")
    parser.add_argument("--eval-every", type=int, help="validation every N epochs (0: only at the end)")
    parser.add_argument("--eval-mode", help="sampled | layerwise")
    parser.add_argument("--eval-fanouts", type=parse_int_list)
    parser.add_argument("--eval-batch-size", type=int)
    parser.add_argument("--eval-max-nodes", type=int, help="evaluate a seeded subset of each mask")
    parser.add_argument("--aggregator", help="mean | gcn | pool")
    parser.add_argument("--prefetch", type=int, help="mini-batches prepared ahead (0: off)")
    parser.add_argument("--num-workers", type=int, help="loader threads")
    parser.add_argument(
        "--placement", help="none | device | pinned: sample and gather the co-located graph on the device"
    )
    parser.add_argument(
        "--feature-dtype", help="auto | stored | float32 | bfloat16 | float16 (with a placement)"
    )
    parser.add_argument(
        "--cache-remote-features", type=float, help="share of other partitions' nodes cached (0..1)"
    )
    parser.add_argument("--dist-backend", help="auto | nccl | gloo (trainers sharing a GPU: gloo)")
    parser.add_argument("--feat-name")
    parser.add_argument("--feat-norm", help="none | row (L1-normalize each feature row)")
    parser.add_argument("--label-name")
    parser.add_argument("--target-ntype", help="typed graphs: the node type to classify (e.g. paper)")
    parser.add_argument("--save-model", help="where rank 0 saves the model ('' to skip)")
    parser.add_argument("--metrics-json", help="where rank 0 writes the run's figures")
    parser.add_argument("--progress", help="auto | on | off")
    parser.add_argument("--num-threads", type=int, help="torch threads (default: CPUs / local trainers)")


def argument_parser(docstring: str) -> argparse.ArgumentParser:
    """A training script's parser, with :func:`add_common_arguments`' flags.

    Args:
        docstring: the script's docstring; its first line describes the script in ``--help``.

    Returns:
        The parser, for the script to add its own flags to.
    """
    parser = argparse.ArgumentParser(description=docstring.strip().splitlines()[0])
    add_common_arguments(parser)
    return parser


def add_embedding_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of the :class:`~graphstore.client.training.config.EmbeddingConfig` settings.

    Args:
        parser: the script's parser.
    """
    parser.add_argument("--emb-dim", type=int, help="embedding width (default 64)")
    parser.add_argument("--sparse-lr", type=float, help="SparseAdagrad learning rate (default 0.05)")
    parser.add_argument("--init-scale", type=float, help="rows start in U(-s, s) (default 0.1)")
    parser.add_argument(
        "--freeze-embeddings",
        action="store_true",
        default=None,
        help="baseline: keep the random rows, train only the dense model",
    )
    parser.add_argument("--embedding-name", help="the table's name on the servers (default node_emb)")


def add_rgcn_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of the :class:`~graphstore.client.training.config.RGCNConfig` settings (and
    ``--model rgcn|mlp``).

    Args:
        parser: the script's parser.
    """
    parser.add_argument(
        "--model", help="rgcn (relational GCN, default) | mlp (the target type's features only)"
    )
    parser.add_argument("--num-bases", type=int, help="bases of the relation weights (default 4)")
    parser.add_argument("--regularizer", help="basis (default) | bdd | none")
    parser.add_argument(
        "--sparse-lr", type=float, help="SparseAdagrad learning rate of the embeddings (default 0.05)"
    )
    parser.add_argument("--init-scale", type=float, help="embedding rows start in U(-s, s) (default 0.1)")
    parser.add_argument("--embedding-name", help="prefix of the embedding tables on the servers")


def load_training_yaml(path: str, known: set[str]) -> dict:
    """The settings of a training YAML, keys spelled with underscores.

    Args:
        path: the YAML file.
        known: the setting names the config class has.

    Returns:
        ``{setting: value}``.

    Raises:
        FileNotFoundError: a missing file.
        ValueError: a file that is not a mapping, or an unknown setting.
    """
    with open(path) as handle:
        loaded = yaml.safe_load(handle) or {}
    if not isinstance(loaded, dict):
        raise ValueError(f"training config {path!r} must be a mapping, got {type(loaded).__name__}")
    values = {}
    for key, value in loaded.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise ValueError(f"training config {path!r}: unknown setting {key!r}")
        values[name] = value
    return values


def build_config(config_cls: type[ConfigT], args: argparse.Namespace) -> ConfigT:
    """Defaults, then the training YAML (``args.config``), then the flags given (those not None).

    Args:
        config_cls: :class:`TrainConfig` or a subclass.
        args: the parsed flags.

    Returns:
        The validated config.

    Raises:
        ValueError: an unknown key in the YAML, or an invalid setting.
        FileNotFoundError: a missing YAML or partition config.
    """
    known = {f.name for f in dataclasses.fields(config_cls)}
    values = load_training_yaml(args.config, known) if getattr(args, "config", None) else {}
    for name, value in vars(args).items():
        if name in known and value is not None:
            values[name] = value
    # An older spelling: amp: true/false.
    if isinstance(values.get("amp"), bool):
        values["amp"] = "bf16" if values["amp"] else "none"
    for name in ("fanouts", "eval_fanouts"):
        if isinstance(values.get(name), str):
            values[name] = parse_int_list(values[name])
    config = config_cls(**values)
    config.validate()
    if config.part_config is not None and not os.path.isfile(config.part_config):
        raise FileNotFoundError(f"--part-config {config.part_config!r}: no such file")
    return config


def config_from_args(
    parser: argparse.ArgumentParser, config_cls: type[ConfigT], argv: Sequence[str] | None = None
) -> ConfigT:
    """Parse the command line into a validated config; a bad setting or a missing file ends the script
    with one line naming it on stderr and exit code 2.

    Args:
        parser: the script's parser, with :func:`add_common_arguments` (and its own flags) added.
        config_cls: :class:`TrainConfig` or a subclass.
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The validated config.
    """
    args = parser.parse_args(argv)
    try:
        return build_config(config_cls, args)
    except (ValueError, FileNotFoundError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
