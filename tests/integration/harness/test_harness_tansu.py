"""The Tansu fixtures and helpers: start, bootstrap, stop, kill -9, restart on the same port."""
from __future__ import annotations

from support.admin import admin_client, create_topic
from support.ports import port_range
from support.tansu import start_tansu


def test_fresh_tansu_is_empty_and_kill_9_then_restart_on_same_port(fresh_tansu, names, tmp_path) -> None:
    low, high = port_range()
    assert low <= fresh_tansu.port <= high and fresh_tansu.bootstrap == f"127.0.0.1:{fresh_tansu.port}"
    topic = names.topic()
    create_topic(fresh_tansu.bootstrap, topic, 3)
    assert topic in admin_client(fresh_tansu.bootstrap).list_topics(timeout=5).topics

    assert fresh_tansu.kill() == -9 and not fresh_tansu.is_running()
    with start_tansu(fresh_tansu.port, log_dir=tmp_path) as again:  # memory storage: nothing survives
        assert again.port == fresh_tansu.port
        assert topic not in admin_client(again.bootstrap).list_topics(timeout=5).topics
    assert not again.is_running() and again.process.returncode == 0
    assert "listening on" in again.log_text()
