"""Client-side assignors (seed 000) in the shard: acceptance criteria A1-A16 of
seed-drafts.md §4, each test named after the criterion it checks.

`CsaContext` is a ShardContext that also speaks kcoord's private APIs 32700-32702.
Requests go through the shard exactly as the service sends them, answers come back
through coordinator/private_apis.py and are encoded and decoded with the private wire
schemas: a test sees what a member would read off the socket. Records go through the
real codec and replay (ShardContext.apply).

Topic foo has 6 partitions; assignor `s` = {Min 0, Max 1, Version 1} (§4).
"""
from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode

from coordinator import private_apis
from coordinator.config import CoordinatorConfig
from coordinator.group.modern.consumer.group import ConsumerGroupState
from coordinator.protocol import private_messages as pm
from coordinator.protocol.codec import encode_body
from coordinator.protocol.private_apis import COMPUTE_ASSIGNMENT, INVALID_ASSIGNMENT
from records import ConsumerGroupCurrentMemberAssignmentKey, decode_record

from .context import UNCHANGED, ShardContext, topic

S1 = pm.ClientAssignor(name="s", minimum_version=0, maximum_version=1, version=1)

def spec(name: str = "s", lo: int = 0, hi: int = 1, version: int = 1, reason: int = 0, metadata: bytes = b""):
    return pm.ClientAssignor(name=name, minimum_version=lo, maximum_version=hi, version=version, reason=reason,
                             metadata=metadata)


def _wire(message):
    """The message as a member decodes it (kio's codec over the private schema)."""
    from coordinator.protocol.codec import decode_body
    return decode_body(type(message), encode_body(message), 0)


class CsaContext(ShardContext):
    def csa(self, group_id: str, member_id: str, epoch: int, *, topics=UNCHANGED, owned=UNCHANGED,
            assignors=UNCHANGED, rebalance_timeout_ms: int | None = None, server_assignor=None, instance_id=None):
        """A 32700 heartbeat; on join the fields a member sends on join are filled in."""
        if epoch == 0:
            topics = ("foo",) if topics is UNCHANGED else topics
            owned = () if owned is UNCHANGED else owned
            assignors = (S1,) if assignors is UNCHANGED else assignors
            rebalance_timeout_ms = 300_000 if rebalance_timeout_ms is None else rebalance_timeout_ms
        req = pm.CsaHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
            rebalance_timeout=datetime.timedelta(milliseconds=-1 if rebalance_timeout_ms is None
                                                 else rebalance_timeout_ms),
            subscribed_topic_names=None if topics is UNCHANGED else tuple(topics),
            server_assignor=server_assignor,
            client_assignors=None if assignors is UNCHANGED else tuple(assignors),
            topic_partitions=None if owned is UNCHANGED else tuple(
                pm.TopicPartitions(topic_id=self.id_of(t), partitions=tuple(sorted(ps)))
                for t, ps in (owned.items() if isinstance(owned, dict) else owned)))
        req = _wire(req)
        result = self.apply(self.shard.consumer_group_csa_heartbeat(self.ctx(1), req, self.now_ms))
        return _wire(private_apis.csa_response(result.response))

    def prepare(self, group_id: str, member_id: str, epoch: int):
        req = _wire(pm.PrepareAssignmentRequest(group_id=group_id, member_id=member_id, member_epoch=epoch))
        result = self.apply(self.shard.consumer_group_prepare_assignment(self.ctx(0), req, self.now_ms))
        return _wire(private_apis.prepare_response(result.response))

    def install(self, group_id: str, member_id: str, epoch: int, group_epoch: int, members: dict, error: int = 0):
        """`members`: {member id: ({topic: partitions}, metadata version, metadata bytes)}."""
        entries = tuple(pm.InstalledMember(
            member_id=m, partitions=tuple(pm.TopicPartitions(topic_id=self.id_of(t), partitions=tuple(ps))
                                          for t, ps in parts.items()),
            metadata_version=version, metadata_bytes=data) for m, (parts, version, data) in members.items())
        req = _wire(pm.InstallAssignmentRequest(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                                group_epoch=group_epoch, error=error, members=entries))
        result = self.apply(self.shard.consumer_group_install_assignment(self.ctx(0), req, self.now_ms))
        return _wire(private_apis.install_response(result.response))

    # ------------------------------------------------------------ reading
    def records_since(self, offset: int) -> list:
        return [decode_record(k, v, topic="__test", partition=0, offset=o) for o, k, v in self.log[offset:]]

    def parts(self, response) -> dict[str, set[int]]:
        if response.assignment is None:
            return {}
        return self.assigned(response)

    def reloaded(self) -> CsaContext:
        """A context whose shard was rebuilt from this one's log, as a restart would."""
        other = CsaContext(*self.shard.image.topics_by_name.values(), config=self.config, now_ms=self.now_ms)
        other.shard = self.reload()
        other.log = list(self.log)
        return other


