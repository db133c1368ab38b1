"""`kcoord cluster status`: the instances of a running kcoord cluster, which shards each
holds and in what state, from the Kafka protocol (and, when given, each instance's metrics).

    kcoord cluster status --bootstrap-server HOST:PORT [--command-config FILE]
                          [--state-topic T] [--state-partitions N]
                          [--metrics-port P | --metrics-url URL ...] [--json]

Instances: every coordinator node kcoord lists in Metadata (node id >= 2**30, one per
instance), with the shards FindCoordinator names it for; from its metrics (`--metrics-port P`:
each instance's host at port P, the Kubernetes layout; or `--metrics-url URL` per instance)
its membership generation, lease remaining, fencing events, shard moves and load time.
Shards: for each state-topic partition a probe group that hashes to it; FindCoordinator is
asked of every instance (all must agree), and OffsetFetch of the probe group at its owner
gives the state: active, loading, moving (no owner, or NOT_COORDINATOR), failed (the owner's
metrics say so). A single kcoord process (no such nodes) is shown with the shards it serves;
Apache Kafka is reported as not kcoord.

Exit status: 0 every instance answers and agrees, every shard active; 2 instances disagree
or one does not answer; 3 some shard is loading, moving or failed; 1 error.
`--command-config FILE` holds client properties for a secured cluster, as for `kcoord groups`.
"""
from __future__ import annotations

import argparse
import asyncio
import sys

import orjson

from coordinator.upstream.client import UpstreamError
from ops.cluster_status import (
    DEFAULT_PROBE_PREFIX,
    DEFAULT_STATE_PARTITIONS,
    DEFAULT_STATE_TOPIC,
    EXIT_ERROR,
    Options,
    collect,
    render,
)
from ops.groups_admin import GroupsError
from ops.groups_cli import _security


def register(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="the instances and shards of a running kcoord cluster",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cluster_command", required=True)
    q = sub.add_parser("status", help="instance -> shard map, shard states, generation, fencing events",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of any kcoord instance")
    q.add_argument("--command-config", help="client properties file (security settings)")
    q.add_argument("--state-topic", default=None,
                   help=f"kcoord's state topic (default {DEFAULT_STATE_TOPIC}, or the internal topic kcoord lists)")
    q.add_argument("--state-partitions", type=int, default=None,
                   help=f"shards, when Metadata does not list the state topic (default {DEFAULT_STATE_PARTITIONS})")
    metrics = q.add_mutually_exclusive_group()
    metrics.add_argument("--metrics-port", type=int, help="every instance serves /metrics on this port at its host")
    metrics.add_argument("--metrics-url", action="append", default=[],
                         help="an instance's metrics, URL or HOST:PORT (repeatable)")
    q.add_argument("--probe-prefix", default=DEFAULT_PROBE_PREFIX,
                   help="name prefix of the probe groups (OffsetFetch needs Describe on them under ACLs)")
    q.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each answer")
    q.add_argument("--json", action="store_true", help="JSON instead of the tables")
    q.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    opts = Options(bootstrap=args.bootstrap_server, state_topic=args.state_topic,
                   state_partitions=args.state_partitions, probe_prefix=args.probe_prefix,
                   metrics_port=args.metrics_port, metrics_urls=tuple(args.metrics_url), timeout=args.timeout)
    try:
        status = asyncio.run(collect(opts, _security(args.command_config)))
    except (GroupsError, UpstreamError, OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        sys.stdout.write(orjson.dumps(status.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render(status))
    return status.exit_code


def main(argv: list[str] | None = None) -> int:
    """`python -m ops.cluster_cli status ...`: the same command without coordinator/cli.py."""
    parser = argparse.ArgumentParser(prog="kcoord")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["cluster", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
