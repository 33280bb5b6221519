"""Hand-rolled readers and writers for the two hot messages (Produce request, Fetch response).

kio's native decoders are fast, but they copy record bytes and its encoders are pure Python
(≈10 µs per Produce response). Produce requests are read here so records stay writable
slices of the request frame (offsets are patched in place); responses are packed with
``struct``. Everything else uses the generic codec.
"""

from __future__ import annotations

import struct
import uuid

from .codec import MalformedRequest, encode_unsigned_varint, read_unsigned_varint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class Reader:
    """Cursor over a request frame; every read checks bounds and raises MalformedRequest."""

    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.buf):
            raise MalformedRequest("field runs past the end of the frame")
        self.pos = start + n
        return start

    def int16(self) -> int:
        value: int = _I16.unpack_from(self.buf, self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack_from(self.buf, self._take(4))[0]
        return value

    def uvarint(self) -> int:
        value, self.pos = read_unsigned_varint(self.buf, self.pos)
        return value

    def uuid(self) -> uuid.UUID:
        start = self._take(16)
        return uuid.UUID(bytes=bytes(self.buf[start : start + 16]))

    def array_length(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n > len(self.buf) - self.pos:
            raise MalformedRequest("array length exceeds the frame")
        return n

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        start = self._take(n)
        try:
            return bytes(self.buf[start : start + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRequest("string is not UTF-8") from exc

    def nullable_bytes(self) -> memoryview | None:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            return None
        start = self._take(n)
        return self.buf[start : start + n]

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


class Writer:
    """Appends protocol fields to a bytearray in legacy or compact (flexible) form."""

    __slots__ = ("flexible", "out")

    def __init__(self, flexible: bool, out: bytearray | None = None) -> None:
        self.out = out if out is not None else bytearray()
        self.flexible = flexible

    def array_length(self, n: int) -> None:
        self.out += encode_unsigned_varint(n + 1) if self.flexible else _I32.pack(n)

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self.out += b"\x00" if self.flexible else b"\xff\xff"
            return
        data = value.encode()
        self.out += encode_unsigned_varint(len(data) + 1) if self.flexible else _I16.pack(len(data))
        self.out += data

    def bytes_length(self, n: int) -> None:
        """Length prefix of a (nullable) bytes field; -1 for null."""
        if self.flexible:
            self.out += encode_unsigned_varint(n + 1)
        else:
            self.out += _I32.pack(n)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.out += b"\x00"
