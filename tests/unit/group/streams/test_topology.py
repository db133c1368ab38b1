"""A topology configured against the metadata image: task counts, internal topics' partition
counts (repartition chains, copartitioning, changelogs) and the statuses of what is wrong."""
from __future__ import annotations

from coordinator.group.streams.records import topology_from
from coordinator.group.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    configure,
    metadata_hash,
    summarize,
)

from .driver import image, subtopology, topic_info, topology

# 0 reads a and writes rep1; 1 reads rep1 and writes rep2; 2 reads rep2 (a chain of repartitions)
CHAIN = topology_from(topology(
    subtopology("0", sources=["a"], sinks=["rep1"], changelogs=["s0-changelog"]),
    subtopology("1", repartition=["rep1"], sinks=["rep2"]),
    subtopology("2", repartition=["rep2"], changelogs=["s2-changelog"]),
))


def test_a_chain_of_repartition_topics_takes_its_source_count_and_lists_what_to_create():
    img = image(a=8)
    c = configure(CHAIN, img, metadata_hash(CHAIN, img))
    assert c.task_counts == {"0": 8, "1": 8, "2": 8}
    assert c.to_create == {"rep1": 8, "rep2": 8, "s0-changelog": 8, "s2-changelog": 8}
    # In the iteration order of Kafka's HashMap of the names (topology.summarize)
    assert c.status == (MISSING_INTERNAL_TOPICS, "Internal topics are missing: rep2, s0-changelog, rep1, "
                                                 "s2-changelog")
    assert not c.is_ready()


def test_ready_once_every_internal_topic_exists_with_its_count():
    img = image(a=8, rep1=8, rep2=8, **{"s0-changelog": 8, "s2-changelog": 8})
    c = configure(CHAIN, img, metadata_hash(CHAIN, img))
    assert c.is_ready() and c.status is None and c.to_create == {}
    assert c.all_tasks()[:2] == [("0", 0), ("0", 1)] and len(c.all_tasks()) == 24


def test_a_fixed_repartition_count_wins_and_an_existing_topic_must_match():
    top = topology_from(topology(subtopology("0", sources=["a"], sinks=["rep"]),
                                 subtopology("1", repartition=[topic_info("rep", 3)])))
    img = image(a=8, rep=4)
    c = configure(top, img, 0)
    assert c.status == (INCORRECTLY_PARTITIONED_TOPICS, "Existing topic rep has different number of partitions: "
                                                        "expected 3, found 4")
    assert c.task_counts is None


def test_missing_source_topics_are_named():
    c = configure(CHAIN, image(), 0)
    assert c.status == (MISSING_SOURCE_TOPICS, "Source topics a are missing.") and c.task_counts is None


def test_copartitioned_sources_must_agree_and_their_repartition_topics_follow():
    top = topology_from(topology(
        subtopology("0", sources=["x"], sinks=["rep"]),
        subtopology("1", sources=["a", "b"], repartition=["rep"], copartition=[(0, 1)]),
    ))
    bad = configure(top, image(x=2, a=4, b=6), 0)
    assert bad.status == (INCORRECTLY_PARTITIONED_TOPICS,
                          "Following topics do not have the same number of partitions: [a=4, b=6]")
    top_rep = topology_from(topology(
        subtopology("0", sources=["x"], sinks=["rep"]),
        subtopology("1", sources=["a"], repartition=["rep"], copartition=[((0,), (0,))]),
    ))
    # rep would take x's 2 partitions, but it is copartitioned with a: it takes a's 4
    good = configure(top_rep, image(x=2, a=4), 0)
    assert good.to_create == {"rep": 4} and good.task_counts == {"0": 2, "1": 4}


def test_the_metadata_hash_covers_the_topologys_topics_only():
    assert metadata_hash(CHAIN, image(a=8)) == metadata_hash(CHAIN, image(a=8, unrelated=3))
    assert metadata_hash(CHAIN, image(a=8)) != metadata_hash(CHAIN, image(a=9))


# Kafka 4.4's broker answered these application ids' MISSING_INTERNAL_TOPICS details with the
# repartition topic first (True) or the changelog first (False): its HashMap's order.
KAFKA_LISTED_REPARTITION_FIRST = {"98e226": True, "7f583f": True, "8e51d4": False, "d8da1c": True,
                                  "15c816": False, "a44ffc": True, "1e0450": False, "6315f5": True}


def test_topic_names_are_listed_in_the_order_kafka_lists_them():
    for suffix, repartition_first in KAFKA_LISTED_REPARTITION_FIRST.items():
        app = f"probe-app-{suffix}"
        listed = summarize([f"{app}-repartition", f"{app}-store-changelog"])
        assert listed.startswith(f"{app}-repartition") is repartition_first, listed
