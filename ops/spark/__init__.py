"""The PySpark pipeline for offsets logs too large for one machine (see job.py)."""
