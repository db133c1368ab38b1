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
from typing import Any

from .config import CoordinatorConfig

log = logging.getLogger("kcoord")

# How long `kcoord serve` waits at start for a state topic that does not exist yet (one it has
# just created reaches the broker's metadata a moment later; thousands of partitions take seconds).
STATE_TOPIC_WAIT_S = 30.0


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
        parsed: Any
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


# `kcoord serve` exits with this when its embedded broker died: a supervisor restarts both.
EXIT_EMBEDDED_BROKER_EXITED = 3
EXIT_BAD_CONFIG = 2   # a --config value kcoord refuses (named in the log)
SHUTDOWN_STEP_TIMEOUT = 10.0   # seconds; a dead upstream must not hold up the exit


async def serve(args: argparse.Namespace) -> int:
    from .runtime.embedded import EmbeddedTansu

    embedded = None
    upstream = args.upstream
    if upstream is None:
        embedded = EmbeddedTansu(storage=args.embedded_storage, log_path=args.embedded_log)
        try:
            await embedded.start()
        except RuntimeError as e:   # it exited or never listened; the message quotes its output
            log.error("%s", e)
            return EXIT_EMBEDDED_BROKER_EXITED
        upstream = embedded.bootstrap
    parts: dict = {}
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    body = loop.create_task(_serve_body(args, upstream, embedded, parts, stop), name="kcoord-serve")
    # A signal during a long start (loading the state topic) stops at once, not once loaded.
    stopped = loop.create_task(stop.wait(), name="kcoord-stop-signal")
    waits: set[asyncio.Future] = {body, stopped}
    if embedded is not None:
        waits.add(embedded.exited)
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if embedded is not None and embedded.exited.done() and not embedded.exited.cancelled() \
                and not body.done():
            # The upstream is gone for good (its memory storage with it): serving on would
            # only answer errors. Exit so a supervisor restarts kcoord and a fresh broker.
            log.error("%s", embedded.exit_report(embedded.exited.result()))
            body.cancel()
            await asyncio.wait({body}, timeout=SHUTDOWN_STEP_TIMEOUT)
            return EXIT_EMBEDDED_BROKER_EXITED
        if not body.done():
            return 0            # signalled before kcoord was ready; `finally` shuts down
        return body.result()
    finally:
        stopped.cancel()
        if not body.done():
            body.cancel()
            await asyncio.wait({body}, timeout=SHUTDOWN_STEP_TIMEOUT)
        await _shutdown(parts, embedded)


async def _serve_body(args: argparse.Namespace, upstream: str, embedded, parts: dict,
                      stop: asyncio.Event) -> int:
    from .gateway.gateway import Gateway
    from .runtime.metrics import register_group_collector
    from .runtime.state_topic import TOPIC_CONFIGS, StateTopic
    from .service import GroupCoordinatorService, SkipOffsetsError

    config = _config_from_args(args)
    state_topic = parts["state_topic"] = StateTopic(
        upstream.split(",")[0], config.state_topic, config.state_topic_partitions,
        replication_factor=config.state_topic_replication_factor, max_batch_bytes=config.max_write_batch_bytes)
    await state_topic.start()
    try:
        service = parts["service"] = GroupCoordinatorService(config, state_topic)
    except SkipOffsetsError as e:   # an operator's setting: say which entry, no traceback
        log.error("%s", e)
        return EXIT_BAD_CONFIG
    gateway = parts["gateway"] = Gateway(service, upstream, args.listen, config.state_topic,
                                         max_frame_size=config.socket_request_max_bytes, config=config,
                                         advertised_host=args.advertised_host,
                                         metadata_refresh_interval=config.metadata_refresh_interval_ms / 1000)
    await gateway.start()
    service.on_metadata_update(gateway.cluster.image)
    gateway.cluster.subscribe(service.on_metadata_update)
    # From here on the cluster view watches the state topic for the service: a missing or
    # replaced topic voids the service's state, and it reloads once the topic is back.
    gateway.cluster.manage_state_topic(service, state_topic, config.state_topic_partitions, TOPIC_CONFIGS,
                                       recreate=not args.no_state_topic_recreate)
    if args.metrics_port:
        from prometheus_client import start_http_server
        register_group_collector(service.shards)
        start_http_server(args.metrics_port, addr=args.metrics_host)
    _print_listeners(gateway, upstream, embedded, args)
    await service.start(missing_topic_wait_s=STATE_TOPIC_WAIT_S)
    failed = service.failed_partitions()
    loaded = len(service.runtimes) - len(failed)
    print(f"kcoord ready: {loaded} shards loaded from {config.state_topic}"
          + (f", {len(failed)} FAILED (partition:offset "
             + ",".join(f"{p}:{o}" for p, o in sorted(failed.items())) + "; see the log)" if failed else ""),
          flush=True)
    await stop.wait()
    return 0


async def _shutdown(parts: dict, embedded) -> None:
    """Close what started, each step bounded; the embedded broker last (the others talk to it)."""
    steps = []
    if "gateway" in parts:
        steps.append(("gateway", parts["gateway"].close()))
    if "service" in parts:
        parts["service"].close()
    if "state_topic" in parts:
        steps.append(("state topic client", parts["state_topic"].stop()))
    if embedded is not None:
        steps.append(("embedded broker", embedded.stop()))
    for what, step in steps:
        try:
            await asyncio.wait_for(step, SHUTDOWN_STEP_TIMEOUT)
        except TimeoutError:
            log.warning("shutdown: closing the %s took over %.0fs; going on", what, SHUTDOWN_STEP_TIMEOUT)
        except Exception as e:
            log.warning("shutdown: closing the %s failed: %r", what, e)


def _print_listeners(gateway, upstream: str, embedded, args) -> None:
    if embedded is not None:
        print(f"kcoord gateway, upstream {upstream} (embedded Tansu pid {embedded.pid}, storage "
              f"{embedded.storage_description}; broker output: {embedded.log_path})", flush=True)
    else:
        print(f"kcoord gateway, upstream {upstream}", flush=True)
    for info in gateway.listeners:
        print(f"  listener {info.describe()}", flush=True)
    if args.metrics_port:
        print(f"  metrics  http://{args.metrics_host}:{args.metrics_port}/metrics", flush=True)


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
    s.add_argument("--embedded-log", default=None,
                   help="file for the embedded broker's output (default: kcoord-tansu-PORT-PID.log in $TMPDIR)")
    s.add_argument("--no-state-topic-recreate", action="store_true",
                   help="report a missing state topic but do not recreate it (kcoord stops serving groups "
                        "until an operator creates it)")
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
