"""`--config fencing` with --instance-id: fence by writing (`epoch`) unless another mode is
named; `transactional` and `none` stay selectable, anything else is refused at start; and the
fenced log's every send asks the process whether the shard is assigned here AND its membership
lease holds (docs/user/cluster.md, docs/design/fencing.md)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from coordinator.clustered import ClusterProcess, fencing_mode
from coordinator.config import CoordinatorConfig


def test_the_default_fences_by_writing():
    assert fencing_mode(CoordinatorConfig()) == "epoch"


@pytest.mark.parametrize("named, mode", [("transactional", "transactional"), (" Epoch ", "epoch"),
                                         ("none", "none")])
def test_a_named_mode_is_kept(named, mode):
    assert fencing_mode(CoordinatorConfig(fencing=named)) == mode


def test_an_unknown_mode_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match=r"fencing='txn'.*transactional, epoch, none"):
        fencing_mode(CoordinatorConfig(fencing="txn"))


def test_the_default_log_fences_by_writing_and_every_send_needs_the_shard_and_the_lease():
    process = ClusterProcess(CoordinatorConfig(state_topic="t", state_topic_partitions=4), "kc-0",
                             "127.0.0.1:9092", None)
    log = process.state_log(plain_writer=object())
    assert log.fencing == "epoch" and log.offsets_per_append == 0
    gate = log.producers.owns
    assert not gate(1)                                    # no assignment yet
    lease = {"valid": True}
    process.node = SimpleNamespace(owns=lambda p: p in (1, 2))
    process.membership = SimpleNamespace(serving=lambda: lease["valid"])
    assert gate(1) and not gate(3)
    lease["valid"] = False                                # paused past the lease: nothing is sent
    assert not gate(1)
