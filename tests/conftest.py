"""Shared fixtures: real Tansu brokers, real Apache Kafka clusters (4.4 one and three nodes, 4.3, 3.9;
support.kafka_broker), unique names, an ownership ledger, driver cleanup.

Integration tests that use ``upstream`` run against Tansu and Kafka 4.4, the ``kafka_subset``
also against Kafka 4.4 on three nodes, Kafka 4.4 and Kafka 3.9 (support.upstreams; KCOORD_UPSTREAMS narrows).

tests/ is put on sys.path so the harness imports as ``support`` from any test directory.
Integration tests (anything under tests/integration) get the ``integration`` marker and
a per-test timeout (KCOORD_INTEGRATION_TIMEOUT, default 120 s) unless they set their own.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from support import durations, ports  # noqa: E402
from support.names import TestNames  # noqa: E402
from support.ownership import OwnershipLedger  # noqa: E402
from support.tansu import TansuBroker, start_tansu  # noqa: E402

if TYPE_CHECKING:
    from support.kcoord import KcoordProcess

ports.narrow_for_xdist_worker()   # before any fixture hands out a port
INTEGRATION_TIMEOUT = float(os.environ.get("KCOORD_INTEGRATION_TIMEOUT", "120"))


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0 loads its protocol schemas with importlib.resources' legacy API.
    for text in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{text}:DeprecationWarning")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Integration tests using ``upstream`` run against Tansu and real Kafka (support.upstreams)."""
    if (TESTS_DIR / "integration") in Path(str(metafunc.definition.path)).resolve().parents:
        from support import upstreams

        upstreams.parametrize(metafunc)


# Suites whose assertions are timing budgets under CPU load (a 50-member churn, rebalance
# latency bounds): scripts/test runs them after the parallel run, alone on the machine.
SERIAL_DIRS = (TESTS_DIR / "integration" / "rebalance",)


# tryfirst: the markers must be on the items before `-m "not serial"` / `-m serial` deselects
# (the mark plugin's own modifyitems); ordering first is fine, deselection keeps the order.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    integration_dir = TESTS_DIR / "integration"
    for item in items:
        if any(d in Path(item.path).resolve().parents for d in SERIAL_DIRS):
            item.add_marker(pytest.mark.serial)
        if integration_dir in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(INTEGRATION_TIMEOUT))
    durations.longest_files_first(items)


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """One Tansu broker for the whole session; use unique topic/group names (``names``)."""
    broker = start_tansu(log_dir=tmp_path_factory.mktemp("tansu"))
    yield broker
    broker.stop()


@pytest.fixture
def fresh_tansu(tmp_path: Path) -> Iterator[TansuBroker]:
    """A broker of this test's own (memory storage: empty, and gone after the test)."""
    broker = start_tansu(log_dir=tmp_path)
    yield broker
    broker.stop()


@pytest.fixture
def names(request: pytest.FixtureRequest) -> TestNames:
    """``names.topic()`` / ``names.group()``: unique per call, readable per test."""
    return TestNames(request.node.name)


@pytest.fixture
def ledger() -> OwnershipLedger:
    return OwnershipLedger()


class Drivers:
    """Consumer drivers started by one test; every one is shut down at teardown."""

    def __init__(self) -> None:
        self._started: list[object] = []

    def add(self, driver):  # type: ignore[no-untyped-def]
        self._started.append(driver)
        return driver

    def shutdown_all(self) -> None:
        errors = []
        for driver in reversed(self._started):
            try:
                driver.shutdown()  # type: ignore[attr-defined]
            except Exception as exc:  # keep tearing down the rest
                errors.append(f"{driver!r}: {exc!r}")
        if errors:
            raise RuntimeError("driver teardown failed:\n" + "\n".join(errors))


@pytest.fixture
def drivers() -> Iterator[Drivers]:
    """Register before starting, ``drivers.add(RdkafkaConsumer(...)).start()``, for guaranteed cleanup."""
    registry = Drivers()
    yield registry
    registry.shutdown_all()


@pytest.fixture(scope="session")
def java_classes() -> Path:
    """Java jars fetched (lazily) and the drivers compiled; skips if no JDK is on PATH."""
    from support.java import compiled_classes, ensure_java_jars, java_available

    if not java_available():
        pytest.skip("java/javac not on PATH (a JDK >= 17 is needed for the Java client tests)")
    return compiled_classes(ensure_java_jars())


@pytest.fixture
def upstream(request: pytest.FixtureRequest):
    """The cluster kcoord runs next to: Tansu unless parametrized (support.upstreams: integration
    tests run against Tansu and Kafka 4.4, the ``kafka_subset`` also against 3 nodes, 4.3 and 3.9)."""
    from support.upstreams import cluster

    return cluster(request)


# --- real Apache Kafka (support.kafka_broker): one cluster per kind for the session, started
# only when a test asks for it. Jars from Maven Central (scripts/fetch_kafka.py, cached).
KAFKA_STARTED: list = []


def _start_kafka_or_skip(tmp_path_factory: pytest.TempPathFactory, version: str, nodes: int, name: str):
    import shutil

    from support.kafka_broker import start_kafka

    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    cluster = start_kafka(version, tmp_path_factory.mktemp(name), nodes=nodes)
    KAFKA_STARTED.append((name, cluster))
    return cluster


@pytest.fixture(scope="session")
def kafka44(tmp_path_factory: pytest.TempPathFactory):
    """Apache Kafka 4.4 (the reference), one combined KRaft node."""
    from support.kafka_broker import KAFKA_44

    cluster = _start_kafka_or_skip(tmp_path_factory, KAFKA_44, 1, "kafka44")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kafka44_3node(tmp_path_factory: pytest.TempPathFactory):
    """Apache Kafka 4.4, three combined KRaft nodes (3-voter quorum)."""
    from support.kafka_broker import KAFKA_44

    cluster = _start_kafka_or_skip(tmp_path_factory, KAFKA_44, 3, "kafka44-3node")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kafka43(tmp_path_factory: pytest.TempPathFactory):
    """Apache Kafka 4.4 (the previous line, for the marked subset), one combined KRaft node."""
    from support.kafka_broker import KAFKA_43

    cluster = _start_kafka_or_skip(tmp_path_factory, KAFKA_43, 1, "kafka43")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kafka39(tmp_path_factory: pytest.TempPathFactory):
    """Apache Kafka 3.9 with its defaults (no KIP-848 on the broker), one combined KRaft node."""
    from support.kafka_broker import KAFKA_39

    cluster = _start_kafka_or_skip(tmp_path_factory, KAFKA_39, 1, "kafka39")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kafka_docker():
    """Apache Kafka 4.x in Docker (testcontainers); skips where no Docker engine answers."""
    from support.apache_kafka import docker_available, start_apache_kafka

    if not docker_available():
        pytest.skip("no Docker engine: the Apache Kafka (testcontainers) variant runs where Docker exists")
    broker = start_apache_kafka()
    yield broker
    broker.stop()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for name, cluster in KAFKA_STARTED:
        terminalreporter.write_line(f"{name}: {cluster} started in {cluster.start_seconds:.1f}s")
    for line in RECORDER.summary():
        terminalreporter.write_line(line)


RECORDER = durations.Recorder()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    RECORDER.add(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    RECORDER.write()


@pytest.fixture
def kcoord(upstream, names: TestNames) -> Iterator[KcoordProcess]:
    """A real `kcoord serve` process in front of ``upstream``, with its own state topic."""
    from support.kcoord import KcoordProcess, serving

    yield from serving(KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}"))
