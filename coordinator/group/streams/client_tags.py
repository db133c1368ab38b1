"""Zone-aware standby placement: kcoord's extension, off by default (the group's
`streams.rack.aware.assignment.tags`, else the serve-wide `streams_rack_aware_assignment_tags`,
empty). Kafka 4.4's streams `sticky` assignor has no rack
awareness; classic Kafka Streams has KIP-708's (`rack.aware.assignment.tags`, its
`ClientTagAwareStandbyTaskAssignor`), whose filter this module applies to the sticky assignor's
standby placement (assignor.py).

Rules (KIP-708's, as its assignor does them):
- a process's tags are its members' `ClientTags` for the configured keys (the members of one
  process are the stream threads of one Streams client, and Kafka Streams 4.4 sends its
  `client.tag.<key>` configs as every member's ClientTags: StreamThread.initStreamsRebalanceData
  passes StreamsConfig.getClientTags() into StreamsRebalanceData); where they differ, the
  smallest member id's;
- for each standby replica of a task, the processes already holding the task (its active and
  the standbys placed so far) ban, for each configured key they have a value for, every
  process with that same value: but only while that key has more distinct values among the
  group's processes than the task has holders (KIP-708: "if we have used more clients than
  all the tag's unique values, we can't filter out clients located on that tag"). What is
  banned stays banned for the task's later replicas, as KIP-708's assignor keeps adding to
  its filtered clients, except that once the holders have every value of a key, that key
  bans only the active's value (`settle`): which standbys' values stayed banned would depend on
  the order they were placed in, and a target that placed them in another order moved a
  standby between two zones and back (3 of 3,000 random groups, each a restore of a standby
  at every new target);
- a process without a value for a key is never banned by that key and bans nobody by it
  (KIP-708 builds its filter from the values clients have: a client without the tag is in
  none of its tag groups). So an instance that does not set the tag is a candidate
  everywhere, and its copies do not count against any zone;
- the filter only narrows the choice: when it leaves no candidate, the replica is placed by
  the rule without tags (KIP-708 falls back to the least loaded clients), so exactly the
  standbys that would be placed without tags are placed.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

Banned = dict[str, set[str]]     # tag key -> the values a task's next replica may not have

# Kafka Streams refuses more client tags ("At most 5 client tags can be specified using
# client.tag. prefix.", StreamsConfig's MAX_RACK_AWARE_ASSIGNMENT_TAG_LIST_SIZE): a member
# sending more is no Streams client, and its tags are not read (the member counts as untagged),
# so a hostile member's thousands of tags cost the assignor nothing (record 19 keeps them all,
# as Kafka does).
MAX_CLIENT_TAGS = 5


class TagSpread:
    """The configured keys' values of each process, and how many distinct values each key has."""

    __slots__ = ("keys", "of", "distinct")

    def __init__(self, keys: Iterable[str], members: Mapping[str, tuple[str, Iterable[tuple[str, str]]]]) -> None:
        """``members``: member id -> (process id, its client tags)."""
        self.keys = tuple(dict.fromkeys(keys))
        wanted = set(self.keys)
        self.of: dict[str, dict[str, str]] = {}
        for _m, (pid, tags) in sorted(members.items(), reverse=True):
            # the smallest member id of a process is seen last and wins
            self.of[pid] = {k: v for k, v in tags if k in wanted}
        values: dict[str, set[str]] = {k: set() for k in self.keys}
        for held in self.of.values():
            for k, v in held.items():
                values[k].add(v)
        self.distinct = {k: len(vs) for k, vs in values.items()}

    def ban(self, holders: set[str], banned: Banned | None = None) -> Banned:
        """``banned`` (a new table when None) with the values of the task's ``holders`` added,
        for each key with more distinct values than there are holders."""
        if banned is None:
            banned = {}
        count = len(holders)
        for k in self.keys:
            if self.distinct[k] > count:
                values = {tags[k] for h in holders if k in (tags := self.of[h])}
                if values:
                    banned.setdefault(k, set()).update(values)
        return banned

    def settle(self, holders: set[str], banned: Banned, first: Banned) -> Banned:
        """``banned`` where each key whose every value the task's ``holders`` have is back to
        ``first`` (the ban of the active's values): which of the standbys' values stayed banned
        then depends only on the order the standbys were placed in, so a new target that placed
        them in another order banned another zone and moved a standby (the rule's reason,
        module docstring)."""
        for k in self.keys:
            if k in banned and len({tags[k] for h in holders if k in (tags := self.of[h])}) == self.distinct[k]:
                if k in first:
                    banned[k] = set(first[k])
                else:           # the active has no value for it: the key bans nothing
                    del banned[k]
        return banned

    def cells(self, process_ids: Iterable[str]) -> int:
        """How many distinct cells the processes fall in."""
        return len({self.cell(pid) for pid in process_ids})

    def cell(self, process_id: str) -> tuple[str | None, ...]:
        """The process's values of the keys (None: none): processes of one cell are banned
        together."""
        tags = self.of[process_id]
        return tuple(tags.get(k) for k in self.keys)

    def allows(self, banned: Banned, process_id: str) -> bool:
        """Whether the process may take the replica: none of its values is banned."""
        tags = self.of[process_id]
        return not any(k in tags and tags[k] in values for k, values in banned.items())
