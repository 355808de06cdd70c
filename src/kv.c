/*
 * kv.c — the public key/value API of mote.h: transactions, named trees,
 * put/get/del/count and cursors, with argument checking.
 *
 * Named trees share one B+tree: a user key k of tree t is stored as
 * prefix(t) + k (see node.h). Tree 0 is the catalog (name -> u32 id);
 * the next free id is kept in the root slot. Counting a tree is the
 * difference of two ranks, so it is O(log n) like every other lookup.
 *
 * A write operation that fails midway (out of memory, I/O error, damaged
 * page) may leave the transaction's tree half changed: the transaction is
 * then marked failed and can only be aborted (commit returns the error).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "kv.h"

unsigned mote__tree_prefix(uint32_t tree, uint8_t *out)
{
    if (tree < 0x80) {
        out[0] = (uint8_t)tree;
        return 1;
    }
    out[0] = (uint8_t)(0x80 | (tree >> 8));
    out[1] = (uint8_t)tree;
    return 2;
}

static int check_txn(mote_txn *t, int write)
{
    if (!t)
        return mote__err(MOTE_INVALID, "transaction is NULL");
    if (store_forked(t->s))
        return mote__forked_err(t->s);
    if (t->failed)
        return mote__err(t->failed, "an earlier operation of this transaction "
                         "failed (%s); abort it", mote_strerror(t->failed));
    if (write && !t->write)
        return mote__err(MOTE_READONLY, "write in a read-only transaction");
    if (write) /* cursors remember their keys before the tree changes */
        for (mote_cursor *c = t->cursors; c; c = c->next_in_txn)
            mote__cur_save(c);
    return MOTE_OK;
}

static int tree_exists(const mote_txn *t, uint32_t tree)
{
    uint32_t next = t->write ? t->next_tree : rd32(t->root->data + 36);
    if (tree < 1 || tree >= next)
        return mote__err(MOTE_INVALID, "tree id %u does not exist (ids come "
                         "from mote_kv_tree)", tree);
    return MOTE_OK;
}

static int pend_flush_tree(mote_txn *t, uint32_t tree);

/* Every operation on a tree comes through here: its deferred puts are
 * written first. */
static int check_tree(mote_txn *t, uint32_t tree)
{
    int rc = tree_exists(t, tree);
    return rc ? rc : pend_flush_tree(t, tree);
}

/* Build the internal key; MOTE_INVALID / MOTE_TOOBIG for bad keys. */
static int ikey(uint32_t tree, const void *k, size_t kl, uint8_t *out, size_t *outlen)
{
    if (!k && kl)
        return mote__err(MOTE_INVALID, "key is NULL");
    if (kl > MOTE_MAX_KEY)
        return mote__err(MOTE_TOOBIG, "key of %zu bytes; the limit is %u", kl,
                         MOTE_MAX_KEY);
    unsigned a = mote__tree_prefix(tree, out);
    if (kl)
        memcpy(out + a, k, kl);
    *outlen = a + kl;
    return MOTE_OK;
}

/* The checks every operation on a tree starts with: the transaction (and
 * writable if `write`), the tree (its deferred puts written first). */
static int tree_args(mote_txn *t, int write, uint32_t tree)
{
    int rc = check_txn(t, write);
    return rc ? rc : check_tree(t, tree);
}

/* tree_args, then the internal key k (kl bytes) of user key `key`. */
static int key_args(mote_txn *t, int write, uint32_t tree, const void *key, size_t klen,
                    uint8_t *k, size_t *kl)
{
    int rc = tree_args(t, write, tree);
    return rc ? rc : ikey(tree, key, klen, k, kl);
}

/* Remember a failure that may have left the txn's tree half changed. */
static int write_result(mote_txn *t, int rc)
{
    if (rc == MOTE_OK) {
        t->changed = 1;
        t->gen++;
    } else if (rc != MOTE_NOTFOUND && rc != MOTE_EXISTS) {
        t->failed = rc;
    }
    return rc;
}

/* ---- transactions ---------------------------------------------------------- */

static void pending_free(mote_txn *t);

void mote__kv_txn_end(mote_txn *t)
{
    for (mote_cursor *c = t->cursors; c; c = c->next_in_txn) {
        mote__cur_reset(c);
        c->t = NULL;
    }
    t->cursors = NULL;
    pending_free(t);
}

int mote__kv_base_view(mote_txn *w, mote_txn **out) { return mote__txn_base_view(w, out); }

void mote__kv_view_end(mote_txn *v)
{
    if (!v)
        return;
    mote__kv_txn_end(v);
    mote__txn_abort(v);
}

uint64_t mote__kv_bytes(const mote_txn *t)
{
    return (uint64_t)(t->write ? t->npages : rd32(t->root->data + 32)) << t->s->page_shift;
}

uint64_t mote_txn_id(const mote_txn *t) { return t ? t->txnid : 0; }

/* ---- trees ----------------------------------------------------------------- */

