"""One HTTP :class:`Request` and its JSON body (:func:`dumps`); imports no receiver."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Request:
    """One HTTP request to make: ``method`` ``url`` with ``headers`` and ``body`` bytes."""

    url: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"


def dumps(payload: Any) -> bytes:
    """Compact, key-sorted UTF-8 JSON (deterministic: retries send the same bytes)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
