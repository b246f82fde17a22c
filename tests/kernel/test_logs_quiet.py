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


def test_exception_logs_print_the_traceback(caplog):
    """``log.exception`` hands the traceback to the stdlib record (it was
    rendered as the text ``exc_info=True`` and lost)."""
    from plait.logs import get_logger
    setup_logging("INFO", stdlib=False)
    log = get_logger("plait.test_logs")
    with caplog.at_level(logging.INFO, logger="plait.test_logs"):
        try:
            raise KeyError("the-cause")
        except KeyError:
            log.exception("handler failed", agent="a")
    record = caplog.records[-1]
    assert record.exc_info and record.exc_info[0] is KeyError
    assert "exc_info" not in record.getMessage() and "agent='a'" in record.getMessage()
    assert "the-cause" in caplog.text
