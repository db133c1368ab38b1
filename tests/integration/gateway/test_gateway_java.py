"""Java kafka-clients 4.3 through the gateway: it must accept our ApiVersions (features
included: group.version finalized at 1 is what makes a 4.x consumer use KIP-848)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gateway_helpers import RunningGateway
from support.names import TestNames

PROBE = Path(__file__).resolve().parent / "java" / "GatewayProbe.java"
pytestmark = pytest.mark.java


def test_java_client_through_gateway(gateway: RunningGateway, names: TestNames) -> None:
    from support.java import ensure_java_jars, java_available
    if not java_available():
        pytest.skip("no JDK on PATH")
    jars = ensure_java_jars() / "jars"
    log4j = jars.parent / "log4j2.properties"
    topic = names.topic()
    result = subprocess.run(
        ["java", f"-Dlog4j2.configurationFile={log4j}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         "-cp", f"{jars}/*", str(PROBE), gateway.bootstrap, topic],
        capture_output=True, text=True, timeout=90)
    out = result.stdout
    assert result.returncode == 0, f"stdout:\n{out}\nstderr:\n{result.stderr[-3000:]}"
    assert "group.version=FinalizedVersionRange[min_version_level:1, max_version_level:1]" in out
    assert "group.version=SupportedVersionRange[min_version:0, max_version:1]" in out
    ports = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+) \(id:", out)}
    assert ports and ports <= gateway.broker_ports(), out
    assert len(re.findall(rf"^sent {re.escape(topic)}-\d@\d+$", out, re.M)) == 5, out
