"""A real Apache Kafka broker (KRaft, combined broker+controller) from Maven Central jars, no Docker.

    cluster = start_kafka("4.3.1", work_dir=tmp, nodes=1)     # or nodes=3, sasl=True, tls=True, ...
    cluster.bootstrap, cluster.client_config(), cluster.stop()

The jars come from scripts/fetch_kafka.py (``<repo>/.cache/kafka/<version>/libs``, env
KCOORD_KAFKA_CACHE), fetched on first use. Each node runs ``java -Xmx… -cp 'libs/*'``:
``kafka.tools.StorageTool format -t <cluster-id> -c server.properties`` (``--add-scram`` for the
SCRAM users when SASL is on), then ``kafka.Kafka server.properties``. The cluster is ready when
a Metadata round trip (ApiVersions first, as every client does) lists every node. A node that
exits or does not become ready fails the start with its log tail. Logs (stdout+stderr of the
JVM, Log4j to the console) stay in ``work_dir/node-<id>/server.log``.

Listeners per node, all on 127.0.0.1: CLIENT (PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL, what
tests connect to), INTERNAL (PLAINTEXT, broker to broker) and CONTROLLER (PLAINTEXT, KRaft).
The quorum is static (``controller.quorum.voters``): 1 voter on one node, 3 on three, which
both 3.9 and 4.x accept.

The settings that differ from Kafka's defaults are SETTINGS, ONE_NODE_SETTINGS and
THREE_NODE_SETTINGS below, each with its reason; they are the fixture's spec (README, Testing).
"""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from coordinator.upstream.embedded_kafka import LOG4J2, new_cluster_id  # the embedded broker's, shared

from . import ports, processes

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("kcoord.tests.kafka")

# Every broker setting the fixture changes from Kafka's default, and why. Kafka 3.9 gets the
# same values (the older line "with its defaults" otherwise: KIP-848 stays off there).
SETTINGS: dict[str, str] = {
    # KIP-848 bounds (defaults 45000 / 5000): lowered so a test can set short per-group
    # `consumer.session.timeout.ms` / `consumer.heartbeat.interval.ms` (IncrementalAlterConfigs
    # on a GROUP resource) to match kcoord's FAST settings; the group defaults stay Kafka's.
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    # Streams (KIP-1071) bounds (defaults 45000 / 5000), lowered for the same reason: the
    # streams application tests set 6 s sessions and 500 ms heartbeats per group
    # (support/streams_deployment.py); the group defaults stay Kafka's.
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "500",
    # Classic bounds (default 6000): the drivers' classic members use 2000-6000 ms sessions.
    "group.min.session.timeout.ms": "1000",
    # Classic groups formed straight on Kafka (default 3000): a test's members start together,
    # the 3 s wait would only slow it. kcoord keeps its own (Kafka's) default.
    "group.initial.rebalance.delay.ms": "0",
    # Transactions left open by a killed producer are aborted within ~1 s (default 10000).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    # __consumer_offsets partitions (default 50): created on the first FindCoordinator; 50
    # partitions on one 512 MiB node take seconds and memory for nothing in a test.
    "offsets.topic.num.partitions": "5",
    # The log cleaner (compaction): look for dirty logs every 500 ms (default 15000) with a
    # 16 MiB dedupe buffer (default 128 MiB, which would take a quarter of the heap). The
    # compaction test lowers segment.ms / min.cleanable.dirty.ratio on its topic itself.
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.dedupe.buffer.size": "16777216",
    # Test loads are small: fewer network/request threads keep a node light on 2 cores
    # (defaults 3 network, 8 io threads).
    "num.network.threads": "2",
    "num.io.threads": "4",
    # No auto-created topics (default true): tests create what they use, as on Tansu.
    "auto.create.topics.enable": "false",
}

