"""``graphstore status``: the health, partition, tensors, memory and metrics of a cluster's servers.

    graphstore status --config configs/local-2part.yaml [--json]   # every server of a cluster
    graphstore status --probe 127.0.0.1:50051                      # exit 0 only when SERVING
    graphstore status --probe 10.0.0.5:50051 --tls-ca ca.pem       # a TLS server (or --config C.yaml)

``--probe`` is what container health checks run: it imports grpc and the health stubs only,
no torch, and answers within ``--timeout`` seconds. The health service needs no token; with TLS the
probe needs the CA (``--tls-ca``, or the ``tls`` section of ``--config``). With ``metrics_port`` in
the cluster config, the report adds each server's per-call counts, p50 / p99 latencies and per-tensor
bytes from its Prometheus endpoint. A partition's read replicas are listed after the owners
(``server K.rN``), each with its role and the calls of each method it answered.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from graphstore.launcher.commands.arguments import add_command


def _format_bytes(count: int | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _format_report(part_id: int, report, replica: int = 0) -> list[str]:
    uptime = "-" if report.uptime_s is None else f"{report.uptime_s:.0f} s"
    served = "-" if report.part_id is None else str(report.part_id)
    label = f"{part_id}.r{replica}" if replica else str(part_id)
    role = "" if report.read_replica is None else ("read_replica  " if report.read_replica else "owner  ")
    lines = [
        f"server {label}  {report.address:<22} {report.health:<12} partition {served:<3} {role}"
        f"uptime {uptime:<8} "
        f"rss {_format_bytes(report.rss_bytes):<10} anon {_format_bytes(report.rss_anon_bytes)}"
    ]
    if report.part_id is not None and report.part_id != part_id:
        lines.append(f"  warning: the config expects partition {part_id} at this address")
    if report.read_replica is not None and report.read_replica != (replica > 0):
        expected = "a read replica" if replica else "the owner"
        lines.append(f"  warning: the config expects {expected} of partition {part_id} at this address")
    if report.error:
        lines.append(f"  stats: {report.error}")
    calls = sorted(
        (k.removeprefix("calls_"), v) for k, v in report.counters.items() if k.startswith("calls_")
    )
    if calls:
        lines.append("  calls served: " + ", ".join(f"{method} {count}" for method, count in calls))
    lines += _format_metrics(report)
    for tensor in report.tensors:
        shape = "x".join(str(d) for d in tensor.shape)
        flags = ",".join(
            flag
            for flag, on in (
                ("partition", tensor.from_partition),
                ("writable", tensor.writable),
                ("persistent", tensor.persistent),
            )
            if on
        )
        lines.append(f"  tensor {tensor.name:<24} {tensor.policy:<5} {tensor.dtype:<9} [{shape}] {flags}")
    return lines


def _format_metrics(report) -> list[str]:
    if report.metrics_error:
        return [f"  metrics: {report.metrics_error}"]
    metrics = report.metrics
    if not metrics:
        return []
    lines = []
    for method, entry in sorted(metrics["rpc"].items()):
        p50 = "-" if entry.get("p50_ms") is None else f"{entry['p50_ms']:.2f} ms"
        p99 = "-" if entry.get("p99_ms") is None else f"{entry['p99_ms']:.2f} ms"
        calls, errors = entry["count"], entry["errors"]
        lines.append(f"  rpc {method:<16} calls {calls:<9} errors {errors:<6} p50 {p50:<10} p99 {p99}")
    for tensor, ops in sorted(metrics["tensor_bytes"].items()):
        moved = "  ".join(f"{op} {_format_bytes(count)}" for op, count in sorted(ops.items()))
        lines.append(f"  bytes {tensor:<24} {moved}")
    if metrics["auth_denied"]:
        denied = ", ".join(f"{code} {count}" for code, count in sorted(metrics["auth_denied"].items()))
        lines.append(f"  auth denied: {denied}")
    if metrics["checkpoints"]:
        done = ", ".join(f"{outcome} {count}" for outcome, count in sorted(metrics["checkpoints"].items()))
        lines.append(f"  periodic checkpoints: {done}")
    return lines


def _probe_security(args: argparse.Namespace, config):
    from graphstore.auth import ChannelSecurity

    if args.tls_ca is not None or args.tls_server_name is not None:
        return ChannelSecurity(ca=args.tls_ca, server_name=args.tls_server_name, use_tls=True)
    if config is not None:
        return config.channel_security()
    return None


def run(args: argparse.Namespace) -> int:
    """Entry point of ``graphstore status``; 0 when every server asked is SERVING, else 1."""
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0, got {args.timeout}")
    if args.probe is None and args.config is None:
        raise ValueError("status: give --config C.yaml (every server) or --probe HOST:PORT (one server)")
    from graphstore.launcher.control import SERVING, probe_health

    if args.probe is not None:
        config = None
        if args.config is not None:
            from graphstore.config import load_cluster_config

            config = load_cluster_config(args.config, check_files=False)
        health = probe_health(args.probe, timeout_s=args.timeout, security=_probe_security(args, config))
        print(f"{args.probe} {health}")
        return 0 if health == SERVING else 1

    from graphstore.config import load_cluster_config
    from graphstore.launcher.control import fetch_report

    config = load_cluster_config(args.config, check_files=False)
    security = _probe_security(args, config)
    reports = [
        fetch_report(
            server.address,
            timeout_s=args.timeout,
            security=security,
            metrics_port=config.metrics_port_of(server.part_id, server.replica),
        )
        for server in config.all_servers
    ]
    if args.json:
        payload = {
            "graph_name": config.graph_name,
            "servers": [
                dict(dataclasses.asdict(report), replica=server.replica)
                for server, report in zip(config.all_servers, reports, strict=True)
            ],
        }
        json.dump(payload, sys.stdout, indent=2)
        print()
    else:
        parts = f"{config.num_parts} partitions"
        if config.read_replicas:
            parts += f", {len(config.read_replicas)} read replicas"
        print(f"cluster {config.path}: graph {config.graph_name or '-'}, {parts}")
        for server, report in zip(config.all_servers, reports, strict=True):
            print("\n".join(_format_report(server.part_id, report, server.replica)))
    return 0 if all(report.health == SERVING for report in reports) else 1


def register(subparsers) -> None:
    """Add the ``status`` subcommand."""
    parser = add_command(
        subparsers, "status", "show the health, partition, tensors and memory of the servers", __doc__
    )
    parser.add_argument(
        "--config", help="cluster YAML: report every server in it (with --probe: only its tls settings)"
    )
    parser.add_argument(
        "--probe", metavar="HOST:PORT", help="check one server; exit 0 only when it is SERVING"
    )
    parser.add_argument("--tls-ca", default=None, help="CA bundle verifying a TLS server (PEM)")
    parser.add_argument(
        "--tls-server-name", default=None, help="name to check the server certificate against"
    )
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="deadline of each call in seconds (default 3)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (with --config)")
    parser.set_defaults(func=run)