# ---------------------------------------------------------------------------- fixtures

FOO = topic("foo", 6)
BAR = topic("bar", 3)
ALL = set(range(6))


def fast(**kw) -> CoordinatorConfig:
    """Defaults, except the KIP-1263 assignment interval (tests step the clock)."""
    return CoordinatorConfig(consumer_assignment_interval_ms=0, **kw)


def joined(*topics, config=None) -> CsaContext:
    """A1-A3 done: A owns foo 0-5 at epoch 2, the group STABLE in client mode."""
    c = CsaContext(*(topics or (FOO,)), config=config or fast())
    assert c.csa("g", "A", 0).error_code == COMPUTE_ASSIGNMENT
    assert c.prepare("g", "A", 1).error_code == 0
    assert c.install("g", "A", 1, 2, {"A": ({"foo": range(6)}, 1, b"x")}).error_code == 0
    r = c.csa("g", "A", 1)
    assert r.error_code == 0 and r.member_epoch == 2 and c.parts(r) == {"foo": ALL}
    return c


def kinds(records) -> list[str]:
    return [type(r.key).__name__.replace("ConsumerGroup", "").replace("Key", "") for r in records]


# ---------------------------------------------------------------------------- A1-A3
def test_a1_first_member_is_asked_to_compute():
    c = CsaContext(FOO, config=fast())
    r = c.csa("g", "A", 0)
    assert r.error_code == COMPUTE_ASSIGNMENT
    assert r.member_epoch == 1 and r.member_id == "A"
    assert r.heartbeat_interval.total_seconds() * 1000 == 100    # pending work: the pending interval
    assert r.assignment is not None and r.assignment.topic_partitions == ()
    recs = c.records_since(0)
    assert kinds(recs) == ["MemberMetadata", "Metadata", "CurrentMemberAssignment"]
    assert [(a.name, a.minimum_version, a.maximum_version, a.version) for a in recs[0].value.client_assignors] \
        == [("s", 0, 1, 1)]
    assert recs[1].value.epoch == 2 and recs[2].value.member_epoch == 1
    assert c.group("g").state is ConsumerGroupState.ASSIGNING


def test_a2_prepare_shows_the_group():
    c = CsaContext(FOO, config=fast())
    c.csa("g", "A", 0)
    before = len(c.log)
    p = c.prepare("g", "A", 1)
    assert p.error_code == 0 and p.group_epoch == 2 and p.client_assignor_name == "s"
    [a] = p.members
    assert (a.member_id, a.subscriptions, a.assignor_version, a.topic_partitions) == \
        ("A", (FOO.topic_id,), 1, ())
    assert [(m.topic_id, m.topic_name, m.num_partitions) for m in p.partition_metadata] == [(FOO.topic_id, "foo", 6)]
    assert len(c.log) == before                     # Prepare writes nothing
    # the member is no longer told COMPUTE once it prepared
    assert c.csa("g", "A", 1).error_code == 0


