"""The sample sticky assignor (members/sticky.py): complete, balanced, sticky, versioned;
and its output is accepted by the coordinator's install validation (client_assignment.py)."""
from __future__ import annotations

import uuid

import pytest

from coordinator.group.modern.client_assignment import Snapshot, validate_install
from members.assignor import AssignorError, GroupSpec, MemberSpec
from members.sticky import StickyAssignor

FOO = uuid.uuid5(uuid.NAMESPACE_DNS, "foo")
BAR = uuid.uuid5(uuid.NAMESPACE_DNS, "bar")


def group(members, partitions=None, epoch=2):
    return GroupSpec(epoch, {m.member_id: m for m in members}, partitions or {FOO: 12})


def member(mid, topics=(FOO,), current=None, version=2, meta=b"\x01"):
    return MemberSpec(mid, frozenset(topics), version, meta if version == 2 else b"", current=current or {})


def owners(result):
    out = {}
    for m, a in result.items():
        for t, ps in a.partitions.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} twice"
                out[(t, p)] = m
    return out


def check_valid(spec, result):
    validate_install(Snapshot(spec.group_epoch, "sticky", {m.member_id: m.subscriptions for m in spec.members.values()},
                              spec.partitions), {m: a.partitions for m, a in result.items()})


def test_complete_and_balanced():
    spec = group([member("a"), member("b"), member("c"), member("d", topics=(FOO, BAR))], {FOO: 12, BAR: 5})
    result = StickyAssignor().assign(spec)
    check_valid(spec, result)
    assert len(owners(result)) == 17
    assert sorted(len(result[m].partitions.get(FOO, ())) for m in "abcd") == [3, 3, 3, 3]
    assert result["d"].partitions[BAR] == frozenset(range(5))      # the only subscriber


def test_sticky_when_a_member_joins_and_leaves():
    a = StickyAssignor()
    first = a.assign(group([member("a"), member("b"), member("c")]))
    current = {m: r.partitions for m, r in first.items()}
    spec = group([member(m, current=current[m]) for m in "abc"] + [member("d")])
    second = a.assign(spec)
    check_valid(spec, second)
    moved = sum(1 for (t, p), m in owners(second).items() if owners(first)[(t, p)] != m)
    assert moved == 3                                              # only what d needs
    for m in "abc":
        assert second[m].partitions[FOO] <= current[m][FOO]
    # c leaves: only its partitions move
    spec3 = group([member(m, current=second[m].partitions) for m in "abd"])
    third = a.assign(spec3)
    check_valid(spec3, third)
    for m in "abd":
        assert second[m].partitions[FOO] <= third[m].partitions[FOO]


def test_stale_current_partitions_are_ignored():
    spec = group([member("a", current={FOO: frozenset({0, 99})}), member("b", current={FOO: frozenset({0})})],
                 {FOO: 4})
    result = StickyAssignor().assign(spec)
    check_valid(spec, result)
    assert 0 in result["a"].partitions[FOO]                        # a owned more: it keeps 0


def test_versions_and_weights():
    spec = group([member("a", version=1), member("b", meta=b"\x00"), member("c")], {FOO: 6})
    result = StickyAssignor().assign(spec)
    check_valid(spec, result)
    assert "b" not in {m for m, a in result.items() if a.partitions}   # weight 0
    assert result["a"].metadata_version == 2 and result["a"].metadata == b"\x01"
    assert StickyAssignor(version=1).metadata() == b"" and StickyAssignor(weight=7).metadata() == b"\x07"
    with pytest.raises(ValueError):
        StickyAssignor(version=3)


def test_bad_metadata_is_an_assignor_error():
    with pytest.raises(AssignorError) as e:
        StickyAssignor().assign(group([member("a", meta=b"\x01\x02")]))
    assert e.value.code == 1 and "does not parse" in str(e.value)
