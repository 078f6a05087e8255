"""``graphstore slurm``: run graphstore inside a Slurm job (``deploy/slurm/graphstore.sbatch``).

    graphstore slurm config --template configs/slurm.yaml --out cluster.yaml   # servers on the job's nodes
    srun --overlap --ntasks-per-node=1 graphstore servers --config cluster.yaml &
    GRAPHSTORE_CONFIG=cluster.yaml srun --overlap graphstore slurm exec -- python examples/train_dist.py ...
    graphstore slurm env                                                      # the mapping, as exports

``config`` writes a cluster YAML from a template (every field but ``servers``) and the job's nodes
(``SLURM_JOB_NODELIST``): partition k on node k % nodes. ``exec`` runs a command with torchrun's
variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``) set from srun's (:mod:`graphstore.launcher.slurm`), so an unchanged
training script joins its trainer group; ``env`` prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path

from graphstore.launcher.commands.arguments import add_command


def run_exec(args: argparse.Namespace) -> int:
    """``graphstore slurm exec -- COMMAND``: replace this process with the command."""
    from graphstore.launcher.slurm import torch_env_from_slurm

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ValueError("slurm exec: no command given (usage: graphstore slurm exec -- python train.py)")
    env = dict(os.environ, **torch_env_from_slurm(os.environ), PYTHONUNBUFFERED="1")
    try:
        os.execvpe(command[0], command, env)
    except FileNotFoundError:
        raise FileNotFoundError(f"slurm exec: command not found: {command[0]}") from None


def run_env(args: argparse.Namespace) -> int:
    """``graphstore slurm env``: print the mapped variables as shell exports."""
    from graphstore.launcher.slurm import torch_env_from_slurm

    for key, value in torch_env_from_slurm(os.environ).items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def run_config(args: argparse.Namespace) -> int:
    """``graphstore slurm config``: write the job's cluster YAML and check it."""
    import yaml

    from graphstore.config import load_cluster_config
    from graphstore.launcher.slurm import cluster_for_nodes, expand_hostlist

    template_path = Path(args.template)
    template = yaml.safe_load(template_path.read_text()) or {}
    if not isinstance(template, dict):
        raise ValueError(f"{template_path}: a cluster config template is a mapping")
    if template.get("part_config"):
        # Relative to the template's folder, as in any cluster YAML; the output may live elsewhere.
        template["part_config"] = str((template_path.parent / template["part_config"]).resolve())
    nodelist = args.nodelist or os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise ValueError("slurm config: SLURM_JOB_NODELIST is not set (run it in a job, or pass --nodelist)")
    num_parts = args.num_parts if args.num_parts is not None else _num_parts(template.get("part_config"))
    mapping = cluster_for_nodes(template, expand_hostlist(nodelist), num_parts, args.port, args.replicas)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(mapping, sort_keys=False))
    config = load_cluster_config(out)  # the same checks launch makes (partition config, TLS files)
    placement = ", ".join(
        f"{s.part_id}{f'.r{s.replica}' if s.replica else ''}@{s.address}" for s in config.all_servers
    )
    print(f"wrote {out}: {len(config.all_servers)} servers ({placement})")
    return 0


def _num_parts(part_config: str | None) -> int:
    if not part_config:
        raise ValueError("slurm config: the template has no part_config; pass --num-parts")
    with open(part_config) as handle:
        meta = json.load(handle)
    if not isinstance(meta, dict) or not isinstance(meta.get("num_parts"), int):
        raise ValueError(f"slurm config: {part_config} has no integer 'num_parts'")
    return meta["num_parts"]


def register(subparsers) -> None:
    """Add the ``slurm`` subcommand and its ``config`` / ``exec`` / ``env`` actions."""
    parser = add_command(
        subparsers,
        "slurm",
        "inside a Slurm job: the cluster YAML of its nodes, torchrun's variables from srun's",
        __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    config = actions.add_parser("config", help="write a cluster YAML whose servers run on the job's nodes")
    config.add_argument(
        "--template", required=True, help="cluster YAML without 'servers' (configs/slurm.yaml)"
    )
    config.add_argument("--out", required=True, help="where to write the job's cluster YAML")
    config.add_argument("--port", type=int, default=50051, help="first server port (default 50051)")
    config.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="servers per partition: its owner and read replicas, on different nodes where there are "
        "enough (default 1)",
    )
    config.add_argument(
        "--num-parts", type=int, default=None, help="partitions (default: the template's part_config)"
    )
    config.add_argument("--nodelist", default=None, help="Slurm host list (default: $SLURM_JOB_NODELIST)")
    config.set_defaults(func=run_config)
    execute = actions.add_parser("exec", help="run a command with torchrun's variables set from srun's")
    execute.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    execute.set_defaults(func=run_exec)
    env = actions.add_parser("env", help="print torchrun's variables for this srun task as exports")
    env.set_defaults(func=run_env)