def test_a3_install_writes_target_with_metadata_and_member_reconciles():
    c = CsaContext(FOO, config=fast())
    c.csa("g", "A", 0)
    c.prepare("g", "A", 1)
    before = len(c.log)
    assert c.install("g", "A", 1, 2, {"A": ({"foo": range(6)}, 1, b"x")}).error_code == 0
    recs = c.records_since(before)
    assert kinds(recs) == ["TargetAssignmentMember", "TargetAssignmentMetadata"]
    assert (recs[0].value.metadata_version, recs[0].value.metadata_bytes) == (1, b"x")
    assert recs[1].value.assignment_epoch == 2 and recs[1].value.client_assignor_name == "s"
    assert recs[1].value.assignment_error == 0
    r = c.csa("g", "A", 1)
    assert r.error_code == 0 and r.member_epoch == 2 and c.parts(r) == {"foo": ALL}
    assert (r.assignment.error, r.assignment.metadata_version, r.assignment.metadata_bytes) == (0, 1, b"x")
    assert c.group("g").state is ConsumerGroupState.STABLE
    # the metadata the member reached is persisted on its current assignment (type 8 tags)
    cur = c.records_since(before + 2)[-1]
    assert isinstance(cur.key, ConsumerGroupCurrentMemberAssignmentKey)
    assert (cur.value.error, cur.value.metadata_version, cur.value.metadata_bytes) == (0, 1, b"x")


def owners(c: CsaContext, group_id: str = "g") -> dict[tuple[str, int], list[str]]:
    """Who owns each partition now (assigned or pending revocation), from the group state."""
    out: dict[tuple[str, int], list[str]] = {}
    names = {t.topic_id: t.name for t in c.shard.image.topics_by_name.values()}
    for m in c.group(group_id).members.values():
        for a in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    out.setdefault((names[t], p), []).append(m.member_id)
    return out


def single_owner(c: CsaContext) -> None:
    assert all(len(v) == 1 for v in owners(c).values()), owners(c)


# ---------------------------------------------------------------------------- A4
def _two_members_prepared(c: CsaContext) -> int:
    """A (foo, bar) and B (foo) joined, A asked and prepared; returns the prepared epoch."""
    assert c.csa("g", "A", 0, topics=("foo", "bar")).error_code == COMPUTE_ASSIGNMENT
    c.csa("g", "B", 0, topics=("foo",))
    p = c.prepare("g", "A", 1)
    assert p.error_code == 0
    return p.group_epoch


GOOD = {"A": {"foo": [0, 1, 2], "bar": [0, 1, 2]}, "B": {"foo": [3, 4, 5]}}


@pytest.mark.parametrize("case", ["twice", "missing", "unknown-member", "foo-6", "unsubscribed", "epoch",
                                  "no-prepare"])
def test_a4_invalid_install_writes_nothing_and_asks_again(case):
    c = CsaContext(FOO, BAR, config=fast())
    epoch = _two_members_prepared(c)
    plan = {m: dict(t) for m, t in GOOD.items()}
    if case == "twice":
        plan["B"]["foo"] = [0, 3, 4, 5]
    elif case == "missing":
        plan["B"]["foo"] = [3, 4]
    elif case == "unknown-member":
        plan["Z"] = {}
    elif case == "foo-6":
        plan["B"]["foo"] = [3, 4, 5, 6]
    elif case == "unsubscribed":
        plan = {"A": {"foo": [0, 1, 2]}, "B": {"foo": [3, 4, 5], "bar": [0, 1, 2]}}
    elif case == "epoch":
        epoch += 1
    elif case == "no-prepare":
        # a fresh round: the install comes before any Prepare of it
        c.install("g", "A", 1, epoch, {m: (t, 1, b"") for m, t in GOOD.items()})
        r = c.csa("g", "A", 1, assignors=(spec(reason=1),))
        assert r.error_code == COMPUTE_ASSIGNMENT
        epoch = c.group("g").group_epoch
    before = len(c.log)
    r = c.install("g", "A", c.member("g", "A").member_epoch, epoch, {m: (t, 1, b"") for m, t in plan.items()})
    assert r.error_code == INVALID_ASSIGNMENT, r
    assert r.error_message
    assert len(c.log) == before
    assert c.csa("g", "A", c.member("g", "A").member_epoch).error_code == COMPUTE_ASSIGNMENT


