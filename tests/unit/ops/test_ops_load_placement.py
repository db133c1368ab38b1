"""`kcoord offsets load` places groups with the partitioner the target topic says, and never
copies the source's partitioner markers (they describe the source's placement)."""
from __future__ import annotations

from coordinator.group.hashing import KAFKA, LEGACY
from ops.load import LoadPlan, plan
from records.partitioner_records import is_partitioner_marker, marker_record

from .logs import LogBuilder, commit

GROUP = "replay-ab588cff"      # Java hash -1544171307: Kafka's partition 2 of 5, legacy 1


def test_a_load_places_groups_with_the_target_topics_partitioner_and_drops_markers():
    log = LogBuilder().write(raw=[marker_record("kafka")]).write(commit(GROUP, "t", 0, 1))
    for partitioner, expected in ((KAFKA, 2), (LEGACY, 1)):
        result = LoadPlan(5, partitioner=partitioner.name)
        out = list(plan(log.log_batches(), 5, result, partitioner))
        assert [p for p, *_ in out] == [expected], partitioner
        assert not any(is_partitioner_marker(key) for _, key, _, _ in out)
        assert result.records == 1 and result.as_dict()["partitioner"] == partitioner.name
