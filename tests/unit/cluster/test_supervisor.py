"""`kcoord serve --processes N` (coordinator/supervisor.py): each child's command line."""
from __future__ import annotations

import pytest

from coordinator.supervisor import child_argv


def test_child_ports_shift_by_stride_and_instance_ids_are_numbered():
    argv = ["--log-level", "INFO", "serve", "--listen", "PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9192",
            "--processes", "3", "--port-stride=10", "--metrics-port", "9404", "--upstream", "k:9092",
            "--instance-id", "kc"]
    out = child_argv(argv, 2, 10, "kc", "127.0.0.1:9092")
    assert out == ["--log-level", "INFO", "serve", "--listen", "PLAINTEXT://0.0.0.0:9112,SSL://0.0.0.0:9212",
                   "--metrics-port", "9406", "--upstream", "k:9092", "--instance-id", "kc-2"]


def test_default_listener_is_shifted_and_port_zero_stays_zero():
    assert child_argv(["serve", "--upstream", "k:1"], 1, 100, "kcoord", "127.0.0.1:9092")[-4:] == [
        "--listen", "127.0.0.1:9192", "--instance-id", "kcoord-1"]
    assert "127.0.0.1:0" in child_argv(["serve", "--listen=127.0.0.1:0"], 1, 100, "k", "x:1")


def test_a_listener_without_a_port_is_refused_by_name():
    with pytest.raises(ValueError, match="--listen 'nohost'"):
        child_argv(["serve", "--listen", "nohost"], 0, 100, "k", "x:1")
