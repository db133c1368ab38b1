"""A structured fuzz run in front of Kafka 4.4 (bench/bench_fuzz.py --upstream kafka, seed 1)
left the broker answering nothing after 127,685 frames: each IncrementalAlterConfigs naming a
config operation outside SET..SUBTRACT on a TOPIC resource made its controller fail on a null
OpType and renounce its leadership (26 times). kcoord refuses such a resource itself, with or
without safeguards, and forwards only the others (gateway/admin_policy.py)."""
from __future__ import annotations

import sys

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.state_guard import Local, Split, StateTopicGuard
from coordinator.protocol.apis import INCREMENTAL_ALTER_CONFIGS, request_class, request_header_version
from coordinator.protocol.codec import decode_body, encode_body, encode_response_frame
from coordinator.protocol.framing import RequestHeader, frame, request_body_offset


def _request(*resources: tuple[str, int]):  # type: ignore[no-untyped-def]
    cls = request_class(INCREMENTAL_ALTER_CONFIGS, 1)
    m = sys.modules[cls.__module__]
    return cls(validate_only=False, resources=tuple(m.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=(m.AlterableConfig(name="retention.ms", config_operation=op,
                                                                        value="1000"),))
        for name, op in resources))


def _decide(request):  # type: ignore[no-untyped-def]
    version = request_header_version(INCREMENTAL_ALTER_CONFIGS, 1)
    data = frame(RequestHeader(INCREMENTAL_ALTER_CONFIGS, 1, 3, "t").encode(version) + encode_body(request))
    offset = request_body_offset(data, version)[1]
    # no policy: the gateway's path for a client without safeguards (guarded.py)
    return StateTopicGuard("__kcoord", lambda: None, lambda: True).admin(
        INCREMENTAL_ALTER_CONFIGS, 1, request, data, offset)


@pytest.mark.parametrize("op", [4, 5, 127, -1, -128])
def test_an_unknown_config_operation_is_refused_naming_the_field_and_never_forwarded(op):
    decision = _decide(_request(("t", op)))
    assert isinstance(decision, Local), decision
    encode_response_frame(INCREMENTAL_ALTER_CONFIGS, 1, 3, decision.response)     # what the client reads
    [answer] = decision.response.responses
    assert (answer.resource_name, answer.error_code) == ("t", ErrorCode.invalid_request)
    assert answer.error_message == (f"Unknown config_operation {op} for config 'retention.ms' of resource 't' "
                                    f"(0-3: SET, DELETE, APPEND, SUBTRACT).")


def test_the_other_resources_are_forwarded_without_the_refused_one():
    decision = _decide(_request(("t", 5), ("u", 0), ("v", 3)))
    assert isinstance(decision, Split), decision
    version = request_header_version(INCREMENTAL_ALTER_CONFIGS, 1)
    forwarded = decode_body(request_class(INCREMENTAL_ALTER_CONFIGS, 1), decision.frame,
                            request_body_offset(decision.frame, version)[1])
    assert [r.resource_name for r in forwarded.resources] == ["u", "v"]


def test_known_operations_are_forwarded_as_they_are():
    assert _decide(_request(("t", 0), ("u", 1), ("v", 2), ("w", 3))) is None
