"""Logging: structlog key-value records (secrets redacted) through the stdlib root logger."""
from __future__ import annotations

import logging

import structlog

from plait.audit import redact_processor


#: httpx logs a line per request (per data page); held above INFO.
QUIET = {"httpx": logging.WARNING}


def setup_logging(level: str = "INFO", stdlib: bool = True) -> None:
    """Key-value logs on stderr at ``level``; ``stdlib=False`` leaves the root handler to the host
    (Faust)."""
    if stdlib:
        logging.basicConfig(level=level.upper(),
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")
    chosen = logging.getLevelName(level.upper())
    for name, quiet in QUIET.items():
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(max(quiet, chosen if isinstance(chosen, int) else logging.INFO))
    structlog.configure(
        processors=[redact_processor, _render],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True)


_KEY_VALUES = structlog.processors.KeyValueRenderer(key_order=["event"])


def _render(logger, name: str, event_dict: dict) -> tuple[tuple, dict]:
    """The last processor: ``key=value`` text, and ``exc_info`` handed to the stdlib logger so the
    traceback prints under the line."""
    exc_info = event_dict.pop("exc_info", None)
    return (_KEY_VALUES(logger, name, event_dict),), ({"exc_info": exc_info} if exc_info else {})


#: librdkafka's logger; a NullHandler keeps it off stderr unless the host configured logging.
KAFKA_LOGGER = "plait.kafka"
logging.getLogger(KAFKA_LOGGER).addHandler(logging.NullHandler())


def kafka_logger() -> logging.Logger:
    """The ``logger=`` of every confluent-kafka client, so librdkafka logs through Python logging.
    """
    return logging.getLogger(KAFKA_LOGGER)


def get_logger(name: str):
    """A structlog logger named ``name`` (use keyword fields, not %-formatting)."""
    return structlog.get_logger(name)
