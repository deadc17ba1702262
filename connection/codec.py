"""Payload encryption: an AES-256-GCM :class:`PayloadCodec` with key ids, so keys can rotate.

Off by default. Turn it on with the same key on every worker, API and CLI process:

* ``JOBS_ENCRYPTION_KEY="k2:<base64 key>,k1:<base64 key>"``, or
* ``JOBS_ENCRYPTION_KEY_FILE=/path/to/keys`` holding the same entries (commas, spaces or
  newlines between them; ``#`` starts a comment). Setting both is an error.

Each entry is ``<key id>:<key>``: the id is 1-64 characters of ``[A-Za-z0-9._-]``, the key
32 random bytes in base64 (standard or URL-safe alphabet). The **first** entry is the current
key and encrypts everything new; the others only decrypt. To rotate: put a new key first and
keep the old ones after it until nothing encrypted with them is still needed (running jobs,
retained histories). ``python -m connection.codec [key id]`` prints a fresh entry.

Every payload the SDK sends (workflow and activity inputs and results, signal, query and
update arguments, memos, heartbeat details, failure details) becomes
``metadata = {encoding: binary/encrypted, encryption-key-id: <id>}`` and
``data = nonce(12 bytes) || AES-GCM(serialized original payload)``: the original metadata is
inside the ciphertext too. This is the layout of Temporal's encryption samples (Go,
TypeScript, Python), so their codecs read these payloads given the key. Not encrypted:
search attributes (``JobName``, ``JobHandler``, ``JobStatus``, ``JobRunAt``), workflow ids,
and failure messages and stack traces (handlers should not put secrets in error messages).

Decoding leaves unencrypted payloads as they are (histories from before encryption was
turned on stay readable) and fails with :class:`DecryptionError`, naming the key id, for a
key id that is not configured or a key that does not open the payload.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from jobctl.connection.errors import JobsError, SpecError

KEY_ENV = "JOBS_ENCRYPTION_KEY"
KEY_FILE_ENV = "JOBS_ENCRYPTION_KEY_FILE"
ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class DecryptionError(JobsError):
    """An encrypted payload this process cannot open (unknown key id, wrong key, damaged)."""


class KeyRing:
    """Named AES-256-GCM keys; ``current`` encrypts, every key decrypts."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]):
        if not keys:
            raise ValueError("a key ring needs at least one key")
        self.current = keys[0][0]
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys}

    @property
    def ids(self) -> list[str]:
        return list(self._ciphers)

    def cipher(self, key_id: str) -> AESGCM | None:
        return self._ciphers.get(key_id)


def parse_keys(text: str, source: str = KEY_ENV) -> KeyRing:
    """Parse ``id:base64key`` entries (first = current). Errors name ``source`` and the entry,
    never the key material."""
    entries = [
        entry
        for line in text.splitlines()
        for entry in re.split(r"[\s,]+", line.split("#", 1)[0])
        if entry
    ]
    if not entries:
        raise SpecError([(source, "no key in it (expected id:base64key[,id:base64key...])")])
    keys: list[tuple[str, bytes]] = []
    for number, entry in enumerate(entries, 1):
        key_id, colon, encoded = entry.partition(":")
        if not colon or not KEY_ID.fullmatch(key_id):
            reason = f"entry {number} is not <key id>:<base64 key> (id: 1-64 of [A-Za-z0-9._-])"
            raise SpecError([(source, reason)])
        if key_id in dict(keys):
            raise SpecError([(source, f"key id {key_id!r} appears twice")])
        key = _decode_key(encoded)
        if key is None or len(key) != KEY_BYTES:
            raise SpecError(
                [(source, f"key {key_id!r} is not {KEY_BYTES} bytes of base64 (AES-256)")]
            )
        keys.append((key_id, key))
    return KeyRing(keys)


def _decode_key(encoded: str) -> bytes | None:
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None


def keys_from_env(environ: Mapping[str, str] | None = None) -> KeyRing | None:
    """The configured keys, or None when encryption is off (neither variable set)."""
    env = os.environ if environ is None else environ
    inline, path = env.get(KEY_ENV, "").strip(), env.get(KEY_FILE_ENV, "").strip()
    if inline and path:
        raise SpecError([(KEY_ENV, f"set {KEY_ENV} or {KEY_FILE_ENV}, not both")])
    if inline:
        return parse_keys(inline, KEY_ENV)
    if path:
        try:
            text = Path(path).expanduser().read_text()
        except OSError as err:
            raise SpecError([(KEY_FILE_ENV, f"cannot read {path}: {err.strerror}")]) from err
        return parse_keys(text, KEY_FILE_ENV)
    return None


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over each whole payload, tagged with the id of the key that sealed it."""

    def __init__(self, keys: KeyRing):
        self.keys = keys

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") == ENCODING:
            return payload  # already sealed (e.g. passed through a codec server twice)
        cipher = self.keys.cipher(self.keys.current)
        assert cipher is not None
        nonce = secrets.token_bytes(NONCE_BYTES)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: self.keys.current.encode()},
            data=nonce + cipher.encrypt(nonce, payload.SerializeToString(), None),
        )

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was turned on
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode("utf-8", "replace")
        cipher = self.keys.cipher(key_id)
        if cipher is None:
            raise DecryptionError(
                f"payload encrypted with key id {key_id!r}, which is not configured "
                f"(known key ids: {', '.join(self.keys.ids)}); add it to {KEY_ENV}"
            )
        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], None)
        except InvalidTag as err:
            raise DecryptionError(
                f"payload encrypted with key id {key_id!r} does not decrypt with the configured "
                f"key {key_id!r}: wrong key for that id, or the payload was altered"
            ) from err
        return Payload.FromString(plain)


def codec_from_env(environ: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    """The codec for the configured keys, or None when encryption is off."""
    keys = keys_from_env(environ)
    return EncryptionCodec(keys) if keys is not None else None


def new_key() -> str:
    """A fresh random AES-256 key in base64."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


if __name__ == "__main__":
    key_id = sys.argv[1] if len(sys.argv) > 1 else "k1"
    if not KEY_ID.fullmatch(key_id):
        sys.exit("error: a key id is 1-64 characters of [A-Za-z0-9._-]")
    print(f"{key_id}:{new_key()}")
