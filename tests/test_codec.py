"""Payload encryption: the AES-256-GCM codec, its keys, the codec-server endpoints, and a job
on a real dev server whose secret never reaches Temporal in clear."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads, SearchAttributes, WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from jobctl.connection.client import connect, connect_options
from jobctl.connection.codec import (
    ENCODING,
    KEY_ENV,
    KEY_FILE_ENV,
    KEY_ID_METADATA,
    DecryptionError,
    EncryptionCodec,
    codec_from_env,
    keys_from_env,
    new_key,
    parse_keys,
)
from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import SpecError
from jobctl.workflows.models import JobReport
from tests.helpers.poll import eventually
from tests.helpers.processes import Api, Workers, cli_env, jobs
from tests.helpers.temporal import end_singletons

KEY_A, KEY_B, KEY_C = new_key(), new_key(), new_key()
SECRET = "s3cret-card-4111-1111-1111-1111"
TOKEN = "codec-token"
UI = "http://localhost:8233"


def codec(spec: str) -> EncryptionCodec:
    return EncryptionCodec(parse_keys(spec))


def plain_payload(value: Any) -> Payload:
    [payload] = pydantic_data_converter.payload_converter.to_payloads([value])
    return payload


# -- the codec -----------------------------------------------------------------------------


async def test_round_trip_seals_the_whole_payload() -> None:
    sealer = codec(f"k1:{KEY_A}")
    original = plain_payload({"secret": SECRET})
    [sealed] = await sealer.encode([original])
    assert sealed.metadata["encoding"] == ENCODING == b"binary/encrypted"
    assert sealed.metadata[KEY_ID_METADATA] == b"k1"
    assert set(sealed.metadata) == {"encoding", KEY_ID_METADATA}  # json/plain is inside
    assert SECRET.encode() not in sealed.SerializeToString()
    [again] = await sealer.encode([original])
    assert again.data != sealed.data  # a fresh nonce every time
    assert await sealer.decode([sealed, again]) == [original, original]
    # Unencrypted payloads (from before encryption was on) pass through decode untouched.
    assert await sealer.decode([original]) == [original]
    # Sealing a sealed payload again is a no-op, so decode stays one layer deep.
    assert await sealer.encode([sealed]) == [sealed]


async def test_the_data_converter_of_connect_encrypts_when_a_key_is_set() -> None:
    converter = connect_options(environ={KEY_ENV: f"k1:{KEY_A}"})["data_converter"]
    assert isinstance(converter.payload_codec, EncryptionCodec)
    assert converter.payload_converter_class is pydantic_data_converter.payload_converter_class
    [payload] = await converter.encode([{"secret": SECRET}])
    assert payload.metadata["encoding"] == ENCODING and SECRET.encode() not in payload.data
    assert await converter.decode([payload], [dict]) == [{"secret": SECRET}]
    assert connect_options(environ={})["data_converter"] is pydantic_data_converter


async def test_a_rotated_key_still_decrypts_what_the_old_key_sealed() -> None:
    before = codec(f"old:{KEY_A}")
    [sealed_old] = await before.encode([plain_payload({"n": 1})])
    after = codec(f"new:{KEY_B},old:{KEY_A}")
    [sealed_new] = await after.encode([plain_payload({"n": 2})])
    assert sealed_new.metadata[KEY_ID_METADATA] == b"new"  # the first key is current
    decoded = await after.decode([sealed_old, sealed_new])
    assert decoded == [plain_payload({"n": 1}), plain_payload({"n": 2})]
    with pytest.raises(DecryptionError) as unknown:
        await before.decode([sealed_new])
    assert str(unknown.value) == (
        "payload encrypted with key id 'new', which is not configured (known key ids: old); "
        f"add it to {KEY_ENV}"
    )


async def test_a_wrong_key_is_a_clear_error_naming_the_key_id() -> None:
    [sealed] = await codec(f"k1:{KEY_A}").encode([plain_payload({"secret": SECRET})])
    with pytest.raises(DecryptionError) as wrong:
        await codec(f"k1:{KEY_B}").decode([sealed])
    assert "key id 'k1'" in str(wrong.value) and "wrong key" in str(wrong.value)
    tampered = Payload()
    tampered.CopyFrom(sealed)
    tampered.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(DecryptionError, match=r"'k1'.*altered"):
        await codec(f"k1:{KEY_A}").decode([tampered])


BAD_KEYS = [
    ("", "no key in it"),
    (KEY_A, "entry 1 is not <key id>:<base64 key>"),
    (f"k1:{KEY_A},{KEY_B}", "entry 2 is not <key id>:<base64 key>"),
    (f"bad id:{KEY_A}", "entry 1 is not"),
    (f"k1:{KEY_A},k1:{KEY_B}", "key id 'k1' appears twice"),
    ("k1:bm90IDMyIGJ5dGVz", "key 'k1' is not 32 bytes of base64"),
    ("k1:!!!not-base64!!!", "key 'k1' is not 32 bytes of base64"),
]


# Ids by reason: the specs hold keys made at import time, and test ids must not change per run.
@pytest.mark.parametrize(("spec", "reason"), BAD_KEYS, ids=[reason for _, reason in BAD_KEYS])
def test_bad_key_settings_are_refused_without_echoing_the_key(spec: str, reason: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_keys(spec)
    [(field, message)] = err.value.problems
    assert field == KEY_ENV and reason in message
    for key in (KEY_A, KEY_B):
        assert key not in message


def test_keys_from_the_environment_or_a_file(tmp_path: Path) -> None:
    assert keys_from_env({}) is None and codec_from_env({}) is None
    ring = keys_from_env({KEY_ENV: f" k2:{KEY_B} , k1:{KEY_A} "})
    assert ring is not None and (ring.current, ring.ids) == ("k2", ["k2", "k1"])
    url_safe = base64.urlsafe_b64encode(base64.b64decode(KEY_C)).decode().rstrip("=")
    keyfile = tmp_path / "keys"
    keyfile.write_text(f"# current first\nk3:{url_safe}\nk2:{KEY_B}  # retired 2026-01\n")
    ring = keys_from_env({KEY_FILE_ENV: str(keyfile)})
    assert ring is not None and (ring.current, ring.ids) == ("k3", ["k3", "k2"])
    with pytest.raises(SpecError) as both:
        keys_from_env({KEY_ENV: f"k1:{KEY_A}", KEY_FILE_ENV: str(keyfile)})
    assert both.value.problems[0] == (KEY_ENV, f"set {KEY_ENV} or {KEY_FILE_ENV}, not both")
    with pytest.raises(SpecError) as missing:
        keys_from_env({KEY_FILE_ENV: str(tmp_path / "nope")})
    assert missing.value.problems[0][0] == KEY_FILE_ENV and "nope" in missing.value.problems[0][1]
    keyfile.write_text("k1:short\n")
    with pytest.raises(SpecError) as bad:
        keys_from_env({KEY_FILE_ENV: str(keyfile)})
    assert bad.value.problems[0] == (KEY_FILE_ENV, "key 'k1' is not 32 bytes of base64 (AES-256)")


# -- codec-server endpoints, in process ---------------------------------------------------


def to_json(payloads: list[Payload]) -> dict[str, Any]:
    return json_format.MessageToDict(Payloads(payloads=payloads))


def from_json(body: dict[str, Any]) -> list[Payload]:
    return list(json_format.ParseDict(body, Payloads()).payloads)


def in_process(token: str) -> httpx.AsyncClient:
    """The API app in this process (the codec endpoints need no Temporal)."""
    transport = httpx.ASGITransport(app=create_app(token))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost:8000")


@pytest.fixture
async def api_with_key(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv(KEY_ENV, f"k2:{KEY_B},k1:{KEY_A}")
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.delenv("JOBS_CODEC_CORS_ORIGINS", raising=False)
    async with in_process(TOKEN) as http:
        yield http


async def test_codec_endpoints_encode_decode_and_name_unknown_keys(
    api_with_key: httpx.AsyncClient,
) -> None:
    http, auth = api_with_key, {"Authorization": f"Bearer {TOKEN}"}
    original = plain_payload({"secret": SECRET})
    encoded = await http.post("/codec/encode", json=to_json([original]), headers=auth)
    assert encoded.status_code == 200, encoded.text
    [sealed] = from_json(encoded.json())
    assert sealed.metadata[KEY_ID_METADATA] == b"k2" and SECRET not in encoded.text
    assert await codec(f"k2:{KEY_B}").decode([sealed]) == [original]
    [by_old_key] = await codec(f"k1:{KEY_A}").encode([original])
    decoded = await http.post("/codec/decode", json=to_json([sealed, by_old_key]), headers=auth)
    assert from_json(decoded.json()) == [original, original]
    [foreign] = await codec(f"k0:{KEY_C}").encode([original])
    refused = await http.post("/codec/decode", json=to_json([foreign]), headers=auth)
    assert refused.status_code == 422
    assert "key id 'k0'" in refused.json()["detail"][0]["reason"]
    as_json = {**auth, "Content-Type": "application/json"}
    garbage = await http.post("/codec/decode", content=b'{"payloads": 3}', headers=as_json)
    assert garbage.status_code == 422 and garbage.json()["detail"][0]["field"] == "payloads"
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        unauthorized = await http.post("/codec/decode", json=to_json([sealed]), headers=headers)
        assert unauthorized.status_code == 401


async def test_cors_only_for_the_ui_origin_and_only_on_the_codec(
    api_with_key: httpx.AsyncClient,
) -> None:
    http = api_with_key
    preflight = {
        "Origin": UI,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
    }
    answer = await http.options("/codec/decode", headers=preflight)  # no token: browsers send none
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == UI
    allowed = answer.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "x-namespace"} <= set(allowed.split(", "))
    assert "POST" in answer.headers["access-control-allow-methods"]
    other = await http.options(
        "/codec/decode", headers={**preflight, "Origin": "https://evil.example"}
    )
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    not_codec = await http.options("/jobs", headers=preflight)
    assert not_codec.status_code == 401 and "access-control-allow-origin" not in not_codec.headers
    # The actual request carries the header too, even when refused, so the UI can show why.
    refused = await http.post("/codec/decode", json={"payloads": []}, headers={"Origin": UI})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == UI


async def test_cors_origins_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_CODEC_CORS_ORIGINS", "https://ui.example.com/, http://other:8080")
    monkeypatch.delenv(KEY_ENV, raising=False)
    async with in_process(TOKEN) as http:
        for origin in ("https://ui.example.com", "http://other:8080"):
            answer = await http.options(
                "/codec/encode",
                headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
            )
            assert answer.headers.get("access-control-allow-origin") == origin
        default_ui = await http.options(
            "/codec/encode", headers={"Origin": UI, "Access-Control-Request-Method": "POST"}
        )
        assert default_ui.status_code == 400


async def test_without_a_key_the_codec_changes_nothing_and_says_why_it_cannot_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    original = plain_payload({"n": 1})
    [sealed] = await codec(f"k1:{KEY_A}").encode([original])
    async with in_process("") as http:
        same = await http.post("/codec/encode", json=to_json([original]))
        assert from_json(same.json()) == [original]
        refused = await http.post("/codec/decode", json=to_json([sealed]))
        assert refused.status_code == 422
        assert "key id 'k1'" in refused.json()["detail"][0]["reason"]
        assert KEY_ENV in refused.json()["detail"][0]["reason"]


def test_a_bad_key_stops_the_api_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k1:tooshort")
    with pytest.raises(SpecError) as err:
        create_app(TOKEN)
    assert err.value.problems[0][0] == KEY_ENV


# -- end to end on a dev server ------------------------------------------------------------


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload inside a proto message, except search attributes (never encoded)."""
    if isinstance(message, Payload):
        yield message
        return
    if isinstance(message, SearchAttributes):
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif field.is_repeated:
            items = list(value)
        else:
            items = [value]
        for item in items:
            if isinstance(item, Message):
                yield from payloads_in(item)


