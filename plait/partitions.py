"""Partitions of one pull export: ``dataConfig.partitions`` (a list of
``queryConditions`` fragments) and ``dataConfig.split`` (a range cut into
windows), each pulled with its own cursor (docs/events.md, "Partitions").

Partition ``p``'s request carries ``queryConditions`` with fragment ``p``
merged over it (the fragment's keys win). A split ``{"field": "id",
"from": 0, "to": 100, "parts": 4}`` gives the fragments ``{"fromId": 0,
"toId": 25}``, ``{"fromId": 25, "toId": 50}``...: contiguous windows, one's
``to`` the next one's ``from``, so the data API must treat one end as
exclusive (the demo API's ``seq``: ids ``fromId+1 .. toId``). ``from`` and
``to`` are both integers or both ISO 8601 date-times with an offset (cut at
whole seconds, written as given: ``Z`` or ``+hh:mm``).
"""
from __future__ import annotations

import json

from datetime import datetime, timedelta
from typing import Any

#: Most partitions one task may have: each is a fetch chain and a FetchPage on the broker.
MAX_PARTITIONS = 256


def window_keys(field: str) -> tuple[str, str]:
    """The fragment keys of a split on ``field``: ``("fromId", "toId")`` for ``id``."""
    cap = field[:1].upper() + field[1:]
    return f"from{cap}", f"to{cap}"


def parse_bound(value: Any) -> int | datetime:
    """A split bound as an integer or an aware datetime. Raises ``ValueError``
    naming what is accepted."""
    if isinstance(value, bool):
        raise ValueError("must be an integer or an ISO 8601 date-time with an offset")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            when = None
        if when is not None and when.tzinfo is not None:
            return when
    raise ValueError(f"{value!r} is neither an integer nor an ISO 8601 date-time with an offset")


def _iso(when: datetime, like: str) -> str:
    text = when.isoformat()
    return text.replace("+00:00", "Z") if like.endswith("Z") else text


def split_windows(field: str, start: Any, stop: Any, parts: int) -> list[dict[str, Any]]:
    """``parts`` contiguous windows from ``start`` to ``stop`` as fragments
    ``{from<Field>, to<Field>}``; integer windows differ by at most one,
    time windows are whole seconds (the last one takes the remainder).

    Raises ``ValueError`` when the bounds are of different kinds, ``start``
    is not before ``stop``, or the range has fewer units than ``parts``."""
    lo, hi = parse_bound(start), parse_bound(stop)
    if isinstance(lo, int) != isinstance(hi, int):
        raise ValueError("to: must be of from's kind: both integers or both date-times")
    if not lo < hi:
        raise ValueError(f"to: {stop!r} is not after from ({start!r})")
    span = hi - lo if isinstance(lo, int) else int((hi - lo).total_seconds())
    if span < parts:
        raise ValueError(f"the range holds {span} {'values' if isinstance(lo, int) else 'seconds'}"
                         f", fewer than parts ({parts})")
    if isinstance(lo, int):
        cuts = [lo + span * i // parts for i in range(parts)] + [hi]
    else:
        cuts = [_iso(lo + timedelta(seconds=span * i // parts), start)
                for i in range(parts)] + [stop]
    a, b = window_keys(field)
    return [{a: cuts[i], b: cuts[i + 1]} for i in range(parts)]


def check_fragments(fragments: list[Any]) -> None:
    """Raise ``ValueError`` naming the first fragment of ``dataConfig.partitions``
    that is not a non-empty object, or a fragment repeated: the same JSON, key order aside
    (``1`` and ``true`` differ, as they do to the data API)."""
    seen: dict[str, int] = {}
    for i, fragment in enumerate(fragments):
        if not isinstance(fragment, dict) or not fragment:
            raise ValueError(f"item {i}: must be a non-empty object (a queryConditions "
                             "fragment)")
        text = json.dumps(fragment, sort_keys=True, default=str)
        if text in seen:
            raise ValueError(f"item {i} repeats item {seen[text]}: each "
                             "partition would export the same rows")
        seen[text] = i