def test_a4_messages_name_the_invariant():
    c = CsaContext(FOO, BAR, config=fast())
    epoch = _two_members_prepared(c)
    r = c.install("g", "A", 1, epoch, {"A": ({"foo": [0, 1, 2], "bar": [0, 1, 2]}, 1, b""),
                                       "B": ({"foo": [3, 4]}, 1, b"")})
    assert "is not assigned" in r.error_message and "-5" in r.error_message


# ---------------------------------------------------------------------------- A5
def test_a5_prepare_and_install_caller_checks():
    c = CsaContext(FOO, config=fast())
    c.csa("g", "A", 0)
    c.csa("g", "B", 0)
    unknown_member = ErrorCode.unknown_member_id.value
    for call in (lambda *a: c.prepare(*a), lambda *a: c.install(*a, 2, {})):
        assert call("g", "B", 1).error_code == unknown_member            # not the chosen member
        assert call("g", "Z", 1).error_code == unknown_member            # no such member
        assert call("g", "A", 7).error_code == ErrorCode.fenced_member_epoch.value
        assert call("nope", "A", 1).error_code == ErrorCode.group_id_not_found.value
        assert call("", "A", 1).error_code == ErrorCode.invalid_request.value
        assert call("g", "A", -1).error_code == ErrorCode.invalid_request.value
    assert c.prepare("g", "A", 1).error_code == 0                        # and the chosen one may


# ---------------------------------------------------------------------------- A6
def test_a6_joiner_after_prepare_waits_for_the_next_round_without_double_ownership():
    c = CsaContext(FOO, config=fast())
    c.csa("g", "A", 0)
    assert c.prepare("g", "A", 1).group_epoch == 2
    b = c.csa("g", "B", 0)
    assert c.group("g").group_epoch == 3 and b.error_code == 0
    assert c.install("g", "A", 1, 2, {"A": ({"foo": range(6)}, 1, b"")}).error_code == 0
    assert c.group("g").assignment_epoch == 2 and c.group("g").state is ConsumerGroupState.ASSIGNING
    a = c.csa("g", "A", 1)
    assert a.member_epoch == 2 and c.parts(a) == {"foo": ALL}
    assert a.error_code == COMPUTE_ASSIGNMENT                            # sticky: A again, for epoch 3
    b = c.csa("g", "B", b.member_epoch)
    assert c.parts(b) in ({}, {"foo": set()}) and not c.member("g", "B").assigned_partitions
    single_owner(c)
    p = c.prepare("g", "A", 2)
    assert p.group_epoch == 3 and {m.member_id for m in p.members} == {"A", "B"}
    assert c.install("g", "A", 2, 3, {"A": ({"foo": [0, 1, 2]}, 1, b""),
                                      "B": ({"foo": [3, 4, 5]}, 1, b"")}).error_code == 0
    a = c.csa("g", "A", 2)
    assert c.parts(a) == {"foo": {0, 1, 2}} and a.member_epoch == 2      # told the kept set, revoking 3-5
    single_owner(c)
    b = c.csa("g", "B", c.member("g", "B").member_epoch)
    assert b.member_epoch == 3 and not c.member("g", "B").assigned_partitions   # unreleased yet
    single_owner(c)
    a = c.csa("g", "A", 2, owned={"foo": [0, 1, 2]})
    assert a.member_epoch == 3 and a.error_code == 0
    b = c.csa("g", "B", 3)
    assert c.parts(b) == {"foo": {3, 4, 5}}
    single_owner(c)
    assert c.group("g").state is ConsumerGroupState.STABLE


