"""The file store's record codec: one table of record kinds and their fields, read by
both the encoder and the decoder.

A frame on disk is ``[u32 length][u32 crc32(payload)][payload]`` (little endian); the
payload is the kind byte of :data:`RECORD_KINDS` followed by the record's fields in the
table's order.  Field encodings (:class:`FieldCodec`): integers ``<q``, text ``u32
length + UTF-8`` (length ``0xFFFFFFFF`` = ``None`` for optional text), bytes ``u32
length + bytes``, a flag one byte, a list of names ``u16 count`` + texts, and the
``attributes``/``info`` dicts JSON text (bytes values inside tagged ``{"$bytes":
base64}``; JSON has no tuples or non-string keys).  Never pickle: a store file must not
be able to run code.

Changing a field here changes the on-disk format: stores written before must still load
(tests/test_filestore.py keeps frames written by earlier versions).
"""

from __future__ import annotations

import base64
import json
import struct
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

from .base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)

__all__ = [
    "CHECKPOINT",
    "HEADER_SIZE",
    "RECORD_KINDS",
    "Checkpoint",
    "CorruptRecord",
    "decode",
    "encode",
    "frame",
    "frame_record",
]

FRAME_HEADER = struct.Struct("<II")
HEADER_SIZE = FRAME_HEADER.size
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_I64 = struct.Struct("<q")
_NO_TEXT = 0xFFFFFFFF  # the length of an absent optional text

# Record kinds (the first payload byte).
K_DEST_ADD = 1
K_DEST_REMOVE = 2
K_DURABLE_ADD = 3
K_DURABLE_REMOVE = 4
K_MSG_ADD = 5
K_MSG_DELIVERED = 6
K_MSG_SETTLE = 7
K_TXN_STATE = 8
K_TXN_SEND = 9
K_TXN_ACK = 10
K_TXN_REMOVE = 11
K_CHECKPOINT = 0x7F  # first record of a compacted segment: older segments are superseded


class Checkpoint(tuple):
    """Marker record (file store only): everything in older segments is superseded."""

    __slots__ = ()


CHECKPOINT = Checkpoint()


class CorruptRecord(ValueError):
    """A record with a valid checksum that does not decode (not written by this code)."""


# -- field encodings ------------------------------------------------------------------
# Readers take (buffer, position) and return (value, position after it).

_intern = sys.intern
_unpack_u32 = _U32.unpack_from
_unpack_i64 = _I64.unpack_from


def _write_text(s: str) -> bytes:
    b = s.encode("utf-8", "surrogatepass")
    return _U32.pack(len(b)) + b


def _read_text(buf: bytes, p: int) -> tuple[str, int]:
    (n,) = _unpack_u32(buf, p)
    p += 4
    return buf[p : p + n].decode("utf-8", "surrogatepass"), p + n


def _read_name(buf: bytes, p: int) -> tuple[str, int]:
    # Destination and interest names repeat across millions of records: share one copy.
    (n,) = _unpack_u32(buf, p)
    p += 4
    return _intern(buf[p : p + n].decode("utf-8", "surrogatepass")), p + n


def _write_optional_text(s: str | None) -> bytes:
    return _U32.pack(_NO_TEXT) if s is None else _write_text(s)


def _read_optional_text(buf: bytes, p: int) -> tuple[str | None, int]:
    (n,) = _unpack_u32(buf, p)
    if n == _NO_TEXT:
        return None, p + 4
    p += 4
    return buf[p : p + n].decode("utf-8", "surrogatepass"), p + n


def _write_bytes(b: bytes) -> bytes:
    return _U32.pack(len(b)) + bytes(b)


def _read_bytes(buf: bytes, p: int) -> tuple[bytes, int]:
    (n,) = _unpack_u32(buf, p)
    p += 4
    return buf[p : p + n], p + n


def _write_int(n: int) -> bytes:
    return _I64.pack(n)


def _read_int(buf: bytes, p: int) -> tuple[int, int]:
    return _unpack_i64(buf, p)[0], p + 8


def _write_flag(b: bool) -> bytes:
    return b"\x01" if b else b"\x00"


def _read_flag(buf: bytes, p: int) -> tuple[bool, int]:
    return buf[p] != 0, p + 1


def _write_names(names: tuple[str, ...]) -> bytes:
    return _U16.pack(len(names)) + b"".join(map(_write_text, names))


