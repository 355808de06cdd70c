/*
 * alloc.c — page allocation in a write transaction (from pages free in the
 * durable base and not pending, never one a snapshot may still read), the
 * transaction's dirty map, and the placement of a small commit's pages onto few runs of adjacent free pages
 * (see "Free pages and snapshots" in ARCHITECTURE.md).
 */
#include <stdlib.h>

#include "checksum.h"
#include "pager.h"

/* ---- Allocation (write transactions) ---------------------------------------- */

static int dirty_add(mote_txn *t, mpage *pg)
{
    if ((!t->dhash || t->ndirty + 1 > t->dmask + 1) && mote__page_rehash(&t->dhash, &t->dmask))
        return mote__err(MOTE_NOMEM, "out of memory tracking dirty pages");
    pg->hnext = t->dhash[pg->pgno & t->dmask];
    t->dhash[pg->pgno & t->dmask] = pg;
    t->ndirty++;
    return MOTE_OK;
}

static void dirty_remove(mote_txn *t, mpage *pg)
{
    mpage **pp = &t->dhash[pg->pgno & t->dmask];
    while (*pp != pg)
        pp = &(*pp)->hnext;
    *pp = pg->hnext;
    t->ndirty--;
}

/* The txn's bitmap and the pending bits cover `npages` pages. */
static int bm_cover(mote_txn *t, uint32_t npages)
{
    uint32_t need = mote__bm_cover_bytes(t->s->P, npages);
    int rc = mote__bm_grow(&t->bm, &t->bm_cap, need);
    return rc ? rc : mote__bm_grow(&t->s->pend, &t->s->pend_cap, need);
}

static int txn_alloc(mote_txn *t, uint32_t *out)
{
    mote_store *s = t->s;
    uint32_t np = t->npages, p = t->hint;
    while (p < np) {
        if ((p & 7) == 0 && p + 8 <= np && (t->bm[p >> 3] | s->pend[p >> 3]) == 0xff) {
            p += 8;
            continue;
        }
        if (!bit_get(t->bm, p) && !bit_get(s->pend, p))
            goto found;
        p++;
    }
    /* past the end: never onto a page in use, pending or used by the base.
     * A commit that shrinks the file (mote__shrink) has npages below the
     * base's, and the bitmap pages it copied went past its new end onto a
     * page the base still used (found by model_sorted_batches once values
     * of 1,200-1,358 bytes stayed inline: the assertion below; without it a
     * page of the durable state overwritten before the commit's sync) */
    p = np;
    while (p < rd32(t->base->data + 32) &&
           (bit_get(t->bm, p) || bit_get(s->pend, p) || base_uses(t, p)))
        p++;
    if (p >= mote__max_pages(s->P))
        return mote__err(MOTE_FULL, "store %s is full: %u pages is the limit for "
                         "page size %u", s->path, p, s->P);
    int rc = bm_cover(t, p + 1);
    if (rc)
        return rc;
    t->npages = p + 1;
found:
    assert(t->write && !base_uses(t, p) && !bit_get(s->pend, p));
    bit_set(t->bm, p);
    t->hint = p + 1;
    *out = p;
    return MOTE_OK;
}

/* A new dirty page; zeroed unless the caller overwrites all of it. */
static int page_new(mote_txn *t, mpage **out, int zero)
{
    uint32_t pgno = 0;
    mpage *pg = mote__mpage_alloc(t->s->P);
    if (!pg)
        return mote__err(MOTE_NOMEM, "out of memory for a new page");
    int rc = txn_alloc(t, &pgno);
    if (!rc) {
        pg->pgno = pgno;
        rc = dirty_add(t, pg);
        if (rc)
            bit_clr(t->bm, pgno);
    }
    if (rc) {
        mote__mpage_free(pg, t->s->P);
        return rc;
    }
    if (zero)
        memset(pg->data, 0, t->s->P);
    wr32(pg->data + 4, pgno);
    wr64(pg->data + 8, t->txnid);
    pg->birth = t->txnid;
    pg->dirty = 1;
    *out = pg;
    return MOTE_OK;
}

int mote__page_new(mote_txn *t, mpage **out)
{
    return page_new(t, out, 1);
}

