"""Online conversion between classic and consumer groups (KIP-848 migration)."""
