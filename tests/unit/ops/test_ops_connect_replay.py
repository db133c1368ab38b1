"""`kcoord offsets replay` on connect groups (types 1000-1004, seed 001): the JSON model
describes the workers and their units, the text layout shows them as `connector:tasks`,
the records are counted by name, and the HTML report plots the group epoch.
(Before: a connect group crashed replay_model, read as a classic group, and its records
were missing from `by_type`.)"""
from __future__ import annotations

from ops.describe import render_text, replay_model
from ops.materialise import OffsetsReplay
from ops.report import ReportCollector

from .test_ops_connect import W, running_group
from .test_ops_downgrade import coordinator_log

CONNECT_NAMES = {"CONNECT_GROUP_METADATA", "CONNECT_GROUP_MEMBER_METADATA",
                 "CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA", "CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER",
                 "CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT"}


def _models():
    """The model on the bulk path (no hook) and on the record-by-record path (a hook)."""
    log = coordinator_log(running_group())
    yield replay_model(OffsetsReplay().feed_all(log))
    yield replay_model(OffsetsReplay(on_record=lambda *a: None).feed_all(log))


def test_replay_model_describes_a_connect_group_and_its_workers_units():
    for model in _models():
        (g,) = model["groups"]
        assert (g["group"], g["type"], g["protocol_type"], g["state"]) == (W, "connect", "connect", "Stable")
        assert (g["group_epoch"], g["assignment_epoch"], g["assignor"]) == (2, 2, "sessioned")
        (m,) = g["members"]
        assert (m["member_id"], m["member_type"], m["member_epoch"], m["state"]) == ("W1", "connect", 2, "STABLE")
        assert m["assignment"] == m["target_assignment"] == {"A": [-1, 0]}
        assert m["pending_revocation"] == {} and g["offsets"] == []


def test_connect_records_are_counted_by_name():
    for model in _models():
        s = model["summary"]
        assert set(s["by_type"]) == CONNECT_NAMES and s["unknown_types"] == {}
        assert sum(s["by_type"].values()) == s["records"]


def test_text_layout_shows_connect_workers_with_epochs_and_units():
    model = next(_models())
    lines = render_text(model).splitlines()
    assert lines[1].split() == [W, "Connect", "connect", "Stable"]
    assert [W, "partition", "(0)", "sessioned", "Stable", "2", "2", "1"] in [x.split() for x in lines]
    member = next(x.split() for x in lines if x.startswith(W) and "W1" in x)
    # #PARTITIONS counts units; CURRENT and TARGET are `connector:tasks`, task -1 the connector.
    assert member[-5:] == ["2", "2", "A:-1,0", "2", "A:-1,0"], member
    assert "CONNECT_GROUP_METADATA 1" in lines[-1]


def test_html_report_plots_the_connect_group_epoch():
    c = ReportCollector()
    OffsetsReplay(on_record=c.observe).feed_all(coordinator_log(running_group()))
    assert [e for _, e in c.epochs[W]] == [2]      # the one CONNECT_GROUP_METADATA record: epoch 2
    assert set(c.types) == CONNECT_NAMES
