"""Logging: structlog for Plait's own records, stdlib underneath (Faust, uvicorn)."""
from __future__ import annotations

import logging

import structlog


def setup_logging(level: str = "INFO") -> None:
    """Key-value logs on stderr at ``level``."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    structlog.configure(
        processors=[structlog.processors.TimeStamper(fmt="iso"), structlog.processors.add_log_level,
                    structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())))
