"""tests/support/moto_s3.py: a missing moto[server] is an ImportError (the S3-store tests
skip on it locally and fail on it in CI); any other failure of the helper is not (review 22)."""
from __future__ import annotations

import sys

import pytest

from support import moto_s3


def test_a_missing_moto_server_is_an_import_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))   # no moto_server beside it
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ImportError, match="moto_server"):
        moto_s3.start_moto_s3(tmp_path)


def test_a_missing_boto3_is_an_import_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)     # import boto3 -> ImportError
    with pytest.raises(ImportError, match="boto3"):
        moto_s3.start_moto_s3(tmp_path)
