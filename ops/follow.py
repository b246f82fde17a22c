"""``plait follow TASK``: a progress bar fed by the task's Server-Sent Events
(rows done, rows/s, ETA when the source gave a total)."""
from __future__ import annotations

import json
from typing import Any, Iterator

import httpx
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                           TaskProgressColumn, TextColumn, TimeRemainingColumn)
from rich.text import Text

from plait.lifecycle import TERMINAL


def events(api: str, task_id: str) -> Iterator[dict[str, Any]]:
    """Task states from ``GET /export/tasks/{id}/events`` until the task ends.

    Raises ``httpx.HTTPStatusError`` (e.g. 404 for an unknown task)."""
    timeout = httpx.Timeout(None, connect=5.0)  # the stream may idle; connecting may not
    with httpx.stream("GET", f"{api}/export/tasks/{task_id}/events", timeout=timeout) as resp:
        if resp.is_error:
            resp.read()  # the error's body, for the caller's message
        resp.raise_for_status()
        for line in resp.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


class RowsPerSecond(ProgressColumn):
    """Rows per second, from rich's moving average of progress updates."""

    def render(self, task) -> Text:
        return Text(f"{task.speed:,.0f} rows/s" if task.speed else "- rows/s")


def follow(api: str, task_id: str, console: Console | None = None) -> dict[str, Any]:
    """Show a progress bar until the task ends; returns its final state.

    Raises ``httpx.HTTPStatusError`` (404: unknown task) or ``httpx.HTTPError``
    (API unreachable) before any bar is drawn."""
    from itertools import chain

    console = console or Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TaskProgressColumn(), RowsPerSecond(), TimeRemainingColumn())
    stream = events(api, task_id)
    first = next(stream, None)
    state: dict[str, Any] = {}
    if first is None:
        return state
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(task_id[:12], total=None)
        for state in chain([first], stream):
            progress.update(bar, completed=state.get("exportedRows") or 0,
                            total=state.get("totalRows"),
                            description=f"{task_id[:12]} {state['status']}")
            if state["status"] in TERMINAL:
                break
    stream.close()
    return state
