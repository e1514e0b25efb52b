"""A page's Content-Encoding undone while it streams, its size bounded at every layer.

A compressed body is no measure of what it holds: 1.8 KB of `gzip, gzip` unpacks to a gigabyte of zeros.
So no layer is ever asked for more than the page limit allows: each decompression call is given the
bytes still allowed as its maximum output, and the page is refused at the byte that passes the limit,
whatever the number of stacked encodings. Only gzip and deflate are asked for (and undone); a body in
another encoding is refused.
"""

from __future__ import annotations

import zlib

ACCEPTED = "gzip, deflate"
MAX_LAYERS = 4  # a server stacks one, rarely two; more is a bomb or a mistake


class DecodingFailed(Exception):
    """The body cannot be decoded: an unknown encoding, corrupt data, or too many layers."""


class TooLarge(Exception):
    """A layer of the body unpacks past the limit."""


class _Layer:
    """One gzip or deflate layer (a gzip layer may hold several members, one after another)."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._decompressor = self._new()
        self._raw_deflate_tried = False

    def _new(self) -> "zlib._Decompress":
        # gzip: the gzip header; deflate: zlib's header (RFC 9110), raw deflate as some servers send it.
        return zlib.decompressobj(16 + zlib.MAX_WBITS if self.encoding == "gzip" else zlib.MAX_WBITS)

    def decode(self, data: bytes, allowed: int) -> bytes:
        """Up to `allowed` + 1 bytes of output for `data` (the extra byte tells that the limit passed)."""
        out = bytearray()
        while data:
            try:
                out += self._decompressor.decompress(data, allowed + 1 - len(out))
            except zlib.error:
                if self.encoding == "deflate" and not self._raw_deflate_tried and not out:
                    self._raw_deflate_tried = True
                    self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise DecodingFailed(f"the page's {self.encoding} data is corrupt") from None
            if len(out) > allowed:
                raise TooLarge()
            if self._decompressor.unconsumed_tail:  # output stopped at the maximum: not possible below it
                data = self._decompressor.unconsumed_tail
            elif self._decompressor.eof and self._decompressor.unused_data and self.encoding == "gzip":
                data = self._decompressor.unused_data  # the next gzip member
                self._decompressor = self._new()
            else:
                data = b""
        return bytes(out)


class BoundedDecoder:
    """Undoes a `Content-Encoding` header's layers (applied in the order listed, so undone in reverse)."""

    def __init__(self, content_encoding: str, max_bytes: int) -> None:
        names = [name.strip().lower() for name in content_encoding.split(",") if name.strip()]
        names = ["gzip" if name == "x-gzip" else name for name in names if name != "identity"]
        if len(names) > MAX_LAYERS:
            raise DecodingFailed(f"the page is encoded {len(names)} times over")
        unknown = [name for name in names if name not in ("gzip", "deflate")]
        if unknown:
            raise DecodingFailed(f"the page is in an encoding the browser does not read ({unknown[0][:40]})")
        self._layers = [_Layer(name) for name in reversed(names)]
        self.max_bytes = max_bytes
        self.size = 0  # decoded bytes so far

    def feed(self, data: bytes) -> bytes:
        for layer in self._layers:
            data = layer.decode(data, self.max_bytes - self.size if layer is self._layers[-1] else self.max_bytes)
        self.size += len(data)
        if self.size > self.max_bytes:
            raise TooLarge()
        return data
