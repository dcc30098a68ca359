"""DLedger's data and index files, byte by byte (DLedger ``DLedgerMmapFileStore``,
big-endian like Java's ByteBuffer): the on-disk format of a DLedger broker's CommitLog
(:mod:`ariane.dledger` writes it; the store's tools read it).

Directory layout (``<storePathRootDir>/dledger-<selfId>/``)::

    data/<20-digit start offset>    entries, mapped_file_size_commit_log bytes per file
    index/<20-digit start offset>   index entries, 32 per log index (file name = index * 32)
    currterm                        properties: currTerm=<term>, voteLeader=<id or empty>
    checkpoint                      properties: endIndex=<i>, committedIndex=<i>
    begin                           properties: index=<first index>, pos=<its data offset>,
                                    baseTerm=<term of the entry before it>
    cut/<20-digit offset>.<n>       bytes cut off the log (truncation, recovery), kept

Data entry (``DLedgerEntry``; ``ENTRY_HEADER_SIZE`` = 48, then the body)::

    off  size  field
      0     4  magic        1 NORMAL, 2 NOOP (an empty body a new leader appends)
      4     4  size         48 + body length
      8     8  entryIndex   the log index
     16     8  entryTerm    term of the leader that created it
     24     8  pos          offset of the entry's first byte in the data files
     32     4  channel      0 (reserved)
     36     4  chainCrc     0 (reserved)
     40     4  bodyCrc      zlib.crc32(body) & 0x7FFFFFFF
     44     4  bodySize     body length
     48     B  body         one CommitLog record (see ``ariane.store.format``), for the
                            DLedger CommitLog; its PHYSICALOFFSET is ``pos + 48``

Entries never straddle files: when ``size + 8`` does not fit, the rest of the file gets a
BLANK (``int32 -1`` then ``int32`` bytes left; note: the reverse order of the CommitLog's
blank) and the entry goes at the start of the next file. The first data file of a DLedger
CommitLog upgraded from a plain one starts where the old CommitLog ended
(``dividedCommitlogOffset``), so physical offsets continue.

Index entry (``INDEX_UNIT_SIZE`` = 32), entry ``i`` at byte ``i * 32``::

      0     4  magic
      4     8  pos          data offset of the entry
     12     4  size         entry size
     16     8  entryIndex
     24     8  entryTerm

This module only describes, encodes and parses; it does no I/O and logs nothing.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass
from typing import Final

from ariane.errors import CorruptionError

__all__ = [
    "BLANK_MAGIC",
    "CRC_MASK",
    "ENTRY_HEADER",
    "ENTRY_HEADER_SIZE",
    "INDEX_UNIT",
    "INDEX_UNIT_SIZE",
    "MAGIC_NOOP",
    "MAGIC_NORMAL",
    "MIN_BLANK_LEN",
    "EntryHeader",
    "body_crc_ok",
    "decode_header",
    "encode_entry",
]

MAGIC_NORMAL: Final = 1
MAGIC_NOOP: Final = 2
BLANK_MAGIC: Final = -1
MIN_BLANK_LEN: Final = 8
ENTRY_HEADER: Final = struct.Struct(">iiqqqiiii")
ENTRY_HEADER_SIZE: Final = 48
INDEX_UNIT: Final = struct.Struct(">iqiqq")
INDEX_UNIT_SIZE: Final = 32
CRC_MASK: Final = 0x7FFFFFFF
_VALID_MAGIC = (MAGIC_NORMAL, MAGIC_NOOP)


@dataclass(slots=True)
class EntryHeader:
    """The 48 bytes before an entry's body (not frozen: a follower makes one per entry it
    copies, and a frozen dataclass takes four times as long to build; treat it as read-only)."""

    magic: int
    size: int
    index: int
    term: int
    pos: int
    body_crc: int
    body_size: int


def encode_entry(index: int, term: int, pos: int, body: bytes, *, noop: bool = False) -> bytes:
    """A whole entry (header and body)."""
    crc = zlib.crc32(body) & CRC_MASK if body else 0
    magic = MAGIC_NOOP if noop else MAGIC_NORMAL
    head = ENTRY_HEADER.pack(
        magic, ENTRY_HEADER_SIZE + len(body), index, term, pos, 0, 0, crc, len(body)
    )
    return head + body


def decode_header(buf: bytes | bytearray | memoryview | mmap.mmap, at: int = 0) -> EntryHeader:
    """Parse and check the header at ``at`` (sizes consistent, magic known).

    Raises:
        CorruptionError: not a valid entry header.
    """
    if len(buf) - at < ENTRY_HEADER_SIZE:
        raise CorruptionError(f"entry header needs {ENTRY_HEADER_SIZE} bytes at {at}")
    magic, size, index, term, pos, _ch, _chain, crc, body_size = ENTRY_HEADER.unpack_from(buf, at)
    if magic not in _VALID_MAGIC:
        raise CorruptionError(f"bad entry magic {magic} at {at}")
    if size != ENTRY_HEADER_SIZE + body_size or body_size < 0 or index < 0 or pos < 0:
        raise CorruptionError(f"bad entry sizes (size {size}, body {body_size}) at {at}")
    if magic == MAGIC_NOOP and body_size:
        raise CorruptionError(f"NOOP entry with a body at {at}")
    return EntryHeader(magic, size, index, term, pos, crc, body_size)


def body_crc_ok(header: EntryHeader, body: bytes | bytearray | memoryview | mmap.mmap) -> bool:
    """True when ``body`` has the CRC the header records."""
    if not header.body_size:
        return True
    return (zlib.crc32(body) & CRC_MASK) == header.body_crc
