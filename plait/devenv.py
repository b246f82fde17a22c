"""Where a running ``plait dev`` publishes its URLs (README, "Trying the API by hand"): ``export``
lines in ``.plait/dev.env`` (or ``$PLAIT_DEV_ENV``), deleted when it stops. Readers look in the
current directory and its parents; a file whose ``PLAIT_DEV_PID`` is not alive is stale."""
from __future__ import annotations

import os
import shlex
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

ENV_FILE_VAR = "PLAIT_DEV_ENV"
DEV_FILE = Path(".plait") / "dev.env"
PID_KEY = "PLAIT_DEV_PID"


DEV_KEYS = ("PLAIT_API_URL", "PLAIT_DEMO_DATA_API_URL", "PLAIT_BROKER_URL", "PLAIT_REDIS_URL",
            "PLAIT_REDIS_PREFIX", "PLAIT_TOPIC_PREFIX", "PLAIT_METRICS_URLS")


@dataclass
class DevEnv:
    """A dev file: ``path`` (None: none found), its ``values`` (empty when missing or stale),
    ``stale``."""

    path: Path | None = None
    values: dict[str, str] = field(default_factory=dict)
    stale: bool = False

    @property
    def running(self) -> bool:
        """A live ``plait dev`` wrote this file."""
        return bool(self.values)


def dev_file_path(start: Path | None = None) -> Path | None:
    """``$PLAIT_DEV_ENV``, else the first ``.plait/dev.env`` in ``start`` (default CWD) or a parent;
    None."""
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
    """``export KEY=VALUE`` (or ``KEY=VALUE``) lines -> dict, values shell-unquoted."""
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


def export_lines(values: dict[str, str]) -> list[str]:
    """``values`` plus this pid (:data:`PID_KEY`) as ``export KEY=VALUE`` lines (values
    shell-quoted): what :func:`write_dev_env` writes and ``plait dev`` prints."""
    return [f"export {k}={shlex.quote(v)}" for k, v in {**values, PID_KEY: str(os.getpid())}.items()]


def write_dev_env(values: dict[str, str], path: Path | None = None) -> Path:
    """Write :func:`export_lines` of ``values`` to ``path`` (default :func:`target_path`);
    returns it."""
    path = path or target_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = export_lines(values)
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
    """Remove from ``environ`` the :data:`DEV_KEYS` and pid of another ``plait dev``'s sourced file
    (``PLAIT_DEV_PID`` set, not ours); returns the names removed."""
    env = os.environ if environ is None else environ
    pid = env.get(PID_KEY)
    if pid is None or pid == str(os.getpid()):
        return []
    gone = [k for k in (*DEV_KEYS, PID_KEY) if k in env]
    for key in gone:
        del env[key]
    return gone


def live_owner(path: Path) -> int | None:
    """The pid of the live process, not this one, that wrote ``path``; else None."""
    try:
        pid = int(parse_dev_file(path.read_text()).get(PID_KEY, ""))
    except (OSError, ValueError):
        return None
    return pid if pid != os.getpid() and _pid_alive(pid) else None


def target_path() -> Path:
    """Where ``plait dev`` writes its file: ``$PLAIT_DEV_ENV`` or ``./.plait/dev.env``."""
    return Path(os.environ.get(ENV_FILE_VAR) or DEV_FILE).resolve()
