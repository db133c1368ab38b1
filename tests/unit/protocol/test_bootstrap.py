"""coordinator/protocol/bootstrap.py: the one parser of an upstream's 'host:port,...' list."""
from __future__ import annotations

import pytest

from coordinator.protocol.bootstrap import parse_bootstrap
from coordinator.upstream.client import parse_bootstrap as client_parse_bootstrap


def test_each_entry_splits_at_its_last_colon_and_is_stripped():
    assert parse_bootstrap("a:1, b:2 ,[::1]:9092") == [("a", 1), ("b", 2), ("[::1]", 9092)]


def test_a_port_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError):
        parse_bootstrap("a:1,b:x")


def test_the_upstream_client_serves_the_same_parser():
    assert client_parse_bootstrap is parse_bootstrap
