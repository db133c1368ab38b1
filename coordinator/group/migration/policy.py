"""`group.consumer.migration.policy` (KIP-848): which online conversions are allowed.

Parsing is case-insensitive; an unknown value means `disabled`, as in Kafka. Empty
groups convert in both directions whatever the policy (offline migration).
"""
from __future__ import annotations

import enum


class MigrationPolicy(enum.Enum):
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, value: str | None) -> MigrationPolicy:
        try:
            return cls((value or "").strip().lower())
        except ValueError:
            return cls.DISABLED

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)
