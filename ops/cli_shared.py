"""What every ``plait`` subcommand module shares: the one-line user error
(:class:`CliError`), the hint to start the dev stack, and how the API's
address is found. The subcommand modules (``ops.cli``, ``ops.tasks_cli``,
``ops.schedules_cli``) import it; it imports none of them."""
from __future__ import annotations

import os
from pathlib import Path

from plait.errors import PlaitError


class CliError(PlaitError):
    """An error the user can fix: printed as one line ``plait CMD: message``
    (the message says what to do), exit status 1."""


#: Printed after a broker/API/Redis address we could not reach.
START_DEV = "start `plait dev` in this directory (it writes .plait/dev.env)"


def shown(path: Path) -> str:
    """``path`` relative to the CWD when below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def api_url(given: str | None) -> str:
    """``--api``, else ``PLAIT_API_URL``, else the running ``plait dev``'s API.

    Raises ``CliError`` saying how to name one."""
    from plait.devenv import read_dev_env

    url = given or os.environ.get("PLAIT_API_URL")
    if url:
        return url.rstrip("/")
    dev = read_dev_env()
    if dev.running:
        return dev.values["PLAIT_API_URL"].rstrip("/")
    gone = (f"the `plait dev` that wrote {shown(dev.path)} is no longer running; "
            if dev.stale else "no `plait dev` is running here; ")
    raise CliError(f"{gone}{START_DEV}, or pass --api URL / set PLAIT_API_URL")
