"""Unit tests of the test harness itself (tests/support)."""
