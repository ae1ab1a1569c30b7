"""The S3 backend against a moto server on loopback (see ``conftest.s3_endpoint``).

The store suite (``test_store.py``) runs on both backends; these are the S3 backend's own
properties: the single-writer fence, a second machine opening the same prefix, streaming
through the bucket, URL validation, an unreachable endpoint and credentials kept out of what
the store reports.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

import wsnapshot
from _helpers import build_tree, tree_state
from conftest import BUCKET
from wsnapshot import (
    SnapshotStore,
    StoreConfigError,
    StoreUnavailable,
    WorkspaceServedElsewhere,
    _s3,
    _storedir,
)
from wsnapshot.testing import CutProxy

TREE = {
    "a.txt": b"hello\n",
    "bin/blob": bytes(range(256)) * 64,
    "empty/": None,
    "link": ("link", "a.txt"),
}


def _raw(url: str) -> S3Store:
    bucket, prefix = wsnapshot.parse_s3_url(url)
    return S3Store(bucket, prefix=prefix)


def _keys(url: str, under: str = "") -> list[str]:
    return sorted(m["path"] for batch in obstore.list(_raw(url), under) for m in batch)


def _workspace(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    return d


def test_layout_numbers_every_commit(s3_url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    build_tree(ws, TREE)
    store = SnapshotStore(ws, s3_url, state_dir=tmp_path / "state")
    info = store.create("one")
    store.delete(store.create("two").id)
    keys = _keys(s3_url)
    assert f"snapshots/{info.id}.json" in keys
    assert [k for k in keys if k.startswith("log/")] == [f"log/{n:020d}.json" for n in (1, 2, 3, 4)]
    ops = [
        json.loads(bytes(obstore.get(_raw(s3_url), f"log/{n:020d}.json").bytes()))
        for n in (1, 2, 4)
    ]
    assert [o["op"] for o in ops] == ["open", "create", "delete"]
    assert ops[1]["id"] == info.id
    sha = hashlib.sha256(b"hello\n").hexdigest()
    assert f"blobs/{sha[:2]}/{sha[2:]}" in keys
    assert store.backend == "s3"
    assert store.bucket == BUCKET
    assert store.store_dir == s3_url


def test_second_machine_lists_and_restores_byte_exact(s3_url: str, tmp_path: Path) -> None:
    first_ws = _workspace(tmp_path, "first")
    build_tree(first_ws, TREE)
    os.utime(first_ws / "a.txt", ns=(1, 1_234_567_891))
    (first_ws / "bin" / "blob").chmod(0o600)
    first = SnapshotStore(first_ws, s3_url, state_dir=tmp_path / "state1")
    one = first.create("one")
    state_one = tree_state(first_ws)
    (first_ws / "a.txt").write_bytes(b"changed")
    (first_ws / "new.bin").write_bytes(os.urandom(70_000))
    two = first.create("two")
    state_two = tree_state(first_ws)
    # another machine: a new, empty workspace and its own state directory, the same URL
    second_ws = _workspace(tmp_path, "second")
    second = SnapshotStore(second_ws, s3_url, state_dir=tmp_path / "state2")
    assert [(i.id, i.description) for i in second.list()] == [(one.id, "one"), (two.id, "two")]
    second.restore(one.id)
    assert tree_state(second_ws) == state_one  # bytes, modes, mtimes, links, empty dirs
    second.restore(two.id)
    assert tree_state(second_ws) == state_two


def test_two_writers_exactly_one_keeps_saving(s3_url: str, tmp_path: Path) -> None:
    ws_a = _workspace(tmp_path, "a")
    ws_b = _workspace(tmp_path, "b")
    (ws_a / "f").write_bytes(b"a")
    (ws_b / "f").write_bytes(b"b")
    a = SnapshotStore(ws_a, s3_url, state_dir=tmp_path / "sa")
    saved = a.create("by a")
    since = a._files.saved_at  # type: ignore[attr-defined]
    b = SnapshotStore(ws_b, s3_url, state_dir=tmp_path / "sb")  # takes the workspace over
    with pytest.raises(WorkspaceServedElsewhere) as lost:
        a.create("lost")
    assert str(lost.value).startswith(
        f"this workspace is now served elsewhere; snapshots since {since} were not saved"
    )
    # every later call of the loser answers the same, reads included
    for call in (
        a.create,
        a.list,
        lambda: a.restore(saved.id),
        lambda: a.delete(saved.id),
        lambda: a.export(saved.id),
        lambda: a.import_from(io.BytesIO(b"{}")),
    ):
        with pytest.raises(WorkspaceServedElsewhere):
            call()
    # the winner keeps saving; nothing of the loser's last attempt was stored
    kept = b.create("by b")
    assert [i.description for i in b.list()] == ["by a", "by b"]
    assert kept.id in {i.id for i in b.list()}


def test_a_writer_checks_the_fence_before_a_restore(s3_url: str, tmp_path: Path) -> None:
    ws_a = _workspace(tmp_path, "a")
    (ws_a / "f").write_bytes(b"original")
    a = SnapshotStore(ws_a, s3_url, state_dir=tmp_path / "sa")
    sid = a.create().id
    (ws_a / "f").write_bytes(b"edited")
    SnapshotStore(_workspace(tmp_path, "b"), s3_url, state_dir=tmp_path / "sb")
    with pytest.raises(WorkspaceServedElsewhere):
        a.restore(sid)  # restore writes nothing to the bucket: the HEAD check stops it
    assert (ws_a / "f").read_bytes() == b"edited"


def test_the_fence_is_one_create_only_put(s3_url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    (ws / "f").write_bytes(b"x")
    store = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s")
    # someone else created the next log entry between this writer's check and its commit
    nxt = f"log/{store._files.head + 1:020d}.json"  # type: ignore[attr-defined]
    real = store._files.check_head  # type: ignore[attr-defined]

    def check_then_race() -> None:
        real()
        obstore.put(_raw(s3_url), nxt, b"{}", mode="create")

    store._files.check_head = check_then_race  # type: ignore[attr-defined]
    with pytest.raises(WorkspaceServedElsewhere):
        store.create()
    assert _keys(s3_url, "snapshots/") == []  # the manifest was never written


def test_streamed_export_and_import_through_the_bucket(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_storedir, "CHUNK", 4096)
    ws = _workspace(tmp_path, "ws")
    build_tree(ws, {**TREE, "big": os.urandom(300_000)})
    src = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s1")
    sid = src.create().id
    out = io.BytesIO()
    assert src.export_to(sid, out) == src.export_size(sid)
    data = out.getvalue()
    assert src.export_range(sid, 100, 5000) == data[100:5100]
    assert src.export_range(sid, 0, len(data)) == data
    dst_ws = _workspace(tmp_path, "dst")
    dst = SnapshotStore(dst_ws, s3_url.replace("/t/", "/t2/"), state_dir=tmp_path / "s2")
    assert dst.import_from(io.BytesIO(data)).id == sid
    dst.restore(sid)
    assert tree_state(dst_ws) == tree_state(ws)


def test_a_corrupt_blob_in_the_bucket_is_refused(s3_url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    (ws / "f").write_bytes(b"good content")
    store = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s")
    sid = store.create().id
    sha = hashlib.sha256(b"good content").hexdigest()
    obstore.put(_raw(s3_url), f"blobs/{sha[:2]}/{sha[2:]}", b"evil content")
    (ws / "f").write_bytes(b"edited")
    with pytest.raises(Exception, match="does not match its SHA-256"):
        store.restore(sid)
    assert (ws / "f").read_bytes() == b"edited"


@pytest.mark.parametrize(
    "url",
    [
        "s3://",
        "s3://bucket-only",
        "s3://bucket-only/",
        "s3://B/prefix",
        "s3://ab/prefix",
        "s3://bucket/../escape",
        "s3://bucket/a//b",
        "s3://bucket/a/./b",
        "s3://bucket/sp ace",
        "s3://bucket/a\x00b",
        "s3://bucket..x/prefix",
    ],
)
def test_bad_urls_are_refused_with_the_form(url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    with pytest.raises(StoreConfigError, match=r"give s3://BUCKET/PREFIX"):
        SnapshotStore(ws, url, state_dir=tmp_path / "s")


def test_a_prefix_holding_other_objects_is_refused(s3_url: str, tmp_path: Path) -> None:
    obstore.put(_raw(s3_url), "someone-elses.txt", b"data")
    with pytest.raises(StoreConfigError, match="not a wsnapshot store and not empty"):
        SnapshotStore(_workspace(tmp_path, "ws"), s3_url, state_dir=tmp_path / "s")
    with pytest.raises(StoreConfigError, match="not a wsnapshot store"):
        SnapshotStore.open_read_only(
            _workspace(tmp_path, "ws2"), s3_url.replace("/t/", "/none/"), state_dir=tmp_path / "r"
        )


def test_a_reader_never_takes_over(s3_url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    (ws / "f").write_bytes(b"x")
    writer = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s")
    one = writer.create()
    reader = SnapshotStore.open_read_only(
        _workspace(tmp_path, "r"), s3_url, state_dir=tmp_path / "rs"
    )
    assert [i.id for i in reader.list()] == [one.id]
    with pytest.raises(StoreConfigError, match="read-only"):
        reader.create()
    assert writer.create().id != one.id  # still the writer


def test_an_unreachable_endpoint_is_named_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str
) -> None:
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYSECRET"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard: nothing listens
    monkeypatch.setattr(_s3, "_RETRIES", 0)
    with pytest.raises(StoreUnavailable) as err:
        SnapshotStore(_workspace(tmp_path, "ws"), f"s3://{BUCKET}/x", state_dir=tmp_path / "s")
    text = str(err.value)
    assert f"s3://{BUCKET}/x" in text
    assert "AWS_ENDPOINT_URL" in text
    assert secret not in text
    assert "testing" not in text  # the access key id either


def test_the_location_never_carries_credentials(s3_url: str, tmp_path: Path) -> None:
    store = SnapshotStore(_workspace(tmp_path, "ws"), s3_url, state_dir=tmp_path / "s")
    for shown in (store.store_dir, repr(store.bucket), store.backend):
        assert "testing" not in shown


@pytest.mark.parametrize(
    "url",
    [
        "s3://AKIAEXAMPLE:wJalrSECRET@bucket/prefix",
        "s3://wJalrSECRET@bucket/prefix",
        "s3://bucket:wJalrSECRET/prefix",
    ],
)
def test_credentials_in_the_url_are_refused_unechoed(url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError) as err:
        SnapshotStore(_workspace(tmp_path, "ws"), url, state_dir=tmp_path / "s")
    assert "credentials never go in the URL" in str(err.value)
    assert "wJalr" not in str(err.value)


@pytest.mark.parametrize(
    "url",
    [
        "s3://bucket/prefix?X-Amz-Signature=wJalrSECRET",
        "s3://bucket/prefix/?X-Amz-Credential=wJalrSECRET&X-Amz-Signature=x",
        "s3://bucket/prefix#wJalrSECRET",
        "s3://bucket?wJalrSECRET",
        "s3://bucket/a/b?token=wJalrSECRET#frag",
    ],
)
def test_a_query_string_or_fragment_is_refused_unechoed(url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError) as err:
        wsnapshot.parse_s3_url(url)
    assert "no query string or fragment" in str(err.value)
    assert "wJalr" not in str(err.value)
    assert "give s3://BUCKET/PREFIX" in str(err.value)
    with pytest.raises(StoreConfigError) as err:
        SnapshotStore(_workspace(tmp_path, "ws"), url, state_dir=tmp_path / "s")
    assert "wJalr" not in str(err.value)


def test_a_reader_without_network_diffs_a_mirror(s3_url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    (ws / "kept").write_bytes(b"k")
    (ws / "gone").write_bytes(b"g")
    store = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s")
    one = store.create().id
    (ws / "gone").unlink()
    (ws / "new").write_bytes(b"n")
    two = store.create().id
    with store.mirror_for_reader([one, two]) as local:
        assert local == str((tmp_path / "s").resolve())
        reader = SnapshotStore.open_read_only(ws, local)
        diff = reader.diff(one, two)
        assert (diff.added, diff.removed) == (("new",), ("gone",))
        assert reader.diff(two).to_dict()["modified"] == []
    assert list((tmp_path / "s" / "snapshots").iterdir()) == []  # the mirror is gone
    with pytest.raises(wsnapshot.SnapshotNotFound), store.mirror_for_reader([str(uuid.uuid4())]):
        pass


def test_check_fence_finds_a_take_over_without_a_commit(s3_url: str, tmp_path: Path) -> None:
    a = SnapshotStore(_workspace(tmp_path, "a"), s3_url, state_dir=tmp_path / "sa")
    a.check_fence()
    before = [a.served_elsewhere]
    SnapshotStore(_workspace(tmp_path, "b"), s3_url, state_dir=tmp_path / "sb")
    before.append(a.served_elsewhere)  # not known before a request
    with pytest.raises(WorkspaceServedElsewhere) as lost:
        a.check_fence()
    assert before == [None, None]
    reason = a.served_elsewhere
    assert reason == str(lost.value)
    assert reason.startswith("this workspace is now served elsewhere; snapshots since")


def test_an_outage_refuses_what_would_lose_data_and_passes(
    s3_url: str, tmp_path: Path, cut: CutProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_s3, "_RETRIES", 0)
    ws = _workspace(tmp_path, "ws")
    (ws / "f").write_bytes(b"saved")
    store = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s")
    saved = store.create("before").id
    (ws / "f").write_bytes(b"edited during the outage")
    cut.cut()
    for call in (
        lambda: store.create("during"),
        lambda: store.restore(saved),  # refused before the workspace is touched
        lambda: store.delete(saved),
        store.list,
        lambda: store.export(saved),
    ):
        with pytest.raises(StoreUnavailable) as err:
            call()
        assert s3_url in str(err.value)
        assert "retry when it is back" in str(err.value)
    assert (ws / "f").read_bytes() == b"edited during the outage"
    assert store.served_elsewhere is None
    cut.restore()
    # the same writer goes on: nothing was half saved, the fence is still its own
    after = store.create("after")
    assert [i.description for i in store.list()] == ["before", "after"]
    store.restore(saved)
    assert (ws / "f").read_bytes() == b"saved"
    assert store.export(after.id)["files"]["f"]["content"] == "edited during the outage"


def test_a_log_entry_whose_answer_was_lost_is_this_writers_own(s3_url: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "ws")
    (ws / "f").write_bytes(b"x")
    store = SnapshotStore(ws, s3_url, state_dir=tmp_path / "s")
    files = store._files
    # the create of the next entry reached the bucket but its answer did not (an outage)
    body = {"op": "create", "id": None, "at": "t", "writer": files.writer}  # type: ignore[attr-defined]
    nxt = f"log/{files.head + 1:020d}.json"  # type: ignore[attr-defined]
    obstore.put(_raw(s3_url), nxt, json.dumps(body).encode(), mode="create")
    info = store.create()
    assert store.served_elsewhere is None
    assert [i.id for i in store.list()] == [info.id]
    # another writer's entry is a take-over
    other = {"op": "open", "id": None, "at": "t", "writer": "elsewhere"}
    nxt = f"log/{files.head + 1:020d}.json"  # type: ignore[attr-defined]
    obstore.put(_raw(s3_url), nxt, json.dumps(other).encode(), mode="create")
    with pytest.raises(WorkspaceServedElsewhere):
        store.create()


def test_state_dir_is_for_s3_stores_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="state_dir is for s3:// stores"):
        SnapshotStore(_workspace(tmp_path, "ws"), tmp_path / "store", state_dir=tmp_path / "s")
