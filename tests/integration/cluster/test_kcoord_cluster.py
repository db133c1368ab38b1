"""Three `kcoord serve --instance-id` processes in front of Tansu or Apache Kafka 4.3 form one cluster
(issue 14): the shards spread over them, every instance names the same coordinator and the
same addresses, real clients follow a group to its owner, and killing a process moves its
shards to the others with every acknowledged commit kept.

On Tansu the processes join as dynamic members (Tansu 0.6 cannot carry static ones:
coordinator/cluster/membership.py static_membership_works), so a restart rebalances.

The trio runs the default fencing (`epoch`, fence by writing) unless a test names
`fencing=transactional`: those run first on Kafka 4.4 only, so the trio starts in that mode
and the rolling upgrade leaves it at the default for the rest of the module."""
from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from coordinator.cluster.balancer import NODE_ID_BASE
from coordinator.clustered import DEFAULT_FENCING
from support import group_probe as probe
from support import raw_client
from support.admin import create_topic
from support.kcoord import CLUSTER, KcoordProcess, free_port_block, start_all
from support.names import unique_name
from support.ownership import OwnershipLedger
from support.produce import BackgroundProducer, produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

pytestmark = pytest.mark.integration

SHARDS = 12
PARTITIONS = 6
METADATA = 3


def find(process: KcoordProcess, group: str) -> tuple[int, int, str, int]:
    """(error code, node id, host, port) of FindCoordinator v3 asked of `process`."""
    return probe.find(process.bootstrap, group)


def coordinators(processes, groups) -> dict[str, tuple[int, str, int]] | None:
    """Each group's coordinator if every process names the same one, else None."""
    out = {}
    for g in groups:
        try:
            answers = {find(p, g) for p in processes}
        except OSError:        # a process not listening (yet, or any more)
            return None
        if len(answers) != 1:
            return None
        code, node, host, port = answers.pop()
        if code != 0:
            return None
        out[g] = (node, host, port)
    return out


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets; a shard that just moved may still be loading
    (COORDINATOR_LOAD_IN_PROGRESS, which the Admin client does not retry): asked again."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    out: dict[int, int] = {}

    def ask() -> bool:
        try:
            result = admin.list_consumer_group_offsets([req])[group].result(timeout=20)
        except KafkaException as e:
            if e.args[0].code() in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                                    KafkaError.COORDINATOR_NOT_AVAILABLE):
                return False
            raise
        out.update({tp.partition: tp.offset for tp in result.topic_partitions})
        return True

    wait_until(ask, 30, message=f"the committed offsets of {group}")
    return out


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest):
    """Module-scoped, so one trio serves the module per upstream (support.upstreams; pytest
    groups the tests by upstream)."""
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


def _settled(procs: list[KcoordProcess]) -> bool:
    """Every process names the same coordinator for every group, and the groups spread over
    all three instances."""
    c = coordinators(procs, [f"g-{i}" for i in range(40)])
    return c is not None and len({node for node, _, _ in c.values()}) == 3


