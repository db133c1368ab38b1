"""Reusable harness for kcoord's integration tests: real brokers, real clients.

Imported as the top-level package ``support`` (tests/conftest.py puts tests/ on
sys.path). See README.md beside this file. Modules:

    wait             wait_until: bounded waits on a condition (never a bare sleep)
    ports            free loopback ports inside the range this harness may use
    names            unique topic/group names per test
    processes        child-process registry (nothing outlives the run)
    tansu            start/stop an embedded Tansu broker
    admin            create topics, read committed offsets (confluent-kafka AdminClient)
    produce          produce records one per batch; a background producer
    ownership        OwnershipLedger: no partition owned by two members at once
    consumer_events  the event log every consumer driver feeds (one interface)
    rdkafka          confluent-kafka (librdkafka) consumer driver, one thread each
    java             Java kafka-clients 4.3 consumer driver (subprocess, JSON lines)
    aiokafka_driver, kafka_python_driver   classic-only Python client drivers
"""
