"""Offline tools: offsets log dump, replay, downgrade check, PySpark pipeline."""
