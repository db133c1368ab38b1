"""AssignorIndex (coordinator/group/modern/consumer/assignor_index.py) agrees with client_assignment's rules
over random groups: the assignor, and each member's eligibility as assigner, with a member
added, replaced or removed through the group's own replay helpers."""
from __future__ import annotations

import random

from coordinator.group.modern.client_assignment import eligible_assigners, select_assignor
from coordinator.group.modern.consumer.group import ClientAssignorSpec, ConsumerGroup, ConsumerGroupMember


def _specs(rng: random.Random):
    if rng.random() < 0.1:
        return None
    names = rng.sample(["a", "b", "c", "d"], rng.randint(1, 3))
    out = []
    for n in names:
        lo = rng.randint(0, 2)
        out.append(ClientAssignorSpec(n, lo, lo + rng.randint(0, 2), rng.randint(0, 4)))
    return tuple(out)


def test_index_matches_the_rules_through_replay():
    rng = random.Random(17)
    for _ in range(300):
        g = ConsumerGroup("g")
        for step in range(rng.randint(1, 12)):
            mid = f"m{rng.randint(0, 6)}"
            if rng.random() < 0.2:
                g.remove_member(mid)
            else:
                g.put_member(ConsumerGroupMember(mid, client_assignors=_specs(rng)))
            lists = {m: mm.client_assignors for m, mm in g.members.items()}
            name = select_assignor(lists)
            assert g.client_assignor_index.select(len(g.members)) == name
            if name is not None:
                eligible = eligible_assigners(name, lists)
                for m, specs in lists.items():
                    spec = next(s for s in specs if s.name == name)
                    assert g.client_assignor_index.covers_all(spec) == (m in eligible)
        for m in list(g.members):
            g.remove_member(m)
        idx = g.client_assignor_index
        assert (idx.listed, dict(idx.names), dict(idx.ranks), idx.versions) == (0, {}, {}, {})