async def raw_history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    events: list[HistoryEvent] = []
    token = b""
    while True:
        page = await client.workflow_service.get_workflow_execution_history(
            GetWorkflowExecutionHistoryRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=workflow_id),
                next_page_token=token,
            )
        )
        events.extend(page.history.events)
        token = page.next_page_token
        if not token:
            return events


async def wait_done(http: httpx.AsyncClient, job_id: str, timeout: float = 60) -> dict[str, Any]:
    async def body() -> dict[str, Any]:
        answer: dict[str, Any] = (await http.get(f"/jobs/{job_id}")).json()
        return answer

    return await eventually(
        body,
        lambda answer: answer.get("status") == "done",
        timeout=timeout,
        interval=0.3,
        what=f"{job_id} done",
    )


@pytest.mark.devserver
async def test_a_secret_payload_never_reaches_temporal_in_clear(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = f"live2:{KEY_B},live1:{KEY_A}"
    env = cli_env(
        dev_server.address,
        f"codec-{uuid.uuid4().hex[:8]}",
        JOBS_ENCRYPTION_KEY=keys,
        JOBS_API_TOKEN=TOKEN,
    )
    env.pop(KEY_FILE_ENV, None)
    workers, api = Workers(env, tmp_path), Api(env)
    job_id = f"codec-{uuid.uuid4().hex[:10]}"
    try:
        workers.start()
        api.start()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx.AsyncClient(base_url=api.url, timeout=30, headers=auth) as http,
            httpx.AsyncClient(base_url=api.url, timeout=30) as anon,
        ):
            created = await http.post(
                "/jobs",
                json={
                    "id": job_id,
                    "name": "codec job",
                    "handler": "log",
                    "payload": {"secret": SECRET},
                    "delay": 0,
                },
            )
            assert created.status_code == 201, created.text
            done = await wait_done(http, job_id)  # the API and the worker share the key
            assert done["result"] == {"logged": True}

            # Raw history through a client without the codec: no secret, every payload sealed.
            plain = await Client.connect(dev_server.address, namespace="default")
            events = await raw_history(plain, job_id)
            raw = b"".join(event.SerializeToString() for event in events)
            assert SECRET.encode() not in raw
            assert base64.b64encode(SECRET.encode())[:20] not in raw
            sealed = [p for event in events for p in payloads_in(event)]
            assert len(sealed) >= 4  # start input, activity input and result, workflow result
            assert {p.metadata["encoding"] for p in sealed} == {ENCODING}
            assert {p.metadata[KEY_ID_METADATA] for p in sealed} == {b"live2"}
            started = events[0].workflow_execution_started_event_attributes.input.payloads
            with pytest.raises(Exception, match="binary/encrypted"):
                await plain.data_converter.decode(started, [dict])

            # The codec server decodes what the worker sealed; only with the token.
            body = to_json(list(started))
            decoded = await http.post(
                "/codec/decode", json=body, headers={"X-Namespace": "default"}
            )
            assert decoded.status_code == 200, decoded.text
            [spec] = from_json(decoded.json())
            assert spec.metadata["encoding"] == b"json/plain"
            assert json.loads(spec.data)["payload"] == {"secret": SECRET}
            no_token = await anon.post("/codec/decode", json=body)
            assert no_token.status_code == 401 and SECRET not in no_token.text
            preflight = await anon.options(
                "/codec/decode",
                headers={
                    "Origin": UI,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,x-namespace,content-type",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == UI

        # Status reads it back with the key: in process and through `jobctl status`.
        monkeypatch.setenv(KEY_ENV, keys)
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        sealed_client = await connect(dev_server.address, "default")
        report = await operations.status(sealed_client, job_id)
        assert isinstance(report, JobReport)
        assert report.status == "done" and report.result == {"logged": True}
        [spec_back] = await sealed_client.data_converter.decode(started, [dict])
        assert spec_back["payload"] == {"secret": SECRET}
        status = jobs(env, "status", job_id, "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["status"] == "done"
        # Without the key `jobctl status` fails, with one line and no secret.
        keyless = {k: v for k, v in env.items() if k != KEY_ENV}
        blind = jobs(keyless, "status", job_id, "--json")
        assert blind.returncode != 0 and SECRET not in blind.stdout + blind.stderr
        # A process holding only the retired key names the key it lacks.
        old_only = jobs({**env, KEY_ENV: f"live1:{KEY_A}"}, "status", job_id, "--json")
        assert old_only.returncode != 0 and "'live2'" in old_only.stderr
    finally:
        api.stop()
        workers.stop_all()
        await end_singletons(dev_client)
