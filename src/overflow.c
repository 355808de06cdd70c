/*
 * overflow.c — values larger than a third of a page live in a chain of overflow
 * pages (node.h): the leaf holds a 12-byte pointer {pgno, birth32, crc} to
 * the first page, each page the pointer to the next (pgno 0: the last) and
 * up to P - 32 bytes of the value. Written last page first, so that each
 * pointer carries the checksum of the page it names; read whole into the
 * transaction's value buffer; freed page by page. Part of the B+tree layer,
 * on the pager's page functions.
 */
#include <stdlib.h>

#include "btree.h"
#include "checksum.h"

int mote__ovf_write(mote_txn *t, const uint8_t *v, size_t n, uint8_t *ptr12)
{
    uint32_t P = t->s->P, chunk = P - OVF_HDR;
    size_t npg = (n + chunk - 1) / chunk;
    uint8_t next[PTR12] = {0};
    for (size_t i = npg; i-- > 0;) {
        mpage *pg;
        int rc = mote__page_new(t, &pg);
        if (rc) {
            if (i + 1 < npg)
                mote__ovf_free(t, next, n - (i + 1) * chunk);
            return rc;
        }
        size_t off = i * chunk, len = n - off < chunk ? n - off : chunk;
        pg->data[0] = PAGE_OVERFLOW;
        memcpy(pg->data + NH, next, PTR12);
        memcpy(pg->data + OVF_HDR, v + off, len);
        wr32(next, pg->pgno);
        wr32(next + 4, (uint32_t)t->txnid);
        wr32(next + 8, mote__crc32c(0, pg->data, P));
    }
    memcpy(ptr12, next, PTR12);
    return MOTE_OK;
}

static int ovf_walk(mote_txn *t, const uint8_t *ptr12, size_t n, uint8_t *dst, int free_pages)
{
    uint32_t chunk = t->s->P - OVF_HDR;
    uint8_t ptr[CHILD] = {0};
    memcpy(ptr, ptr12, PTR12);
    size_t done = 0;
    while (ptr_pgno(ptr) != 0) {
        mpage *pg;
        int rc = mote__page_get(t, ptr, -1, &pg);
        if (rc)
            return rc;
        size_t len = n - done < chunk ? n - done : chunk;
        if (dst && done < n)
            memcpy(dst + done, pg->data + OVF_HDR, len);
        done += len;
        uint32_t pgno = pg->pgno, b32 = (uint32_t)pg->birth;
        memcpy(ptr, pg->data + NH, PTR12);
        mote__page_put(t->s, pg);
        if (free_pages && (rc = mote__page_free(t, pgno, b32)))
            return rc;
        if (done > n + chunk)
            return CORRUPT("overflow chain at page %u longer than its value", pgno);
    }
    if (done < n)
        return CORRUPT("overflow chain shorter than its value (%zu of %zu bytes)", done, n);
    return MOTE_OK;
}

int mote__ovf_read(mote_txn *t, const uint8_t *ptr12, size_t n, mote_val *out)
{
    if (n > t->vbuf_cap) {
        uint8_t *b = mote__realloc(t->vbuf, n);
        if (!b)
            return mote__err(MOTE_NOMEM, "out of memory reading a %zu-byte value", n);
        t->vbuf = b;
        t->vbuf_cap = n;
    }
    int rc = ovf_walk(t, ptr12, n, t->vbuf, 0);
    if (!rc) {
        out->data = t->vbuf;
        out->size = n;
    }
    return rc;
}

int mote__ovf_free(mote_txn *t, const uint8_t *ptr12, size_t n)
{
    return ovf_walk(t, ptr12, n, NULL, 1);
}
