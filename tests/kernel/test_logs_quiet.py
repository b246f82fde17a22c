"""plait.logs.setup_logging keeps httpx's per-request INFO lines (one per data
page fetched) out of the logs, unless the host chose httpx's level."""
from __future__ import annotations

import logging

import pytest

from plait.logs import QUIET, setup_logging


@pytest.fixture
def httpx_logger():
    logger = logging.getLogger("httpx")
    before = logger.level
    yield logger
    logger.setLevel(before)


def test_httpx_request_lines_are_not_logged_at_info(httpx_logger):
    httpx_logger.setLevel(logging.NOTSET)
    setup_logging("INFO", stdlib=False)
    assert not httpx_logger.isEnabledFor(logging.INFO)
    assert httpx_logger.isEnabledFor(logging.WARNING) and QUIET["httpx"] == logging.WARNING
    setup_logging("ERROR", stdlib=False)  # already set: the first choice stays
    assert httpx_logger.level == logging.WARNING


def test_a_level_the_host_chose_for_httpx_stays(httpx_logger):
    httpx_logger.setLevel(logging.DEBUG)
    setup_logging("INFO", stdlib=False)
    assert httpx_logger.level == logging.DEBUG
