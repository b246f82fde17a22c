"""Short-lived data tokens proving a page request comes from Plait for this task and user
(docs/events.md, "Business data API (pull contract)"): ``v1.<taskId>.<expiresAt>.<hex HMAC-SHA256>``
over ``plait-data-token/v1``, task id, user id (bound, not carried) and expiry (Unix s)."""
from __future__ import annotations

import hmac
import re

from plait.errors import AuthError
from plait.signature import hmac_sha256_hex

HEADER_DATA_TOKEN = "X-Plait-Data-Token"
HEADER_TASK_ID = "X-Plait-Task-Id"
_LABEL = "plait-data-token/v1"
_TOKEN_RE = re.compile(r"^v1\.(?P<task>[A-Za-z0-9_-]{1,128})\.(?P<exp>[0-9]{1,12})\."
                       r"(?P<mac>[0-9a-f]{64})$")


class DataTokenError(AuthError, ValueError):
    """A refused data token (answer 401); ``reason``: ``malformed``, ``bad signature``, ``wrong
    task`` or ``expired``. A ``ValueError`` too."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"data token refused: {reason}", status=401)
        self.reason = reason


def _mac(secret: str, task_id: str, user_id: str, expires_at: int) -> str:
    msg = "\n".join([_LABEL, task_id, user_id, str(expires_at)]).encode("utf-8")
    return hmac_sha256_hex(secret, msg)


def mint_data_token(secret: str, task_id: str, user_id: str, expires_at: int | float) -> str:
    """A token for ``task_id`` and ``user_id`` valid until ``expires_at`` (Unix s, rounded down).
    Raises ValueError unless ``task_id`` is 1-128 of ``[A-Za-z0-9_-]``."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", task_id or ""):
        raise ValueError("task_id must be 1-128 characters of [A-Za-z0-9_-]")
    exp = int(expires_at)
    return f"v1.{task_id}.{exp}.{_mac(secret, task_id, user_id, exp)}"


def verify_data_token(secret: str, token: str, task_id: str, user_id: str,
                      now: float) -> None:
    """None when ``token`` is valid for ``task_id`` and ``user_id`` at ``now`` (Unix s; valid while
    ``now < expiresAt``). Raises DataTokenError."""
    match = _TOKEN_RE.match(token or "")
    if not match:
        raise DataTokenError("malformed")
    claimed_task, exp = match["task"], int(match["exp"])
    if not hmac.compare_digest(_mac(secret, claimed_task, user_id, exp), match["mac"]):
        raise DataTokenError("bad signature")
    if not hmac.compare_digest(claimed_task.encode(), (task_id or "").encode()):
        raise DataTokenError("wrong task")
    if now >= exp:
        raise DataTokenError("expired")
