"""Object storage over HTTP (moto's standalone S3 server), the DLQ, and the
partitioner contract between the SDK (confluent-kafka) and Faust (aiokafka)."""
from __future__ import annotations

import json
import time
import uuid

import boto3
import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from plait import topics as T
from ops.infra import free_port
from producers.sdk import PlaitProducer
from support import read_rows, seq_spec, source_ids, submit, wait_for, wait_task

pytestmark = pytest.mark.integration
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_endpoint(monkeypatch_module):
    from moto.server import ThreadedMotoServer

    for k, v in AWS.items():
        monkeypatch_module.setenv(k, v)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_export_to_s3_over_http_with_presigned_link(make_stack, s3_endpoint, tmp_path):
    # given a bucket on the S3 endpoint and a stack storing there
    bucket = f"plait-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    stack = make_stack(PLAIT_STORAGE_URL=f"s3://{bucket}/exports",
                       PLAIT_S3_ENDPOINT_URL=s3_endpoint, **AWS)
    # when a multi-page export runs
    task = wait_task(stack.api_url, submit(stack.api_url,
                                           seq_spec(stack.demo_data_api, "parquet", 700, 100)))
    # then the file is in the bucket, shards are gone, and the presigned URL serves it
    assert task["status"] == "SUCCESS", task
    # (shards are deleted after SUCCESS is acknowledged: wait for it, do not race it)
    want = [f"exports/{task['file']['key']}"]

    def bucket_keys() -> list[str]:
        return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]

    wait_for(lambda: bucket_keys() == want, 30, f"the bucket to hold only {want}")
    url = task["file"]["url"]
    assert url.startswith(s3_endpoint) and "Signature" in url or "X-Amz-Signature" in url
    resp = httpx.get(url)
    assert resp.status_code == 200
    path = tmp_path / "out.parquet"
    path.write_bytes(resp.content)
    assert [r[0] for r in read_rows(path)[1:]] == source_ids(700)


def test_large_files_upload_in_parts_and_round_trip(s3_endpoint, tmp_path):
    # given a 20 MiB file (over the 8 MiB multipart threshold)
    from sinks.store import S3Store

    bucket = f"plait-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    store = S3Store(bucket, "p", s3_endpoint)
    path = tmp_path / "big.bin"
    path.write_bytes(uuid.uuid4().bytes * (20 * 1024 * 1024 // 16))
    # when it is stored
    store.put_file("results/t/big.bin", path)
    # then S3 assembled it from parts (multipart ETag "<md5>-<parts>") and it reads back
    head = store.client.head_object(Bucket=bucket, Key="p/results/t/big.bin")
    assert head["ETag"].strip('"').endswith("-3") and head["ContentLength"] == path.stat().st_size
    assert httpx.get(store.link("results/t/big.bin", "big.bin", 60)).content == path.read_bytes()
    assert store.list("results/") == ["results/t/big.bin"]
    assert store.delete_prefix("results/") == 1 and store.list("results/") == []


def test_undecodable_event_goes_to_dlq_and_the_partition_moves_on(stack):
    # given garbage on export.requests, followed by a valid request on the same key
    broker, prefix = stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"]
    raw = Producer({"bootstrap.servers": broker, "partitioner": "murmur2_random"})
    raw.produce(f"{prefix}{T.REQUESTS}", key=b"poison-key", value=b"{not json")
    raw.flush(10)
    task_id = submit(stack.api_url, seq_spec(stack.demo_data_api, "csv", 10, 10))
    # then the valid task still completes
    assert wait_task(stack.api_url, task_id)["status"] == "SUCCESS"
    # and the DLQ holds the poison event with its error and original payload
    letters = consume_all(broker, f"{prefix}{T.DLQ}")
    mine = [l for l in letters if l["data"]["key"] == "poison-key"]
    assert len(mine) == 1
    assert "not JSON" in mine[0]["data"]["error"] and mine[0]["data"]["payload"] == "{not json"


def consume_all(broker: str, topic: str, idle: float = 3.0, timeout: float = 20,
                with_partition: bool = False) -> list[dict]:
    """Every event on ``topic`` (all partitions, from the start), read until no
    event came for ``idle`` seconds. (Tansu's high watermarks are not reliable
    after idempotent batches, so they are not used.)"""
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    out: list[dict] = []
    deadline, last = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last < idle:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        last = time.monotonic()
        event = json.loads(msg.value())
        if with_partition:
            event["_partition"] = msg.partition()
        out.append(event)
    consumer.close()
    return out


def test_sdk_partitions_keys_like_faust(stack):
    # given events sent with the SDK (confluent-kafka, murmur2_random)
    from aiokafka.partitioner import DefaultPartitioner

    from plait.events import CancelRequested

    broker, prefix = stack.env["PLAIT_BROKER_URL"], stack.env["PLAIT_TOPIC_PREFIX"]
    sdk = PlaitProducer(broker, prefix)
    keys = [f"part-{uuid.uuid4().hex[:6]}-{i}" for i in range(40)]
    for key in keys:
        sdk.send(T.DLQ, key, CancelRequested(taskId=key))
    sdk.flush()
    # then each landed on the partition Faust's aiokafka partitioner picks
    faust_side = DefaultPartitioner()
    parts = list(range(int(stack.env.get("PLAIT_PARTITIONS", 4))))
    landed = {}
    for letter in consume_all(broker, f"{prefix}{T.DLQ}", with_partition=True):
        landed[letter["subject"]] = letter["_partition"]
    for key in keys:
        assert landed[key] == faust_side(key.encode(), parts, parts), key
    assert len({landed[k] for k in keys}) > 1  # keys really spread


def test_links_are_signed_for_the_public_endpoint_when_set(s3_endpoint, tmp_path):
    # given a store the workers reach at 127.0.0.1 and downloaders at localhost
    # (compose: http://minio:9000 inside, PLAIT_S3_PUBLIC_URL=http://localhost:9000 outside)
    from sinks.store import open_store

    bucket = f"plait-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    public = s3_endpoint.replace("127.0.0.1", "localhost")
    store = open_store(f"s3://{bucket}/p", "http://api", "secret", s3_endpoint, "us-east-1", public)
    path = tmp_path / "a.csv"
    path.write_bytes(b"id\n1\n")
    store.put_file("results/t/a.csv", path)
    # when a link is made
    url = store.link("results/t/a.csv", "a.csv", 60)
    # then it names the public host (path style) and serves the file from there
    assert url.startswith(f"{public}/{bucket}/p/results/t/a.csv?"), url
    assert "X-Amz-Signature" in url
    assert httpx.get(url).content == b"id\n1\n"
    # and without a public URL, links keep the endpoint the workers use
    inner = open_store(f"s3://{bucket}/p", "http://api", "secret", s3_endpoint)
    assert inner.link("results/t/a.csv", "a.csv", 60).startswith(s3_endpoint)