@pytest.fixture(scope="module")
def shared_trio(upstream):
    """Three processes for the module (a start of three and their settling cost ~20 s),
    started by the first test's fixture in the fencing mode it asks for."""
    state = unique_name("__kc_trio")
    procs = [KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", f"kc-{i}")) for i in range(3)]
    try:
        yield procs
    finally:
        for p in procs:
            if p.running():
                p.stop()


def _fencing(process: KcoordProcess) -> str:
    return next((item.split("=", 1)[1] for item in process.config if item.startswith("fencing=")), DEFAULT_FENCING)


def _restart_on_its_port(process: KcoordProcess) -> None:
    """Start `process` again on its ports. The test port range lies inside the machine's
    ephemeral range (32768-60999), so a client connection elsewhere can hold the stopped
    process's port for a moment: that start is tried again once the port is free."""
    def started() -> bool:
        try:
            process.restart(timeout=120)
            return True
        except RuntimeError as e:
            if "Address already in use" not in str(e):
                raise
            return False

    wait_until(started, 120, interval=1.0, message=f"{process.bootstrap} free to start on again")


def _with_fencing(procs: list[KcoordProcess], fencing: str) -> list[KcoordProcess]:
    """The three processes running with `fencing` (the default one named by none of their
    settings), settled. Not started yet: all three start together. To epoch: a rolling
    restart, one process at a time (a rolling upgrade). Back to transactional: all stopped
    first (a transactional take writes nothing to the partition, so it fences no epoch
    owner: docs/design/fencing.md)."""
    config = CLUSTER if fencing == DEFAULT_FENCING else (*CLUSTER, f"fencing={fencing}")
    if fencing == "transactional" and any(_fencing(p) != fencing for p in procs):
        for p in procs:
            if p.running():
                p.stop()
    if not any(p.running() for p in procs):
        for p in procs:
            p.config = config
    for p in procs:
        if _fencing(p) != fencing:
            if p.running():
                assert p.stop() == 0
            p.config = config
            _restart_on_its_port(p)
            wait_until(lambda: coordinators(procs, [f"g-{i}" for i in range(40)]) is not None, 60,
                       message=f"the cluster settles after a restart with fencing={fencing}")
    start_all([p for p in procs if not p.running()], timeout=120)     # three at once on a loaded machine
    wait_until(lambda: _settled(procs), 60, message="the cluster settles")
    return procs


@pytest.fixture
def trio(shared_trio):
    """The module's three processes with the default fencing (epoch), settled; each test uses
    its own topics and groups. A process an earlier test killed or stopped is started again
    under its instance id (a paused one was woken by its test), so every test begins with
    three settled instances."""
    return _with_fencing(shared_trio, DEFAULT_FENCING)


def _kafka44_only(request: pytest.FixtureRequest) -> None:
    """fencing=transactional with real processes runs on Kafka 4.4 only: the runtime-level
    tests cover Tansu (tests/integration/runtime/test_fenced_state_log.py), and a trio
    restarted per upstream costs CI a minute."""
    if request.node.callspec.params.get("upstream") != "kafka44":
        pytest.skip("fencing=transactional with real processes runs on Kafka 4.4 only")


@pytest.fixture
def transactional_trio(shared_trio, request):
    """The module's three processes with fencing=transactional: started so (the module's
    first tests), and the rolling upgrade to the default the test runs when it likes."""
    _kafka44_only(request)
    return _with_fencing(shared_trio, "transactional"), lambda: _with_fencing(shared_trio, DEFAULT_FENCING)


# fencing=transactional with real processes: first in the module, so the trio starts in that
# mode (no stop of all three); the rolling upgrade then leaves it at the default.


def test_a_paused_process_fenced_by_a_transactional_take_answers_nothing_and_writes_nothing(
        transactional_trio, upstream, names, ask_on_waking):
    """fencing=transactional: a paused process past its session is fenced by its successor's
    take (InitProducerId aborts its open transaction); what waited for it is refused, never
    applied."""
    _pause_take_over_and_wake(transactional_trio[0], upstream, names, ask_on_waking, "transactional")


def test_a_rolling_upgrade_from_transactional_fencing_keeps_every_commit(transactional_trio, upstream, names):
    """Each process in turn stopped (SIGTERM) and started again with the default fencing (epoch) while
    commits go on: the shards pass from transactional owners to epoch owners and back
    (a stopped epoch owner's shards go to a transactional one mid-upgrade), without a stop of
    the cluster; every acknowledged commit is kept, and the shards end fenced by writing."""
    from coordinator.group.hashing import partition_for
    from support.state_partition import read_state_log

    procs, upgrade = transactional_trio
    topic = names.topic()
    create_topic(upstream.bootstrap, topic, 1)
    groups = [f"{names.group()}-{i}" for i in range(6)]
    acked: dict[str, list[tuple[int, float]]] = {g: [] for g in groups}
    stop = threading.Event()

    def commits() -> None:
        # One connection per process, opened again after a failure: few client ports taken
        # while a process restarts on its own (see _restart_on_its_port).
        socks: dict[int, socket.socket] = {}

        def conn(port: int) -> socket.socket:
            if port not in socks:
                socks[port] = socket.create_connection(("127.0.0.1", port), timeout=30)
            return socks[port]

        offset = 0
        while not stop.is_set():
            offset += 1
            for g in groups:
                port = procs[offset % 3].port
                try:
                    port = probe.find(conn(port), g)[3]
                    if probe.commit(conn(port), g, topic, offset) == 0:
                        acked[g].append((offset, time.monotonic()))
                except (OSError, AssertionError):     # a process stopping or starting:
                    dropped = socks.pop(port, None)    # the next round asks again
                    if dropped is not None:
                        dropped.close()
        for sock in socks.values():
            sock.close()

    t = threading.Thread(target=commits, daemon=True)
    t.start()
    try:
        wait_until(lambda: all(acked.values()), 60, message="every group commits before the upgrade")
        upgrade()
        upgraded = time.monotonic()
        wait_until(lambda: all(a and a[-1][1] > upgraded for a in acked.values()), 60,
                   message="every group commits after the upgrade")
    finally:
        stop.set()
        t.join(60)
    assert all(p.running() for p in procs)
    for g in groups:
        owner = next(p for p in procs if p.port == find(procs[0], g)[3])
        code, offset = fetch_loaded(owner, g, topic)
        assert code == 0 and offset >= max(o for o, _ in acked[g]), (g, offset, acked[g][-3:])
    for partition in {partition_for(g, SHARDS) for g in groups}:
        log = read_state_log(upstream.bootstrap, procs[0].state_topic, partition)
        assert log.fences, f"state partition {partition} was not fenced by writing"
        assert log.epoch_regressions() == []


def test_three_processes_share_the_shards_and_agree_on_addresses(trio):
    groups = [f"g-{i}" for i in range(40)]
    coords = coordinators(trio, groups)
    assert coords is not None
    nodes = {node: (host, port) for node, host, port in coords.values()}
    # Synthetic node ids, one per instance, each at that instance's bootstrap port.
    assert all(node >= NODE_ID_BASE for node in nodes), nodes
    assert sorted(port for _, port in nodes.values()) == sorted(p.port for p in trio)
    # Metadata from every instance lists the same brokers at the same addresses, the three
    # coordinator nodes among them; the upstream broker is fronted by one instance.
    views = []
    for p in trio:
        md = raw_client.call_with(p.bootstrap, METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)
        views.append(sorted((int(b.node_id), b.host, int(b.port)) for b in md.brokers))
    assert views[0] == views[1] == views[2], views
    listed = {node: (host, port) for node, host, port in views[0]}
    for node, address in nodes.items():
        assert listed.get(node) == address, (node, listed)
    upstream_nodes = [n for n in listed if n < NODE_ID_BASE]
    assert upstream_nodes, listed
    own_ports = {port for p in trio for port in range(p.port, p.port + 2)}
    assert all(listed[n][1] in own_ports for n in upstream_nodes), (listed, own_ports)


# Before the tests that kill a process with -9: the next test's `trio` starts a killed one
# again (12-20 s on Tansu, where the processes are dynamic members), and the last kill of
# the module (test_librdkafka_follows_an_upstream_broker_to_its_new_front) needs no restart.
def test_groups_list_through_one_instance_shows_every_instances_groups(trio, upstream, names):
    """`kcoord groups list` asks ListGroups of every node in Metadata, as Kafka's tools do:
    through any one instance it finds the groups of all three."""
    import subprocess
    import sys

    topic = names.topic()
    create_topic(upstream.bootstrap, topic, 1)
    groups = [f"{names.group()}-{i}" for i in range(12)]
    for g in groups:
        owner = next(p for p in trio if p.port == find(trio[0], g)[3])
        wait_until(lambda o=owner, g=g: commit(o, g, topic, 3) == 0, 30, message=f"commit of {g}")
    owners = {find(trio[0], g)[1] for g in groups}
    assert len(owners) >= 2, owners
    out = subprocess.run([sys.executable, "-m", "coordinator.cli", "groups", "list", "--bootstrap-server",
                          trio[1].bootstrap], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed = set(out.stdout.split())
    assert set(groups) <= listed, sorted(set(groups) - listed)


def _unconsumed(produced, consumers) -> str:
    """What a failed wait for consumption reports: the records not consumed yet per
    partition, and the partitions each consumer holds (an unowned partition shows here)."""
    seen = {(r.partition, r.offset) for c in consumers for r in c.consumed()}
    missing = Counter(r.partition for r in produced if (r.partition, r.offset) not in seen)
    held = {c.member: sorted(p for _, p in c.assignment()) for c in consumers}
    return f"not consumed, per partition: {dict(sorted(missing.items()))}; partitions held: {held}"


def _consumer(client: str, bootstrap: str, topic: str, group: str, member: str, ledger, protocol: str):
    if client == "java":
        from support.java import JavaConsumer, java_available
        if not java_available():
            pytest.skip("no JDK: the Java client cannot run here")
        return JavaConsumer(bootstrap, topic, group, member=member, ledger=ledger, group_protocol=protocol)
    return RdkafkaConsumer(bootstrap, topic, group, member=member, ledger=ledger, group_protocol=protocol)


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_kill_dash_nine_moves_the_groups_and_keeps_every_commit(trio, upstream, names, drivers, client):
    topic = names.topic()
    create_topic(upstream.bootstrap, topic, PARTITIONS)
    produce_records(upstream.bootstrap, topic, 120)
    producer = BackgroundProducer(upstream.bootstrap, topic, interval=0.005).start()
    # One consumer-protocol group and one classic group, through different instances.
    group_a, group_b = names.group(), names.group()
    ledgers = {group_a: OwnershipLedger(), group_b: OwnershipLedger()}   # a partition per group
    consumers = [drivers.add(_consumer(client, trio[i % 3].bootstrap, topic, group, f"{group}-c{i}",
                                       ledgers[group], protocol)).start()
                 for i, (group, protocol) in enumerate([(group_a, "consumer"), (group_a, "consumer"),
                                                        (group_b, "classic"), (group_b, "classic")])]
    by_group = {group_a: consumers[:2], group_b: consumers[2:]}
    for members in by_group.values():
        wait_until(lambda m=members: sum(len(c.assignment()) for c in m) == PARTITIONS, 60,
                   message="each group is assigned every partition")
    wait_until(lambda: all(len(c.consumed()) > 20 for c in consumers), 60, message="consumption")

    # Kill the instance coordinating group A.
    _, node_a, _, port_a = find(trio[0], group_a)
    victim = next(p for p in trio if p.port == port_a)
    survivors = [p for p in trio if p is not victim]
    killed_at = time.monotonic_ns()
    assert victim.kill() == -9
    acked: dict[str, dict[int, int]] = {}
    for group, members in by_group.items():
        acked[group] = {}
        for c in members:
            for ev in c.events("committed"):
                if ev["t"] < killed_at:
                    for _, part, off in ev["offsets"]:
                        acked[group][part] = max(acked[group].get(part, -1), off)
    assert acked[group_a], "no commit of group A was acknowledged before the kill"

    # Served again by a survivor, named the same by both.
    wait_until(lambda: (c := coordinators(survivors, [group_a, group_b])) is not None
               and c[group_a][0] != node_a, 60, message="group A's shard moved to a survivor")
    for group in (group_a, group_b):
        after = committed(survivors[0].bootstrap, group, topic)
        assert all(after[p] >= off for p, off in acked[group].items()), (group, acked[group], after)

    produced = produce_records(upstream.bootstrap, topic, 60) + producer.stop()
    for group, members in by_group.items():
        wait_until(lambda m=members: {(r.partition, r.offset) for r in produced}
                   <= {(r.partition, r.offset) for c in m for r in c.consumed()}, 90,
                   message=lambda g=group, m=members: f"group {g} consumes everything produced around the "
                                                      f"kill ({_unconsumed(produced, m)})")
    for ledger in ledgers.values():
        ledger.assert_no_double_ownership()
    assert not [e for c in consumers for e in c.errors() if e.get("fatal")]
    # KIP-848 members saw no rebalance: the failover was shorter than their session timeout.
    assert not [e for c in by_group[group_a] for e in c.events("lost") if e["t"] > killed_at]
    counts = Counter(find(p, g)[1] for p in survivors for g in (f"g-{i}" for i in range(40)))
    assert len(counts) == 2, counts   # the survivors now coordinate everything


OFFSET_COMMIT = 8
_commit_request = probe.commit_request


def commit(process: KcoordProcess, group: str, topic: str, offset: int) -> int:
    return probe.commit(process.bootstrap, group, topic, offset)


def fetch(process: KcoordProcess, group: str, topic: str) -> tuple[int, int]:
    return probe.fetch(process.bootstrap, group, topic)


def fetch_loaded(process: KcoordProcess, group: str, topic: str, timeout: float = 30) -> tuple[int, int]:
    """OffsetFetch, retried while the shard answers COORDINATOR_LOAD_IN_PROGRESS (14), as
    clients retry it: an owner that just took the shard may still be loading it."""
    return wait_until(lambda: (r := fetch(process, group, topic))[0] != 14 and r, timeout, 0.1,
                      f"{group}'s shard loaded on {process.bootstrap}")


def owned_group(owner: KcoordProcess, processes, prefix: str) -> str:
    """A group name whose coordinator is `owner`."""
    for i in range(500):
        group = f"{prefix}-{i}"
        if find(processes[0], group)[3] == owner.port:
            return group
    raise AssertionError(f"no group of 500 lands on {owner.port}")


class Committer:
    """One connection to `process`, one commit of `group` in flight at a time, offsets 2, 3,
    ...: (offset, error code or None when the connection failed) of each, in order."""

    def __init__(self, process: KcoordProcess, group: str, topic: str) -> None:
        self.process, self.group, self.topic = process, group, topic
        self.answers: list[tuple[int, int | None]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        offset = 1
        try:
            sock = socket.create_connection(("127.0.0.1", self.process.port), timeout=60)
        except OSError:
            return
        with sock:
            while not self.stopping.is_set():
                offset += 1
                try:
                    self.answers.append((offset, probe.commit(sock, self.group, self.topic, offset)))
                except (OSError, AssertionError):    # closed or timed out: no answer
                    self.answers.append((offset, None))
                    return

    def acked(self) -> list[int]:
        return [offset for offset, code in self.answers if code == 0]

    def start(self) -> Committer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(90)
        assert not self.thread.is_alive(), "the committer's last commit got no answer in 90 s"


def _pause_take_over_and_wake(trio, upstream, names, ask_on_waking, fencing: str) -> None:
    """SIGSTOP past the membership session while commits are in flight: the others take its
    shards (fencing its producer epoch: a transactional take, or an epoch take and its fence
    write); on SIGCONT it answers nothing as the owner, nothing it sends is accepted, and
    everything it landed before the fence is in the new owner's state (the log says so)."""
    import signal

    from coordinator.group.hashing import partition_for
    from support.state_partition import read_state_log

    topic = names.topic()
    create_topic(upstream.bootstrap, topic, 1)
    victim = trio[1]
    survivors = [trio[0], trio[2]]
    group = owned_group(victim, trio, names.group())
    # The new topic reaches kcoord's metadata within its refresh (UNKNOWN_TOPIC_OR_PARTITION before).
    wait_until(lambda: commit(victim, group, topic, 1) == 0, 30, message="the first commit")
    committer = Committer(victim, group, topic).start()
    wait_until(lambda: len(committer.acked()) >= 20, 30, message="20 commits acknowledged")

    victim.process.send_signal(signal.SIGSTOP)
    try:
        acked_before = max(committer.acked())      # its in-flight commit is answered only on waking
        committer.stopping.set()
        # The others see the session expire and take its shards.
        wait_until(lambda: (c := coordinators(survivors, [group])) is not None and c[group][2] != victim.port,
                   60, message="a survivor owns the paused process's shard")
        new_owner = next(p for p in survivors if p.port == find(survivors[0], group)[3])
        code, loaded = fetch_loaded(new_owner, group, topic)
        assert code == 0 and loaded >= acked_before, (code, loaded, acked_before)
        # A commit that reaches the zombie while it sleeps (the kernel accepts the bytes).
        answer = ask_on_waking(victim, OFFSET_COMMIT, 8, _commit_request(group, topic, 999))
    finally:
        victim.process.send_signal(signal.SIGCONT)
    committer.stop()
    # It answers nothing as the owner after its lease: NOT_COORDINATOR (16) to what waited
    # in its socket; the commit in flight over the pause is refused too, or was answered
    # before the pause took hold, and then it landed before the fence.
    assert answer.topics[0].partitions[0].error_code == 16, answer
    last_offset, last_code = committer.answers[-1]
    assert last_code != 0 or last_offset <= loaded, committer.answers[-3:]
    # Nothing it did after waking is applied: the new owner still has what it loaded.
    assert fetch_loaded(new_owner, group, topic) == (0, loaded)
    # The log: the new owner's state is what the partition holds (everything landed before
    # the fence is in the load), and no batch under an older epoch of a producer id landed
    # after a newer one (nothing accepted after the fence).
    log = read_state_log(upstream.bootstrap, victim.state_topic, partition_for(group, SHARDS))
    assert log.offsets.get((group, topic, 0)) == loaded, (log.offsets.get((group, topic, 0)), loaded)
    assert log.epoch_regressions() == []
    if fencing == "epoch":
        # The take's fence record is under a newer epoch than every earlier batch of its id.
        at, pid, epoch = log.fences[-1]
        older = [b.producer_epoch for b in log.batches if b.producer_id == pid and b.base_offset < at]
        assert older and max(older) < epoch, (older, epoch)
    # It steps down and rejoins: all three agree again, and its answers come from the map.
    wait_until(lambda: coordinators(trio, [group, *(f"g-{i}" for i in range(40))]) is not None, 60,
               message="the woken process rejoins and agrees with the others")
    owner = next(p for p in trio if p.port == find(trio[0], group)[3])
    assert fetch_loaded(owner, group, topic) == (0, loaded)


def test_a_paused_process_answers_nothing_and_writes_nothing(trio, upstream, names, ask_on_waking):
    """The default fencing (epoch): the successor's take bumps the shard's epoch and writes
    its fence before loading; the woken process's writes are refused at the partition, and
    what waited for it is refused, never applied."""
    _pause_take_over_and_wake(trio, upstream, names, ask_on_waking, DEFAULT_FENCING)


def test_a_joiner_takes_a_share_and_unmoved_shards_keep_serving(upstream, names):
    """Two processes, then a third: it takes a third of the shards; a group whose shard did
    not move answers every request throughout."""
    import threading

    topic = names.topic()
    create_topic(upstream.bootstrap, topic, 1)
    state = f"__kc_{names.topic()}"
    procs = [KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", f"kc-{i}")) for i in range(3)]
    try:
        start_all(procs[:2], timeout=60)
        groups = [f"g-{i}" for i in range(40)]
        wait_until(lambda: (c := coordinators(procs[:2], groups)) is not None
                   and len({n for n, _, _ in c.values()}) == 2, 60, message="two processes settle")
        before = coordinators(procs[:2], groups)
        assert before is not None
        # Probe every group's committed offset on its coordinator while the third joins.
        for g in groups:
            owner = next(p for p in procs[:2] if p.port == before[g][2])
            wait_until(lambda o=owner, g=g: commit(o, g, topic, 7) == 0, 30, message=f"commit of {g}")
        errors: dict[str, list[int]] = {g: [] for g in groups}
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                for g in groups:
                    code, node, host, port = find(procs[0], g)
                    if code:
                        errors[g].append(code)
                        continue
                    owner = next((p for p in procs if p.port == port), None)
                    if owner is None:
                        continue
                    err, offset = fetch(owner, g, topic)
                    if err or offset != 7:
                        errors[g].append(err or -offset)

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        procs[2].start(timeout=60)
        wait_until(lambda: (c := coordinators(procs, groups)) is not None
                   and len({n for n, _, _ in c.values()}) == 3, 60, message="the joiner takes a share")
        stop.set()
        t.join(30)
        after = coordinators(procs, groups)
        assert after is not None
        moved = {g for g in groups if after[g] != before[g]}
        unmoved = set(groups) - moved
        assert moved and unmoved, (moved, unmoved)
        assert {g: errors[g] for g in unmoved if errors[g]} == {}
        # Each holds 4 of the 12 shards.
        shares = Counter(find(procs[0], f"s-{i}")[1] for i in range(200))
        assert len(shares) == 3, shares
    finally:
        for p in procs:
            if p.process is not None and p.process.poll() is None:
                p.stop()


def test_rolling_restart_fences_no_consumer_protocol_member(trio, upstream, names, ledger, drivers):
    """SIGTERM and restart each process in turn while consumers run: each leaves the group
    after its writes (its shards move at once) and comes back; KIP-848 members lose
    nothing, and nothing produced meanwhile is missed."""
    topic, group = names.topic(), names.group()
    create_topic(upstream.bootstrap, topic, PARTITIONS)
    producer = BackgroundProducer(upstream.bootstrap, topic, interval=0.005).start()
    consumers = [drivers.add(RdkafkaConsumer(trio[i].bootstrap, topic, group, member=f"c{i}", ledger=ledger,
                                             group_protocol="consumer")).start() for i in range(3)]
    wait_until(lambda: sum(len(c.assignment()) for c in consumers) == PARTITIONS, 60, message="assignment")
    started = time.monotonic_ns()
    for p in trio:
        assert p.stop() == 0          # SIGTERM: a scale-down, LeaveGroup by instance id
        p.restart(timeout=60)
        wait_until(lambda: coordinators(trio, [group, *(f"g-{i}" for i in range(40))]) is not None, 60,
                   message="the cluster settles after a restart")
    produced = producer.stop()
    wait_until(lambda: {(r.partition, r.offset) for r in produced}
               <= {(r.partition, r.offset) for c in consumers for r in c.consumed()}, 90,
               message=lambda: "everything produced during the rolling restart is consumed "
                               f"({_unconsumed(produced, consumers)})")
    assert not [e for c in consumers for e in c.events("lost") if e["t"] > started]
    assert not [e for c in consumers for e in c.errors() if e.get("fatal")]
    ledger.assert_no_double_ownership()


def test_processes_flag_runs_a_supervised_cluster(upstream, names):
    """`kcoord serve --processes 2`: two children form one cluster; a child killed with -9
    is restarted by the supervisor under the same instance id."""
    import os
    import signal

    state = f"__kc_{names.topic()}"
    sup = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                        port=free_port_block(12), extra_args=("--processes", "2", "--port-stride", "10"))
    sup.start(timeout=60)
    try:
        second = KcoordProcess(upstream.bootstrap, state, port=sup.port + 10)
        pair = [sup, second]
        wait_until(lambda: (c := coordinators(pair, [f"g-{i}" for i in range(40)])) is not None
                   and len({n for n, _, _ in c.values()}) == 2, 60, message="two children form a cluster")
        children = [int(pid) for pid in os.popen(f"pgrep -P {sup.process.pid}").read().split()]
        assert len(children) == 2, children
        os.kill(children[0], signal.SIGKILL)
        wait_until(lambda: len([int(p) for p in os.popen(f"pgrep -P {sup.process.pid}").read().split()
                                if int(p) != children[0]]) == 2, 60, message="the supervisor restarts the child")
        wait_until(lambda: (c := coordinators(pair, [f"g-{i}" for i in range(40)])) is not None
                   and len({n for n, _, _ in c.values()}) == 2, 60, message="the restarted child serves again")
    finally:
        assert sup.stop(timeout=60) == 0


def upstream_front(process: KcoordProcess) -> dict[int, tuple[str, int]]:
    md = raw_client.call_with(process.bootstrap, METADATA, 12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    return {int(b.node_id): (b.host, int(b.port)) for b in md.brokers if b.node_id < NODE_ID_BASE}


def test_librdkafka_follows_an_upstream_broker_to_its_new_front(trio, upstream, names, ledger, drivers):
    """Issue 14 §4: librdkafka keys brokers by node id. Kill the instance fronting the
    upstream broker: the survivors name the same node id at another instance's address,
    and a running consumer follows it (it reconnects to the new address) and consumes on."""
    topic, group = names.topic(), names.group()
    create_topic(upstream.bootstrap, topic, PARTITIONS)
    front = upstream_front(trio[0])
    (node, (host, port)), = front.items()
    victim = next(p for p in trio if p.port < port <= p.port + 1)
    survivors = [p for p in trio if p is not victim]
    consumer = drivers.add(RdkafkaConsumer(survivors[0].bootstrap, topic, group, member="c0", ledger=ledger,
                                           group_protocol="consumer")).start()
    producer = BackgroundProducer(upstream.bootstrap, topic, interval=0.005).start()
    wait_until(lambda: len(consumer.consumed()) > 50, 60, message="consumption through the first front")
    assert victim.kill() == -9
    wait_until(lambda: all((f := upstream_front(p)) and f[node] != (host, port) for p in survivors), 60,
               message="the survivors front the broker elsewhere")
    assert upstream_front(survivors[0]) == upstream_front(survivors[1])
    produced = producer.stop()
    wait_until(lambda: {(r.partition, r.offset) for r in produced}
               <= {(r.partition, r.offset) for r in consumer.consumed()}, 90,
               message=f"the consumer follows node {node} to its new address")
    assert not [e for e in consumer.errors() if e.get("fatal")]


def test_fencing_none_refuses_to_serve_beside_a_second_process(upstream, names):
    """`fencing=none` writes as one process does, so it stops (exit 4) once its membership
    group holds a second instance; the other then serves every shard."""
    state = f"__kc_{names.topic()}"
    alone = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS,
                          config=(*CLUSTER, "fencing=none"), extra_args=("--instance-id", "kc-0"))
    second = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", "kc-1"))
    alone.start(timeout=60)
    try:
        assert any("fencing=none" in line for line in alone.output()), alone.output()
        second.start(timeout=60)
        wait_until(lambda: alone.process.poll() is not None, 60, message="the fencing=none process stops")
        assert alone.process.returncode == 4
        assert "runs with fencing=none, but membership group" in alone.log_text()
        wait_until(lambda: (c := coordinators([second], [f"g-{i}" for i in range(40)])) is not None
                   and {port for _, _, port in c.values()} == {second.port}, 60,
                   message="the second process serves every shard")
    finally:
        for p in (alone, second):
            if p.process is not None and p.process.poll() is None:
                p.stop()
