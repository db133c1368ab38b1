"""`kcoord --log-level` (coordinator/cli.py configure_logging): the root's level, then
per-logger levels, so one part's detail (the cluster membership's JoinGroup and Heartbeat
answers) can be switched on without every library's debug output."""
from __future__ import annotations

import logging

import pytest

from coordinator.cli import configure_logging, main


@pytest.fixture
def restored():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("kcoord.cluster").level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    logging.getLogger("kcoord.cluster").setLevel(saved[2])


def test_a_plain_level_sets_the_root(restored):
    configure_logging("warning")
    assert logging.getLogger().level == logging.WARNING


def test_per_logger_levels_follow_the_root_level(restored):
    configure_logging("INFO, kcoord.cluster=DEBUG")
    assert logging.getLogger().level == logging.INFO
    assert logging.getLogger("kcoord.cluster").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("aiokafka").isEnabledFor(logging.DEBUG)


def test_an_unknown_level_is_refused_with_its_name(restored):
    with pytest.raises(ValueError, match="LOUD"):
        configure_logging("INFO,kcoord.cluster=loud")


def test_kcoord_refuses_an_unknown_level_as_a_usage_error(restored, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--log-level", "INFO,kcoord.cluster=loud", "serve"])
    assert stopped.value.code == 2
    assert "--log-level INFO,kcoord.cluster=loud: Unknown level: 'LOUD'" in capsys.readouterr().err