static int catalog_key(const char *name, uint8_t *key, size_t *klen)
{
    if (!name)
        return mote__err(MOTE_INVALID, "tree name is NULL");
    size_t n = strlen(name);
    if (n < 1 || n > MOTE_MAX_TREE_NAME)
        return mote__err(MOTE_INVALID, "tree name of %zu bytes: must be 1 to %u",
                         n, MOTE_MAX_TREE_NAME);
    return ikey(0, name, n, key, klen);
}

int mote_kv_tree(mote_txn *t, const char *name, unsigned flags, uint32_t *tree)
{
    uint8_t key[MAX_IKEY];
    size_t kl = 0;
    mote_val v;
    int rc = check_txn(t, 0);
    if (!rc && !tree)
        rc = mote__err(MOTE_INVALID, "mote_kv_tree: tree is NULL");
    if (!rc && (flags & ~MOTE_TREE_CREATE))
        rc = mote__err(MOTE_INVALID, "mote_kv_tree: unknown flags 0x%x", flags);
    if (!rc)
        rc = catalog_key(name, key, &kl);
    if (rc)
        return rc;
    rc = mote__bt_get(t, key, kl, &v);
    if (rc == MOTE_OK) {
        if (v.size != 4)
            return CORRUPT("catalog entry for tree '%s' has %zu bytes", name, v.size);
        *tree = rd32(v.data);
        mote__txn_release_held(t);
        return MOTE_OK;
    }
    if (rc != MOTE_NOTFOUND || !(flags & MOTE_TREE_CREATE))
        return rc == MOTE_NOTFOUND ? mote__err(rc, "no tree named '%s'", name) : rc;
    if ((rc = check_txn(t, 1)))
        return rc;
    if (t->next_tree > MOTE_MAX_TREES)
        return mote__err(MOTE_FULL, "a store holds at most %u trees", MOTE_MAX_TREES);
    uint8_t id[4];
    wr32(id, t->next_tree);
    rc = write_result(t, mote__bt_put(t, key, kl, id, 4, MOTE_NOOVERWRITE));
    if (rc)
        return rc;
    *tree = t->next_tree++;
    return MOTE_OK;
}

int mote_kv_drop(mote_txn *t, const char *name)
{
    uint32_t tree;
    int rc = check_txn(t, 1);
    if (!rc)
        rc = mote_kv_tree(t, name, 0, &tree);
    if (!rc)
        rc = pend_flush_tree(t, tree);
    if (rc)
        return rc;
    uint8_t lo[2], hi[2];
    unsigned ll = mote__tree_prefix(tree, lo), hl = mote__tree_prefix(tree + 1, hi);
    mote_cursor c;
    memset(&c, 0, sizeof c);
    c.t = t;
    memcpy(c.lo, lo, ll);
    c.lolen = ll;
    memcpy(c.hi, hi, hl);
    c.hilen = hl;
    /* delete from the first key of the tree until none is left */
    while ((rc = mote__cur_seek(&c, lo, ll, MOTE_SEEK_GE)) == MOTE_OK) {
        uint8_t k[MAX_IKEY];
        mote__cur_save(&c);
        uint32_t kl = c.klen;
        memcpy(k, c.key, kl);
        mote__cur_reset(&c);
        if ((rc = write_result(t, mote__bt_del(t, k, kl, 0))))
            return rc;
    }
    mote__cur_reset(&c);
    if (rc != MOTE_NOTFOUND)
        return write_result(t, rc);
    uint8_t key[MAX_IKEY];
    size_t kl = 0;
    catalog_key(name, key, &kl);
    return write_result(t, mote__bt_del(t, key, kl, 0));
}

/* ---- the store's identity ------------------------------------------------------ */
/* A random 64-bit number under the catalog's empty name (which no tree can
 * have): given by the store's first commit that changes it (a store of an
 * earlier library gets one at its first write), carried to its copies by
 * deltas, new in a compacted copy (check.c). A replicator tells by it a
 * store from another one at the same path (delta.c). */

static const uint8_t ident_key[1] = {0}; /* tree 0's prefix, an empty name */

static uint64_t new_ident(const mote_store *s)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id) {
        static _Atomic uint64_t n; /* no entropy yet (early boot): time and place */
        struct timespec a, b;
        clock_gettime(CLOCK_REALTIME, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        uint64_t mix[6] = {(uint64_t)a.tv_sec, (uint64_t)a.tv_nsec, (uint64_t)b.tv_sec,
                           (uint64_t)b.tv_nsec, (uint64_t)getpid(), ++n};
        id = mote__hash64(mix, sizeof mix, s->ino ^ (uint64_t)(uintptr_t)s);
    }
    return id ? id : 1;
}

int mote__kv_ident(mote_txn *t, uint64_t *ident)
{
    mote_val v;
    *ident = 0;
    int rc = mote__bt_get(t, ident_key, sizeof ident_key, &v);
    if (rc)
        return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
    if (v.size != 8)
        return CORRUPT("the store's identity has %zu bytes", v.size);
    *ident = rd64(v.data);
    mote__txn_release_held(t);
    return MOTE_OK;
}

