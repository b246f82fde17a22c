"""Factories shared by the security tests: callers, registries, specs."""
from __future__ import annotations

from typing import Any

from plait.callers import Caller, CallerRegistry
from plait.spec import ExportSpec

SECRET = "s3cr3t-" + "k" * 40  # a recognizable secret: tests grep outputs for it


def make_caller(**over: Any) -> Caller:
    """A valid caller ``crm`` / ``crm-app``; keyword overrides replace fields."""
    fields: dict[str, Any] = dict(
        sysCode="crm", appKey="crm-app", appSecret=SECRET, bizTypes=["orders"],
        dataApiPrefixes=["https://data.crm.example.com/export/"],
        fileFormats=["csv", "xlsx"], maxRows=100_000, maxConcurrentTasks=3,
        reuseWindowSeconds=600, linkTtlSeconds=3600, tier="gold")
    fields.update(over)
    return Caller.model_validate(fields)


def make_registry(*callers: Caller) -> CallerRegistry:
    """A registry of ``callers`` (default: the one ``make_caller()``)."""
    return CallerRegistry(callers or [make_caller()])


def make_spec(**over: Any) -> ExportSpec:
    """A valid pull spec for ``crm``; top-level keyword overrides, plus
    ``url=``, ``fileFormat=`` and ``maxRows=`` shortcuts."""
    url = over.pop("url", "https://data.crm.example.com/export/orders")
    fmt = over.pop("fileFormat", "csv")
    max_rows = over.pop("maxRows", None)
    doc: dict[str, Any] = dict(
        sysCode="crm", bizType="orders", userId="alice",
        dataConfig={"mode": "pull", "dataApiUrl": url},
        documentConfig={"fileName": "orders", "fileFormat": fmt},
        jobConfig={"maxRows": max_rows} if max_rows else {})
    doc.update(over)
    return ExportSpec.model_validate(doc)
