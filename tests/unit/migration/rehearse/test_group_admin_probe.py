"""The probe's sample of the group (GroupAdmin.describe: ListGroups, then the listed type's
describe) against a stub coordinator that answers as Kafka does and whose group changes type
between two requests: a sample taken across a conversion is taken again, not read as the old
type's "Dead"; a group that stays torn is a sample of no type; a Dead or deleted group is
still reported so; a describe that disagrees again with an unchanged listing is no race, and
the sample is what the describe says."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from migration.rehearse import group_admin
from migration.rehearse.group_admin import (
    CONSUMER_GROUP_DESCRIBE,
    DESCRIBE_ATTEMPTS,
    DESCRIBE_GROUPS,
    GROUP_ID_NOT_FOUND,
    LIST_GROUPS,
    STREAMS_GROUP_DESCRIBE,
    GroupAdmin,
    GroupView,
)

GROUP = "g"
COORDINATOR_LOAD_IN_PROGRESS = 14

Group = tuple[str, str]  # (type, state) as ListGroups lists it


class StubCoordinator:
    """One group's coordinator. ``changes`` maps the number of a request (1 for the first) to
    the group it finds (None: deleted), as if a conversion, a join or a deletion was written
    just before it. DescribeGroups is answered as below v6 (the probe asks at most v5)."""

    def __init__(self, group: Group | None, changes: dict[int, Group | None] | None = None,
                 classic_dead_error: bool = False) -> None:
        self.group = group
        self.changes = dict(changes or {})
        self.classic_dead_error = classic_dead_error  # answer as DescribeGroups v6+ (KIP-1043)
        self.calls: list[int] = []

    def call(self, api_key: int, **fields) -> NS:
        self.calls.append(api_key)
        if len(self.calls) in self.changes:
            self.group = self.changes[len(self.calls)]
        gtype, state = self.group or ("", "")
        if api_key == LIST_GROUPS:
            listed = () if self.group is None else (NS(group_id=GROUP, group_type=gtype, group_state=state),)
            return NS(error_code=0, groups=listed)
        if api_key == DESCRIBE_GROUPS:
            if gtype == "classic" and state != "Dead":
                member = NS(member_id="id-a", client_id="a", member_assignment=b"")
                return NS(groups=(NS(error_code=0, group_state=state, members=(member,)),))
            code = GROUP_ID_NOT_FOUND if self.classic_dead_error else 0
            return NS(groups=(NS(error_code=code, group_state="Dead", members=()),))
        wanted = {CONSUMER_GROUP_DESCRIBE: "consumer", STREAMS_GROUP_DESCRIBE: "streams"}[api_key]
        if gtype != wanted:
            return NS(groups=(NS(error_code=GROUP_ID_NOT_FOUND, group_state="",
                                 error_message=f"Group {GROUP} is not a {wanted} group."),))
        return NS(groups=(NS(error_code=0, error_message=None, group_state=state, group_epoch=5,
                             assignment_epoch=5, members=()),))


def sample(coordinator: StubCoordinator) -> GroupView:
    admin = GroupAdmin("127.0.0.1:1", GROUP, "t")
    admin._coordinator = coordinator  # type: ignore[assignment]
    return admin.describe()


def test_a_conversion_between_list_and_describegroups_is_sampled_again_as_the_new_type():
    # Listed classic Empty; the first StreamsGroupHeartbeat converts the group before
    # DescribeGroups, which answers "Dead" with no error.
    c = StubCoordinator(("classic", "Empty"), {2: ("streams", "Assigning")})
    view = sample(c)
    assert (view.group_type, view.state, view.error, view.torn) == ("streams", "Assigning", None, False)
    assert view.group_epoch == 5
    assert c.calls == [LIST_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS, STREAMS_GROUP_DESCRIBE]
    # Classic -> consumer alike (the consumer rehearsal's upgrade), and with v6's error.
    for dead_error in (False, True):
        c = StubCoordinator(("classic", "Stable"), {2: ("consumer", "Reconciling")}, classic_dead_error=dead_error)
        view = sample(c)
        assert (view.group_type, view.state, view.torn) == ("consumer", "Reconciling", False)
        assert c.calls == [LIST_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_DESCRIBE]


@pytest.mark.parametrize("old, new, describe", [
    (("consumer", "Stable"), ("classic", "PreparingRebalance"), CONSUMER_GROUP_DESCRIBE),
    (("streams", "Empty"), ("classic", "PreparingRebalance"), STREAMS_GROUP_DESCRIBE),
])
def test_a_conversion_to_classic_between_list_and_describe_is_sampled_again(old, new, describe):
    c = StubCoordinator(old, {2: new})
    view = sample(c)
    assert (view.group_type, view.state, view.error, view.torn) == ("classic", "PreparingRebalance", None, False)
    assert [m.client_id for m in view.members] == ["a"]
    assert c.calls == [LIST_GROUPS, describe, LIST_GROUPS, DESCRIBE_GROUPS]


def test_a_group_converted_on_every_attempt_is_a_torn_sample_of_no_type():
    flips = {2 * i + 2: ("streams", "Assigning") if i % 2 == 0 else ("classic", "Empty")
             for i in range(DESCRIBE_ATTEMPTS)}
    c = StubCoordinator(("classic", "Empty"), flips)
    view = sample(c)
    assert view.torn and (view.group_type, view.state, view.members) == ("", "", ())
    assert view.error is not None and view.error.count("listed ") == DESCRIBE_ATTEMPTS
    assert "listed classic Empty, DescribeGroups Dead" in view.error
    assert f"StreamsGroupDescribe error {GROUP_ID_NOT_FOUND}" in view.error
    assert len(c.calls) == 2 * DESCRIBE_ATTEMPTS
    # A torn sample is no "classic Dead": the analyses leave a sample with an error out.
    assert not (view.group_type == "classic" and view.state == "Dead")


def test_a_group_deleted_between_list_and_describe_is_not_listed():
    c = StubCoordinator(("classic", "Empty"), {2: None})
    view = sample(c)
    assert (view.group_type, view.state, view.error, view.torn) == ("", "", None, False)
    assert c.calls == [LIST_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS]
    c = StubCoordinator(("consumer", "Empty"), {2: None})
    assert (sample(c).group_type, c.calls[-1]) == ("", LIST_GROUPS)


@pytest.mark.parametrize("gtype", ["classic", "consumer", "streams"])
def test_a_group_listed_dead_is_dead_without_a_retry(gtype):
    c = StubCoordinator((gtype, "Dead"))
    view = sample(c)
    assert (view.group_type, view.state, view.error, view.torn) == (gtype, "Dead", None, False)
    assert len(c.calls) == 2


def test_a_sample_without_a_race_takes_two_requests():
    for group, describe in ((("classic", "Stable"), DESCRIBE_GROUPS), (("consumer", "Stable"), CONSUMER_GROUP_DESCRIBE),
                            (("streams", "Stable"), STREAMS_GROUP_DESCRIBE)):
        c = StubCoordinator(group)
        view = sample(c)
        assert (view.group_type, view.state, view.error) == (*group, None)
        assert c.calls == [LIST_GROUPS, describe]
    c = StubCoordinator(None)
    assert sample(c) == GroupView("", "") and c.calls == [LIST_GROUPS]


def test_other_describe_errors_are_error_samples_of_the_listed_type_without_a_retry():
    class Loading(StubCoordinator):
        def call(self, api_key: int, **fields) -> NS:
            answer = super().call(api_key, **fields)
            if api_key != LIST_GROUPS:
                answer.groups[0].error_code = COORDINATOR_LOAD_IN_PROGRESS
            return answer

    for gtype in ("classic", "consumer", "streams"):
        c = Loading((gtype, "Stable"))
        view = sample(c)
        assert (view.group_type, view.state, view.torn) == (gtype, "Stable", False)
        assert view.error is not None and str(COORDINATOR_LOAD_IN_PROGRESS) in view.error
        assert len(c.calls) == 2


def test_a_type_describegroups_never_describes_keeps_its_dead_answer():
    # Not a classic group by its listing, so DescribeGroups' "Dead" is no sign of a conversion.
    c = StubCoordinator(("share", "Stable"))
    view = sample(c)
    assert (view.group_type, view.state, view.torn) == ("share", "Dead", False) and len(c.calls) == 2


def test_the_bound_is_the_modules_constant(monkeypatch):
    monkeypatch.setattr(group_admin, "DESCRIBE_ATTEMPTS", 1)
    c = StubCoordinator(("classic", "Empty"), {2: ("streams", "Assigning")})
    view = sample(c)
    assert view.torn and c.calls == [LIST_GROUPS, DESCRIBE_GROUPS]


class DescribeBug(StubCoordinator):
    """A coordinator whose describe disagrees with its own listing while nothing changes: as a
    DescribeGroups that answers "Dead" for a live classic group (or, as v6+, GROUP_ID_NOT_FOUND),
    or a ConsumerGroupDescribe / StreamsGroupDescribe that answers GROUP_ID_NOT_FOUND for a
    group ListGroups lists of its type."""

    def call(self, api_key: int, **fields) -> NS:
        answer = super().call(api_key, **fields)
        if api_key == DESCRIBE_GROUPS:
            code = GROUP_ID_NOT_FOUND if self.classic_dead_error else 0
            answer.groups = (NS(error_code=code, group_state="Dead", members=()),)
        elif api_key != LIST_GROUPS:
            answer.groups = (NS(error_code=GROUP_ID_NOT_FOUND, group_state="", error_message="not found"),)
        return answer


def test_describegroups_dead_for_an_unchanged_classic_listing_is_the_samples_state():
    # Listed classic Stable twice in a row: no conversion landed, so "Dead" is what the
    # coordinator says of its group, and the checks must see it, not a torn sample.
    c = DescribeBug(("classic", "Stable"))
    view = sample(c)
    assert view == GroupView("classic", "Dead") and not view.torn
    assert c.calls == [LIST_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS, DESCRIBE_GROUPS]
    # As v6+ answers it: an error sample of the listed type.
    c = DescribeBug(("classic", "Stable"), classic_dead_error=True)
    view = sample(c)
    assert (view.group_type, view.state, view.torn) == ("classic", "Stable", False)
    assert view.error == f"DescribeGroups error {GROUP_ID_NOT_FOUND}" and len(c.calls) == 4


@pytest.mark.parametrize("gtype, describe", [("consumer", CONSUMER_GROUP_DESCRIBE),
                                             ("streams", STREAMS_GROUP_DESCRIBE)])
def test_group_id_not_found_for_an_unchanged_listing_is_an_error_sample_of_the_listed_type(gtype, describe):
    c = DescribeBug((gtype, "Stable"))
    view = sample(c)
    assert (view.group_type, view.state, view.torn) == (gtype, "Stable", False)
    assert view.error is not None and f"error {GROUP_ID_NOT_FOUND}" in view.error
    assert c.calls == [LIST_GROUPS, describe, LIST_GROUPS, describe]


def test_a_listing_that_moved_is_retaken_until_it_stays():
    # The group's state moved between the first two listings (a join), so the first retake
    # is a race as far as the probe can tell; the third listing equals the second.
    c = DescribeBug(("classic", "Empty"), {3: ("classic", "PreparingRebalance")})
    view = sample(c)
    assert view == GroupView("classic", "Dead") and len(c.calls) == 2 * DESCRIBE_ATTEMPTS == 6
    # A group converted on every attempt still is torn (the listing moves each time).
    flips = {2 * i + 3: ("streams", "Assigning") if i % 2 == 0 else ("classic", "Empty")
             for i in range(DESCRIBE_ATTEMPTS)}
    assert sample(DescribeBug(("classic", "Empty"), flips)).torn
