"""What kcoord may advertise of the upstream's `transaction.version` feature.

Rule: a client uses transactions v2 when the finalized `transaction.version` is 2 or more
(KIP-890 part 2; Java >= 4.0 then skips AddOffsetsToTxn, sends TxnOffsetCommit v5, and
produces with Produce v12, whose implicit AddPartitionsToTxn it relies on). So kcoord forwards
level 2 only while it serves TxnOffsetCommit v5 and lets clients produce with v12; otherwise
it lowers the level to 1 (the client then adds partitions and offsets explicitly, which
kcoord can serve or translate). The supported range is lowered the same way, so a client never
sees a finalized level above what is said to be supported.
"""
from __future__ import annotations

from ...protocol.api_versions import Features

TRANSACTION_VERSION = "transaction.version"


def clamp_transaction_version(features: Features, txn_offset_commit_max: int | None,
                              produce_max: int | None) -> Features:
    """`features` with transaction.version at most 1 unless TxnOffsetCommit v5+ is served
    (`txn_offset_commit_max`; None: not advertised) and Produce v12+ is advertised."""
    if (txn_offset_commit_max or -1) >= 5 and (produce_max or -1) >= 12:
        return features
    finalized = dict(features.finalized)
    supported = dict(features.supported)
    if TRANSACTION_VERSION in finalized:
        lo, hi = finalized[TRANSACTION_VERSION]
        finalized[TRANSACTION_VERSION] = (min(lo, 1), min(hi, 1))
    if TRANSACTION_VERSION in supported:
        lo, hi = supported[TRANSACTION_VERSION]
        supported[TRANSACTION_VERSION] = (min(lo, 1), min(hi, 1))
    return Features(supported, finalized, features.finalized_epoch)
