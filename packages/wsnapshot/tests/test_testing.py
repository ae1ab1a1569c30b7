"""``wsnapshot.testing``: the moto server both packages' S3 tests share."""

from __future__ import annotations

import importlib.util
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from wsnapshot import testing
from wsnapshot.testing import CutProxy, moto_server


def test_moto_server_creates_the_buckets_and_stops_at_the_end(tmp_path: Path) -> None:
    log = tmp_path / "moto.log"
    with moto_server("one-bucket", "two-bucket", log=log) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.log == log
        for bucket in ("one-bucket", "two-bucket"):
            with urllib.request.urlopen(f"{server.url}/{bucket}", timeout=10) as answer:  # noqa: S310
                assert answer.status == 200
        proxy = CutProxy(server.url)
        with urllib.request.urlopen(f"{proxy.url}/one-bucket", timeout=10) as answer:  # noqa: S310
            assert answer.status == 200
        proxy.cut()
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"{proxy.url}/one-bucket", timeout=10)  # noqa: S310
        proxy.restore()
        with urllib.request.urlopen(f"{proxy.url}/one-bucket", timeout=10) as answer:  # noqa: S310
            assert answer.status == 200
        proxy.close()
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"{server.url}/one-bucket", timeout=10)  # noqa: S310


def test_the_environment_points_at_the_server_and_drops_session_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = testing.MotoServer(url="http://127.0.0.1:9", log=Path("moto.log"))
    monkeypatch.setenv("AWS_SESSION_TOKEN", "a-real-session")
    monkeypatch.setenv("AWS_PROFILE", "production")
    server.patch_environment(monkeypatch, secret_access_key="s3cret-key")
    wanted = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "s3cret-key",
        "AWS_REGION": "us-east-1",
    }
    assert {k: os.environ.get(k) for k in wanted} == wanted
    assert "AWS_SESSION_TOKEN" not in os.environ and "AWS_PROFILE" not in os.environ


def test_without_moto_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "moto" else real(name, *a)
    )
    with (
        pytest.raises(ModuleNotFoundError, match=r"pip install 'moto\[server\]'"),
        moto_server("b"),
    ):
        pass
