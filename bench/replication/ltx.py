"""Which commits a Litestream 0.5 LTX file holds.

Litestream 0.5 gives one transaction id (TXID) to each of its syncs, not to each SQLite transaction: a sync
copies every WAL frame committed since the last one into one L0 LTX file (``<path>/ltx/0/<min>-<max>.ltx``,
16 hex digits each, min == max; litestream db.go ``sync``). So an uploaded file's name does not tell which
SQLite commits it carries; its pages do. The writer (writer.py) inserts one row per commit with increasing ids
above ``ROW_BASE``, so the largest such id in an LTX file's table-leaf pages is the newest commit the file
holds (a file holds a database's latest version of every page it changed, and the row of the newest commit is
in the rightmost leaf, which that commit changed). cli.py checks this reading against ``litestream restore
-txid`` on a few files of each run.

LTX (superfly/ltx, version 3): a 100-byte header (big-endian: magic ``LTX1``, flags, page size, commit,
min TXID, max TXID, timestamp in ms, ...), then page frames: a 6-byte page header (page number, flags; number
0 ends the block), with flag 1 a 4-byte size and an LZ4 block of the page; then the page index and trailer.
"""

import struct

try:
    import lz4.block as _lz4
except ImportError:  # a slow pure-Python decoder below
    _lz4 = None


def lz4_block_decompress(src, size):
    """Decompress one LZ4 block (no frame) whose output is `size` bytes."""
    if _lz4 is not None:
        return _lz4.decompress(src, uncompressed_size=size)
    out = bytearray()
    i, n = 0, len(src)
    while i < n:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        out += src[i:i + lit]
        i += lit
        if i >= n:
            break
        off = src[i] | (src[i + 1] << 8)
        i += 2
        ml = token & 15
        if ml == 15:
            while True:
                b = src[i]
                i += 1
                ml += b
                if b != 255:
                    break
        ml += 4
        start = len(out) - off
        for k in range(ml):  # (may overlap)
            out.append(out[start + k])
    return bytes(out[:size])


def header(data):
    """The header's fields of an LTX file's bytes: dict of page_size, commit, min_txid, max_txid, timestamp_ms."""
    if len(data) < 100 or data[:4] != b"LTX1":
        raise ValueError("not an LTX file")
    flags, page_size, commit, min_tx, max_tx, ts = struct.unpack_from(">IIIQQq", data, 4)
    return {"flags": flags, "page_size": page_size, "commit": commit, "min_txid": min_tx, "max_txid": max_tx,
            "timestamp_ms": ts}


def pages(data):
    """(page number, page bytes) of each page frame of an LTX file."""
    h = header(data)
    size = h["page_size"]
    i = 100
    while i + 6 <= len(data):
        pgno, flags = struct.unpack_from(">IH", data, i)
        i += 6
        if pgno == 0:
            return
        if not flags & 1:
            raise ValueError("LTX page in the old LZ4 frame format (not written by Litestream 0.5.17)")
        (n,) = struct.unpack_from(">I", data, i)
        i += 4
        yield pgno, lz4_block_decompress(data[i:i + n], size)
        i += n


def _varint(b, i):
    v = 0
    for k in range(9):
        c = b[i + k]
        if k == 8:
            return (v << 8) | c, i + 9
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + k + 1
    raise ValueError("bad varint")


def leaf_rowids(pgno, page):
    """The rowids of a SQLite table-leaf page (none for any other kind of page)."""
    off = 100 if pgno == 1 else 0
    if page[off] != 0x0D:
        return []
    (ncells,) = struct.unpack_from(">H", page, off + 3)
    out = []
    for c in range(ncells):
        (ptr,) = struct.unpack_from(">H", page, off + 8 + 2 * c)
        _, j = _varint(page, ptr)   # payload size
        rowid, _ = _varint(page, j)
        out.append(rowid)
    return out


def newest_row(data, base):
    """The largest rowid above `base` in the table-leaf pages of an LTX file's bytes; None if it has none."""
    best = None
    for pgno, page in pages(data):
        for r in leaf_rowids(pgno, page):
            if r > base and (best is None or r > best):
                best = r
    return best