int mote__kv_ident_set(mote_txn *t, uint64_t ident)
{
    uint8_t v[8];
    wr64(v, ident ? ident : new_ident(t->s));
    return write_result(t, mote__bt_put(t, ident_key, sizeof ident_key, v, 8, 0));
}

int mote__kv_ident_ensure(mote_txn *t)
{
    mote_store *s = t->s;
    if (s->has_ident || !t->changed)
        return MOTE_OK;
    uint64_t id;
    int rc = mote__kv_ident(t, &id);
    if (rc || id) {
        s->has_ident = !rc; /* (one look per handle: no process removes it) */
        return rc;
    }
    return mote__kv_ident_set(t, 0);
}

int mote_store_ident(mote_store *s, uint64_t *ident)
{
    if (!s || !ident)
        return mote__err(MOTE_INVALID, "mote_store_ident: NULL argument");
    *ident = 0;
    mote_txn *t;
    int rc = mote__txn_begin(s, 0, &t);
    if (rc)
        return rc;
    rc = mote__kv_ident(t, ident);
    mote__txn_abort(t);
    return rc;
}

/* ---- put / get / del / count ------------------------------------------------ */

int mote_kv_put(mote_txn *t, uint32_t tree, const void *key, size_t klen,
                const void *val, size_t vlen, unsigned flags)
{
    uint8_t k[MAX_IKEY];
    size_t kl = 0;
    int rc = key_args(t, 1, tree, key, klen, k, &kl);
    if (!rc && !val && vlen)
        rc = mote__err(MOTE_INVALID, "value is NULL");
    if (!rc && vlen > MOTE_MAX_VALUE)
        rc = mote__err(MOTE_TOOBIG, "value of %zu bytes; the limit is %u", vlen,
                       MOTE_MAX_VALUE);
    if (!rc && (flags & ~MOTE_NOOVERWRITE))
        rc = mote__err(MOTE_INVALID, "mote_kv_put: unknown flags 0x%x", flags);
    if (rc)
        return rc;
    return write_result(t, mote__bt_put(t, k, kl, val ? val : "", vlen, flags));
}

int mote_kv_get(mote_txn *t, uint32_t tree, const void *key, size_t klen, mote_val *val)
{
    uint8_t k[MAX_IKEY];
    size_t kl = 0;
    int rc = key_args(t, 0, tree, key, klen, k, &kl);
    return rc ? rc : mote__bt_get(t, k, kl, val);
}

static int kv_del(mote_txn *t, uint32_t tree, const void *key, size_t klen, int known)
{
    uint8_t k[MAX_IKEY];
    size_t kl = 0;
    int rc = key_args(t, 1, tree, key, klen, k, &kl);
    if (rc)
        return rc;
    rc = mote__bt_del(t, k, kl, known);
    if (rc == MOTE_NOTFOUND && known)
        t->gen++; /* the miss copied the path: cursors revalidate */
    return write_result(t, rc);
}

int mote_kv_del(mote_txn *t, uint32_t tree, const void *key, size_t klen)
{
    return kv_del(t, tree, key, klen, 0);
}

int mote__kv_del_known(mote_txn *t, uint32_t tree, const void *key, size_t klen)
{
    return kv_del(t, tree, key, klen, 1);
}

/* ---- deferred puts ------------------------------------------------------------ */

/*
 * Index entries of single puts are deferred (mote__kv_put_later): 10,000
 * puts in one transaction then write each index as one sorted batch (one
 * descent per leaf) instead of 10,000 descents to scattered leaves. Nothing
 * can observe the difference: every operation on the tree writes them first
 * (check_tree, check_cursor, mote_kv_drop), and so does the commit.
 */

/* The deferred puts of one tree: internal keys back to back in buf, key i
 * from off[i] to off[i + 1]. */
typedef struct mote_pending {
    uint32_t tree;
    size_t n, cap; /* keys; off has cap + 1 entries */
    size_t *off;
    uint8_t *buf;
    size_t bcap;
} mote_pending;

enum { PEND_MAX = 1 << 17 }; /* keys of a tree written at once at the latest */

static mote_pending *pend_of(mote_txn *t, uint32_t tree)
{
    for (unsigned i = 0; i < t->npend; i++)
        if (t->pend[i].tree == tree)
            return &t->pend[i];
    return NULL;
}

/* Write p's keys as one sorted batch and empty p (also on failure, which
 * fails the transaction). */
static int pend_write(mote_txn *t, mote_pending *p)
{
    size_t n = p->n;
    if (!n)
        return MOTE_OK;
    p->n = 0;
    mote_kvop *ops = mote__malloc(n * sizeof *ops);
    if (!ops)
        return write_result(t, mote__err(MOTE_NOMEM, "out of memory writing %zu deferred "
                                         "index entries", n));
    for (size_t i = 0; i < n; i++)
        ops[i] = (mote_kvop){p->buf + p->off[i], (uint32_t)(p->off[i + 1] - p->off[i]), 0, "",
                             0};
    int rc = mote__kvops_sort(ops, n);
    size_t m = 0;
    for (size_t i = 0; !rc && i < n; i++) /* a key given twice is put once */
        if (!m || mote__keycmp(ops[m - 1].key, ops[m - 1].klen, ops[i].key, ops[i].klen))
            ops[m++] = ops[i];
    if (!rc) {
        for (mote_cursor *c = t->cursors; c; c = c->next_in_txn)
            mote__cur_save(c);
        uint64_t missing;
        rc = mote__bt_apply(t, ops, m, &missing);
    }
    mote__free(ops);
    t->gen++;
    return write_result(t, rc);
}

