"""Moved: each group API's error response is wire knowledge and lives in
coordinator/protocol/error_responses.py, paired with its API by the API table
(coordinator/protocol/api_table.py). This name stays only until the last importer's import
line follows; it holds no table.
"""
from __future__ import annotations

from ..protocol.error_responses import consumer_group_heartbeat, txn_offset_commit

__all__ = ["consumer_group_heartbeat", "txn_offset_commit"]