# ---------------------------------------------------------------------------- A7
def test_a7_member_leaving_between_prepare_and_install_is_dropped():
    c = joined()
    c.csa("g", "B", 0)
    assert c.csa("g", "A", 2).error_code == COMPUTE_ASSIGNMENT
    p = c.prepare("g", "A", 2)
    assert p.group_epoch == 3
    leave = c.csa("g", "B", -1)
    assert leave.error_code == 0 and "B" not in c.group("g").members
    before = len(c.log)
    r = c.install("g", "A", 2, 3, {"A": ({"foo": [0, 1, 2]}, 1, b""), "B": ({"foo": [3, 4, 5]}, 1, b"")})
    assert r.error_code == 0
    written = c.records_since(before)
    assert all(getattr(rec.key, "member_id", "A") != "B" for rec in written)
    assert "B" not in c.group("g").target_assignment
    # epoch 4 (B's leave) is behind: the next round hands out foo 3-5
    a = c.csa("g", "A", 2, owned={"foo": [0, 1, 2, 3, 4, 5]})
    assert a.error_code == COMPUTE_ASSIGNMENT
    p = c.prepare("g", "A", a.member_epoch)
    assert p.group_epoch == 4 and [m.member_id for m in p.members] == ["A"]
    assert c.install("g", "A", a.member_epoch, 4, {"A": ({"foo": range(6)}, 1, b"")}).error_code == 0
    assert c.parts(c.csa("g", "A", a.member_epoch, owned={"foo": [0, 1, 2]})) == {"foo": ALL}


# ---------------------------------------------------------------------------- A8
def test_a8_assignor_error_advances_the_epoch_without_looping():
    c = joined()
    assert c.csa("g", "A", 2, assignors=(spec(reason=1),)).error_code == COMPUTE_ASSIGNMENT
    p = c.prepare("g", "A", 2)
    before = len(c.log)
    assert c.install("g", "A", 2, p.group_epoch, {}, error=7).error_code == 0
    [meta] = c.records_since(before)
    assert meta.value.assignment_epoch == p.group_epoch and meta.value.assignment_error == 7
    a = c.csa("g", "A", 2)
    assert a.error_code == 0 and a.member_epoch == p.group_epoch
    assert c.parts(a) == {"foo": ALL} and a.assignment.error == 7         # target partitions unchanged
    for _ in range(3):
        again = c.csa("g", "A", a.member_epoch)
        assert again.error_code == 0                                       # no new COMPUTE
    assert c.group("g").state is ConsumerGroupState.STABLE


# ---------------------------------------------------------------------------- A9
def test_a9_assigner_that_never_prepares_is_replaced_not_fenced():
    c = CsaContext(FOO, config=fast())
    assert c.csa("g", "A", 0, rebalance_timeout_ms=10_000).error_code == COMPUTE_ASSIGNMENT
    assert c.csa("g", "B", 0).error_code == 0
    c.csa("g", "A", 1)
    c.advance(9_999)
    assert c.csa("g", "B", 1).error_code == 0
    c.advance(1)
    assert c.csa("g", "B", 1).error_code == COMPUTE_ASSIGNMENT
    assert "A" in c.group("g").members                                     # not fenced
    assert c.csa("g", "A", 1).error_code == 0
    assert c.install("g", "A", 1, 3, {"A": ({"foo": range(6)}, 1, b"")}).error_code == \
        ErrorCode.unknown_member_id.value
    assert c.prepare("g", "B", 1).error_code == 0