int mote__page_free(mote_txn *t, uint32_t pgno, uint64_t birth32)
{
    mote_store *s = t->s;
    assert(t->write);
    mpage *d = birth32 == (uint32_t)t->txnid ? dirty_find(t, pgno) : NULL;
    if (d) {
        dirty_remove(t, d);
        mote__mpage_free(d, s->P);
        bit_clr(t->bm, pgno);
        if (pgno < t->hint)
            t->hint = pgno;
        return MOTE_OK;
    }
    if (t->nfreed == t->cap_freed) {
        size_t n = t->cap_freed ? t->cap_freed * 2 : 32;
        uint32_t *f = mote__realloc(t->freed, n * sizeof *f);
        if (!f)
            return mote__err(MOTE_NOMEM, "out of memory freeing a page");
        t->freed = f;
        t->cap_freed = n;
    }
    t->freed[t->nfreed++] = pgno;
    bit_clr(t->bm, pgno);
    bit_set(s->pend, pgno);
    return MOTE_OK;
}

int mote__page_write(mote_txn *t, uint8_t *ptr, int level, mpage **out)
{
    uint32_t pgno = ptr_pgno(ptr), b32 = ptr_birth(ptr);
    assert(t->write);
    if (b32 == (uint32_t)t->txnid) {
        mpage *d = dirty_find(t, pgno);
        if (d) {
            *out = d;
            return MOTE_OK;
        }
    }
    mpage *old, *pg;
    int rc = mote__page_get(t, ptr, level, &old);
    if (rc)
        return rc;
    rc = page_new(t, &pg, 0);
    if (!rc) {
        t->copied++;
        memcpy(pg->data, old->data, t->s->P);
        wr32(pg->data + 4, pg->pgno);
        wr64(pg->data + 8, t->txnid);
        rc = mote__page_free(t, pgno, b32);
        if (rc) {
            mote__page_free(t, pg->pgno, (uint32_t)t->txnid);
        } else {
            wr32(ptr, pg->pgno);
            wr32(ptr + 4, (uint32_t)t->txnid);
            wr32(ptr + 8, 0); /* crc set at commit */
            *out = pg;
        }
    }
    mote__page_put(t->s, old);
    return rc;
}

/* ---- Placement of a small commit's pages ---------------------------------- */

#define PLACE_MAX 64u /* dirty pages a commit places, at most */
#define PLACE_BMP 2u  /* pages kept for the bitmap pages the commit copies */
#define PLACE_SLACK 8u  /* free pages may reach 1/8 of the file ... */
#define PLACE_PIECES 2u /* ... so that a commit needs at most 2 runs */
#define RESERVE_SLACK 4u /* a record goes into a short run while 1/4 of the file is free, */
#define RESERVE_HALF 2u  /* if it holds half a commit of CHAIN_RUN + 1 pages or more, or */
#define RESERVE_CAP 2u   /* while half the file is free */

typedef struct {
    uint32_t start, len;
} page_run;

typedef struct {
    uint8_t *ptr[PLACE_MAX]; /* the parent pointer of each dirty tree node */
    mpage *pg[PLACE_MAX];
    uint32_t n;
    page_run top[PLACE_MAX + PLACE_BMP]; /* the longest free runs, longest first */
    uint32_t ntop;
} placement;

/* Collect the dirty nodes below `node` and their parent pointers; 0 when
 * there are more than PLACE_MAX. */
static int place_collect(mote_txn *t, uint8_t *node, placement *pl)
{
    if (n_type(node) != NODE_BRANCH)
        return 1;
    unsigned n = n_nkeys(node);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *ptr = node + n_off(node, i);
        if (ptr_birth(ptr) != (uint32_t)t->txnid)
            continue;
        mpage *pg = dirty_find(t, ptr_pgno(ptr));
        if (!pg)
            continue;
        if (pl->n == PLACE_MAX)
            return 0;
        pl->ptr[pl->n] = ptr;
        pl->pg[pl->n++] = pg;
        if (!place_collect(t, pg->data, pl))
            return 0;
    }
    return 1;
}

