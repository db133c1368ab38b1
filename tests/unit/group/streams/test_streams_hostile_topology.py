"""Hostile topologies against the pure core's configuration (group/streams/topology.py): the
repartition partition counts decided in work linear in the topology, with the decisions the
pass-by-pass fix point makes (Kafka's `RepartitionTopics`, in kcoord's name order)."""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping

import pytest

from coordinator.group.image import MetadataImage
from coordinator.group.streams.model import Subtopology, TopicInfo, Topology
from coordinator.group.streams.topology import (
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    TopicConfigurationError,
    _decide_partition_counts,
    configure,
)

from .driver import image


class CountingTopics(Mapping):
    """The image's topics by name, counting every lookup the configuration makes."""

    def __init__(self, topics: Mapping) -> None:
        self.topics, self.lookups = dict(topics), 0

    def __getitem__(self, name):
        self.lookups += 1
        return self.topics[name]

    def __contains__(self, name) -> bool:
        self.lookups += 1
        return name in self.topics

    def get(self, name, default=None):
        self.lookups += 1
        return self.topics.get(name, default)

    def __iter__(self) -> Iterator:
        return iter(self.topics)

    def __len__(self) -> int:
        return len(self.topics)


def chain(n: int) -> Topology:
    """input -> r{n-1} -> ... -> r0: each repartition topic written by the subtopology that
    reads the one after it in name order, so each pass in name order decides one of them."""
    subs = [Subtopology("head", source_topics=("input",), repartition_sink_topics=(f"r{n - 1:06d}",))]
    subs += [Subtopology(f"s{i:06d}", repartition_source_topics=(TopicInfo(f"r{i:06d}"),),
                         repartition_sink_topics=(f"r{i - 1:06d}",)) for i in range(n - 1, 0, -1)]
    subs.append(Subtopology("tail", repartition_source_topics=(TopicInfo("r000000"),)))
    return Topology.of(1, subs)


def test_a_chain_of_thousands_of_repartition_topics_costs_lookups_linear_in_its_length():
    """Passes in name order decided one link per pass: n^2/2 lookups (4.5 million for 3,000
    links, 5 s of the event loop for 2,000 in one heartbeat, and a frame may be 100 MB)."""
    n = 3_000
    counting = CountingTopics(image(input=4).topics_by_name)
    img = dataclasses.replace(image(input=4), topics_by_name=counting)
    configured = configure(chain(n), img, 0)
    assert configured.status is not None and configured.status[0] == MISSING_INTERNAL_TOPICS
    assert configured.to_create == {f"r{i:06d}": 4 for i in range(n)}
    assert configured.task_counts is not None and set(configured.task_counts.values()) == {4}
    assert counting.lookups <= 20 * n, counting.lookups


def test_thousands_of_subtopologies_reading_thousands_of_source_topics_configure_once_each():
    n = 2_000
    topics = {f"in{i}": 1 + i % 7 for i in range(n)}
    counting = CountingTopics(image(**topics).topics_by_name)
    img = dataclasses.replace(image(**topics), topics_by_name=counting)
    subs = [Subtopology(f"s{i}", source_topics=tuple(f"in{j}" for j in range(i % 50, n, 50)),
                        repartition_sink_topics=(f"rep{i % 10}",)) for i in range(n)]
    subs += [Subtopology(f"t{k}", repartition_source_topics=(TopicInfo(f"rep{k}"),))
             for k in range(10)]
    configured = configure(Topology.of(1, subs), img, 0)
    assert configured.to_create == {f"rep{k}": 7 for k in range(10)}
    assert counting.lookups <= 20 * sum(len(s.source_topics) + 1 for s in subs), counting.lookups


def passes(topology: Topology, img: MetadataImage) -> dict[str, int]:
    """The fix point pass by pass, as kcoord ran it before (the reference the events keep)."""
    decided = {r.name: r.partitions for s in topology.subtopologies for r in s.repartition_source_topics
               if r.partitions > 0}
    flexible = {r.name for s in topology.subtopologies for r in s.repartition_source_topics} - decided.keys()

    def known(t: str) -> int | None:
        found = img.topics_by_name.get(t)
        return found.num_partitions if found is not None else decided.get(t)
    writers: dict[str, list[Subtopology]] = {}
    for s in topology.subtopologies:
        for sink in s.repartition_sink_topics:
            writers.setdefault(sink, []).append(s)
    pending = set(flexible)
    while pending:
        progress = False
        for name in sorted(pending):
            candidates = [c for s in writers.get(name, ()) for t in
                          (*s.source_topics, *(r.name for r in s.repartition_source_topics))
                          if (c := known(t)) is not None]
            if candidates:
                decided[name] = max(candidates)
                pending.discard(name)
                progress = True
        if not progress:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS, "undecidable")
    return decided


def random_topology(rng: random.Random) -> tuple[Topology, MetadataImage]:
    sources = {f"in{i}": rng.randint(1, 9) for i in range(rng.randint(1, 4))}
    internal = [f"r{i}" for i in range(rng.randint(1, 9))]
    existing = {name: rng.randint(1, 9) for name in internal if rng.random() < 0.1}
    subs = []
    for k in range(rng.randint(1, 8)):
        reads = rng.sample(internal, rng.randint(0, min(3, len(internal))))
        subs.append(Subtopology(
            f"s{k}", source_topics=tuple(rng.sample(sorted(sources), rng.randint(0, len(sources)))),
            repartition_source_topics=tuple(TopicInfo(r, rng.choice((0, 0, 0, -1, rng.randint(1, 9)))) for r in reads),
            repartition_sink_topics=tuple(rng.sample(internal, rng.randint(0, min(3, len(internal)))))))
    return Topology.of(1, subs), image(**sources, **existing)


@pytest.mark.parametrize("seed", range(4))
def test_the_events_decide_what_the_passes_decide(seed):
    rng = random.Random(seed)
    undecidable = 0
    for _ in range(1_500):
        topology, img = random_topology(rng)
        try:
            expected = passes(topology, img)
        except TopicConfigurationError:
            undecidable += 1
            with pytest.raises(TopicConfigurationError) as refused:
                _decide_partition_counts(topology, img)
            assert refused.value.status == MISSING_SOURCE_TOPICS
            continue
        # copartition groups are enforced after both (and not generated here)
        assert _decide_partition_counts(topology, img) == expected, topology
    assert 0 < undecidable < 1_500      # both kinds of topology were drawn