static int pend_flush_tree(mote_txn *t, uint32_t tree)
{
    mote_pending *p = t->npend ? pend_of(t, tree) : NULL;
    return p && p->n ? pend_write(t, p) : MOTE_OK;
}

int mote__kv_flush(mote_txn *t)
{
    int rc = MOTE_OK;
    for (unsigned i = 0; !rc && i < t->npend; i++)
        rc = pend_write(t, &t->pend[i]);
    return rc;
}

static void pending_free(mote_txn *t)
{
    for (unsigned i = 0; i < t->npend; i++) {
        mote__free(t->pend[i].off);
        mote__free(t->pend[i].buf);
    }
    mote__free(t->pend);
    t->pend = NULL;
    t->npend = t->pend_cap = 0;
}

int mote__kv_put_later(mote_txn *t, uint32_t tree, const void *key, size_t klen)
{
    uint8_t k[MAX_IKEY];
    size_t kl = 0;
    int rc = check_txn(t, 1);
    if (!rc)
        rc = tree_exists(t, tree);
    if (!rc)
        rc = ikey(tree, key, klen, k, &kl);
    if (rc)
        return rc;
    mote_pending *p = pend_of(t, tree);
    if (!p) {
        if (t->npend == t->pend_cap) {
            unsigned nc = t->pend_cap ? 2 * t->pend_cap : 4;
            mote_pending *np = mote__realloc(t->pend, nc * sizeof *np);
            if (!np)
                return mote__err(MOTE_NOMEM, "out of memory");
            t->pend = np;
            t->pend_cap = nc;
        }
        p = &t->pend[t->npend++];
        memset(p, 0, sizeof *p);
        p->tree = tree;
    }
    if (p->n == p->cap) {
        size_t nc = p->cap ? 2 * p->cap : 256;
        size_t *no = mote__realloc(p->off, (nc + 1) * sizeof *no);
        if (!no)
            return mote__err(MOTE_NOMEM, "out of memory");
        if (!p->off)
            no[0] = 0;
        p->off = no;
        p->cap = nc;
    }
    size_t len = p->off[p->n];
    if ((rc = mote__grow(&p->buf, &p->bcap, len + kl)))
        return rc;
    memcpy(p->buf + len, k, kl);
    p->off[++p->n] = len + kl;
    return p->n >= PEND_MAX ? pend_write(t, p) : MOTE_OK;
}

/*
 * Batches are sorted by radix sort on 8-byte chunks of the keys: each op gets
 * a sort key (the next 8 key bytes as a big-endian integer, zero-padded, and
 * how many bytes are left, capped at 9 = "more than 8"), those are sorted by
 * LSD radix passes (a pass whose digit is the same everywhere is skipped), and
 * runs whose chunk is equal with more bytes left are sorted again on the next
 * chunk. The length makes the order exact: of two keys with equal padded
 * chunks, the one that ends first is a prefix of the other. Index keys share
 * long prefixes (tree prefix and type tag, a level's few values, a text's
 * common start, the high bytes of ids) that a comparison sort compares again
 * at every step; here the 8-byte chunks that every key of a range shares are
 * skipped first (one compare per key and chunk). Only the sort keys move
 * while sorting (16 bytes, where an op is 40); the ops are put in their
 * order once at the end.
 */
typedef struct skey {
    uint64_t chunk;
    uint32_t i;    /* index of the op */
    uint32_t left; /* key bytes from the chunk on, capped at 9 */
} skey;

enum { SORT_SMALL = 24 }; /* ranges below this: insertion sort */

/* Compare two keys that share their first d bytes. */
static inline int op_cmp_from(const mote_kvop *a, const mote_kvop *b, size_t d)
{
    return mote__keycmp(a->key + d, a->klen - (uint32_t)d, b->key + d, b->klen - (uint32_t)d);
}

/* Insertion sort of the ops named by sk[0..n), which share d key bytes. */
static void sk_isort(const mote_kvop *ops, skey *sk, size_t n, size_t d)
{
    for (size_t i = 1; i < n; i++) {
        skey x = sk[i];
        size_t j = i;
        for (; j && op_cmp_from(&ops[sk[j - 1].i], &ops[x.i], d) > 0; j--)
            sk[j] = sk[j - 1];
        sk[j] = x;
    }
}

/* Digit p of a sort key: 0 is the length, 1..8 the chunk's bytes from the
 * least significant. */
static inline unsigned skey_digit(const skey *k, unsigned p)
{
    return p ? (unsigned)(k->chunk >> (8 * (p - 1))) & 0xff : k->left;
}

