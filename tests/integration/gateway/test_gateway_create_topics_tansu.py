"""Two CreateTopics that Tansu 0.6 mishandles, through a real gateway in front of a real
Tansu (fuzz/README.md, Findings): kcoord answers them itself and Tansu keeps serving.

- A topic deleted behind kcoord's metadata view (here: at the upstream directly, so the
  view cannot know until its next refresh, set to an hour) and recreated with an absurd
  count beside its assignments: Tansu 0.6 would create it with 2**31 - 1 partitions and
  abort allocating for its next Metadata answer. kcoord answers Kafka's
  TOPIC_ALREADY_EXISTS while its view knows the topic, and Kafka's rule once it does not.
- validate_only: Tansu creates what it is asked to validate; kcoord answers the validation.
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from gateway_helpers import STATE_TOPIC, LoopThread, RunningGateway, free_ports, start_gateway
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.protocol import apis
from support.names import TestNames
from support.raw_client import call, create_topics_request, partition_count, request_types
from support.tansu import TansuBroker, start_tansu
from support.wait import wait_until


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = start_tansu(free_ports(1), log_dir=tmp_path_factory.mktemp("create-topics-tansu"))
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def slow_view(gw_loop: LoopThread, tansu: TansuBroker) -> Iterator[RunningGateway]:
    """A gateway whose metadata view refreshes only when a forwarded admin answer asks it to."""
    running = start_gateway(gw_loop, tansu.bootstrap, config=CoordinatorConfig(state_topic=STATE_TOPIC),
                            metadata_refresh_interval=3600.0)
    yield running
    running.close()


def _knows(gateway: RunningGateway, topic: str) -> bool:
    return topic in gateway.gateway.cluster.image.topics_by_name


def test_a_topic_deleted_behind_the_view_is_not_recreated_with_an_absurd_count(
        slow_view: RunningGateway, tansu: TansuBroker, names: TestNames) -> None:
    topic = names.topic()
    created = call(slow_view.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(topic, 1, 1)]))
    assert created.topics[0].error_code == ErrorCode.none
    wait_until(lambda: _knows(slow_view, topic), 30, message=f"{topic} in kcoord's view")
    d = request_types(apis.DELETE_TOPICS, 5)
    deleted = call(tansu.bootstrap, apis.DELETE_TOPICS, 5, d.DeleteTopicsRequest(
        topic_names=(topic,), timeout=timedelta(seconds=10)))
    assert deleted.responses[0].error_code == ErrorCode.none
    m = request_types(apis.CREATE_TOPICS, 7)
    absurd = m.CreateTopicsRequest(timeout=timedelta(seconds=10), validate_only=False, topics=(m.CreatableTopic(
        name=topic, num_partitions=2**31 - 1, replication_factor=-1, configs=(),
        assignments=(m.CreatableReplicaAssignment(partition_index=0, broker_ids=tuple(
            slow_view.gateway.cluster.brokers)),)),))
    assert _knows(slow_view, topic)      # the view still holds the deleted topic
    answer = call(slow_view.bootstrap, apis.CREATE_TOPICS, 7, absurd)
    assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
        (topic, ErrorCode.topic_already_exists, f"Topic '{topic}' already exists.")]
    slow_view.loop.run(slow_view.gateway.cluster.refresh())
    assert not _knows(slow_view, topic)
    answer = call(slow_view.bootstrap, apis.CREATE_TOPICS, 7, absurd)
    assert [(t.name, t.error_code) for t in answer.topics] == [(topic, ErrorCode.invalid_request)]
    # Nothing reached Tansu: it answers Metadata, without the topic.
    assert tansu.is_running()
    assert partition_count(tansu.bootstrap, topic) == 0


def test_validate_only_is_answered_here_and_creates_nothing(slow_view: RunningGateway, tansu: TansuBroker,
                                                            names: TestNames) -> None:
    new, wide = names.topic(), names.topic()
    m = request_types(apis.CREATE_TOPICS, 7)
    request = m.CreateTopicsRequest(timeout=timedelta(seconds=10), validate_only=True, topics=(
        m.CreatableTopic(name=new, num_partitions=7_000, replication_factor=1, assignments=(),
                         configs=(m.CreatableTopicConfig(name="retention.ms", value="60000"),)),
        m.CreatableTopic(name=wide, num_partitions=1, replication_factor=99, assignments=(), configs=())))
    answer = call(slow_view.bootstrap, apis.CREATE_TOPICS, 7, request)
    results = {t.name: t for t in answer.topics}
    assert (results[new].error_code, results[new].num_partitions, results[new].replication_factor) == (
        ErrorCode.none, 7_000, 1)
    assert [(c.name, c.value) for c in results[new].configs] == [("retention.ms", "60000")]
    assert results[wide].error_code == ErrorCode.invalid_replication_factor
    # The same request made for real creates the topic: the validation did not.
    assert partition_count(tansu.bootstrap, new) == 0
    real = call(slow_view.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(new, 2, 1)]))
    assert [(t.name, t.error_code) for t in real.topics] == [(new, ErrorCode.none)]
    wait_until(lambda: partition_count(tansu.bootstrap, new) == 2, 30, message=f"{new} in Tansu's Metadata")
