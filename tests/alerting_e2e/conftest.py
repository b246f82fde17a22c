"""Fixtures of the alerting end-to-end tests."""
from __future__ import annotations

import pytest

from alert_e2e_support import Receiver


@pytest.fixture
def receiver():
    """A started :class:`Receiver` on 127.0.0.1, stopped afterwards."""
    r = Receiver().start()
    yield r
    r.stop()