enum { NPASS = 9 }; /* digits of a sort key */

/* The keys of the ops named by sk[0..n) (n >= 2) share their first d bytes:
 * how many they share, counted in whole chunks from d. */
static size_t sk_common(const mote_kvop *ops, const skey *sk, size_t n, size_t d)
{
    const mote_kvop *a = &ops[sk[0].i];
    size_t lcp = a->klen;
    for (size_t j = 1; j < n && lcp >= d + 8; j++) {
        const mote_kvop *b = &ops[sk[j].i];
        size_t m = lcp < b->klen ? lcp : b->klen, k = d;
        while (k + 8 <= m && !memcmp(a->key + k, b->key + k, 8))
            k += 8;
        lcp = k;
    }
    return lcp >= d + 8 ? lcp - (lcp - d) % 8 : d;
}

/* The ops named by sk[0..n) share their first d key bytes: put sk in the
 * order of the rest of the keys. tmp is scratch of n entries; count is
 * shared by the whole recursion (a call is done with it before it
 * recurses). `top`: the caller checked that the range is not in order. */
static void sk_radix(const mote_kvop *ops, skey *sk, skey *tmp, size_t n, size_t d, int top,
                     size_t (*count)[256])
{
    if (n < SORT_SMALL) {
        sk_isort(ops, sk, n, d);
        return;
    }
    if (!top) {
        size_t sorted = 1; /* a part already in order (new ids ascend) */
        while (sorted < n && op_cmp_from(&ops[sk[sorted - 1].i], &ops[sk[sorted].i], d) <= 0)
            sorted++;
        if (sorted == n)
            return;
    }
    d = sk_common(ops, sk, n, d);
    uint64_t vary = 0; /* bits that differ from the first op's sort key */
    uint32_t lvary = 0;
    for (size_t i = 0; i < n; i++) {
        const mote_kvop *op = &ops[sk[i].i];
        size_t left = op->klen - d;
        uint64_t c = 0;
        if (left >= 8)
            c = mote__be64(op->key + d);
        else
            for (size_t j = 0; j < left; j++)
                c |= (uint64_t)op->key[d + j] << (56 - 8 * j);
        sk[i].chunk = c;
        sk[i].left = (uint32_t)(left < 9 ? left : 9);
        vary |= c ^ sk[0].chunk;
        lvary |= sk[i].left ^ sk[0].left;
    }
    if (!vary && !lvary)
        return; /* the same key n times (shared chunks were skipped) */
    /* passes only for the digits that differ somewhere */
    unsigned pass[NPASS], np = 0;
    if (lvary)
        pass[np++] = 0;
    for (unsigned p = 1; p < NPASS; p++)
        if ((vary >> (8 * (p - 1))) & 0xff)
            pass[np++] = p;
    memset(count, 0, np * sizeof *count);
    for (size_t i = 0; i < n; i++)
        for (unsigned j = 0; j < np; j++)
            count[j][skey_digit(&sk[i], pass[j])]++;
    skey *src = sk, *dst = tmp;
    for (unsigned j = 0; j < np; j++) {
        size_t *c = count[j];
        unsigned p = pass[j];
        size_t pos = 0;
        for (unsigned v = 0; v < 256; v++) {
            size_t k = c[v];
            c[v] = pos;
            pos += k;
        }
        for (size_t i = 0; i < n; i++)
            dst[c[skey_digit(&src[i], p)]++] = src[i];
        skey *t = src;
        src = dst;
        dst = t;
    }
    if (src != sk)
        memcpy(sk, src, n * sizeof *sk);
    for (size_t i = 0, e; i < n; i = e) {
        for (e = i + 1; e < n && sk[e].chunk == sk[i].chunk && sk[e].left == sk[i].left; e++)
            ;
        if (e - i > 1 && sk[i].left == 9)
            sk_radix(ops, sk + i, tmp + i, e - i, d + 8, 0, count);
    }
}

int mote__kvops_sort(mote_kvop *ops, size_t n)
{
    size_t i = 1; /* input already in order costs one pass */
    while (i < n && mote__keycmp(ops[i - 1].key, ops[i - 1].klen, ops[i].key, ops[i].klen) <= 0)
        i++;
    if (i >= n)
        return MOTE_OK;
    skey small_sk[SORT_SMALL], *sk = small_sk; /* a small range: insertion sort */
    mote_kvop small_ops[SORT_SMALL], *otmp = small_ops;
    size_t(*count)[256] = NULL;
    int big = n >= SORT_SMALL, ok = 1;
    if (big) {
        sk = mote__malloc(2 * n * sizeof *sk);
        otmp = mote__malloc(n * sizeof *otmp);
        count = mote__malloc(NPASS * sizeof *count);
        ok = sk && otmp && count;
    }
    if (ok) {
        for (size_t j = 0; j < n; j++)
            sk[j].i = (uint32_t)j;
        sk_radix(ops, sk, big ? sk + n : NULL, n, 0, 1, count);
        for (size_t j = 0; j < n; j++)
            otmp[j] = ops[sk[j].i];
        memcpy(ops, otmp, n * sizeof *ops);
    }
    if (big) {
        mote__free(sk);
        mote__free(otmp);
        mote__free(count);
    }
    if (!ok)
        return mote__err(MOTE_NOMEM, "out of memory sorting a batch of %zu", n);
    return MOTE_OK;
}

