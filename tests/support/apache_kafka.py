"""A real Apache Kafka 4.x broker (KRaft, one node) in Docker via testcontainers.

Only where a Docker engine answers; elsewhere `docker_available()` is False and the
tests that need it skip cleanly (environment.md §8: the constructor raises at once).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from . import ports

IMAGE = "apache/kafka:4.1.0"


def docker_available() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


@dataclass
class ApacheKafka:
    container: object
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.container.stop()


def start_apache_kafka(timeout: float = 120.0) -> ApacheKafka:
    from confluent_kafka.admin import AdminClient
    from testcontainers.core.container import DockerContainer

    port = ports.free_port()
    container = (DockerContainer(IMAGE)
                 .with_bind_ports(9092, port)
                 .with_env("KAFKA_NODE_ID", "1")
                 .with_env("KAFKA_PROCESS_ROLES", "broker,controller")
                 .with_env("KAFKA_LISTENERS", "PLAINTEXT://:9092,CONTROLLER://:9093")
                 .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
                 .with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
                 .with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT")
                 .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093")
                 .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
                 .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
                 .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
                 .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"))
    container.start()
    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    while True:
        try:
            admin.list_topics(timeout=2)
            return ApacheKafka(container, port)
        except Exception:
            if time.monotonic() > deadline:
                container.stop()
                raise
            time.sleep(1)
