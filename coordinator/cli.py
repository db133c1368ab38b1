"""`kcoord`: the command line.

    kcoord serve [--listen 127.0.0.1:9092] [--upstream host:port] [--metrics-port N] ...

Without --upstream an embedded Tansu broker is started on loopback.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import logging
import signal
import sys

from .config import CoordinatorConfig

log = logging.getLogger("kcoord")


def _config_from_args(args: argparse.Namespace) -> CoordinatorConfig:
    config = CoordinatorConfig(state_topic=args.state_topic, state_topic_partitions=args.state_partitions)
    fields = {f.name: f for f in dataclasses.fields(CoordinatorConfig)}
    for item in args.config or ():
        key, sep, value = item.partition("=")
        name = key.strip().replace(".", "_").replace("-", "_")
        # Accept Kafka's names too: group.consumer.session.timeout.ms -> consumer_session_timeout_ms
        for prefix in ("group_coordinator_", "group_"):
            if name not in fields and name.startswith(prefix) and name[len(prefix):] in fields:
                name = name[len(prefix):]
        if not sep or name not in fields:
            raise SystemExit(f"kcoord: unknown --config {item!r}; known: {', '.join(sorted(fields))}")
        current = getattr(config, name)
        if isinstance(current, bool):
            parsed = value.lower() in ("1", "true", "yes")
        elif isinstance(current, int):
            parsed = int(value)
        elif isinstance(current, tuple):
            parsed = tuple(v.strip() for v in value.split(",") if v.strip())
        else:
            parsed = value
        setattr(config, name, parsed)
    return config


async def serve(args: argparse.Namespace) -> int:
    from .gateway.gateway import Gateway
    from .runtime.embedded import EmbeddedTansu
    from .runtime.metrics import register_group_collector
    from .runtime.state_topic import StateTopic
    from .service import GroupCoordinatorService

    config = _config_from_args(args)
    embedded = None
    upstream = args.upstream
    if upstream is None:
        embedded = EmbeddedTansu(storage=args.embedded_storage)
        await embedded.start()
        upstream = embedded.bootstrap
    state_topic = StateTopic(upstream.split(",")[0], config.state_topic, config.state_topic_partitions,
                             replication_factor=config.state_topic_replication_factor,
                             max_batch_bytes=config.max_write_batch_bytes)
    gateway = None
    service = None
    try:
        await state_topic.start()
        service = GroupCoordinatorService(config, state_topic)
        gateway = Gateway(service, upstream, args.listen, config.state_topic,
                          advertised_host=args.advertised_host,
                          metadata_refresh_interval=config.metadata_refresh_interval_ms / 1000)
        await gateway.start()
        service.on_metadata_update(gateway.cluster.image)
        gateway.cluster.subscribe(service.on_metadata_update)
        if args.metrics_port:
            from prometheus_client import start_http_server
            register_group_collector(service.shards)
            start_http_server(args.metrics_port, addr=args.metrics_host)
        _print_listeners(gateway, upstream, embedded, args)
        await service.start()
        print(f"kcoord ready: {len(service.runtimes)} shards loaded from {config.state_topic}", flush=True)
        await _wait_for_signal()
        return 0
    finally:
        if gateway is not None:
            await gateway.close()
        if service is not None:
            service.close()
        await state_topic.stop()
        if embedded is not None:
            await embedded.stop()


def _print_listeners(gateway, upstream: str, embedded, args) -> None:
    print(f"kcoord gateway, upstream {upstream}" + (" (embedded Tansu, in-memory)" if embedded else ""), flush=True)
    for info in gateway.listeners:
        print(f"  listener {info.describe()}", flush=True)
    if args.metrics_port:
        print(f"  metrics  http://{args.metrics_host}:{args.metrics_port}/metrics", flush=True)


async def _wait_for_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord", description="Kafka-native group coordinator gateway")
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the gateway and the group coordinator")
    s.add_argument("--listen", default="127.0.0.1:9092", help="bootstrap listener host:port (default %(default)s)")
    s.add_argument("--advertised-host", default=None, help="host name clients are told (default: the listen host)")
    s.add_argument("--upstream", default=None,
                   help="upstream bootstrap host:port[,host:port]; default: start an embedded Tansu broker")
    s.add_argument("--embedded-storage", default=None, help="Tansu --storage-engine URL (default memory)")
    s.add_argument("--state-topic", default="__kcoord_offsets")
    s.add_argument("--state-partitions", type=int, default=50)
    s.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics on this port")
    s.add_argument("--metrics-host", default="127.0.0.1")
    s.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="coordinator setting, e.g. group.consumer.heartbeat.interval.ms=2000 (repeatable)")
    for module in _TOOL_MODULES:
        try:
            tool = importlib.import_module(module)
        except ImportError as e:
            if e.name != module:
                raise
            continue
        tool.register(sub)  # each tool adds its sub-command and sets `func` on its parser
    return parser


# Sub-commands owned by other packages: `register(subparsers)` adds them.
_TOOL_MODULES = ("ops.cli", "migration.cli")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop
        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    if args.command == "serve":
        return asyncio.run(serve(args))
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