/* The checks of a batch for tree: sizes, and for user keys (not
 * `prefixed`) strictly ascending order, else runs would land in wrong
 * leaves (the object layer checks its own when it seals a batch); prefixed
 * keys must carry the tree's prefix. *bytes = room for the keys with their
 * prefixes. */
static int batch_check(uint32_t tree, const mote_kvop *ops, size_t n, int prefixed,
                       size_t *bytes)
{
    uint8_t pre[2] = {0};
    unsigned pl = mote__tree_prefix(tree, pre), extra = prefixed ? 0 : pl;
    size_t b = 0;
    for (size_t i = 0; i < n; i++) {
        const mote_kvop *op = &ops[i];
        if (op->klen > MOTE_MAX_KEY + (prefixed ? pl : 0) ||
            (!op->del && op->vlen > MOTE_MAX_VALUE))
            return mote__err(MOTE_TOOBIG, "key or value too big in a batch");
        if (prefixed && (op->klen < pl || op->key[0] != pre[0] ||
                         (pl > 1 && op->key[1] != pre[1])))
            return mote__err(MOTE_INVALID, "internal: batch key outside tree %u", tree);
        if (!prefixed && i &&
            mote__keycmp(ops[i - 1].key, ops[i - 1].klen, op->key, op->klen) >= 0)
            return mote__err(MOTE_INVALID, "batch keys not in ascending order");
        b += op->klen + extra;
    }
    *bytes = b;
    return MOTE_OK;
}

static int apply_result(mote_txn *t, int rc, uint64_t miss, uint64_t *missing)
{
    if (missing)
        *missing = miss;
    t->gen++; /* even a batch of misses copied pages: cursors revalidate */
    return write_result(t, rc);
}

int mote__kv_apply(mote_txn *t, uint32_t tree, const mote_kvop *ops, size_t n,
                   uint64_t *missing)
{
    size_t bytes = 0;
    int rc = tree_args(t, 1, tree);
    if (!rc)
        rc = batch_check(tree, ops, n, 0, &bytes);
    if (rc || !n)
        return rc;
    mote_kvop *iops = mote__malloc(n * sizeof *iops);
    uint8_t *arena = mote__malloc(bytes);
    if (!iops || !arena) {
        mote__free(iops);
        mote__free(arena);
        return mote__err(MOTE_NOMEM, "out of memory for a batch of %zu", n);
    }
    uint8_t *p = arena;
    for (size_t i = 0; i < n; i++) {
        size_t kl = 0;
        ikey(tree, ops[i].key, ops[i].klen, p, &kl);
        iops[i] = ops[i];
        iops[i].key = p;
        iops[i].klen = (uint32_t)kl;
        if (!iops[i].val)
            iops[i].val = "";
        p += kl;
    }
    uint64_t miss = 0;
    rc = mote__bt_apply(t, iops, n, &miss);
    mote__free(iops);
    mote__free(arena);
    return apply_result(t, rc, miss, missing);
}

int mote__kv_apply_ikeys(mote_txn *t, uint32_t tree, const mote_kvop *ops, size_t n,
                         uint64_t *missing)
{
    size_t bytes;
    int rc = tree_args(t, 1, tree);
    if (!rc)
        rc = batch_check(tree, ops, n, 1, &bytes);
    if (rc || !n)
        return rc;
    uint64_t miss = 0;
    rc = mote__bt_apply(t, ops, n, &miss);
    return apply_result(t, rc, miss, missing);
}

int mote_kv_count(mote_txn *t, uint32_t tree, const void *lo, size_t lolen,
                  const void *hi, size_t hilen, uint64_t *count)
{
    uint8_t a[MAX_IKEY], b[MAX_IKEY];
    size_t al = 0, bl = 0;
    uint64_t ra, rb;
    int rc = tree_args(t, 0, tree);
    if (!rc && !count)
        rc = mote__err(MOTE_INVALID, "mote_kv_count: count is NULL");
    if (!rc)
        rc = lo ? ikey(tree, lo, lolen, a, &al) : ikey(tree, NULL, 0, a, &al);
    if (!rc)
        rc = hi ? ikey(tree, hi, hilen, b, &bl) : ikey(tree + 1, NULL, 0, b, &bl);
    if (!rc)
        rc = mote__bt_rank(t, a, al, &ra);
    if (!rc)
        rc = mote__bt_rank(t, b, bl, &rb);
    if (rc)
        return rc;
    *count = rb > ra ? rb - ra : 0;
    return MOTE_OK;
}

/* ---- cursors ------------------------------------------------------------- */