ONE_NODE_SETTINGS: dict[str, str] = {
    # One node: the internal topics can have one replica (defaults 3 / 3 / 2).
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    # Share-group state topic (4.x; ignored with a warning by 3.9): defaults 3 / 2.
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

THREE_NODE_SETTINGS: dict[str, str] = {
    # Topics created with replication factor -1 (kcoord's state topic) get all three replicas
    # (default 1), so the state topic is replicated as in production. Internal topics keep
    # Kafka's defaults (3 replicas, min.isr 2).
    "default.replication.factor": "3",
}

SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"      # super user
USER, USER_PASSWORD = "alice", "alice-secret"             # a plain user, for ACL tests

LOG4J1 = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
"""


# JVM flags: C1 only (TieredStopAtLevel=1) spends less CPU compiling at start and leaves the
# 2 cores to the clients under test; test loads are small, C2's peak speed is not needed.
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
ENV_JVM_OPTS = "KCOORD_KAFKA_JVM_OPTS"      # extra JVM flags (appended)


class KafkaStartError(RuntimeError):
    pass


def _fetch_kafka():
    """scripts/fetch_kafka.py as a module (the versions and the Maven fetch live there)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import fetch_kafka
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return fetch_kafka


KAFKA_44 = _fetch_kafka().KAFKA_44    # the reference line (4.4.0)
KAFKA_43 = _fetch_kafka().KAFKA_43    # the previous line (4.3.1), for a marked subset
KAFKA_39 = _fetch_kafka().KAFKA_39    # the older line, no KIP-848 on the broker (3.9.1)


def libs_dir(version: str) -> Path:
    """The jars of ``version``, fetched (Maven) first if the cache lacks them."""
    return _fetch_kafka().fetch(version)


@dataclass
class KafkaNode:
    node_id: int
    port: int
    internal_port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class KafkaCluster:
    version: str
    nodes: list[KafkaNode]
    cluster_id: str
    sasl: bool = False
    tls: bool = False
    authorizer: bool = False
    ca_path: Path | None = None
    start_seconds: float = 0.0

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        """The first node's CLIENT port (TansuBroker has ``port`` too)."""
        return self.nodes[0].port

    @property
    def security_protocol(self) -> str:
        return {(False, False): "PLAINTEXT", (True, False): "SASL_PLAINTEXT",
                (False, True): "SSL", (True, True): "SASL_SSL"}[(self.sasl, self.tls)]

    def client_config(self, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict[str, str]:
        """confluent-kafka settings to reach the CLIENT listener as ``user``."""
        conf = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol}
        if self.sasl:
            conf.update({"sasl.mechanism": SCRAM_MECHANISM, "sasl.username": user, "sasl.password": password})
        if self.tls:
            conf["ssl.ca.location"] = str(self.ca_path)
        return conf

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.log_path}) ---\n{n.log_tail(lines)}" for n in self.nodes)

    def __str__(self) -> str:
        return f"Kafka {self.version} x{len(self.nodes)} at {self.bootstrap}"

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every node at once (a lone survivor would wait for a lost quorum), then
        SIGKILL whatever still runs after ``timeout``."""
        for node in self.nodes:
            if node.is_running():
                node.process.terminate()
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.process is not None:
                processes.stop(node.process, max(0.1, deadline - time.monotonic()))
            for port in (node.port, node.internal_port, node.controller_port):
                ports.release(port)

    def kill_node(self, node_id: int) -> int:
        node = next(n for n in self.nodes if n.node_id == node_id)
        return processes.kill(node.process)

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _java_command(version: str, libs: Path, node_dir: Path, heap: str) -> list[str]:
    major = int(version.split(".")[0])
    if major >= 4:
        (node_dir / "log4j2.properties").write_text(LOG4J2)
        logging_flag = f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}"
    else:
        (node_dir / "log4j.properties").write_text(LOG4J1)
        logging_flag = f"-Dlog4j.configuration=file:{node_dir / 'log4j.properties'}"
    return ["java", f"-Xmx{heap}", "-Xms128m", *JVM_FLAGS, *os.environ.get(ENV_JVM_OPTS, "").split(),
            "-Djava.awt.headless=true", f"-Dkafka.logs.dir={node_dir}", logging_flag,
            "-cp", f"{libs}/*"]


def _properties(node: KafkaNode, nodes: list[KafkaNode], *, sasl: bool, tls: bool, authorizer: bool,
                overrides: dict[str, str], tls_files: dict[str, Path]) -> dict[str, str]:
    client_protocol = {(False, False): "PLAINTEXT", (True, False): "SASL_PLAINTEXT",
                       (False, True): "SSL", (True, True): "SASL_SSL"}[(sasl, tls)]
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "listeners": (f"CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{node.internal_port},"
                      f"CONTROLLER://127.0.0.1:{node.controller_port}"),
        "advertised.listeners": f"CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{node.internal_port}",
        "listener.security.protocol.map": f"CLIENT:{client_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes),
        "log.dirs": str(node.directory / "data"),
        **SETTINGS,
        **(ONE_NODE_SETTINGS if len(nodes) == 1 else THREE_NODE_SETTINGS),
    }
    if sasl:
        props["sasl.enabled.mechanisms"] = SCRAM_MECHANISM
        props[f"listener.name.client.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = \
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    if tls:
        props.update({
            "listener.name.client.ssl.keystore.type": "PEM",
            "listener.name.client.ssl.keystore.location": str(tls_files["keystore"]),
            "listener.name.client.ssl.truststore.type": "PEM",
            "listener.name.client.ssl.truststore.location": str(tls_files["ca"]),
        })
    if authorizer:
        # Brokers and controllers talk PLAINTEXT on INTERNAL/CONTROLLER as ANONYMOUS, so
        # ANONYMOUS is a super user; CLIENT should then require SASL for ACLs to mean anything.
        props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        props["super.users"] = f"User:ANONYMOUS;User:{ADMIN_USER}"
        props["allow.everyone.if.no.acl.found"] = "false"
    props.update(overrides)
    return props


def _write_properties(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class _Readiness:
    """Ready once every CLIENT port accepts and a Metadata round trip (ApiVersions first, as
    every client does) through the CLIENT listener lists every node."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.admin = None
        self.last_error = ""

    def __call__(self) -> bool:
        if not all(_accepts(n.port) for n in self.cluster.nodes):
            self.last_error = "a CLIENT port does not accept connections yet"
            return False
        if self.admin is None:
            from confluent_kafka.admin import AdminClient

            quiet = logging.getLogger("kcoord.tests.kafka.readiness")
            quiet.propagate = False
            quiet.addHandler(logging.NullHandler())
            self.admin = AdminClient({**self.cluster.client_config(), "logger": quiet})
        try:
            brokers = self.admin.list_topics(timeout=2).brokers
        except Exception as exc:
            self.last_error = f"Metadata failed: {exc}"
            return False
        missing = {n.node_id for n in self.cluster.nodes} - set(brokers)
        self.last_error = f"Metadata lists brokers {sorted(brokers)}, not yet {sorted(missing)}"
        return not missing


