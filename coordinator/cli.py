"""`kcoord`: the command line, the top of the house (docs/design/architecture.md).

    kcoord serve [--listen [NAME://]host:port ...] [--upstream host:port] [--metrics-port N] ...
    kcoord offsets|groups|cluster|rehearse ...     (ops/ and migration/ add these)

This module is the console script and the only one in `coordinator/` that imports the tools
above the coordinator (`ops/`, `migration/`): it imports them directly, each adding its
sub-command (`register(subparsers)`); nothing below it imports it (the import contracts in
pyproject.toml say so).

Without --upstream an embedded broker is started on loopback: Tansu, or Apache Kafka with `--embedded kafka`.

`--config NAME=VALUE` takes coordinator settings (config.py) and security settings
(coordinator/security/settings.py: `ssl.*`, `sasl.*`, `listener.*`, `upstream.*`,
`authorizer`, ...); the latter are resolved (`.file`/`.env` secrets) into one dict handed
to the gateway. Fail closed: a SASL listener, or an SSL listener with
`ssl.client.auth=required`, needs an `authorizer` setting (`authorizer=none` to opt out).
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import signal
import sys
import time
from typing import Any

from migration import cli as rehearse_cli
from ops import cli as offsets_cli
from ops import cluster_cli, groups_cli

from .aio import within
from .config import CoordinatorConfig

log = logging.getLogger("kcoord")

# How long `kcoord serve` waits at start for a state topic that does not exist yet (one it has
# just created reaches the broker's metadata a moment later; thousands of partitions take seconds).
STATE_TOPIC_WAIT_S = 30.0


def _config_from_args(args: argparse.Namespace) -> CoordinatorConfig:
    return _configs_from_args(args)[0]


def _configs_from_args(args: argparse.Namespace) -> tuple[CoordinatorConfig, dict[str, str]]:
    """(coordinator settings, security settings resolved): a `--config` name that
    `is_security_setting` recognises goes to the second (SecurityConfigError: a secret
    that cannot be read, a name given twice)."""
    from .security.settings import is_security_setting, resolve

    config = CoordinatorConfig(state_topic=args.state_topic, state_topic_partitions=args.state_partitions)
    fields = {f.name: f for f in dataclasses.fields(CoordinatorConfig)}
    security_items: list[tuple[str, str]] = []
    for item in args.config or ():
        key, sep, value = item.partition("=")
        if sep and is_security_setting(key.strip()):
            security_items.append((key.strip(), value))
            continue
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
            if value.strip().lower() not in _BOOLEANS:
                raise ValueError(f"--config {key.strip()}={value!r}: not a boolean (true or false)")
            parsed = _BOOLEANS[value.strip().lower()]
        elif isinstance(current, (int, float)):
            try:
                parsed = type(current)(value)
            except ValueError:
                raise ValueError(f"--config {key.strip()}={value!r}: not a number") from None
        elif name == "streams_rack_aware_assignment_tags":
            parsed = _tag_keys(key.strip(), value)
        elif isinstance(current, tuple):
            parsed = tuple(v.strip() for v in value.split(",") if v.strip())
        else:
            parsed = value
        setattr(config, name, parsed)
    return config, resolve(security_items)


def _tag_keys(name: str, value: str) -> tuple[str, ...]:
    """The serve-wide client-tag keys, held to the group key's rules (keys.py `_list`)."""
    from .group.configs.keys import KEYS, RACK_AWARE_TAGS, parse
    from .group.errors import ApiError

    try:
        return tuple(parse(KEYS[RACK_AWARE_TAGS], value))
    except ApiError as e:
        raise ValueError(f"--config {name}={value!r}: {e.message}") from None


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def listen_values(args: argparse.Namespace) -> list[str]:
    """`--listen` as given (repeatable, each comma-separated), or the default."""
    return list(args.listen or [DEFAULT_LISTEN])