int mote_cursor_open(mote_txn *t, uint32_t tree, mote_cursor **out)
{
    if (!out)
        return mote__err(MOTE_INVALID, "mote_cursor_open: out is NULL");
    *out = NULL;
    int rc = tree_args(t, 0, tree);
    if (rc)
        return rc;
    /* queries open and close cursors per call: reuse the last one closed
     * in this txn, and clear only the fields before the (large) key */
    mote_cursor *c = t->spare ? t->spare : mote__malloc(sizeof *c);
    if (!c)
        return mote__err(MOTE_NOMEM, "out of memory opening a cursor");
    t->spare = NULL;
    memset(c, 0, offsetof(mote_cursor, key));
    c->t = t;
    c->tree = tree;
    c->lolen = mote__tree_prefix(tree, c->lo);
    c->hilen = mote__tree_prefix(tree + 1, c->hi);
    c->next_in_txn = t->cursors;
    t->cursors = c;
    *out = c;
    return MOTE_OK;
}

void mote_cursor_close(mote_cursor *c)
{
    if (!c)
        return;
    if (c->t) {
        mote__cur_reset(c);
        mote_cursor **pp = &c->t->cursors;
        while (*pp && *pp != c)
            pp = &(*pp)->next_in_txn;
        if (*pp)
            *pp = c->next_in_txn;
        if (!c->t->spare) {
            c->t->spare = c;
            return;
        }
    }
    mote__free(c);
}

static int check_cursor(mote_cursor *c)
{
    if (!c)
        return mote__err(MOTE_INVALID, "cursor is NULL");
    if (!c->t)
        return mote__err(MOTE_INVALID, "cursor used after its transaction ended");
    int rc = check_txn(c->t, 0);
    return rc ? rc : pend_flush_tree(c->t, c->tree);
}

int mote_cursor_seek(mote_cursor *c, const void *key, size_t klen, int mode)
{
    uint8_t k[MAX_IKEY];
    size_t kl = 0;
    int rc = check_cursor(c);
    if (!rc && (mode < MOTE_SEEK_GE || mode > MOTE_SEEK_LT))
        rc = mote__err(MOTE_INVALID, "mote_cursor_seek: unknown mode %d", mode);
    if (!rc)
        rc = ikey(c->tree, key, klen, k, &kl);
    return rc ? rc : mote__cur_seek(c, k, kl, mode);
}

int mote__cursor_find_id(mote_cursor *c, uint64_t id, mote_val *val)
{
    /* object trees never hold deferred entries, and the caller's loop
     * checked its transaction: only the key is built here */
    uint8_t k[4 + 8];
    memcpy(k, c->lo, 4);
    mote__wr_be64(k + c->lolen, id);
    return mote__cur_find(c, k, c->lolen + 8, val);
}

int mote_cursor_first(mote_cursor *c)
{
    int rc = check_cursor(c);
    return rc ? rc : mote__cur_seek(c, c->lo, c->lolen, MOTE_SEEK_GE);
}

int mote_cursor_last(mote_cursor *c)
{
    int rc = check_cursor(c);
    return rc ? rc : mote__cur_seek(c, c->hi, c->hilen, MOTE_SEEK_LT);
}

/* A cursor whose next step or entry may take the inline way: its
 * transaction is usable and has no deferred puts to write first. */
static inline int cursor_plain(const mote_cursor *c)
{
    const mote_txn *t = c ? c->t : NULL;
    return t && !(t->failed | (int)t->npend) && !store_forked(t->s);
}

/* The general ways, out of line: the inline ones then need no registers
 * saved. */
__attribute__((noinline)) static int cursor_next_slow(mote_cursor *c)
{
    int rc = check_cursor(c);
    return rc ? rc : mote__cur_step(c, 1);
}

int mote_cursor_next(mote_cursor *c)
{
    if (cursor_plain(c) && mote__cur_next_in_leaf(c))
        return MOTE_OK;
    return cursor_next_slow(c);
}

int mote_cursor_prev(mote_cursor *c)
{
    int rc = check_cursor(c);
    return rc ? rc : mote__cur_step(c, -1);
}

int mote_cursor_nth(mote_cursor *c, uint64_t n)
{
    uint64_t base;
    int rc = check_cursor(c);
    if (!rc)
        rc = mote__bt_rank(c->t, c->lo, c->lolen, &base);
    return rc ? rc : mote__cur_select(c, base + n);
}

int mote_cursor_rank(mote_cursor *c, uint64_t *rank)
{
    uint64_t base, r;
    int rc = check_cursor(c);
    if (!rc && !rank)
        rc = mote__err(MOTE_INVALID, "mote_cursor_rank: rank is NULL");
    if (!rc && c->depth == 0)
        rc = MOTE_NOTFOUND;
    if (!rc)
        rc = mote__bt_rank(c->t, c->lo, c->lolen, &base);
    if (!rc) {
        mote__cur_save(c);
        rc = mote__bt_rank(c->t, c->key, c->klen, &r);
    }
    if (rc)
        return rc;
    *rank = r - base;
    return MOTE_OK;
}

