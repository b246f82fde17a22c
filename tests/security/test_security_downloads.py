"""Download links and file names: expired or tampered links answer 403 on the
real API route; file names are sanitized (sinks.writers.sanitize_file_name,
reused, not duplicated) and sent per RFC 6266 / RFC 5987 with UTF-8 names."""
from __future__ import annotations

import uuid
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from fastapi.testclient import TestClient

from api.app import create_api
from ops.stack import drop_prefix
from plait.settings import Settings
from sinks.signing import content_disposition
from sinks.store import LocalStore
from sinks.writers import sanitize_file_name

SIGNING_SECRET = "download-secret-" + "q" * 24


@pytest.fixture
def api_and_store(tmp_path):
    """(TestClient of the real API on a local store, that store)."""
    settings = Settings(storage_url=f"file://{tmp_path}/store", api_url="http://testserver",
                        signing_secret=SIGNING_SECRET,
                        redis_prefix=f"plait-sectest-{uuid.uuid4().hex[:12]}")
    store = LocalStore(tmp_path / "store", "http://testserver", SIGNING_SECRET)
    with TestClient(create_api(settings)) as client:
        yield client, store
    drop_prefix(settings.redis_url, settings.redis_prefix)


def _path_and_query(url):
    parts = urlsplit(url)
    return parts.path, parse_qs(parts.query)


def test_a_valid_link_downloads_with_an_rfc6266_utf8_name(api_and_store):
    # given a stored file with a Chinese name and its signed link
    client, store = api_and_store
    store.put_bytes("results/t1/航班报表.csv", b"a,b\n1,2\n")
    url = store.link("results/t1/航班报表.csv", "航班报表.csv", 60)
    # when the link is fetched
    resp = client.get(url)
    # then the bytes come back with an ASCII fallback and the exact UTF-8 name
    assert resp.status_code == 200 and resp.content == b"a,b\n1,2\n"
    cd = resp.headers["content-disposition"]
    assert cd.startswith('attachment; filename="____.csv"')
    assert f"filename*=UTF-8''{quote('航班报表.csv', safe='')}" in cd


@pytest.mark.parametrize("tamper", [
    lambda q: {**q, "expires": [str(int(q["expires"][0]) + 3600)]},   # extend lifetime
    lambda q: {**q, "name": ["other.csv"]},                           # rename
    lambda q: {**q, "sig": ["0" * 64]},                               # forge
])
def test_tampered_links_are_403(api_and_store, tamper):
    # given a valid link to a stored file
    client, store = api_and_store
    store.put_bytes("results/t1/x.csv", b"secret rows")
    path, query = _path_and_query(store.link("results/t1/x.csv", "x.csv", 60))
    # when one signed part is changed, then 403 and no bytes of the file
    resp = client.get(path, params={k: v[0] for k, v in tamper(query).items()})
    assert resp.status_code == 403 and resp.json()["code"] == 403
    assert b"secret rows" not in resp.content


def test_a_link_to_another_key_is_403(api_and_store):
    # given a valid link for task t1, when its signature is reused for t2's file, then 403
    client, store = api_and_store
    store.put_bytes("results/t2/x.csv", b"t2 rows")
    _, query = _path_and_query(store.link("results/t1/x.csv", "x.csv", 60))
    resp = client.get("/download/results/t2/x.csv", params={k: v[0] for k, v in query.items()})
    assert resp.status_code == 403 and b"t2 rows" not in resp.content


def test_an_expired_link_is_403(api_and_store):
    # given a link that expired a second ago (negative ttl)
    client, store = api_and_store
    store.put_bytes("results/t1/x.csv", b"rows")
    resp = client.get(store.link("results/t1/x.csv", "x.csv", -1))
    # then 403 saying expired
    assert resp.status_code == 403 and "expired" in resp.json()["message"]


# -- file names ------------------------------------------------------------------

@pytest.mark.parametrize("given", ["../../etc/passwd", "..\\..\\windows\\win.ini",
                                   "/abs/path", "a/../../b"])
def test_path_traversal_names_become_one_safe_component(given):
    stem = sanitize_file_name(given)
    assert "/" not in stem and "\\" not in stem and not stem.startswith(".")


def test_a_300_character_name_is_capped():
    assert len(sanitize_file_name("x" * 300).encode()) <= 200
    assert len(sanitize_file_name("报" * 300).encode()) <= 200


@pytest.mark.parametrize("given", ["CON", "nul", "Com1", "LPT9", "aux.csv", "PRN.tar"])
def test_windows_reserved_names_are_defused(given):
    assert sanitize_file_name(given).split(".")[0].upper() not in {
        "CON", "NUL", "COM1", "LPT9", "AUX", "PRN"}


@pytest.mark.parametrize("given", ["a\x00b", "a\nb", "a\rb", "a\x1bb", "a\x7fb", "a\tb"])
def test_c0_control_characters_are_removed(given):
    assert sanitize_file_name(given) == "a_b"


@pytest.mark.parametrize("given", ["a\x85b", "a\x9bb", "invoice\u202efdp.exe", "a\u200bb"])
def test_c1_controls_and_bidi_overrides_are_removed(given):
    stem = sanitize_file_name(given)
    assert all(c not in stem for c in "\x85\x9b\u202e\u200b")


def test_a_chinese_name_is_kept():
    assert sanitize_file_name("销售报表 2024年") == "销售报表 2024年"


@pytest.mark.parametrize("name", ["a\r\nSet-Cookie: x=1.csv", 'a";b=c.csv', "a\\b.csv"])
def test_content_disposition_cannot_be_broken_out_of(name):
    # given a hostile name, when it becomes a header value
    value = content_disposition(name)
    # then no CR/LF, the quoted fallback has no raw quote or backslash, and filename* is encoded
    assert "\r" not in value and "\n" not in value
    fallback = value.split('filename="', 1)[1].split('"; filename*=', 1)[0]
    assert '"' not in fallback and "\\" not in fallback
    assert value.split("filename*=UTF-8''", 1)[1] == quote(name, safe="")


def test_a_link_with_non_ascii_key_sig_and_name_is_403_not_500(api_and_store):
    # given the link schemathesis found: non-ASCII key, sig and name, negative expires
    client, _ = api_and_store
    # when it is fetched
    resp = client.get("/download/%C2%B9%F0%AE%A5%AA?sig=%C2%B8V&expires=-1643661"
                      "&name=%F3%A8%8E%B0%C2%BF%C2%ADJ")
    # then it is a forged link (403 in the envelope), not a server error
    assert resp.status_code == 403, resp.text
    assert resp.json()["message"] == "download link bad signature"
