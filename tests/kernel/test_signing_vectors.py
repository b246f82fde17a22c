"""Every HMAC scheme's wire format, pinned: each scheme's output for fixed
inputs equals the value computed before the schemes shared
``plait.signature.hmac_sha256_hex`` (non-ASCII secret, surrogate file name and
non-UTF-8 body included), and no product module computes an HMAC itself."""
from __future__ import annotations

import ast
from pathlib import Path

from alerting.delivery import signature, verify_signature
from plait.signature import hmac_sha256_hex, sign_request
from plait.tokens import mint_data_token, verify_data_token
from sinks.signing import sign_link, verify_link

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr\u00e9t"
PRODUCT = ("plait", "sinks", "alerting", "schedules", "streams", "producers", "api", "ops")


def test_request_signature_vector():
    got = sign_request(SECRET, "post", "/export/tasks", "b=2&a=1 x", b'{"a":1}', 1700000000,
                       "nonce-0123456789abcdef")
    assert got == "2dbf7b2159d05eb09d09d81435b2146bb162c222e1e0e3c7da7ebb05bc86a6f9"


def test_data_token_vector():
    token = mint_data_token(SECRET, "task_01", "user-\u00fc", 1700000123.9)
    assert token == ("v1.task_01.1700000123."
                     "d3744f1970b18495e528fc52b14c375cfeef3209b05b2f311fb72ca9eae8de8b")
    assert verify_data_token(SECRET, token, "task_01", "user-\u00fc", 1700000000) is None


def test_download_link_vector():
    name = "r\u00e9port \ud800.xlsx"
    sig = sign_link(SECRET, "exports/t1/file.xlsx", 1700000456, name)
    assert sig == "4bb684568d7159c996b013435afcba4875d4579371219ae21ec1714e0bcd46a1"
    assert verify_link(SECRET, "exports/t1/file.xlsx", 1700000456, name, sig, now=0) is None


def test_webhook_signature_vector():
    body = b'{"alerts":[]}\xff'
    got = signature(SECRET, body, 1700000789)
    assert got == "sha256=f98e6dceeb067167269944f16e1669de223c5446ae75ae536a4625c99b921f42"
    assert verify_signature(SECRET, body, 1700000789, got, now=1700000789)


def test_the_shared_helper_is_rfc_4231_hmac_sha256():
    # RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?"
    assert hmac_sha256_hex("Jefe", b"what do ya want for nothing?") == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")


def test_no_module_but_plait_signature_computes_an_hmac(gc_paused):
    """``hmac.new`` / ``hmac.digest`` appear only in ``plait/signature.py``."""
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Attribute) and node.attr in ("new", "digest", "HMAC")
                        and isinstance(node.value, ast.Name) and node.value.id == "hmac"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert [f for f in found if not f.startswith("plait/signature.py:")] == []
    assert any(f.startswith("plait/signature.py:") for f in found)