/* Keep in pl->top the `keep` longest runs seen so far, longest first. */
static void top_add(placement *pl, uint32_t start, uint32_t len, uint32_t keep)
{
    uint32_t i;
    if (pl->ntop == keep) {
        if (pl->top[keep - 1].len >= len)
            return;
        i = keep - 1;
    } else {
        i = pl->ntop++;
    }
    for (; i > 0 && pl->top[i - 1].len < len; i--)
        pl->top[i] = pl->top[i - 1];
    pl->top[i] = (page_run){start, len};
}

/* 64 bits of a bitmap (bit i = page base + i). */
static inline uint64_t bits64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* Scan the pages from `from` on that are free in the txn and in no
 * snapshot, 64 at a time: keep the `keep` longest runs, and stop at the
 * first run of `keep` pages. Returns the number of free pages seen, and in
 * *tail the first page of the free run that ends the file (npages if none). */
static uint32_t free_runs(const mote_txn *t, placement *pl, uint32_t from, uint32_t keep,
                          uint32_t *tail)
{
    const uint8_t *bm = t->bm, *pend = t->s->pend;
    uint32_t np = t->npages, total = 0, start = 0, len = 0;
    pl->ntop = 0;
    *tail = np;
    from = from < 2 ? 2 : from;
    for (uint32_t base = from & ~63u; base < np; base += 64) {
        uint64_t used = bits64(bm + base / 8) | bits64(pend + base / 8);
        if (base < from)
            used |= (1ull << (from - base)) - 1;
        if (np - base < 64)
            used |= ~0ull << (np - base);
        for (uint32_t pos = 0; pos < 64;) {
            uint64_t r = used >> pos; /* the bits above 63 - pos read as free */
            if (r & 1) { /* used pages: to the next free one (~r is 0 if all 64 are used) */
                pos = ~r ? pos + (uint32_t)__builtin_ctzll(~r) : 64;
                if (len) {
                    top_add(pl, start, len, keep);
                    total += len;
                    len = 0;
                }
                continue;
            }
            uint32_t n = r ? (uint32_t)__builtin_ctzll(r) : 64 - pos;
            start = len ? start : base + pos;
            len += n;
            pos += n;
            if (len >= keep) { /* one run holds the commit */
                top_add(pl, start, len, keep);
                return total + len;
            }
        }
    }
    if (len) {
        top_add(pl, start, len, keep);
        total += len;
        *tail = start;
    }
    return total;
}

/* Free pages may grow to 1/SLACK of the file to keep commits in one run */
static int slack_ok(const mote_txn *t, uint32_t total, uint32_t need)
{
    return (uint64_t)(total + need) * PLACE_SLACK <= t->npages;
}

/* Would the pick take more than PLACE_PIECES runs? */
static int many_pieces(const placement *pl, uint32_t need)
{
    uint32_t sum = 0;
    for (uint32_t i = 0; i < pl->ntop && i < PLACE_PIECES; i++)
        sum += pl->top[i].len;
    return sum < need;
}

/* Give the collected pages the numbers of the runs in `pick`, in order
 * (their bits set; the file's end follows the last one the pages take).
 * Returns the page after the last one taken. */
static uint32_t renumber(mote_txn *t, placement *pl, const page_run *pick, uint32_t npick,
                         uint32_t base_np)
{
    uint8_t *bm = t->bm;
    uint32_t k = 0, end = 0;
    for (uint32_t r = 0; r < npick && k < pl->n; r++)
        for (uint32_t p = pick[r].start; p < pick[r].start + pick[r].len && k < pl->n; p++) {
            mpage *pg = pl->pg[k++];
            mpage **pp = &t->dhash[pg->pgno & t->dmask];
            while (*pp != pg)
                pp = &(*pp)->hnext;
            *pp = pg->hnext;
            pg->pgno = p;
            bit_set(bm, p);
            wr32(pg->data + 4, p);
            wr32(pl->ptr[k - 1], p);
            pg->hnext = t->dhash[p & t->dmask];
            t->dhash[p & t->dmask] = pg;
            end = p + 1;
        }
    if (t->npages < end)
        t->npages = end;
    /* pages the txn took at the end and no longer uses are not file */
    while (t->npages > base_np && !bit_get(bm, t->npages - 1) &&
           !bit_get(t->s->pend, t->npages - 1))
        t->npages--;
    return end;
}

/* Are pages [p, p + n) free in the txn and in every snapshot (pages past
 * the file's end are)? */
