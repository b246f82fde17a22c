"""Logging: structlog for Plait's own records (key-value, secrets redacted),
rendered through the stdlib root logger that Faust and uvicorn also use."""
from __future__ import annotations

import logging

import structlog

from plait.audit import redact_processor


#: Library loggers held above INFO: httpx logs every request it sends at
#: INFO (``HTTP Request: POST ... "HTTP/1.1 200 OK"``), a line per data page
#: fetched (~50 a second per export on a fast data API), which cost the
#: worker's event loop more than the rest of its logging; failures reach our
#: own logs and metrics (``plait_data_api_errors_total``).
QUIET = {"httpx": logging.WARNING}


def setup_logging(level: str = "INFO", stdlib: bool = True) -> None:
    """Key-value logs on stderr at ``level``; secret-looking keys are redacted.
    ``stdlib=False`` leaves the root handler to the host (Faust installs its own)."""
    if stdlib:
        logging.basicConfig(level=level.upper(),
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")
    chosen = logging.getLevelName(level.upper())
    for name, quiet in QUIET.items():
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:  # unless the host chose a level for it
            logger.setLevel(max(quiet, chosen if isinstance(chosen, int) else logging.INFO))
    structlog.configure(
        processors=[redact_processor, _render],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True)


_KEY_VALUES = structlog.processors.KeyValueRenderer(key_order=["event"])


def _render(logger, name: str, event_dict: dict) -> tuple[tuple, dict]:
    """The last processor: the fields as ``key=value`` text, and ``exc_info``
    (``log.exception``, ``exc_info=True``) handed to the stdlib logger, which
    prints the traceback under the line (a renderer alone would print
    ``exc_info=True`` and lose it)."""
    exc_info = event_dict.pop("exc_info", None)
    return (_KEY_VALUES(logger, name, event_dict),), ({"exc_info": exc_info} if exc_info else {})


#: Logger librdkafka (confluent-kafka clients) logs to; a NullHandler keeps
#: its lines off stderr unless the host configured logging.
KAFKA_LOGGER = "plait.kafka"
logging.getLogger(KAFKA_LOGGER).addHandler(logging.NullHandler())


def kafka_logger() -> logging.Logger:
    """The logger to pass as ``logger=`` to every confluent-kafka client, so
    librdkafka logs through Python logging instead of printing to stderr."""
    return logging.getLogger(KAFKA_LOGGER)


def get_logger(name: str):
    """A structlog logger named ``name`` (use keyword fields, not %-formatting)."""
    return structlog.get_logger(name)
