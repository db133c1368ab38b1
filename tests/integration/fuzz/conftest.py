"""One fuzz target per test: a `kcoord serve` of its own, watched during the run
(fuzz/health.py), in front of

- ``fuzzer_for``: a Tansu of its own, under an address-space cap (a broker that tries to
  take the machine's memory aborts instead);
- ``kafka_fuzzer_for``: the worker's Apache Kafka 4.4 (the session's ``kafka44``, -Xmx512m;
  a JVM gets no address-space cap, its heap is the bound). The broker is shared with the
  other tests of the worker, so every topic the run created is deleted afterwards and the
  broker must still answer; kcoord's state topic is the run's own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fuzz.health import KAFKA_RSS_LIMIT_MB, TANSU_RSS_LIMIT_MB, UpstreamWatch, answers_api_versions, cap_address_space
from fuzz.live import FUZZ_CONFIG, LiveFuzzer, run
from support.kcoord import FAST, KcoordProcess

RSS_LIMIT_MB = 400          # kcoord idles at ~70 MB; the fuzz run's groups and members add some
TANSU_CAP = 2 * 1024**3
TOPIC_CLEANUP_S = 60.0


def _fuzzer_factory(kcoord: KcoordProcess, state_topic: str,
                    watch: Callable[[], UpstreamWatch]) -> Callable[..., LiveFuzzer]:
    def make(**options) -> LiveFuzzer:
        host, port = kcoord.bootstrap.split(":")
        return LiveFuzzer(host, int(port), kcoord.process.pid, kcoord.log_path, state_topic=state_topic,
                          rss_limit_mb=RSS_LIMIT_MB, upstream=watch(), **options)
    return make


@pytest.fixture
def fuzzer_for(fresh_tansu, names) -> Iterator[Callable[..., LiveFuzzer]]:
    """``fuzzer_for(seed=…, mode=…)``: a LiveFuzzer aimed at a fresh kcoord and Tansu."""
    state_topic = names.topic("fuzz-state")
    kcoord = KcoordProcess(fresh_tansu.bootstrap, state_topic, state_partitions=4,
                           config=FAST + FUZZ_CONFIG).start()
    cap_address_space(fresh_tansu.process.pid, TANSU_CAP)

    def tansu() -> UpstreamWatch:
        return UpstreamWatch("Tansu", fresh_tansu.host, fresh_tansu.port, fresh_tansu.process.pid,
                             rss_limit_mb=TANSU_RSS_LIMIT_MB)
    try:
        yield _fuzzer_factory(kcoord, state_topic, tansu)
        assert kcoord.process.poll() is None, "kcoord exited during the run"
        assert fresh_tansu.is_running(), "Tansu exited during the run"
    finally:
        kcoord.stop()


def _topics(admin) -> set[str]:
    return set(admin.list_topics(timeout=30).topics)


def _delete(admin, topics: list[str]) -> None:
    """Delete ``topics``; one already gone (the run deleted it as we listed) is fine."""
    from confluent_kafka import KafkaError, KafkaException

    if not topics:
        return
    for topic, future in admin.delete_topics(topics, operation_timeout=TOPIC_CLEANUP_S).items():
        try:
            future.result(TOPIC_CLEANUP_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise AssertionError(f"deleting the run's topic {topic!r} failed: {exc}") from exc


@pytest.fixture
def kafka_fuzzer_for(kafka44, names) -> Iterator[Callable[..., LiveFuzzer]]:
    """``kafka_fuzzer_for(seed=…, mode=…)``: a LiveFuzzer aimed at a fresh kcoord in front of
    the worker's Kafka 4.4; the topics the run created are deleted afterwards."""
    from confluent_kafka.admin import AdminClient

    node = kafka44.nodes[0]
    admin = AdminClient(kafka44.client_config())
    before = _topics(admin)
    state_topic = names.topic("fuzz-state")
    kcoord = KcoordProcess(kafka44.bootstrap, state_topic, state_partitions=4, config=FAST + FUZZ_CONFIG).start()

    def kafka() -> UpstreamWatch:
        return UpstreamWatch(f"Kafka {kafka44.version} (-Xmx512m)", kafka44.host, node.port, node.process.pid,
                             rss_limit_mb=KAFKA_RSS_LIMIT_MB, timeout_s=10)
    try:
        yield _fuzzer_factory(kcoord, state_topic, kafka)
        assert kcoord.process.poll() is None, "kcoord exited during the run"
        assert node.is_running(), f"Kafka exited during the run; log tail:\n{node.log_tail()}"
    finally:
        kcoord.stop()
        if node.is_running():
            _delete(admin, sorted(_topics(admin) - before))
            assert run(answers_api_versions(kafka44.host, node.port, 10.0)) is None, \
                "Kafka does not answer ApiVersions after the run's topics were deleted"