def _read_names(buf: bytes, p: int) -> tuple[tuple[str, ...], int]:
    (count,) = _U16.unpack_from(buf, p)
    p += 2
    if count == 1:  # a queue's message, or a topic's with one subscriber
        name, p = _read_name(buf, p)
        return (name,), p
    names = []
    for _ in range(count):
        name, p = _read_name(buf, p)
        names.append(name)
    return tuple(names), p


def _json_default(obj: object) -> object:
    if isinstance(obj, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, set | frozenset):
        return list(obj)
    raise TypeError(f"not JSON serialisable in a store record: {type(obj).__name__}")


def _json_hook(d: dict) -> object:
    if len(d) == 1 and "$bytes" in d:
        return base64.b64decode(d["$bytes"])
    return d


def _write_json(d: dict) -> bytes:
    return _write_text(
        json.dumps(d, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    )


def _read_json(buf: bytes, p: int) -> tuple[dict, int]:
    s, p = _read_text(buf, p)
    return json.loads(s, object_hook=_json_hook), p


class FieldCodec(NamedTuple):
    """How one field is written and read back."""

    write: Callable[[Any], bytes]
    read: Callable[[bytes, int], tuple[Any, int]]


INT = FieldCodec(_write_int, _read_int)
TEXT = FieldCodec(_write_text, _read_text)
NAME = FieldCodec(_write_text, _read_name)  # text, interned when read
OPTIONAL_TEXT = FieldCodec(_write_optional_text, _read_optional_text)
BYTES = FieldCodec(_write_bytes, _read_bytes)
FLAG = FieldCodec(_write_flag, _read_flag)
NAMES = FieldCodec(_write_names, _read_names)
JSON = FieldCodec(_write_json, _read_json)


# -- the table ------------------------------------------------------------------------


class RecordKind(NamedTuple):
    """A record kind: its kind byte, record type and fields in on-disk order (each a
    record attribute name and its encoding)."""

    code: int
    type: type
    fields: tuple[tuple[str, FieldCodec], ...]


RECORD_KINDS: tuple[RecordKind, ...] = (
    RecordKind(K_DEST_ADD, DestAdd, (("name", TEXT), ("dest_type", INT), ("attributes", JSON))),
    RecordKind(K_DEST_REMOVE, DestRemove, (("name", TEXT), ("dest_type", INT))),
    RecordKind(
        K_DURABLE_ADD,
        DurableAdd,
        (
            ("sub_id", TEXT),
            ("client_id", OPTIONAL_TEXT),
            ("name", TEXT),
            ("topic", TEXT),
            ("selector", OPTIONAL_TEXT),
            ("no_local", FLAG),
            ("share", OPTIONAL_TEXT),
        ),
    ),
    RecordKind(K_DURABLE_REMOVE, DurableRemove, (("sub_id", TEXT),)),
    # The message bytes come last so the rest of the frame can be cached (frame_record).
    RecordKind(
        K_MSG_ADD,
        MsgAdd,
        (
            ("key", BYTES),
            ("destination", NAME),
            ("dest_type", INT),
            ("interests", NAMES),
            ("raw", BYTES),
        ),
    ),
    RecordKind(K_MSG_DELIVERED, MsgDelivered, (("key", BYTES), ("interest", TEXT), ("count", INT))),
    RecordKind(K_MSG_SETTLE, MsgSettle, (("key", BYTES), ("interest", TEXT))),
    RecordKind(K_TXN_STATE, TxnState, (("txn_id", INT), ("state", INT), ("info", JSON))),
    RecordKind(
        K_TXN_SEND,
        TxnSend,
        (
            ("txn_id", INT),
            ("key", BYTES),
            ("destination", TEXT),
            ("dest_type", INT),
            ("raw", BYTES),
        ),
    ),
    RecordKind(K_TXN_ACK, TxnAck, (("txn_id", INT), ("key", BYTES), ("interest", TEXT))),
    RecordKind(K_TXN_REMOVE, TxnRemove, (("txn_id", INT),)),
    # When the compaction wrote it (nanoseconds); read back as the CHECKPOINT marker.
    RecordKind(K_CHECKPOINT, Checkpoint, (("written_ns", INT),)),
)


# -- encoder and decoder built from the table -----------------------------------------

_new = tuple.__new__  # builds a NamedTuple without its Python-level __new__


def _make_encoder(kind: RecordKind) -> Callable[[Record], bytes]:
    """An encoder for ``kind``: the kind byte, then one writer call per field."""
    env: dict[str, Any] = {f"write_{name}": codec.write for name, codec in kind.fields}
    env.update(head=bytes((kind.code,)), time_ns=time.time_ns)
    # A checkpoint's only field is when it was written.
    values = ["time_ns()"] if kind.type is Checkpoint else [f"r.{n}" for n, _ in kind.fields]
    calls = ", ".join(
        f"write_{name}({v})" for (name, _), v in zip(kind.fields, values, strict=True)
    )
    source = f"def encode_{kind.type.__name__}(r):\n    return b''.join((head, {calls}))"
    exec(source, env)  # noqa: S102 - source built from the table above only
    return env[f"encode_{kind.type.__name__}"]


def _make_decoder(kind: RecordKind) -> Callable[[bytes, int], tuple[Any, int]]:
    """A decoder for ``kind`` with one reader call per field, written out (as
    ``collections.namedtuple`` builds its classes): a loop over the fields costs a
    third more per record, and a store load decodes millions of them."""
    names = [name for name, _ in kind.fields]
    if kind.type is not Checkpoint and sorted(names) != sorted(kind.type._fields):
        raise TypeError(f"record kind {kind.code}: fields {names} are not {kind.type._fields}")
    env: dict[str, Any] = {f"read_{name}": codec.read for name, codec in kind.fields}
    env.update(new=_new, cls=kind.type, CHECKPOINT=CHECKPOINT)
    lines = [f"def decode_{kind.type.__name__}(buf, p):"]
    lines += [f"    {name}, p = read_{name}(buf, p)" for name in names]
    if kind.type is Checkpoint:
        lines.append("    return CHECKPOINT, p")
    else:
        # The table lists fields in disk order; the record type may order them otherwise.
        lines.append(f"    return new(cls, ({', '.join(kind.type._fields)},)), p")
    exec("\n".join(lines), env)  # noqa: S102 - source built from the table above only
    return env[f"decode_{kind.type.__name__}"]


_ENCODERS: dict[type, Callable[[Record], bytes]] = {
    kind.type: _make_encoder(kind) for kind in RECORD_KINDS
}
_DECODERS: list[Callable[[bytes, int], tuple[Any, int]] | None] = [None] * 256
for _kind in RECORD_KINDS:
    _DECODERS[_kind.code] = _make_decoder(_kind)
del _kind


def encode(record: Record | Checkpoint) -> bytes:
    """The payload of ``record`` (kind byte + fields)."""
    enc = _ENCODERS.get(type(record))
    if enc is None:
        for t, e in _ENCODERS.items():
            if isinstance(record, t):
                enc = e
                break
        else:
            raise TypeError(f"not a store record: {record!r}")
    return enc(record)  # type: ignore[arg-type]


def decode(buf: bytes, p: int, end: int) -> Record | Checkpoint:
    """Decode the payload ``buf[p:end]`` (no copy of the surrounding buffer)."""
    try:
        kind = buf[p]
        dec = _DECODERS[kind]
        if dec is None:
            raise CorruptRecord(f"unknown record kind {kind}")
        rec, p = dec(buf, p + 1)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, CorruptRecord):
            raise
        raise CorruptRecord(str(exc)) from exc
    if p != end:
        raise CorruptRecord(f"record length mismatch ({p} != {end})")
    return rec