def check_listeners(listen: list[str], security: dict[str, str]) -> list[str]:
    """Validates the listeners and their TLS settings before anything starts, and applies
    the fail-closed rule. Returns warnings to log; raises ValueError (a
    SecurityConfigError for the security settings) naming the listener and the setting."""
    from .gateway.listeners import parse_listener_specs, parse_protocol_map
    from .security.tls import SASL_PROTOCOLS, SSL, ListenerSecurity, check_server_ssl_names

    specs = parse_listener_specs(listen, parse_protocol_map(security.get("listener.security.protocol.map")))
    check_server_ssl_names(security, [spec.name for spec in specs])
    from .gateway.sasl import listeners_with_overrides
    from .security.settings import SecurityConfigError

    overridden = listeners_with_overrides(security)
    for spec in specs:
        if spec.name.lower() in overridden and spec.protocol not in SASL_PROTOCOLS:
            raise SecurityConfigError(f"--config listener.name.{spec.name.lower()}.sasl.*: listener {spec.name} is "
                                      f"{spec.protocol}, which does not authenticate with SASL")
    unknown = overridden - {spec.name.lower() for spec in specs}
    if unknown:
        raise SecurityConfigError(f"--config listener.name.{sorted(unknown)[0]}.sasl.*: no listener is named "
                                  f"{sorted(unknown)[0]!r} (listeners: {', '.join(s.name for s in specs)})")
    authorizer = security.get("authorizer")
    warnings = []
    for spec in specs:
        listener_security = ListenerSecurity.from_settings(spec.name, spec.protocol, security)  # reads the files
        if spec.protocol in SASL_PROTOCOLS:
            why = f"listener {spec.name} is {spec.protocol}"
        elif spec.protocol == SSL and listener_security.client_auth in ("required", "requested"):
            # `requested` too: a client that presents a certificate gets its principal, so the
            # listener authenticates (and forwarded traffic is authorized here, forward_gate_for).
            why = f"listener {spec.name} is SSL with ssl.client.auth={listener_security.client_auth}"
        else:
            continue
        if authorizer is None:
            raise FailClosed(f"{why}: clients are authenticated there, so kcoord must authorize them; "
                             "set --config authorizer=upstream|probe|file, or --config authorizer=none to "
                             "serve every group to every authenticated client")
        if authorizer == "none":
            warnings.append(f"{why} and authorizer=none: every authenticated client may use every group")
    return warnings


def split_upstream_scheme(upstream: str | None) -> tuple[str | None, str | None]:
    """`SASL_SSL://b1:9093,b2:9093` -> ("b1:9093,b2:9093", "SASL_SSL"). Each address may carry a
    scheme (as Kafka's `listeners` do); they must agree. A bare list has none."""
    if upstream is None or "://" not in upstream:
        return upstream, None
    schemes, addresses = set(), []
    for item in upstream.split(","):
        scheme, sep, address = item.strip().rpartition("://")
        if sep:
            scheme = scheme.upper()
            if scheme not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise ValueError(f"--upstream {upstream!r}: unknown protocol {scheme}; expected PLAINTEXT, SSL, "
                                 "SASL_PLAINTEXT or SASL_SSL")
            schemes.add(scheme)
        addresses.append(address)
    if len(schemes) > 1:
        raise ValueError(f"--upstream {upstream!r}: the addresses name different protocols {sorted(schemes)}")
    return ",".join(addresses), schemes.pop()


def forward_gate_for(authorizer, security: dict[str, str], listen: list[str]):
    """kcoord authorizes forwarded requests itself when a client's identity cannot reach the
    upstream: clients authenticated by certificate (mTLS), or SASL
    terminated here. With SASL passthrough the upstream sees the client's own principal and
    enforces its own ACLs, so nothing is checked here. Without an authorizer, nothing either:
    the fail-closed rule (check_listeners) made the operator choose authorizer=none."""
    if authorizer is None:
        return None
    from .gateway.listeners import parse_listener_specs, parse_protocol_map
    from .security.forward_acl import ForwardAclGate
    from .security.tls import SASL_PROTOCOLS, SSL, ListenerSecurity, listener_settings

    specs = parse_listener_specs(listen, parse_protocol_map(security.get("listener.security.protocol.map")))
    # Per listener: `listener.name.<listener>.sasl.termination` over `sasl.termination`.
    terminated = any(listener_settings(security, spec.name).get("sasl.termination", "false").strip().lower()
                     in ("1", "true", "yes", "on") for spec in specs if spec.protocol in SASL_PROTOCOLS)
    mtls = any(spec.protocol == SSL and ListenerSecurity.from_settings(spec.name, spec.protocol, security)
               .client_auth in ("required", "requested") for spec in specs)
    if (terminated or mtls) and security.get("authorizer", "").strip().lower() == "probe":
        from .security.settings import SecurityConfigError
        raise SecurityConfigError("--config authorizer=probe asks the upstream on each client's own link, which "
                                  "carries the client's identity only with SASL passthrough; with mTLS or "
                                  "sasl.termination use authorizer=upstream or file")
    return ForwardAclGate(authorizer) if terminated or mtls else None