static int run_free(const mote_txn *t, uint32_t p, uint32_t n)
{
    for (uint32_t i = p; i < p + n && i < t->npages; i++)
        if (bit_get(t->bm, i) || bit_get(t->s->pend, i))
            return 0;
    return 1;
}

/*
 * A small commit's pages go to as few runs of adjacent pages as the free
 * space allows: the fdatasync of a commit costs per write request (measured
 * here: 8 scattered pages + slot + fdatasync 0.42 ms, 8 adjacent ones
 * 0.18 ms). Pages take numbers first-fit as the txn goes, so a commit that
 * changes leaves in several places lands in the holes earlier commits left.
 * Here its tree nodes (and room for the bitmap pages write_bitmap may copy)
 * are renumbered onto the longest free runs, the last piece best-fit. The
 * commit goes to the end of the file in one run (the file grows) when fewer
 * pages are free than it needs, as with first-fit, or when it would take
 * more than PLACE_PIECES runs while free pages are under 1/PLACE_SLACK of
 * the file: without that slack a churning store has no runs at all (each
 * commit fills exactly the single-page holes the one before left).
 * Commits with an overflow page (a chain carries checksums over its page
 * numbers) or more than PLACE_MAX pages keep their numbers. Returns the
 * lowest page this may have freed (for the allocation hint), else UINT32_MAX.
 */
static uint32_t place_list(mote_txn *t, placement *plp);

uint32_t mote__place_pages(mote_txn *t)
{
    placement pl;
    pl.n = 0;
    if (t->ndirty < 2 || t->ndirty > PLACE_MAX ||
        !place_collect(t, t->root->data + SLOT_ROOT_OFF, &pl) || pl.n != t->ndirty)
        return UINT32_MAX;
    return place_list(t, &pl);
}

/* Place the collected pages (their bits set) onto few runs. */
static uint32_t place_list(mote_txn *t, placement *plp)
{
    placement pl = *plp;
    /* runs the pages are in now */
    uint32_t lo = UINT32_MAX, now_runs = 0;
    uint8_t *bm = t->bm;
    for (uint32_t i = 0; i < pl.n; i++) {
        uint32_t p = pl.pg[i]->pgno;
        lo = p < lo ? p : lo;
        now_runs += p < 3 || !bit_get(bm, p - 1) || !dirty_find(t, p - 1);
    }
    if (now_runs == 1)
        return UINT32_MAX;
    for (uint32_t i = 0; i < pl.n; i++) /* their own numbers are candidates */
        bit_clr(bm, pl.pg[i]->pgno);
    uint32_t nbmp = mote__bmp_needed(t->s->P, t->npages);
    uint32_t need = pl.n + (nbmp < PLACE_BMP ? nbmp : PLACE_BMP), tail;
    uint32_t from = lo < t->hint ? lo : t->hint; /* no free page below */
    uint32_t total = free_runs(t, &pl, from, need, &tail), base_np = rd32(t->base->data + 32);
    page_run pick[PLACE_MAX + PLACE_BMP];
    uint32_t npick = 0;
    if (total < need || (slack_ok(t, total, need) && many_pieces(&pl, need))) {
        /* the file grows: one run at its end */
        if (t->npages < base_np || tail + need > mote__max_pages(t->s->P) || bm_cover(t, tail + need))
            goto keep;
        bm = t->bm;
        pick[npick++] = (page_run){tail, need};
    } else {
        for (uint32_t i = 0, left = need; left; i++) {
            if (pl.top[i].len >= left) { /* best fit for the last piece */
                uint32_t j = i;
                while (j + 1 < pl.ntop && pl.top[j + 1].len >= left)
                    j++;
                pick[npick++] = (page_run){pl.top[j].start, left};
                break;
            }
            pick[npick++] = pl.top[i];
            left -= pl.top[i].len;
        }
    }
    if (npick >= now_runs)
        goto keep;
    uint32_t end = renumber(t, &pl, pick, npick, base_np);
    uint32_t low = lo < t->hint ? lo : t->hint;
    t->hint = end; /* bitmap pages follow the last piece */
    return low;
keep:
    for (uint32_t i = 0; i < pl.n; i++)
        bit_set(t->bm, pl.pg[i]->pgno);
    return UINT32_MAX;
}