# ---------------------------------------------------------------------------- A10, A11
def test_a10_only_a_member_covering_every_version_computes():
    c = CsaContext(FOO, config=fast())
    assert c.csa("g", "B", 0, assignors=(spec(lo=3, hi=4, version=4),)).error_code == COMPUTE_ASSIGNMENT
    c.csa("g", "C", 0, assignors=(spec(lo=2, hi=4, version=4),))
    c.csa("g", "A", 0, assignors=(spec(lo=1, hi=5, version=5),))
    # B and C cannot read version 5: B's round is abandoned and A is asked
    assert c.csa("g", "B", 1).error_code == 0
    assert c.csa("g", "C", 1).error_code == 0
    assert c.csa("g", "A", 1).error_code == COMPUTE_ASSIGNMENT
    before = len(c.log)
    d = c.csa("g", "D", 0, assignors=(spec(lo=6, hi=7, version=7),))
    assert d.error_code == ErrorCode.unsupported_assignor.value and "D" not in c.group("g").members
    assert len(c.log) == before
    assert c.csa("g", "E", 0, assignors=(spec(lo=1, hi=1, version=1),)).error_code == 0
    assert c.csa("g", "A", 1).error_code == COMPUTE_ASSIGNMENT
    assert c.prepare("g", "A", 1).error_code == 0


def test_a11_assignor_choice_by_rank_then_name():
    c = CsaContext(FOO, config=fast())
    c.csa("g", "A", 0, assignors=(spec("x"), spec("y")))
    c.csa("g", "B", 0, assignors=(spec("y"), spec("x")))
    z = c.csa("g", "C", 0, assignors=(spec("z"),))
    assert z.error_code == ErrorCode.unsupported_assignor.value and "C" not in c.group("g").members
    p = c.prepare("g", "A", 1)
    assert p.error_code == 0 and p.client_assignor_name == "x"


# ---------------------------------------------------------------------------- A12
def test_a12_real_consumer_switches_to_server_mode_and_back():
    c = joined()
    assert c.csa("g", "A", 2, assignors=(spec(reason=1),)).error_code == COMPUTE_ASSIGNMENT
    r = c.heartbeat("g", "R", 0, topics=["foo"])                         # a key-68 consumer
    assert r.error_code == 0 and c.group("g").group_epoch == 4
    a = c.csa("g", "A", 2)
    assert a.error_code == 0                                              # round abandoned
    assert c.prepare("g", "A", 2).error_code == ErrorCode.unknown_member_id.value
    assert c.group("g").assignment_epoch == 4                             # the server assignor ran
    kept = c.parts(a)["foo"]
    assert len(kept) == 3
    a = c.csa("g", "A", 2, owned={"foo": kept})
    assert a.member_epoch == 4 and a.error_code == 0
    assert (a.assignment.metadata_version, a.assignment.metadata_bytes) == (-1, None)
    r = c.heartbeat("g", "R", r.member_epoch, owned={})
    assert c.assigned(r) == {"foo": ALL - kept}
    single_owner(c)
    c.heartbeat("g", "R", -1)                                              # it leaves: client mode again
    assert c.csa("g", "A", 4).error_code == COMPUTE_ASSIGNMENT
    assert c.prepare("g", "A", 4).client_assignor_name == "s"


# ---------------------------------------------------------------------------- A13
@pytest.mark.parametrize("kw", [
    dict(server_assignor="uniform"),
    dict(assignors=(spec(lo=0, hi=1, version=2),)),
    dict(assignors=(spec(lo=2, hi=1, version=2),)),
    dict(assignors=(spec(name=""),)),
    dict(assignors=()),                        # a join through 32700 must bring client assignors
])
def test_a13_request_validation(kw):
    c = CsaContext(FOO, config=fast())
    r = c.csa("g", "A", 0, **kw)
    assert r.error_code == ErrorCode.invalid_request.value, r
    assert r.error_message and not c.log


# ---------------------------------------------------------------------------- A14
def test_a14_reason_and_metadata_changes_bump_the_epoch():
    c = joined()
    r = c.csa("g", "A", 2, assignors=(spec(reason=1),))
    assert r.error_code == COMPUTE_ASSIGNMENT and c.group("g").group_epoch == 3
    before = len(c.log)
    assert c.csa("g", "A", 2, assignors=(spec(reason=0),)).error_code == COMPUTE_ASSIGNMENT
    assert len(c.log) == before and c.group("g").group_epoch == 3       # same list, Reason 0: no record
    c.csa("g", "A", 2, assignors=(spec(metadata=b"weight"),))
    assert c.group("g").group_epoch == 4
    assert c.member("g", "A").client_assignors[0].metadata == b"weight"