class FailClosed(ValueError):
    """An authenticating listener without an authorizer (the fail-closed start rule)."""


DEFAULT_LISTEN = "127.0.0.1:9092"

# `kcoord serve` exits with this when its embedded broker died: a supervisor restarts both.
EXIT_EMBEDDED_BROKER_EXITED = 3
EXIT_BAD_CONFIG = 2   # a --config value kcoord refuses (named in the log)
SHUTDOWN_STEP_TIMEOUT = 10.0   # seconds; a dead upstream must not hold up the exit


async def serve(args: argparse.Namespace) -> int:
    from .security.settings import SecurityConfigError, redacted

    # Settings and listeners first: a configuration kcoord refuses stops it before anything starts.
    try:
        config, security = _configs_from_args(args)
        for warning in check_listeners(listen_values(args), security):
            log.warning("%s", warning)
        from .gateway.safeguards import Safeguards, process_rules
        Safeguards(process_rules(config), security)   # raises ValueError naming a bad safeguard
    except (SecurityConfigError, ValueError) as e:
        log.error("kcoord refuses to start: %s", e)
        print(f"kcoord: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    args.coordinator_config, args.security_settings = config, security
    if security:
        log.info("security settings: %s", redacted(security))
    # kcoord's own upstream connections (security/upstream.py): `--upstream SASL_SSL://host:port`
    # names the protocol as `upstream.security.protocol` does; the rest are `upstream.*` settings.
    try:
        args.upstream, scheme = split_upstream_scheme(args.upstream)
        if scheme is not None:
            security.setdefault("upstream.security.protocol", scheme)
        from .security.upstream import UpstreamSecurity
        args.upstream_security = UpstreamSecurity.from_settings(security) if any(
            k.startswith("upstream.") for k in security) else None
    except (SecurityConfigError, ValueError) as e:
        log.error("kcoord refuses to start: %s", e)
        print(f"kcoord: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG

    if getattr(args, "instance_id", None) and args.upstream is None:
        msg = ("--instance-id forms a kcoord cluster on a shared upstream: give --upstream (the embedded broker "
               "is this process's own)")
        log.error("kcoord refuses to start: %s", msg)
        print(f"kcoord: {msg}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    embedded = None
    upstream = args.upstream
    if upstream is None:
        embedded = _embedded_broker(args)
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


def _embedded_broker(args: argparse.Namespace):
    """The broker `kcoord serve` starts when no --upstream is given (--embedded)."""
    if getattr(args, "embedded", "tansu") == "kafka":
        from .upstream.embedded_kafka import EmbeddedKafka
        return EmbeddedKafka(data_dir=args.embedded_data_dir, log_path=args.embedded_log,
                             memory_max=args.embedded_memory_max)
    from .upstream.embedded import EmbeddedTansu
    return EmbeddedTansu(storage=args.embedded_storage, log_path=args.embedded_log,
                         memory_max=args.embedded_memory_max)


async def _serve_body(args: argparse.Namespace, upstream: str, embedded, parts: dict,
                      stop: asyncio.Event) -> int:
    from .gateway.gateway import Gateway
    from .metrics import register_group_collector
    from .runtime.state_topic import TOPIC_CONFIGS, StateTopic
    from .service import GroupCoordinatorService, SkipOffsetsError

    started = time.monotonic()
    config = getattr(args, "coordinator_config", None) or _config_from_args(args)
    security: dict[str, str] = getattr(args, "security_settings", None) or {}
    upstream_security = getattr(args, "upstream_security", None)
    state_topic = parts["state_topic"] = StateTopic(
        upstream.split(",")[0], config.state_topic, config.state_topic_partitions,
        # An embedded broker is one node: one replica, without asking it (Tansu cannot say).
        replication_factor=config.state_topic_replication_factor if embedded is None or
        config.state_topic_replication_factor > 0 else 1, max_batch_bytes=config.max_write_batch_bytes,
        security=upstream_security)
    # Several processes (coordinator/clustered.py): --instance-id joins the kcoord
    # cluster of this state topic; the shards then write through the fenced log.
    clustered = None
    state_log: Any = state_topic
    if getattr(args, "instance_id", None):
        from .clustered import ClusterProcess
        try:
            clustered = parts["cluster"] = ClusterProcess(config, args.instance_id, upstream, upstream_security)
        except ValueError as e:
            log.error("kcoord refuses to start: %s", e)
            return EXIT_BAD_CONFIG
        state_log = clustered.state_log(state_topic)
    solo = None
    if clustered is None and embedded is None and config.cluster_solo_check:
        # One process writes without fencing: it checks its state topic's membership group
        # before it loads a shard, and answers and writes only while the watch's lease holds
        # (clustered.SoloWatch): its service writes through the gated log.
        from .clustered import SoloWatch
        solo = parts["solo"] = SoloWatch(config, upstream, upstream_security)
    if state_log is state_topic:
        await state_topic.start()
    else:
        await state_topic.ensure_topic()      # created here; the fenced log writes it
        parts["fenced_log"] = state_log
        await _start_when_listed(state_log, STATE_TOPIC_WAIT_S)
    # The group placement the state topic says, before any shard loads or any group is routed.
    from .service.partitioner import decide as decide_partitioner
    partitioner = await decide_partitioner(state_topic.bootstrap, state_topic.topic, state_topic.partitions,
                                           security=upstream_security)
    # Authorization (security/acl_sources.py): None for authorizer=none or unset.
    from .authz import ALLOW_ALL
    from .security.acl_sources import build_authorizer
    from .security.audit import AuditLog
    from .security.settings import SecurityConfigError
    from .upstream.client import opener
    try:
        authorizer = build_authorizer(security, upstream, opener)
        if authorizer is not None:
            parts["authorizer"] = authorizer
            await authorizer.start()   # file: read now; upstream: the first DescribeAcls
        audit = parts["audit"] = AuditLog.from_settings(security)
    except SecurityConfigError as e:
        log.error("kcoord refuses to start: %s", e)
        return EXIT_BAD_CONFIG
    try:
        service_log = state_log if solo is None else solo.gated(state_log)
        service = parts["service"] = GroupCoordinatorService(config, service_log,
                                                             authorizer=authorizer or ALLOW_ALL, audit=audit,
                                                             partitioner=partitioner)
        from .service.partitioner import before_reload
        service.lifecycle.before_reload = before_reload(state_topic.bootstrap, state_topic.topic,
                                                        state_topic.partitions, partitioner, security=upstream_security)
    except SkipOffsetsError as e:   # an operator's setting: say which entry, no traceback
        log.error("%s", e)
        return EXIT_BAD_CONFIG
    try:
        gate = forward_gate_for(authorizer, security, listen_values(args))
    except SecurityConfigError as e:
        log.error("kcoord refuses to start: %s", e)
        return EXIT_BAD_CONFIG
    gateway = parts["gateway"] = Gateway(service, upstream, listen_values(args), config.state_topic,
                                         max_frame_size=config.socket_request_max_bytes, config=config,
                                         advertised_host=args.advertised_host,
                                         metadata_refresh_interval=config.metadata_refresh_interval_ms / 1000,
                                         security=security, upstream_security=upstream_security,
                                         forward_gate=gate)
    attach = getattr(authorizer, "attach", None)
    if attach is not None:
        attach(gateway)      # authorizer=probe asks on the clients' own upstream links
    if gate is not None:
        cluster = gateway.cluster
        gate.topic_name_of = lambda tid: (t.name if (t := cluster.image.topics_by_id.get(tid)) else None)
    await gateway.start()
    service.on_metadata_update(gateway.cluster.image)
    gateway.cluster.subscribe(service.on_metadata_update)
    service.request_metadata_refresh = gateway.cluster.request_refresh
    # From here on the cluster view watches the state topic for the service: a missing or
    # replaced topic voids the service's state, and it reloads once the topic is back.
    gateway.cluster.manage_state_topic(service, state_log if state_log is state_topic else None,
                                       config.state_topic_partitions, TOPIC_CONFIGS,
                                       recreate=not args.no_state_topic_recreate)
    if args.metrics_port:
        from prometheus_client import start_http_server

        from .group.group_admin import group_state_name
        register_group_collector(service.shards, group_state_name)
        from .runtime.txn_metrics import register_txn_collector
        register_txn_collector(service.shards)
        start_http_server(args.metrics_port, addr=args.metrics_host)
    _print_listeners(gateway, upstream, embedded, args)
    if clustered is None:
        if solo is not None:
            # Before it loads a shard (its groups answer COORDINATOR_LOAD_IN_PROGRESS
            # meanwhile), make sure no other kcoord serves this state topic, then keep
            # watching in the background; the service answers under the watch's lease.
            if not await solo.check(gateway, timeout_s=config.cluster_rebalance_timeout_ms / 1000
                                    + 2 * config.cluster_session_timeout_ms / 1000, service=service):
                return solo.exit_code or 0
        await service.start(missing_topic_wait_s=STATE_TOPIC_WAIT_S)
    else:
        await clustered.start(service, gateway, first_assignment_timeout_s=config.cluster_rebalance_timeout_ms / 1000
                              + config.cluster_session_timeout_ms / 1000)
        await _wait_owned_loaded(service, STATE_TOPIC_WAIT_S)
    failed = service.failed_partitions()
    loaded = len(service.served()) - len(failed)
    groups = sum(len(runtime.shard.groups) for runtime in service.served())
    bootstraps = ", ".join(f"{i.host}:{i.port} {i.security_protocol}" for i in gateway.listeners if i.node_id is None)
    # One line per start: the per-shard lines are DEBUG.
    print(f"kcoord ready in {time.monotonic() - started:.2f}s: {loaded} shards loaded from {config.state_topic} "
          + (f"as instance {args.instance_id} (node {clustered.node.node_id() if clustered.node else -1}, "
             f"fencing={clustered.fencing}) " if clustered is not None else "")
          + f"({groups} groups), upstream {upstream}, listening on {bootstraps}"
          + (f"; {len(failed)} shards FAILED (partition:offset "
             + ",".join(f"{p}:{o}" for p, o in sorted(failed.items())) + "; see the log)" if failed else ""),
          flush=True)
    watch = parts.get("solo")
    if clustered is None:
        if watch is None:
            await stop.wait()
            return 0
        done, pending = await asyncio.wait({asyncio.ensure_future(stop.wait()),
                                            asyncio.ensure_future(watch.stop.wait())},
                                           return_when=asyncio.FIRST_COMPLETED)
        for waiter in pending:
            waiter.cancel()
        return watch.exit_code or 0
    done, _ = await asyncio.wait({asyncio.ensure_future(stop.wait()), asyncio.ensure_future(clustered.stop.wait())},
                                 return_when=asyncio.FIRST_COMPLETED)
    for waiter in _:
        waiter.cancel()
    return clustered.exit_code or 0


async def _start_when_listed(state_log, timeout_s: float) -> None:
    """Start the fenced log once the upstream's metadata lists the state topic: one created a
    moment ago reaches the brokers' metadata a little later (UNKNOWN_TOPIC_OR_PARTITION).

    The fenced links wait for such a topic themselves, but only METADATA_WAIT_S (5 s, every
    refresh of a running log); a cluster member's start gives a topic it has just created
    ``timeout_s`` (STATE_TOPIC_WAIT_S, as the single process's ``service.start`` does), the
    bound a loaded machine needed, and also retries a start whose link failed."""
    from .runtime.fenced_state_log import StateLogError
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay = 0.05
    while True:
        try:
            await state_log.start()
            return
        except StateLogError as e:
            if loop.time() + delay > deadline:
                raise
            log.info("state topic not in the upstream's metadata yet (%s); retrying", e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


async def _wait_owned_loaded(service, timeout_s: float) -> None:
    """Wait (bounded) until the shards assigned here are loaded, for the ready line."""
    from .runtime.shard_runtime import ShardState
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline and any(service.runtimes[p].state is ShardState.LOADING
                                         for p in (service.owned or ())):
        await asyncio.sleep(0.05)


async def _shutdown(parts: dict, embedded) -> None:
    """Close what started, each step bounded; the embedded broker last (the others talk to it)."""
    steps = []
    if "cluster" in parts and "service" in parts:
        # A scale-down: finish the writes in flight, then leave the membership group so the
        # shards move now (LeaveGroup v3 by instance id), before anything else closes.
        try:
            await within(parts["cluster"].leave(parts["service"]), SHUTDOWN_STEP_TIMEOUT * 2)
        except Exception as e:
            log.warning("shutdown: leaving the kcoord cluster failed: %r", e)
    if "solo" in parts:
        steps.append(("single-process watch", parts["solo"].leave()))
    if "gateway" in parts:
        steps.append(("gateway", parts["gateway"].close()))
    if "service" in parts:
        parts["service"].close()
    if "state_topic" in parts:
        steps.append(("state topic client", parts["state_topic"].stop()))
    if "fenced_log" in parts:
        steps.append(("fenced state log", parts["fenced_log"].stop()))
    if "authorizer" in parts:
        steps.append(("authorizer", parts["authorizer"].stop()))
    if parts.get("audit") is not None:
        parts["audit"].close()
    if embedded is not None:
        steps.append(("embedded broker", embedded.stop()))
    for what, step in steps:
        try:
            await within(step, SHUTDOWN_STEP_TIMEOUT)
        except TimeoutError:
            log.warning("shutdown: closing the %s took over %.0fs; going on", what, SHUTDOWN_STEP_TIMEOUT)
        except Exception as e:
            log.warning("shutdown: closing the %s failed: %r", what, e)


def _print_listeners(gateway, upstream: str, embedded, args) -> None:
    if embedded is not None:
        print(f"kcoord gateway, upstream {upstream} (embedded {embedded.name} pid {embedded.pid}, storage "
              f"{embedded.storage_description}; broker output: {embedded.log_path})", flush=True)
    else:
        print(f"kcoord gateway, upstream {upstream}", flush=True)
    for info in gateway.listeners:
        print(f"  listener {info.describe()}", flush=True)
    if args.metrics_port:
        print(f"  metrics  http://{args.metrics_host}:{args.metrics_port}/metrics", flush=True)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record, for log pipelines (`--log-format json`)."""

    def format(self, record: logging.LogRecord) -> str:
        import orjson

        entry = {"time": _utc_iso(record.created), "level": record.levelname, "logger": record.name,
                 "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def _utc_iso(created: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(created, datetime.UTC).isoformat(timespec="milliseconds")


def configure_logging(level: str, fmt: str = "text") -> None:
    """``level``: the root's level, then any ``logger=LEVEL`` items, comma-separated
    (``INFO,kcoord.cluster=DEBUG``: one part's detail without every library's)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if fmt == "json"
                         else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    for item in filter(None, (part.strip() for part in level.split(","))):
        name, sep, value = item.rpartition("=")
        (logging.getLogger(name) if sep else root).setLevel(value.upper())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord", description="Kafka-native group coordinator gateway")
    parser.add_argument("--log-level", default="INFO",
                        help="the level, and per-logger levels: INFO,kcoord.cluster=DEBUG")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="json: one JSON object per log line (time, level, logger, message, exception)")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the gateway and the group coordinator")
    s.add_argument("--listen", action="append", default=None, metavar="[NAME://]HOST:PORT",
                   help=f"a listener, in Kafka's syntax: PLAINTEXT://, SSL://, SASL_PLAINTEXT://, SASL_SSL:// "
                        f"or a name mapped by --config listener.security.protocol.map=NAME:PROTOCOL,...; a bare "
                        f"host:port is PLAINTEXT. Repeatable or comma-separated; each listener takes its port P "
                        f"and P+1.. for the brokers (default {DEFAULT_LISTEN})")
    s.add_argument("--advertised-host", default=None,
                   help="host name clients are told (default: the listen host); NAME=host,... per listener")
    s.add_argument("--upstream", default=None,
                   help="upstream bootstrap host:port[,host:port]; default: start an embedded broker (--embedded)")
    s.add_argument("--embedded", choices=("tansu", "kafka"), default="tansu",
                   help="the broker started without --upstream: tansu (in memory, lost at exit) or kafka (Apache "
                        "Kafka, one KRaft node, data kept in --embedded-data-dir); docs/user/deploy.md compares them")
    s.add_argument("--embedded-storage", default=None, help="Tansu --storage-engine URL (default memory)")
    s.add_argument("--embedded-data-dir", default=None, metavar="DIR",
                   help="--embedded kafka: the broker's data directory, kept across restarts (default: "
                        "kcoord/kafka in the user's data directory, ~/.local/share/kcoord/kafka on Linux)")
    s.add_argument("--embedded-log", default=None,
                   help="file for the embedded broker's output (default: kcoord-tansu-PORT-PID.log in $TMPDIR; "
                        "server.log in the data directory for kafka)")
    from .upstream.memory_cap import DEFAULT_MEMORY_MAX, format_size, parse_size
    s.add_argument("--embedded-memory-max", type=parse_size, default=DEFAULT_MEMORY_MAX, metavar="SIZE",
                   help=f"memory cap of the embedded broker, e.g. 512m, 4g, none: a delegated cgroup v2 "
                        f"memory.max, else an address-space limit (Tansu) or half as JVM heap and a quarter as "
                        f"direct memory (Kafka) (default {format_size(DEFAULT_MEMORY_MAX)})")
    s.add_argument("--no-state-topic-recreate", action="store_true",
                   help="report a missing state topic but do not recreate it (kcoord stops serving groups "
                        "until an operator creates it)")
    s.add_argument("--state-topic", default="__kcoord_offsets")
    s.add_argument("--state-partitions", type=int, default=50)
    s.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics on this port")
    s.add_argument("--metrics-host", default="127.0.0.1")
    s.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="coordinator setting, e.g. group.consumer.heartbeat.interval.ms=2000 (repeatable)")
    s.add_argument("--instance-id", default=None, metavar="NAME",
                   help="join the kcoord cluster of this state topic as NAME (static membership: a restart "
                        "with the same NAME gets its shards back); needs --upstream (docs/user/cluster.md)")
    s.add_argument("--processes", type=int, default=0, metavar="N",
                   help="run N kcoord processes on this host as one cluster (instance ids "
                        "<--instance-id or kcoord>-0..N-1; process i listens on each port + i * "
                        "--port-stride); needs --upstream")
    s.add_argument("--port-stride", type=int, default=100,
                   help="with --processes: port distance between processes (default 100; it must exceed "
                        "the number of upstream brokers + 1)")
    for tool in _TOOLS:
        tool.register(sub)  # each tool adds its sub-command and sets `func` on its parser
    return parser


# Sub-commands owned by the tool packages: `register(subparsers)` adds them.
_TOOLS = (offsets_cli, groups_cli, cluster_cli, rehearse_cli)


# CPython collects its youngest generation after every 700 net allocations of container
# objects, and an older one after every 10 younger ones. A served request allocates dozens
# (the decoded message, its records, the answer) and almost none outlive it, so at the
# default the collector ran every few commits, and its older generations, which walk the
# groups and offsets kept, in proportion: 2.7 % of a durable OffsetCommit's instructions in process, and
# 79.4 -> 73.0 µs of kcoord CPU per 4-partition commit in `kcoord serve` with a tenfold
# younger threshold (bench/bench_commit_cpu.py, 7 alternating pairs, lower in every pair).
# The cost: the young generation holds up to 7,000 container objects, some 1 MB, before a
# cycle among them is freed. The older generations keep CPython's ratios.
GC_YOUNG_THRESHOLD = 7_000


def tune_gc() -> None:
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        configure_logging(args.log_level, args.log_format)
    except ValueError as e:      # logging's own words: "Unknown level: 'LOUD'"
        parser.error(f"--log-level {args.log_level}: {e}")
    try:
        import uvloop
        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    if args.command == "serve":
        if args.processes:
            from .supervisor import run_processes
            return run_processes(args, sys.argv[1:] if argv is None else list(argv), DEFAULT_LISTEN)
        tune_gc()
        return asyncio.run(serve(args))
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
