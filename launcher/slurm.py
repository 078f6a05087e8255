"""Slurm's view of a job, translated: torchrun's variables from ``srun``'s, and a cluster config from the
allocation's nodes.

Pure functions of their arguments (an environment mapping, a node list), so they are tested without
Slurm; ``graphstore slurm exec`` and ``graphstore slurm config`` apply them to the real environment.

Under ``srun`` each task sees ``SLURM_PROCID`` (its rank in the step), ``SLURM_LOCALID`` (its rank on
its node), ``SLURM_NTASKS``, ``SLURM_NODEID``, ``SLURM_STEP_NODELIST`` (``node[01-04]``) and
``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``). :func:`torch_env_from_slurm` maps them:

=================  =============================================================
``RANK``           ``SLURM_PROCID``
``LOCAL_RANK``     ``SLURM_LOCALID``
``WORLD_SIZE``     ``SLURM_NTASKS`` (``SLURM_STEP_NUM_TASKS`` when set)
``LOCAL_WORLD_SIZE`` the tasks on this node: ``SLURM_STEP_TASKS_PER_NODE`` at ``SLURM_NODEID``
``GROUP_RANK``     ``SLURM_NODEID``
``MASTER_ADDR``    the first node of ``SLURM_STEP_NODELIST`` (where rank 0 runs)
``MASTER_PORT``    ``20000 + SLURM_JOB_ID % 10000`` (two jobs sharing a node do not collide)
=================  =============================================================

``MASTER_ADDR`` / ``MASTER_PORT`` already in the environment are kept (the user's choice wins).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

MASTER_PORT_BASE = 20000
MASTER_PORT_SPAN = 10000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_REPEAT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list as names, in order: ``node[01-03,07],gpu-a1`` -> 4 + 1 names.

    Args:
        hostlist: what ``SLURM_JOB_NODELIST`` / ``SLURM_STEP_NODELIST`` hold; several bracket groups
            in one name (``rack[1-2]-node[1-2]``) expand as a product, zero padding is kept.

    Returns:
        The host names.

    Raises:
        ValueError: unbalanced brackets, or a range that is not ``N`` or ``N-M`` with ``N <= M``.
    """
    hosts: list[str] = []
    for item in _split_top_level(hostlist.strip()):
        hosts.extend(_expand_name(item, hostlist))
    return hosts


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_name(name: str, whole: str) -> list[str]:
    open_at = name.find("[")
    if open_at < 0:
        if "]" in name:
            raise ValueError(f"host list {whole!r}: unbalanced ']' in {name!r}")
        return [name]
    close_at = name.find("]", open_at)
    if close_at < 0:
        raise ValueError(f"host list {whole!r}: unbalanced '[' in {name!r}")
    prefix, ranges, rest = name[:open_at], name[open_at + 1 : close_at], name[close_at + 1 :]
    suffixes = _expand_name(rest, whole) if rest else [""]
    names = []
    for part in ranges.split(","):
        match = _RANGE.match(part.strip())
        if not match or (match.group(2) and int(match.group(2)) < int(match.group(1))):
            raise ValueError(f"host list {whole!r}: bad range {part!r}")
        first, last = match.group(1), match.group(2) or match.group(1)
        for number in range(int(first), int(last) + 1):
            names.extend(f"{prefix}{number:0{len(first)}d}{suffix}" for suffix in suffixes)
    return names


def expand_tasks_per_node(spec: str) -> list[int]:
    """Slurm's tasks-per-node list: ``2(x3),1`` -> ``[2, 2, 2, 1]``.

    Raises:
        ValueError: an item that is not ``N`` or ``N(xM)``.
    """
    counts: list[int] = []
    for item in spec.split(","):
        match = _REPEAT.match(item.strip())
        if not match:
            raise ValueError(f"tasks per node {spec!r}: bad item {item!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def torch_env_from_slurm(env: Mapping[str, str]) -> dict[str, str]:
    """torchrun's variables for one ``srun`` task (the table in the module docstring).

    Args:
        env: the task's environment.

    Returns:
        ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
        ``MASTER_ADDR`` and ``MASTER_PORT``, as strings.

    Raises:
        ValueError: not inside an ``srun`` task (a variable missing, naming it) or inconsistent values.
    """

    def need(name: str) -> str:
        value = env.get(name)
        if not value:
            raise ValueError(
                f"{name} is not set: run this inside an srun task (srun graphstore slurm exec ...)"
            )
        return value

    rank, local_rank, node_id = (
        int(need("SLURM_PROCID")),
        int(need("SLURM_LOCALID")),
        int(need("SLURM_NODEID")),
    )
    world_size = int(env.get("SLURM_STEP_NUM_TASKS") or need("SLURM_NTASKS"))
    per_node = expand_tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE") or need("SLURM_TASKS_PER_NODE"))
    nodes = expand_hostlist(env.get("SLURM_STEP_NODELIST") or need("SLURM_JOB_NODELIST"))
    if not 0 <= rank < world_size:
        raise ValueError(f"SLURM_PROCID={rank} is outside the step's {world_size} tasks")
    if not 0 <= node_id < len(per_node):
        raise ValueError(f"SLURM_NODEID={node_id} is outside the step's {len(per_node)} nodes")
    master_port = env.get("MASTER_PORT") or str(
        MASTER_PORT_BASE + int(need("SLURM_JOB_ID")) % MASTER_PORT_SPAN
    )
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(per_node[node_id]),
        "GROUP_RANK": str(node_id),
        "MASTER_ADDR": env.get("MASTER_ADDR") or nodes[0],
        "MASTER_PORT": master_port,
    }


def cluster_for_nodes(
    template: Mapping, nodes: Sequence[str], num_parts: int, port: int, replicas: int = 1
) -> dict:
    """A cluster config (as a mapping) whose servers run on ``nodes``: partition ``k`` on node
    ``k % len(nodes)``, port ``port + k // len(nodes)`` (several partitions on one node get
    consecutive ports), bound to every interface. With ``replicas`` > 1, server ``r`` of partition
    ``k`` (``r`` = 0 is its owner, the others read replicas) runs on node ``(k + r) % len(nodes)``, so
    a partition's replicas sit on different nodes where there are enough, on the next free port there.

    Args:
        template: the rest of the cluster config (``graph_name``, ``part_config``, ``rpc``, ``tls``,
            ``token_file``, ``checkpoint``, ...); it must not list ``servers``.
        nodes: the allocation's nodes, in Slurm's order (``SLURM_JOB_NODELIST`` expanded).
        num_parts: the number of partitions.
        port: the first server port.
        replicas: servers per partition (the owner and its read replicas).

    Returns:
        The template with ``servers`` added.

    Raises:
        ValueError: ``servers`` in the template, no nodes, no partitions, fewer than one replica, or
            ports beyond 65535.
    """
    if "servers" in template:
        raise ValueError("the Slurm template must not list 'servers': they come from the job's nodes")
    if not nodes:
        raise ValueError("no nodes: SLURM_JOB_NODELIST is empty")
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    used = [0] * len(nodes)
    servers = []
    for r in range(replicas):
        for k in range(num_parts):
            node = (k + r) % len(nodes)
            servers.append(
                {"host": nodes[node], "port": port + used[node], "part_id": k, "bind_host": "0.0.0.0"}
            )
            used[node] += 1
    last_port = port + max(used) - 1
    if not 0 < port <= last_port <= 65535:
        raise ValueError(f"ports {port}..{last_port} are not valid TCP ports")
    return {**template, "servers": servers}