int mote__cursor_entry(mote_cursor *c, mote_val *key, mote_val *val)
{
    int rc = mote__cur_entry(c, key, val);
    if (!rc && key) { /* strip the tree prefix */
        key->data = (const uint8_t *)key->data + c->lolen;
        key->size -= c->lolen;
    }
    return rc;
}

__attribute__((noinline)) static int cursor_get_slow(mote_cursor *c, mote_val *key, mote_val *val)
{
    int rc = check_cursor(c);
    return rc ? rc : mote__cursor_entry(c, key, val);
}

int mote_cursor_get(mote_cursor *c, mote_val *key, mote_val *val)
{
    if (cursor_plain(c) && mote__cur_entry_in_leaf(c, key, val))
        return MOTE_OK;
    return cursor_get_slow(c, key, val);
}

/* ---- ranks for the query planner -------------------------------------------- */

int mote__kv_range_ranks(mote_txn *t, uint32_t tree, const void *lo, size_t lol,
                         const void *hi, size_t hil, uint64_t *rlo, uint64_t *rhi)
{
    uint8_t a[MAX_IKEY], b[MAX_IKEY];
    size_t al = 0, bl = 0;
    int rc = tree_args(t, 0, tree);
    if (!rc)
        rc = ikey(tree, lo, lol, a, &al);
    if (!rc)
        rc = ikey(tree, hi, hil, b, &bl);
    if (!rc)
        rc = mote__bt_rank(t, a, al, rlo);
    return rc ? rc : mote__bt_rank(t, b, bl, rhi);
}

int mote__kv_key_at(mote_txn *t, uint32_t tree, uint64_t rank, uint8_t *buf, size_t cap,
                    size_t *len)
{
    mote_cursor c; /* on the stack: not in the txn's list, no write happens meanwhile */
    memset(&c, 0, sizeof c);
    c.t = t;
    c.tree = tree;
    c.lolen = mote__tree_prefix(tree, c.lo);
    c.hilen = mote__tree_prefix(tree + 1, c.hi);
    int rc = tree_args(t, 0, tree);
    if (!rc)
        rc = mote__cur_select(&c, rank);
    mote_val k;
    if (!rc)
        rc = mote__cur_entry(&c, &k, NULL);
    if (!rc) {
        size_t n = k.size - c.lolen;
        *len = n < cap ? n : cap;
        memcpy(buf, (const uint8_t *)k.data + c.lolen, *len);
    }
    mote__cur_reset(&c);
    return rc;
}

/* ---- statistics ------------------------------------------------------------ */

int mote_store_stat(mote_store *s, mote_stat *st)
{
    if (!s || !st)
        return mote__err(MOTE_INVALID, "mote_store_stat: NULL argument");
    mote_txn *t;
    int rc = mote__txn_begin(s, 0, &t);
    if (rc)
        return rc;
    memset(st, 0, sizeof *st);
    const uint8_t *slot = t->root->data;
    st->txnid = t->txnid;
    st->page_size = s->P;
    st->pages = rd32(slot + 32);
    /* the file's size now (s->file_bytes counts the two slots of a store
     * never committed, which creation did not write: open.c) */
    uint64_t size;
    if ((rc = mote__file_size(s, &size))) {
        mote_abort(t);
        return rc;
    }
    st->file_bytes = size;
    st->depth = n_level(slot + SLOT_ROOT_OFF) + 1;
    st->format = rd32(slot + 8);
    st->chain = st_chain_len(slot);
    uint64_t all, cat;
    uint8_t one[1] = {1};
    rc = mote__bt_rank(t, NULL, 0, &all);
    if (!rc)
        rc = mote__bt_rank(t, one, 1, &cat);
    uint64_t ident = 0;
    if (!rc)
        rc = mote__kv_ident(t, &ident);
    if (!rc) {
        st->trees = cat - (ident != 0); /* (the identity is no tree) */
        st->entries = all - cat;
    }
    /* free pages: count set bits of the slot's view of the bitmap */
    uint64_t used = 0;
    for (uint32_t i = 0; i < SLOT_INLINE_BM; i++)
        used += (uint64_t)__builtin_popcount(slot[SLOT_INLINE_OFF + i]);
    uint32_t nb = rd32(slot + 40);
    uint8_t *buf = nb ? mote__malloc(s->P) : NULL;
    for (uint32_t i = 0; !rc && i < nb; i++) {
        uint8_t ptr[CHILD] = {0};
        memcpy(ptr, slot + SLOT_BMP_OFF + i * PTR12, PTR12);
        if (!buf)
            rc = mote__err(MOTE_NOMEM, "out of memory");
        if (!rc)
            rc = mote__read_page_raw(s, ptr_pgno(ptr), buf);
        if (!rc)
            rc = mote__verify_page(s, buf, ptr, "bitmap");
        for (uint32_t j = OVF_HDR; !rc && j < s->P; j++)
            used += (uint64_t)__builtin_popcount(buf[j]);
    }
    mote__free(buf);
    st->pages_free = st->pages > used ? st->pages - used : 0;
    mote__txn_abort(t);
    return rc;
}