# The last MsgAdd's destination, type and interests as encoded, and decoded: a load reads
# them again for each of a queue's messages, one after the other.
# (One reference, read and replaced whole: loads on two threads cannot mix two records.)
_LAST_MIDDLE: list[tuple[bytes, tuple]] = [(b"", ("", 0, ()))]


def decode_msg_add_in_place(data: bytes, view: memoryview, p: int, end: int) -> MsgAdd:
    """The MsgAdd payload ``data[p:end]`` with its message bytes left in place: ``raw``
    is a slice of ``view`` (over ``data``), not a copy (a store loading only the heads of
    its messages).  CorruptRecord as ``decode``."""
    try:
        if data[p] != K_MSG_ADD:
            raise CorruptRecord(f"not a message record (kind {data[p]})")
        key, q = _read_bytes(data, p + 1)
        middle, decoded = _LAST_MIDDLE[0]
        if middle and data[q : q + len(middle)] == middle:
            destination, dest_type, interests = decoded
            q += len(middle)
        else:
            start = q
            destination, q = _read_name(data, q)
            dest_type, q = _read_int(data, q)
            interests, q = _read_names(data, q)
            _LAST_MIDDLE[0] = (bytes(data[start:q]), (destination, dest_type, interests))
        (n,) = _unpack_u32(data, q)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, CorruptRecord):
            raise
        raise CorruptRecord(str(exc)) from exc
    q += 4
    if q + n != end:
        raise CorruptRecord(f"record length mismatch ({q + n} != {end})")
    return MsgAdd(key, destination, dest_type, view[q:end], interests)  # type: ignore[arg-type]


