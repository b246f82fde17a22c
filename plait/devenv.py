"""Where a running ``plait dev`` publishes its URLs, and how other processes
(the ``plait`` CLI, the Producer SDK) find them.

``plait dev`` writes ``.plait/dev.env`` in the directory it was started from
(or the file named by ``PLAIT_DEV_ENV``) and deletes it when it stops. The
file is shell syntax, so ``source .plait/dev.env`` sets the same variables
in a shell::

    export PLAIT_API_URL=http://127.0.0.1:41234
    export PLAIT_DEMO_DATA_API_URL=http://127.0.0.1:41235/data
    export PLAIT_BROKER_URL=127.0.0.1:41236
    export PLAIT_REDIS_URL=redis://127.0.0.1:6379/0
    export PLAIT_REDIS_PREFIX=plait-1a2b3c4d
    export PLAIT_DEV_PID=12345

A shell that sourced the file carries these variables into whatever it
starts; a new ``plait dev`` started there drops them
(:func:`drop_sourced`: ``PLAIT_DEV_PID`` names another process), so it
builds its own stack, and it refuses to take over a file that a live
``plait dev`` wrote (:func:`live_owner`).

Readers look for ``.plait/dev.env`` in the current directory and its parents
(as git looks for ``.git``); a file whose ``PLAIT_DEV_PID`` is not a live
process is stale (``plait dev`` was killed) and is not used.
"""
from __future__ import annotations

import os
import shlex
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

#: Environment variable naming the dev file explicitly (readers and writer).
ENV_FILE_VAR = "PLAIT_DEV_ENV"
#: The dev file, relative to the directory ``plait dev`` runs in.
DEV_FILE = Path(".plait") / "dev.env"
#: The key holding the pid of the ``plait dev`` process that wrote the file.
PID_KEY = "PLAIT_DEV_PID"


#: Variables ``plait dev`` writes to its dev file (besides :data:`PID_KEY`).
DEV_KEYS = ("PLAIT_API_URL", "PLAIT_DEMO_DATA_API_URL", "PLAIT_BROKER_URL", "PLAIT_REDIS_URL",
            "PLAIT_REDIS_PREFIX", "PLAIT_TOPIC_PREFIX", "PLAIT_METRICS_URLS")


@dataclass
class DevEnv:
    """What a dev file says.

    Attributes:
        path: the file found (None: no file).
        values: its ``PLAIT_*`` variables (empty when missing or stale).
        stale: the file exists but its ``plait dev`` process is gone.
    """

    path: Path | None = None
    values: dict[str, str] = field(default_factory=dict)
    stale: bool = False

    @property
    def running(self) -> bool:
        """A live ``plait dev`` wrote this file."""
        return bool(self.values)


def dev_file_path(start: Path | None = None) -> Path | None:
    """The dev file to read: ``$PLAIT_DEV_ENV`` if set, else the first
    ``.plait/dev.env`` in ``start`` (default: the CWD) or a parent; None if none exists."""
    explicit = os.environ.get(ENV_FILE_VAR)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEV_FILE
        if candidate.is_file():
            return candidate
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def parse_dev_file(text: str) -> dict[str, str]:
    """``export KEY=VALUE`` (or ``KEY=VALUE``) lines -> dict; comments and
    blank lines skipped; values are shell-unquoted."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, raw = line.partition("=")
        if sep:
            parts = shlex.split(raw) if raw else [""]
            values[key.strip()] = parts[0] if parts else ""
    return values


def read_dev_env(start: Path | None = None) -> DevEnv:
    """The dev file of a running ``plait dev`` (see module docstring); never raises."""
    path = dev_file_path(start)
    if path is None:
        return DevEnv()
    try:
        values = parse_dev_file(path.read_text())
    except OSError:
        return DevEnv()
    try:
        alive = _pid_alive(int(values.get(PID_KEY, "")))
    except ValueError:
        alive = False
    return DevEnv(path, values if alive else {}, stale=not alive)


def write_dev_env(values: dict[str, str], path: Path | None = None) -> Path:
    """Write ``values`` (plus this process's pid) as ``export`` lines to
    ``path`` (default ``$PLAIT_DEV_ENV`` or ``./.plait/dev.env``); returns the path."""
    path = path or target_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"export {k}={shlex.quote(v)}" for k, v in {**values, PID_KEY: str(os.getpid())}.items()]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("# written by `plait dev`; removed when it stops\n" + "\n".join(lines) + "\n")
    tmp.replace(path)
    return path


def remove_dev_env(path: Path) -> None:
    """Delete ``path`` if it is still this process's dev file."""
    try:
        if parse_dev_file(path.read_text()).get(PID_KEY) == str(os.getpid()):
            path.unlink()
    except OSError:
        pass


def dev_value(key: str) -> str | None:
    """``os.environ[key]`` when set, else the running dev stack's value, else None."""
    return os.environ.get(key) or read_dev_env().values.get(key)


def drop_sourced(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Remove from ``environ`` (default ``os.environ``) the variables of a
    sourced dev file: when ``PLAIT_DEV_PID`` is set and is not this process,
    every :data:`DEV_KEYS` variable and the pid came from another ``plait
    dev``'s file. Returns the names removed (none when the pid is absent or
    this process's)."""
    env = os.environ if environ is None else environ
    pid = env.get(PID_KEY)
    if pid is None or pid == str(os.getpid()):
        return []
    gone = [k for k in (*DEV_KEYS, PID_KEY) if k in env]
    for key in gone:
        del env[key]
    return gone


def live_owner(path: Path) -> int | None:
    """The pid of the live process, not this one, that wrote the dev file
    ``path``; None when there is no file, or its writer is gone or is us."""
    try:
        pid = int(parse_dev_file(path.read_text()).get(PID_KEY, ""))
    except (OSError, ValueError):
        return None
    return pid if pid != os.getpid() and _pid_alive(pid) else None


def target_path() -> Path:
    """Where ``plait dev`` writes its file: ``$PLAIT_DEV_ENV`` or ``./.plait/dev.env``."""
    return Path(os.environ.get(ENV_FILE_VAR) or DEV_FILE).resolve()