/* ---- The commit chain's pages (pager.h COMMIT CHAIN) ----------------------- */

int mote__place_chain(mote_txn *t, uint32_t R, uint32_t *low)
{
    placement pl;
    pl.n = 0;
    if (t->ndirty > PLACE_MAX ||
        !place_collect(t, t->root->data + SLOT_ROOT_OFF, &pl) || pl.n != t->ndirty)
        return 0;
    uint32_t max = mote__max_pages(t->s->P), base_np = rd32(t->base->data + 32);
    for (uint32_t i = 0; i < pl.n; i++) { /* their own numbers are candidates */
        bit_clr(t->bm, pl.pg[i]->pgno);
        if (pl.pg[i]->pgno < *low)
            *low = pl.pg[i]->pgno;
    }
    if (t->hint < *low)
        *low = t->hint;
    /* as many as the free run after R holds go there, the rest onto runs elsewhere */
    uint32_t k = 0;
    while (k < pl.n && R + 1 + k < max && run_free(t, R + 1 + k, 1))
        k++;
    if (bm_cover(t, R + 1 + k))
        k = 0;
    /* pages numbered inside the run are among those placed there (else two
     * would share a number) */
    for (uint32_t i = 0, j = 0; i < pl.n; i++)
        if (pl.pg[i]->pgno >= R + 1 && pl.pg[i]->pgno < R + 1 + k) {
            mpage *pg = pl.pg[i];
            uint8_t *ptr = pl.ptr[i];
            memmove(pl.pg + j + 1, pl.pg + j, (i - j) * sizeof *pl.pg);
            memmove(pl.ptr + j + 1, pl.ptr + j, (i - j) * sizeof *pl.ptr);
            pl.pg[j] = pg;
            pl.ptr[j++] = ptr;
        }
    for (uint32_t i = k; i < pl.n; i++)
        bit_set(t->bm, pl.pg[i]->pgno);
    page_run run = {R + 1, k};
    if (k)
        renumber(t, &pl, &run, 1, base_np);
    t->hint = R + 1 + k; /* bitmap pages follow */
    if (k == pl.n)
        return 1;
    placement rest = pl;
    rest.n = pl.n - k;
    memmove(rest.pg, pl.pg + k, rest.n * sizeof *rest.pg);
    memmove(rest.ptr, pl.ptr + k, rest.n * sizeof *rest.ptr);
    uint32_t lo = place_list(t, &rest);
    if (lo < *low)
        *low = lo;
    return 1;
}

uint32_t mote__reserve_record(mote_txn *t, uint32_t want, uint32_t keep)
{
    uint32_t max = mote__max_pages(t->s->P), q = t->hint, tail;
    uint32_t phys = (uint32_t)(t->s->file_bytes >> t->s->page_shift);
    uint32_t inside = t->npages > phys ? t->npages : phys; /* the file's blocks */
    if (want < 2)
        want = 2;
    if (want > CHAIN_RUN + 1)
        want = CHAIN_RUN + 1;
    if (keep && keep + want <= inside && run_free(t, keep + 1, want - 1))
        return keep;
    if (q < 2 || q + want > inside || !run_free(t, q, want)) {
        placement pl;
        uint32_t total = free_runs(t, &pl, 2, want, &tail);
        /* a run that holds the next commit; else, while free pages are
         * plenty (RESERVE_SLACK), the longest (its pages go elsewhere too,
         * but the file does not grow) unless the next commit is a big one
         * that it holds less than half of (RESERVE_HALF: the rest would be
         * many runs elsewhere, a request each) while less than half the file
         * is free (RESERVE_CAP); else the file's end */
        uint32_t len = total ? pl.top[0].len : 0; /* (no run seen: top is unset) */
        int short_ok = len >= 2 && (uint64_t)total * RESERVE_SLACK > t->npages &&
                       (want <= CHAIN_RUN || len * RESERVE_HALF >= want ||
                        (uint64_t)total * RESERVE_CAP > t->npages);
        if (total && (len >= want || short_ok))
            q = pl.top[0].start;
        else
            q = tail;
    }
    if (q + want > max || bm_cover(t, q + 1))
        return 0;
    bit_set(t->bm, q);
    if (t->npages < q + 1)
        t->npages = q + 1;
    return q;
}
