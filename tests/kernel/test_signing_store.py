"""Signed links and the local object store."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from sinks.signing import content_disposition, sign_link, verify_link
from sinks.store import LocalStore


def test_link_verification_rejects_tampering_and_expiry():
    sig = sign_link("k", "results/t/a.csv", 1000, "a.csv")
    assert verify_link("k", "results/t/a.csv", 1000, "a.csv", sig, now=999) is None
    assert verify_link("k", "results/t/a.csv", 1000, "a.csv", sig, now=1001) == "expired"
    assert verify_link("k", "results/t/b.csv", 1000, "a.csv", sig, now=999) == "bad signature"
    assert verify_link("other", "results/t/a.csv", 1000, "a.csv", sig, now=999) == "bad signature"


def test_content_disposition_keeps_utf8_names_per_rfc6266():
    value = content_disposition("航班 报表.xlsx")
    assert value.startswith('attachment; filename="')
    assert "filename*=UTF-8''%E8%88%AA%E7%8F%AD%20%E6%8A%A5%E8%A1%A8.xlsx" in value


def test_local_store_round_trip_list_delete_and_link(tmp_path):
    store = LocalStore(tmp_path, "http://api", "secret")
    store.put_bytes("shards/t/00000001.parquet", b"b")
    store.put_bytes("shards/t/00000000.parquet", b"a")
    assert store.list("shards/t/") == ["shards/t/00000000.parquet", "shards/t/00000001.parquet"]
    assert store.get_bytes("shards/t/00000000.parquet") == b"a"
    assert store.delete_prefix("shards/t/") == 2 and store.list("shards/t/") == []
    with pytest.raises(KeyError):
        store.get_bytes("shards/t/00000000.parquet")
    q = parse_qs(urlparse(store.link("results/t/x.csv", "x.csv", 60)).query)
    assert verify_link("secret", "results/t/x.csv", int(q["expires"][0]), "x.csv", q["sig"][0]) is None


def test_local_store_refuses_keys_that_escape_its_root(tmp_path):
    store = LocalStore(tmp_path / "root", "http://api", "secret")
    with pytest.raises(ValueError, match="escapes"):
        store.put_bytes("../../etc/passwd", b"x")


def test_local_store_deletes_of_one_prefix_at_once_never_raise(tmp_path):
    """Two cleanups of one task (a failed fetch and a failed write, on one
    worker) delete its shard prefix at once: a directory the other removed
    is skipped (Path.rglob raised FileNotFoundError; the worker then exited
    as if it could not report the failure)."""
    import threading
    store = LocalStore(tmp_path, "http://api", "k")
    stop, raised = threading.Event(), []

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                store.put_bytes(f"shards/t/{n % 7}/{n}.parquet", b"x")
            except OSError:  # a put racing the deletes may lose; not under test
                pass

    def wipe() -> None:
        try:
            for _ in range(1500):
                store.delete_prefix("shards/t/")
        except Exception as exc:  # noqa: BLE001 - the failure under test
            raised.append(exc)

    threads = [threading.Thread(target=write), threading.Thread(target=wipe),
               threading.Thread(target=wipe)]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join()
    stop.set()
    threads[0].join()
    assert raised == []
    store.put_bytes("shards/t/0/last.parquet", b"y")
    assert "shards/t/0/last.parquet" in store.list("shards/t/")
    assert store.delete_prefix("shards/t/") >= 1 and store.list("shards/t/") == []
