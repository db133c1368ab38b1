"""Message types generated from Apache Kafka's own message definitions.

Rules of this package:
- The input is the JSON that Kafka ships in its jars (`common/message/*.json` in
  `kafka-clients`, the record schemas in `kafka-group-coordinator`), read straight from the
  jar: no definition is written or edited by hand here.
- The output has kio's shape (frozen slotted dataclasses, `kafka_type` and `tag` field
  metadata, kio's primitive and entity types, its time-field conventions), so kio's
  readers and writers serialise a generated class exactly as they serialise kio's own.
- Only what kio lacks is written to `coordinator/protocol/messages/`; where both have a
  version, `tests/unit/protocol/test_messagegen.py` checks that the generator's class is
  the same as kio's, field by field. Run `python -m coordinator.protocol.messagegen`
  to regenerate (docs/design/messages.md).
- Stdlib and kio only: the generator runs before anything else of kcoord is importable.
"""
