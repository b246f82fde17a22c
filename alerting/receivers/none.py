"""``none``: a receiver without integrations (Alertmanager's receiver with no
``*_configs``); its messages are settled without a request."""
from __future__ import annotations

from alerting.receivers.registry import ReceiverType, register

NONE = register(ReceiverType(
    name="none", requests=lambda *a: [], am_requests=lambda *a: [],
    am_status=lambda r: {}, check=lambda r: None, am_kind="", am_file=None))
