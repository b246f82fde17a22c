"""The response envelope ``{"code", "message", "data"}`` beside a matching
HTTP status (DESIGN.md, "The API contract"), and validation errors as 422s
that name the field."""
from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def envelope(status: int, message: str, data: Any = None) -> JSONResponse:
    """A JSON response whose ``code`` equals the HTTP status."""
    return JSONResponse({"code": status, "message": message, "data": data}, status_code=status)


def field_path(loc: tuple | list) -> str:
    """``("body", "documentConfig", "fileFormat")`` -> ``documentConfig.fileFormat``."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 whose message names every invalid field and the rule it broke."""
    errors = [{"field": field_path(e["loc"]), "rule": e["msg"]} for e in exc.errors()]
    message = "; ".join(f"{e['field']}: {e['rule']}" for e in errors)
    return envelope(422, f"invalid request: {message}", {"errors": errors})