def start_kafka(version: str, work_dir: Path, *, nodes: int = 1, heap: str | None = None,
                sasl: bool = False, tls: bool = False, authorizer: bool = False,
                overrides: dict[str, str] | None = None, ready_timeout: float = 120.0) -> KafkaCluster:
    """Format and start ``nodes`` combined KRaft nodes of Kafka ``version``; return when ready."""
    started = time.monotonic()
    libs = libs_dir(version)
    heap = heap or ("512m" if nodes == 1 else "384m")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    members = []
    for node_id in range(1, nodes + 1):
        directory = work_dir / f"node-{node_id}"
        directory.mkdir(exist_ok=True)
        members.append(KafkaNode(node_id, ports.free_port(), ports.free_port(), ports.free_port(), directory))
    tls_files = _tls_files(work_dir) if tls else {}
    cluster = KafkaCluster(version, members, new_cluster_id(), sasl=sasl, tls=tls, authorizer=authorizer,
                           ca_path=tls_files.get("ca"))
    try:
        _format_and_launch(cluster, libs, heap, overrides or {}, tls_files)
        deadline = time.monotonic() + ready_timeout
        ready = _Readiness(cluster)
        while not ready():
            dead = [n for n in cluster.nodes if not n.is_running()]
            if dead:
                raise KafkaStartError(
                    f"{cluster}: node {dead[0].node_id} exited with {dead[0].process.returncode} "
                    f"before the cluster was ready; log tail:\n{dead[0].log_tail()}")
            if time.monotonic() > deadline:
                raise KafkaStartError(f"{cluster}: not ready after {ready_timeout:.0f}s ({ready.last_error}); "
                                      f"log tails:\n{cluster.log_tails()}")
            time.sleep(0.1)
    except BaseException:
        cluster.stop(timeout=5)
        raise
    cluster.start_seconds = time.monotonic() - started
    message = f"{cluster} ready in {cluster.start_seconds:.1f}s (logs in {work_dir})"
    log.info(message)
    print(message, file=sys.stderr)
    return cluster


def _format_and_launch(cluster: KafkaCluster, libs: Path, heap: str, overrides: dict[str, str],
                       tls_files: dict[str, Path]) -> None:
    formats = []
    for node in cluster.nodes:
        config = node.directory / "server.properties"
        _write_properties(config, _properties(node, cluster.nodes, sasl=cluster.sasl, tls=cluster.tls,
                                              authorizer=cluster.authorizer, overrides=overrides,
                                              tls_files=tls_files))
        java = _java_command(cluster.version, libs, node.directory, heap="256m")
        scram = []
        if cluster.sasl:
            for user, password in ((ADMIN_USER, ADMIN_PASSWORD), (USER, USER_PASSWORD)):
                scram += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
        with open(node.directory / "format.log", "wb") as out:     # the nodes format side by side
            formats.append((node, subprocess.Popen(
                [*java, "kafka.tools.StorageTool", "format", "-t", cluster.cluster_id, "-c", str(config), *scram],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)))
    for node, proc in formats:
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for node, proc in formats:
        if proc.returncode != 0:
            text = (node.directory / "format.log").read_text(errors="replace")
            raise KafkaStartError(f"{cluster}: StorageTool format of node {node.node_id} failed "
                                  f"({proc.returncode}):\n{text[-3000:]}")
    for node in cluster.nodes:
        java = _java_command(cluster.version, libs, node.directory, heap)
        with open(node.log_path, "wb") as out:
            node.process = processes.track(subprocess.Popen(
                [*java, "kafka.Kafka", str(node.directory / "server.properties")],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=node.directory,
                env={**os.environ, "KAFKA_HEAP_OPTS": ""}, preexec_fn=processes.orphan_guard()))


def _tls_files(work_dir: Path) -> dict[str, Path]:
    """A throwaway CA and a 127.0.0.1/localhost server certificate (PEM), made with cryptography."""
    from .kafka_tls import write_ca_and_server_pem

    return write_ca_and_server_pem(work_dir / "tls")