def msg_add_middle(destination: str, dest_type: int, interests: tuple[str, ...]) -> bytes:
    """A MsgAdd payload's bytes between its key and its message's length, as written."""
    return NAME.write(destination) + INT.write(dest_type) + NAMES.write(interests)


_KEY_LEN32 = _U32.pack(32)


def msg_add_raw_at(data: bytes, p: int, end: int, key: bytes, middle: bytes) -> int:
    """Where the message bytes of the MsgAdd payload ``data[p:end]`` start, when it is
    the one of ``key`` (32 bytes) with ``middle`` (``msg_add_middle``) as written: a
    check of those bytes and of the length, nothing decoded.  -1 when they differ
    (``decode_msg_add_in_place`` then says what the record is)."""
    q = p + 37 + len(middle)
    if (
        data[p] == K_MSG_ADD
        and data.startswith(_KEY_LEN32, p + 1)
        and data.startswith(key, p + 5)
        and data.startswith(middle, p + 37)
        and q + 4 <= end
        and _unpack_u32(data, q)[0] == end - q - 4
    ):
        return q + 4
    return -1


def frame(payload: bytes) -> bytes:
    """``payload`` with its length + crc32 header."""
    return FRAME_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


# -- framing the hot records ----------------------------------------------------------
# A MsgAdd's fields before the message bytes repeat from one message to the next (same
# destination and interests), and so does a MsgSettle's interest: the table's encodings
# of those parts are cached, the message bytes are copied once.  Same bytes as
# ``frame(encode(r))``.

_MSG_ADD_MIDDLE: dict[tuple, bytes] = {}
_SETTLE_TAIL: dict[str, bytes] = {}
_CACHE_LIMIT = 4096
_MSG_ADD_KIND = bytes((K_MSG_ADD,))
_MSG_SETTLE_KIND = bytes((K_MSG_SETTLE,))


def _frame_msg_add(r: MsgAdd) -> bytes:
    key, dest, dtype, raw, interests = r
    middle = _MSG_ADD_MIDDLE.get((dest, dtype, interests))
    if middle is None:
        if len(_MSG_ADD_MIDDLE) > _CACHE_LIMIT:
            _MSG_ADD_MIDDLE.clear()
        middle = _MSG_ADD_MIDDLE[(dest, dtype, interests)] = (
            NAME.write(dest) + INT.write(dtype) + NAMES.write(interests)
        )
    head = b"".join((_MSG_ADD_KIND, _U32.pack(len(key)), key, middle, _U32.pack(len(raw))))
    crc = zlib.crc32(raw, zlib.crc32(head))
    return b"".join((FRAME_HEADER.pack(len(head) + len(raw), crc), head, raw))


def _frame_msg_settle(r: MsgSettle) -> bytes:
    key, interest = r
    tail = _SETTLE_TAIL.get(interest)
    if tail is None:
        if len(_SETTLE_TAIL) > _CACHE_LIMIT:
            _SETTLE_TAIL.clear()
        tail = _SETTLE_TAIL[interest] = TEXT.write(interest)
    payload = b"".join((_MSG_SETTLE_KIND, _U32.pack(len(key)), key, tail))
    return FRAME_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


_FRAMERS: dict[type, Callable[[Any], bytes]] = {
    MsgAdd: _frame_msg_add,
    MsgSettle: _frame_msg_settle,
}


def frame_record(r: Record | Checkpoint) -> bytes:
    """The whole frame of ``r`` (header + payload), the hot kinds from their caches."""
    framer = _FRAMERS.get(type(r))
    return framer(r) if framer is not None else frame(encode(r))
