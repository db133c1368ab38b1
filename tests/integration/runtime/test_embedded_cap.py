"""The embedded broker dies by its memory cap, not by eating the host.

One valid CreateTopics for 50,000,000 partitions, sent straight to the embedded Tansu
(the gateway refuses it), makes Tansu allocate ~200 GB. Under a 512 MiB cap
(`--embedded-memory-max`) the allocation fails inside the broker, so the test can never
take memory from the machine it runs on; kcoord's supervision then logs the cap, that it
was hit, and exits with its embedded-broker status (runtime/memory_cap.py).
"""
from __future__ import annotations

import re
import socket
import sys
from datetime import timedelta
from pathlib import Path

from coordinator.protocol.apis import CREATE_TOPICS
from support import processes, raw_client
from support.kcoord import REPO, free_port_block, launch_serve

EXIT_EMBEDDED_BROKER_EXITED = 3   # coordinator.cli.EXIT_EMBEDDED_BROKER_EXITED
CAP = "512m"


def test_a_50m_partition_create_topics_kills_only_the_capped_broker(tmp_path, names):
    port = free_port_block(2)
    lines: list[str] = []
    args = [sys.executable, "-m", "coordinator.cli", "serve", "--listen", f"127.0.0.1:{port}",
            "--state-topic", f"__kcoord_{names.topic()}", "--state-partitions", "1",
            "--embedded-log", str(tmp_path / "tansu.log"), "--embedded-memory-max", CAP]
    process, log_path = launch_serve(args, REPO, f"kcoord-cap-{port}", lines, timeout=30)
    try:
        banner = next((line for line in lines if "embedded Tansu pid" in line), "")
        match = re.search(r"upstream (\S+):(\d+) \(embedded Tansu pid (\d+)", banner)
        assert match, f"no embedded broker in kcoord's banner: {lines}"
        host, tansu_port, tansu_pid = match.group(1), int(match.group(2)), int(match.group(3))
        assert open(f"/proc/{tansu_pid}/oom_score_adj").read().strip() == "1000"
        limits = Path(f"/proc/{tansu_pid}/limits").read_text()
        assert re.search(r"Max address space\s+536870912\s+536870912", limits), limits

        types = raw_client.request_types(CREATE_TOPICS, 7)
        body = types.CreateTopicsRequest(
            topics=(types.CreatableTopic(name=names.topic("huge"), num_partitions=50_000_000, replication_factor=1,
                                         assignments=(), configs=()),),
            timeout=timedelta(seconds=30), validate_only=False)
        with socket.create_connection((host, tansu_port), timeout=10) as sock:
            sock.sendall(raw_client.encode_request(CREATE_TOPICS, 7, 1, body))
            try:
                answer = raw_client.read_frame(sock)
            except OSError:
                answer = None
        assert answer is None, "Tansu answered a 50,000,000-partition CreateTopics under a 512 MiB cap"
        rc, log = processes.exited(process, log_path, 30, "its broker was sent the request")
        assert rc == EXIT_EMBEDDED_BROKER_EXITED, f"kcoord exited {rc}; log:\n{log[-3000:]}"
        start = next(line for line in log.splitlines() if "embedded Tansu broker pid" in line)
        assert "memory cap 512 MiB by address space (RLIMIT_AS)" in start and "oom_score_adj 1000" in start
        error = next((line for line in log.splitlines()
                      if " ERROR " in line and "exited unexpectedly" in line), None)
        assert error is not None, f"no ERROR line about the embedded broker; log:\n{log[-3000:]}"
        assert "memory cap 512 MiB by address space (RLIMIT_AS) was hit" in error, error
        assert "memory allocation of" in log[log.index(error):], "the broker's own abort is quoted"
    finally:
        if process.poll() is None:
            processes.kill(process)