# ---------------------------------------------------------------------------- A15
def test_a15_reload_mid_flight():
    c = joined()
    c.csa("g", "B", 0)
    assert c.csa("g", "A", 2).error_code == COMPUTE_ASSIGNMENT
    assert c.prepare("g", "A", 2).group_epoch == 3
    fresh = c.reloaded()
    g0, g1 = c.group("g"), fresh.group("g")
    assert g1.members["A"].client_assignors == g0.members["A"].client_assignors
    assert g1.target_metadata == g0.target_metadata == {"A": (1, b"x")}
    assert g1.client_assignor_name == "s"
    a = g1.members["A"]
    assert (a.assignment_error, a.assignment_metadata_version, a.assignment_metadata_bytes) == (0, 1, b"x")
    assert fresh.install("g", "A", 2, 3, {"A": ({"foo": range(6)}, 1, b"")}).error_code == \
        ErrorCode.unknown_member_id.value                                  # the round is gone
    fresh.loaded()
    fresh.advance(0)                                                       # on_loaded re-arms it
    r = fresh.install("g", "A", 2, 3, {"A": ({"foo": range(6)}, 1, b"")})
    assert r.error_code == INVALID_ASSIGNMENT                              # asked again, not prepared
    assert fresh.csa("g", "A", 2).error_code == COMPUTE_ASSIGNMENT


# ---------------------------------------------------------------------------- A16
def test_a16_describe_and_offset_commit():
    from coordinator.group.kio_util import schema

    from .test_issue10_divergences import _describe
    from .test_offsets_and_admin import commit, errors
    c = joined()
    c.csa("g", "B", 0)
    g = _describe(c, "g")
    assert g.group_state == "Assigning" and g.assignor_name == "s"
    ok = commit(c, "g", "A", 2, {"foo": {0: 10}})
    assert set(errors(ok).values()) == {ErrorCode.none}
    stale = commit(c, "g", "A", 1, {"foo": {0: 11}})
    assert set(errors(stale).values()) == {ErrorCode.stale_member_epoch}
    assert schema("offset_commit", 9, "request") is not None


# ---------------------------------------------------------------------------- downgrade-check
def test_downgrade_check_reports_groups_using_client_assignors():
    from tests.unit.ops.test_ops_downgrade import coordinator_log, run_check
    c = joined()
    c.heartbeat("plain", "P", 0, topics=["foo"])
    report, _, _ = run_check(coordinator_log(c))
    groups = {g["group"]: g for g in report["groups"]}
    assert groups["g"]["full"]["client_assignors"] == ["s"]
    assert any("client-side assignors ['s']" in r for r in groups["g"]["reasons"])
    assert "client_assignors" not in groups["plain"]["full"]
    assert not any("client-side" in r for r in groups["plain"]["reasons"])


# ---------------------------------------------------------------------------- static members
def test_a_static_member_replaced_under_a_new_id_keeps_its_client_state():
    c = CsaContext(FOO, config=fast())
    c.csa("g", "A", 0, instance_id="i")
    c.prepare("g", "A", 1)
    c.install("g", "A", 1, 2, {"A": ({"foo": range(6)}, 1, b"x")})
    c.csa("g", "A", 1, instance_id="i")
    assert c.csa("g", "A", -2, instance_id="i").error_code == 0
    r = c.csa("g", "A2", 0, instance_id="i")
    assert r.error_code == 0 and "A" not in c.group("g").members
    fresh = c.reloaded().group("g")
    for g in (c.group("g"), fresh):
        assert [s.name for s in g.members["A2"].client_assignors] == ["s"]
        assert g.target_metadata == {"A2": (1, b"x")}
