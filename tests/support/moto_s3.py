"""moto's S3 server on loopback, as the store of a persistent Tansu (`--storage-engine s3://`).

A memory-store Tansu comes back empty after a restart; on an S3 store its topics, records
and group offsets survive (environment.md §3.5). moto keeps its objects in memory: the
store lives as long as this server, across any number of broker restarts.

    with start_moto_s3(tmp_path) as s3:
        broker = start_tansu(extra_args=("--storage-engine", s3.storage_url), env=s3.tansu_env)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import ports, processes

BUCKET = "tansu"


class MotoError(RuntimeError):
    pass


class MotoNotInstalled(MotoError, ImportError):
    """moto[server] (a test extra) is not installed: a missing dependency, like an ImportError."""


def moto_server_binary() -> str:
    beside = Path(sys.executable).parent / "moto_server"   # the venv's console script
    if beside.is_file():
        return str(beside)
    found = shutil.which("moto_server")
    if found:
        return found
    raise MotoNotInstalled(f"no moto_server beside {sys.executable} or on PATH: install the test extras "
                           f"(moto[server])")


@dataclass
class MotoS3:
    port: int
    process: subprocess.Popen
    log_path: Path
    bucket: str = BUCKET

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_url(self) -> str:
        return f"s3://{self.bucket}/"

    @property
    def tansu_env(self) -> dict[str, str]:
        """What Tansu's S3 client reads (object_store): endpoint, plain HTTP, dummy keys."""
        return {"AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        processes.stop(self.process, 10)
        ports.release(self.port)

    def __enter__(self) -> MotoS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_moto_s3(log_dir: Path | None = None, *, bucket: str = BUCKET, ready_timeout: float = 30.0) -> MotoS3:
    """Start moto_server on a free port and create ``bucket``; returns once the bucket exists."""
    try:
        import boto3  # moto[server] brings it
    except ImportError as e:
        raise MotoNotInstalled(f"boto3 is missing ({e}): install the test extras (moto[server])") from e
    moto_server_binary()    # fail before starting anything

    port = ports.free_port()
    log_path = Path(log_dir or tempfile.gettempdir()) / f"moto-{port}-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        proc = processes.track(subprocess.Popen(
            [moto_server_binary(), "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)))
    server = MotoS3(port, proc, log_path, bucket)
    client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id="test",
                          aws_secret_access_key="test", region_name="us-east-1")
    deadline = time.monotonic() + ready_timeout
    last = ""
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            client.create_bucket(Bucket=bucket)
            return server
        except Exception as e:   # not listening yet (connection refused)
            last = repr(e)
            time.sleep(0.1)
    server.stop()
    raise MotoError(f"moto_server on port {port} did not create bucket {bucket!r} within {ready_timeout}s "
                    f"({'exited ' + str(proc.returncode) if proc.poll() is not None else last}); "
                    f"log:\n{server.log_text()[-2000:]}")
