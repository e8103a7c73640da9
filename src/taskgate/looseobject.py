"""Git's loose objects, read and written without git and without zlib (issue 18), for the
audit anchor that taskgate.gitplumb writes.

A loose object is a zlib stream of `b"<type> <size>\\0" + body` at `objects/ab/cdef…`, named
by the SHA-1 of the uncompressed bytes (Documentation/gitformat-loose.txt). Any zlib stream
will do: git inflates what it finds. The anchor's objects are written in zlib's *stored* form
(RFC 1950 around RFC 1951 blocks of type 00: the bytes as they are, with their lengths and an
Adler-32 checksum), which is byte for byte what zlib and git write with
`core.looseCompression=0`. An anchor commit is about 330 bytes that way, 100 more than
compressed, until `git gc` packs it. What that buys: the prompt hook anchors every prompt of
a session holding a task, and loading the zlib module (a shared library) cost that process
about 0.45 ms, 5 % of a bare interpreter's start, to compress and decompress a few hundred
bytes. A parent git wrote (compressed) is still read with zlib, once per task: the next
anchors name taskgate's own.
"""

from __future__ import annotations

import os

_ADLER_MOD = 65521
_MAX_BLOCK = 0xFFFF  # a stored block's length is 16 bits
_ZLIB_HEADER = b"\x78\x01"  # deflate, 32 KiB window, no dictionary, "fastest" (zlib at level 0)


def adler32(data: bytes) -> int:
    """zlib.adler32(data): A is 1 plus the bytes, B the sum of every prefix's A (RFC 1950 §9)."""
    from itertools import accumulate  # a builtin module

    low = (1 + sum(data)) % _ADLER_MOD
    high = (len(data) + sum(accumulate(data))) % _ADLER_MOD
    return high << 16 | low


def deflate_stored(data: bytes) -> bytes:
    """A zlib stream holding `data` in stored blocks (what zlib.compress(data, 0) returns for
    data up to a few KiB; longer data is cut into blocks of the most a block holds)."""
    parts = [_ZLIB_HEADER]
    start = 0
    while True:
        block = data[start : start + _MAX_BLOCK]
        start += len(block)
        size = len(block)
        final = start >= len(data)
        # BFINAL and BTYPE 00 in the first byte (the rest of it padding), LEN, NLEN (LSB first)
        parts.append(bytes((final, size & 0xFF, size >> 8, ~size & 0xFF, ~size >> 8 & 0xFF)))
        parts.append(block)
        if final:
            break
    parts.append(adler32(data).to_bytes(4, "big"))
    return b"".join(parts)


def inflate_stored(stream: bytes) -> bytes | None:
    """The bytes of a zlib stream made only of stored blocks, checksum verified; None for any
    other stream (compressed blocks, a preset dictionary, anything malformed or cut short)."""
    if len(stream) < 11 or stream[0] != 0x78 or (stream[0] << 8 | stream[1]) % 31:
        return None
    if stream[1] & 0x20:
        return None  # FDICT: a preset dictionary
    parts = []
    at = 2
    while True:
        if at + 5 > len(stream):
            return None
        head = stream[at]
        if head & 0xFE:  # a compressed block type, or padding that is not zero
            return None
        size = stream[at + 1] | stream[at + 2] << 8
        if stream[at + 3] | stream[at + 4] << 8 != ~size & 0xFFFF:
            return None
        block = stream[at + 5 : at + 5 + size]
        if len(block) != size:
            return None
        parts.append(block)
        at += 5 + size
        if head:
            break
    data = b"".join(parts)
    if stream[at:] != adler32(data).to_bytes(4, "big"):
        return None
    return data


def sha1_hex(data: bytes) -> str:
    """SHA-1 of `data`, hex: CPython's builtin module (hashlib imports OpenSSL, ~2 ms)."""
    try:
        module = __import__("_sha1")
    except ImportError:  # pragma: no cover - other interpreters
        import hashlib as module
    return str(module.sha1(data).hexdigest())


def read_commit(objects: str, oid: str) -> bytes | None:
    """The body of loose commit `oid` when its bytes hash to its name (what commit-tree -p
    reads before it writes); None when it is not such a commit (a packed one: the git path)."""
    try:
        with open(os.path.join(objects, oid[:2], oid[2:]), "rb") as handle:
            stream = handle.read()
    except OSError:
        return None
    data = inflate_stored(stream)
    if data is None:  # compressed: written by git
        import zlib

        try:
            data = zlib.decompress(stream)
        except zlib.error:
            return None
    nul = data.find(b"\0")
    kind, _, size = data[:nul].partition(b" ")
    body = data[nul + 1 :]
    if nul < 0 or kind != b"commit" or not size.isdigit() or int(size) != len(body):
        return None
    return body if sha1_hex(data) == oid else None


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (raises OSError: ENOSPC, EFBIG, EIO...)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write(objects: str, kind: str, body: bytes, fsync: bool) -> str | None:
    """The id of the loose object of `kind` holding `body`, put in place: written to a
    temporary file in its fan-out directory and linked to its name, read-only, as
    object-file.c does; an object already there is freshened (its mtime), as git does. None
    (nothing left behind) on any error."""
    raw = b"%s %d\0" % (kind.encode(), len(body)) + body
    oid = sha1_hex(raw)
    folder = os.path.join(objects, oid[:2])
    final = os.path.join(folder, oid[2:])
    if os.path.lexists(final):
        try:
            os.utime(final)
            return oid
        except OSError:
            return None
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    except OSError:
        return None
    for _ in range(5):
        temp = os.path.join(folder, "tmp_obj_" + os.urandom(6).hex()[:6])
        try:
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o444)
            break
        except FileExistsError:
            continue
        except OSError:
            return None
    else:
        return None
    try:
        try:
            write_all(fd, deflate_stored(raw))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:  # noqa: SIM105  (contextlib: the hook's collections/functools imports)
            os.link(temp, final)
        except FileExistsError:
            pass  # written meanwhile by another: the same object (git's finalize_object_file)
    except OSError:
        return None
    finally:
        remove(temp)
    return oid


def remove(path: str) -> None:
    """Unlink `path` if it is there (gitplumb's lock file, a temporary object)."""
    try:  # noqa: SIM105  (contextlib: the hook's collections/functools imports)
        os.unlink(path)
    except OSError:
        pass
