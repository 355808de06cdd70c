/*
 * text.c — full-text indexes: an inverted index of one string property in
 * one kv tree, with BM25 ranking (issue 19).
 *
 * THE TREE. Documents are objects (their ids); terms are the tokens of
 * mote_tokenize (tokenize.c: never empty, no 0x00 byte, at most 255 bytes).
 *
 *   "s"                        the totals: varint documents, varint tokens
 *   "t" term                   varint documents holding the term (its df)
 *   "p" term 0x00 first-id     a block of the term's postings, first-id
 *                              (u64 big-endian) its lowest document:
 *                              varint count, then per posting varint id
 *                              minus the previous one (the first: minus
 *                              first-id, so 0), varint tf, and tf
 *                              positions, each a varint minus the previous
 *                              (the first as it is)
 *   "d" id                     varint tokens of document id (u64 BE)
 *
 * A term's blocks partition its postings by id: block i holds the ids from
 * its first-id up to the next block's first-id, excluded. A block is at
 * most TEXT_BLOCK_MAX bytes unless one posting alone is longer (a document
 * that holds a term thousands of times); it is then alone in its block, a
 * value over a quarter page in overflow pages. Since 0x00 ends the term in
 * a block's key, a term's blocks are adjacent and no other term's key
 * falls between them ("ab" 0x00 ... sorts before "ab" "c" ...).
 *
 * WRITES. A write transaction collects its changes in a text_batch: a
 * document added gives one entry per distinct term, with its positions,
 * and one for the document (its length); a document removed, the same
 * from the text it was indexed with, without positions. mote__text_apply
 * sorts them by (term, id, removal first) and walks each term's blocks
 * once: the block that holds the first change's id is found with one seek
 * (the last block starting at or before it, else the term's first), the
 * changes up to the next block's first-id are merged into its decoded
 * postings, and the result is written back as one block or split into
 * several of at most TEXT_BLOCK_MAX bytes (a block emptied is deleted).
 * So a single put costs one block rewrite per distinct term, and a batch of
 * 10,000 documents one per block touched, not per posting. Blocks that
 * shrink are not merged with their neighbours (a later compaction could).
 *
 * SEARCH. BM25 as SQLite FTS5's bm25() computes it, so that rankings can
 * be compared: for each query term with df documents among N,
 * idf = ln((N - df + 0.5) / (df + 0.5)), or 1e-6 where that is not
 * positive; a document's score is the sum over the terms it holds of
 * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), with dl its
 * length in tokens and avgdl the mean. FTS5 returns the negated sum (lower
 * is better); here higher is better. The postings of every term are read
 * into one array, sorted by id, and each document's length read with one
 * cursor moving forward.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object.h"
#include "text.h"
#include "tokenize.h"

/* What entries and documents start with: they sort by it. */
typedef struct tx_key {
    uint64_t id;
    uint32_t seq;     /* the note it came from (the batch's notes in order) */
} tx_key;

typedef struct tx_entry {
    tx_key k;
    uint32_t term;    /* its index in the batch's terms */
    uint32_t pos;     /* offset in the batch's positions (add) */
    uint32_t tf;
    uint8_t add;      /* 1: the document holds the term now; 0: no longer */
} tx_entry;

typedef struct tx_doc {
    tx_key k;
    uint8_t add;
    uint64_t len;     /* tokens */
} tx_doc;

typedef struct tx_term {
    size_t off;       /* its bytes in the batch's terms */
    uint32_t len, hash;
} tx_term;

#define KEY_MAX (1 + MOTE_TOKEN_MAX + 1 + 8)

/* ---- growing arrays ------------------------------------------------------ */

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return MOTE_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / size)
        return mote__err(MOTE_NOMEM, "out of memory indexing text");
    void *q = mote__realloc(*p, c * size);
    if (!q)
        return mote__err(MOTE_NOMEM, "out of memory indexing text");
    *p = q;
    *cap = c;
    return MOTE_OK;
}

void mote__text_batch_free(text_batch *b)
{
    mote__free(b->e);
    mote__free(b->d);
    mote__free(b->t);
    mote__free(b->terms);
    mote__free(b->slots);
    mote__free(b->pos);
    memset(b, 0, sizeof *b);
}

void mote__text_batch_clear(text_batch *b)
{
    if (b->nt)
        memset(b->slots, 0, b->nslots * sizeof *b->slots);
    b->n = b->nd = b->nt = b->terms_len = b->npos = 0;
}

static uint32_t term_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

/* The index of term p[0..n) in the batch, added if new. */
static int intern(text_batch *b, const char *p, size_t n, uint32_t *out)
{
    int rc;
    if (2 * (b->nt + 1) > b->nslots) { /* grow the table and place the terms again */
        size_t ns = b->nslots ? 2 * b->nslots : 1024;
        uint32_t *sl = mote__calloc(ns, sizeof *sl);
        if (!sl)
            return mote__err(MOTE_NOMEM, "out of memory indexing text");
        for (size_t i = 0; i < b->nt; i++) {
            size_t at = b->t[i].hash & (ns - 1);
            while (sl[at])
                at = (at + 1) & (ns - 1);
            sl[at] = (uint32_t)i + 1;
        }
        mote__free(b->slots);
        b->slots = sl;
        b->nslots = ns;
    }
    uint32_t h = term_hash(p, n);
    size_t at = h & (b->nslots - 1);
    for (; b->slots[at]; at = (at + 1) & (b->nslots - 1)) {
        const tx_term *t = &b->t[b->slots[at] - 1];
        if (t->hash == h && t->len == n && !memcmp(b->terms + t->off, p, n)) {
            *out = b->slots[at] - 1;
            return MOTE_OK;
        }
    }
    if (b->nt >= UINT32_MAX - 1)
        return mote__err(MOTE_FULL, "text index: too many terms in one transaction");
    if ((rc = grow((void **)&b->t, &b->tcap, b->nt + 1, sizeof *b->t)) ||
        (rc = grow((void **)&b->terms, &b->terms_cap, b->terms_len + n, 1)))
        return rc;
    memcpy(b->terms + b->terms_len, p, n);
    b->t[b->nt] = (tx_term){b->terms_len, (uint32_t)n, h};
    b->terms_len += n;
    b->slots[at] = (uint32_t)++b->nt;
    *out = (uint32_t)b->nt - 1;
    return MOTE_OK;
}

/* ---- noting a document ------------------------------------------------------ */

/* One token of a document being noted: its term's index in the batch. */
typedef struct occ {
    uint32_t term, pos;
} occ;

typedef struct noting {
    text_batch *b;
    occ *o;
    size_t n, cap;
} noting;

static int note_token(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                      size_t end)
{
    (void)start, (void)end;
    noting *g = ctx;
    uint32_t term = 0;
    int rc;
    if ((rc = grow((void **)&g->o, &g->cap, g->n + 1, sizeof *g->o)) ||
        (rc = intern(g->b, token, len, &term)))
        return rc;
    g->o[g->n++] = (occ){term, pos};
    return 0;
}

static int term_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int cmp_occ(const void *x, const void *y)
{
    const occ *a = x, *b = y;
    if (a->term != b->term)
        return a->term < b->term ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

int mote__text_note(text_batch *b, uint64_t id, const char *utf8, size_t len, int add)
{
    noting g = {.b = b};
    if (b->nd >= UINT32_MAX || b->npos >= UINT32_MAX - len)
        return mote__err(MOTE_FULL, "text index: too many changes in one batch");
    int rc = mote_tokenize(utf8, len, b->tok, note_token, &g);
    if (!rc && g.n)
        qsort(g.o, g.n, sizeof *g.o, cmp_occ);
    if (!rc)
        rc = grow((void **)&b->d, &b->dcap, b->nd + 1, sizeof *b->d);
    for (size_t i = 0; !rc && i < g.n;) {
        size_t j = i + 1;
        while (j < g.n && g.o[j].term == g.o[i].term)
            j++;
        if ((rc = grow((void **)&b->e, &b->cap, b->n + 1, sizeof *b->e)) ||
            (add && (rc = grow((void **)&b->pos, &b->pos_cap, b->npos + (j - i), sizeof *b->pos))))
            break;
        b->e[b->n++] = (tx_entry){.k = {id, (uint32_t)b->nd}, .term = g.o[i].term,
                                  .pos = (uint32_t)b->npos, .tf = (uint32_t)(j - i),
                                  .add = (uint8_t)(add != 0)};
        if (add)
            for (size_t k = i; k < j; k++)
                b->pos[b->npos++] = g.o[k].pos;
        i = j;
    }
    if (!rc)
        b->d[b->nd++] = (tx_doc){.k = {id, (uint32_t)b->nd}, .add = (uint8_t)(add != 0),
                                 .len = g.n};
    mote__free(g.o);
    return rc;
}

/* ---- keys and blocks ------------------------------------------------------------ */

static size_t post_key(uint8_t *k, const char *term, size_t tlen, uint64_t id)
{
    k[0] = 'p';
    memcpy(k + 1, term, tlen);
    k[1 + tlen] = 0;
    mote__wr_be64(k + 2 + tlen, id);
    return tlen + 10;
}

/* The key of document id's length: 'd' + id (u64 BE), 9 bytes. */
static void doc_key(uint8_t *k, uint64_t id)
{
    k[0] = 'd';
    mote__wr_be64(k + 1, id);
}

/* Is key (of the cursor) a block of term? Its first id into *first. */
static int is_block_of(const mote_val *key, const char *term, size_t tlen, uint64_t *first)
{
    const uint8_t *k = key->data;
    if (key->size != tlen + 10 || k[0] != 'p' || memcmp(k + 1, term, tlen) || k[1 + tlen])
        return 0;
    *first = mote__be64(k + 2 + tlen);
    return 1;
}

/* A decoded posting; its positions in a side array. */
typedef struct post {
    uint64_t id;
    size_t pos;
    uint32_t tf;
} post;

typedef struct postings {
    post *p;
    size_t n, cap;
    uint32_t *pos;
    size_t npos, pos_cap;
    uint8_t *raw;  /* apply_block: a copy of the block's bytes */
    size_t rlen, rcap;
} postings;

static int decode_block(const uint8_t *b, size_t len, uint64_t first, postings *out)
{
    const uint8_t *p = b, *end = b + len;
    uint64_t count, id = first, v;
    unsigned u;
    if (!(u = mote__varint_get(p, end, &count)) || count == 0 || count > len)
        return CORRUPT("text index: a block's count is damaged");
    p += u;
    int rc;
    if ((rc = grow((void **)&out->p, &out->cap, out->n + count, sizeof *out->p)))
        return rc;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t d, tf;
        if (!(u = mote__varint_get(p, end, &d)))
            return CORRUPT("text index: a block is cut short");
        p += u;
        if ((i == 0 && d != 0) || (i > 0 && (d == 0 || id + d < id)))
            return CORRUPT("text index: a block's ids do not ascend");
        id += d;
        if (!(u = mote__varint_get(p, end, &tf)) || tf == 0 || tf > (uint64_t)(end - p))
            return CORRUPT("text index: a posting's count is damaged");
        p += u;
        if ((rc = grow((void **)&out->pos, &out->pos_cap, out->npos + tf, sizeof *out->pos)))
            return rc;
        out->p[out->n++] = (post){id, out->npos, (uint32_t)tf};
        uint64_t at = 0;
        for (uint64_t j = 0; j < tf; j++) {
            if (!(u = mote__varint_get(p, end, &v)) || (j && v == 0) || at + v > UINT32_MAX)
                return CORRUPT("text index: a posting's positions are damaged");
            p += u;
            at += v;
            out->pos[out->npos++] = (uint32_t)at;
        }
    }
    if (p != end)
        return CORRUPT("text index: a block has bytes after its postings");
    return MOTE_OK;
}

static size_t posting_size(const post *p, const uint32_t *pos, uint64_t prev)
{
    size_t n = mote__varint_size(p->id - prev) + mote__varint_size(p->tf);
    for (uint32_t j = 0, at = 0; j < p->tf; j++) {
        n += mote__varint_size(pos[p->pos + j] - at);
        at = pos[p->pos + j];
    }
    return n;
}

static size_t encode_posting(uint8_t *o, const post *p, const uint32_t *pos, uint64_t prev)
{
    size_t n = mote__varint_put(o, p->id - prev);
    n += mote__varint_put(o + n, p->tf);
    for (uint32_t j = 0, at = 0; j < p->tf; j++) {
        n += mote__varint_put(o + n, pos[p->pos + j] - at);
        at = pos[p->pos + j];
    }
    return n;
}

/* The writes of one apply, made at its end as one sorted batch
 * (mote__kv_apply: one descent per leaf, and appended keys fill their
 * leaves where puts one at a time would split them in the middle). Keys
 * and values are copied into buf, each value right after its key; the ops
 * point into it once sealed (buf moves while it grows). */
typedef struct opbuf {
    mote_kvop *ops;
    size_t *off; /* key offset of ops[i] in buf */
    size_t n, cap, ocap;
    uint8_t *buf;
    size_t len, bcap;
} opbuf;

/* Add a put of key (vlen bytes of value to fill at *val) or a delete. */
static int op_add(opbuf *o, const void *key, size_t kl, size_t vlen, int del, uint8_t **val)
{
    int rc;
    if ((rc = grow((void **)&o->ops, &o->cap, o->n + 1, sizeof *o->ops)) ||
        (rc = grow((void **)&o->off, &o->ocap, o->n + 1, sizeof *o->off)) ||
        (rc = grow((void **)&o->buf, &o->bcap, o->len + kl + vlen, 1)))
        return rc;
    memcpy(o->buf + o->len, key, kl);
    o->ops[o->n] = (mote_kvop){.klen = (uint32_t)kl, .del = del, .vlen = vlen};
    o->off[o->n++] = o->len;
    if (val)
        *val = o->buf + o->len + kl;
    o->len += kl + vlen;
    return MOTE_OK;
}

static int cmp_op(const void *x, const void *y)
{
    const mote_kvop *a = x, *b = y;
    int c = memcmp(a->key, b->key, a->klen < b->klen ? a->klen : b->klen);
    return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

/* Make the writes, in key order. A key is written once, except a block
 * whose first posting changed: its old key is deleted, and one of the new
 * blocks may start with the same id again (the put wins). */
static int op_write(mote_txn *t, uint32_t tree, opbuf *o)
{
    for (size_t i = 0; i < o->n; i++) {
        o->ops[i].key = o->buf + o->off[i];
        o->ops[i].val = o->ops[i].del ? NULL : o->buf + o->off[i] + o->ops[i].klen;
    }
    if (o->n)
        qsort(o->ops, o->n, sizeof *o->ops, cmp_op);
    size_t m = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (m && !cmp_op(&o->ops[m - 1], &o->ops[i])) {
            if (!o->ops[m - 1].del && !o->ops[i].del)
                return CORRUPT("text index: a key written twice");
            if (o->ops[m - 1].del)
                o->ops[m - 1] = o->ops[i];
            continue;
        }
        o->ops[m++] = o->ops[i];
    }
    return m ? mote__kv_apply(t, tree, o->ops, m, NULL) : MOTE_OK;
}

/* Write postings ps[0..n) of term as blocks of at most TEXT_BLOCK_MAX
 * bytes (a posting longer than that alone in its block). */
static int write_blocks(opbuf *o, const char *term, size_t tlen, const post *ps, size_t n,
                        const uint32_t *pos)
{
    uint8_t key[KEY_MAX];
    for (size_t i = 0; i < n;) {
        /* how many postings fit, at least one */
        size_t j = i, bytes = 0;
        for (uint64_t prev = ps[i].id; j < n; j++) {
            size_t s = posting_size(&ps[j], pos, prev);
            if (j > i && mote__varint_size(j - i + 1) + bytes + s > TEXT_BLOCK_MAX)
                break;
            bytes += s;
            prev = ps[j].id;
        }
        size_t kl = post_key(key, term, tlen, ps[i].id), len = mote__varint_size(j - i) + bytes;
        uint8_t *v;
        int rc = op_add(o, key, kl, len, 0, &v);
        if (rc)
            return rc;
        size_t at = mote__varint_put(v, j - i);
        for (size_t k = i; k < j; k++)
            at += encode_posting(v + at, &ps[k], pos, k == i ? ps[i].id : ps[k - 1].id);
        i = j;
    }
    return MOTE_OK;
}

/* ---- applying a batch -------------------------------------------------------------- */

/* Entries (of one term) and documents: by document, then in the order
 * noted. */
static int cmp_key(const void *x, const void *y)
{
    const tx_key *a = x, *b = y;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* The batch whose terms are being sorted: qsort has no context argument
 * (qsort_r's differs between glibc and the BSDs). */
static _Thread_local const text_batch *tl_batch;

static int cmp_term(const void *x, const void *y)
{
    const tx_term *a = &tl_batch->t[*(const uint32_t *)x], *b = &tl_batch->t[*(const uint32_t *)y];
    return term_cmp(tl_batch->terms + a->off, a->len, tl_batch->terms + b->off, b->len);
}

/* The batch's entries ordered by term (in key order), then document, then
 * note: a counting sort by the terms' ranks (the distinct terms sorted
 * once), each term's entries sorted apart unless already in order (a
 * transaction's puts mostly come in id order). Into *out (malloc'd). */
static int sort_entries(const text_batch *b, tx_entry **out)
{
    uint32_t *order = mote__malloc((b->nt + 1) * sizeof *order);
    uint32_t *rk = mote__malloc((b->nt + 1) * sizeof *rk); /* a term's rank */
    size_t *start = mote__calloc(b->nt + 2, sizeof *start);
    tx_entry *se = mote__malloc((b->n + 1) * sizeof *se);
    if (!order || !rk || !start || !se) {
        mote__free(order);
        mote__free(rk);
        mote__free(start);
        mote__free(se);
        return mote__err(MOTE_NOMEM, "out of memory indexing text");
    }
    for (uint32_t i = 0; i < b->nt; i++)
        order[i] = i;
    tl_batch = b;
    qsort(order, b->nt, sizeof *order, cmp_term);
    for (uint32_t i = 0; i < b->nt; i++)
        rk[order[i]] = i;
    for (size_t i = 0; i < b->n; i++)
        start[rk[b->e[i].term] + 1]++;
    for (size_t r = 0; r < b->nt; r++)
        start[r + 1] += start[r];
    for (size_t i = 0; i < b->n; i++)
        se[start[rk[b->e[i].term]]++] = b->e[i];
    /* start[r] is now the end of bucket r */
    for (size_t r = 0, from = 0; r < b->nt; from = start[r++]) {
        size_t to = start[r];
        for (size_t i = from + 1; i < to; i++)
            if (cmp_key(&se[i - 1].k, &se[i].k) > 0) {
                qsort(se + from, to - from, sizeof *se, cmp_key);
                break;
            }
    }
    mote__free(rk);
    mote__free(order);
    mote__free(start);
    *out = se;
    return MOTE_OK;
}


static int get_varints(mote_txn *t, uint32_t tree, const void *key, size_t kl, uint64_t *v,
                       int n)
{
    mote_val val;
    for (int i = 0; i < n; i++)
        v[i] = 0;
    int rc = mote_kv_get(t, tree, key, kl, &val);
    if (rc)
        return rc;
    const uint8_t *p = val.data, *end = p + val.size;
    for (int i = 0; i < n; i++) {
        unsigned u = mote__varint_get(p, end, &v[i]);
        if (!u)
            return CORRUPT("text index: a count is damaged");
        p += u;
    }
    return p == end ? MOTE_OK : CORRUPT("text index: a count has extra bytes");
}

static int put_varints(opbuf *o, const void *key, size_t kl, const uint64_t *v, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += mote__varint_size(v[i]);
    uint8_t *p;
    int rc = op_add(o, key, kl, len, 0, &p);
    for (int i = 0; !rc && i < n; i++)
        p += mote__varint_put(p, v[i]);
    return rc;
}

/* A block's posting count, where its postings start and its last id. */
static int block_tail(const uint8_t *b, size_t len, uint64_t first, uint64_t *count,
                      size_t *body, uint64_t *last)
{
    const uint8_t *p = b, *end = b + len;
    uint64_t id = first, d, tf, v;
    unsigned u;
    if (!(u = mote__varint_get(p, end, count)) || *count == 0)
        return CORRUPT("text index: a block's count is damaged");
    p += u;
    *body = u;
    for (uint64_t i = 0; i < *count; i++) {
        if (!(u = mote__varint_get(p, end, &d)))
            return CORRUPT("text index: a block is cut short");
        p += u;
        id += d;
        if (!(u = mote__varint_get(p, end, &tf)))
            return CORRUPT("text index: a block is cut short");
        p += u;
        for (uint64_t j = 0; j < tf; j++) {
            if (!(u = mote__varint_get(p, end, &v)))
                return CORRUPT("text index: a block is cut short");
            p += u;
        }
    }
    *last = id;
    return p == end ? MOTE_OK : CORRUPT("text index: a block has bytes after its postings");
}

/* New documents' postings after all of a block's (the common case: objects
 * get ascending ids): the block's bytes are kept and the new postings
 * appended, without decoding it, if the result still fits. 1: done. */
static int append_block(opbuf *o, const text_batch *b, const tx_entry *e, size_t m,
                        const uint8_t *key, size_t kl, const uint8_t *raw, size_t rlen,
                        uint64_t first, int *done)
{
    *done = 0;
    for (size_t j = 0; j < m; j++)
        if (!e[j].add || (j && e[j].k.id == e[j - 1].k.id))
            return MOTE_OK;
    uint64_t count = 0, last = 0;
    size_t body = 0;
    int rc = block_tail(raw, rlen, first, &count, &body, &last);
    if (rc || e[0].k.id <= last)
        return rc;
    size_t add = 0;
    for (size_t j = 0; j < m; j++) /* an entry is a posting with the batch's positions */
        add += posting_size(&(post){e[j].k.id, e[j].pos, e[j].tf}, b->pos,
                            j ? e[j - 1].k.id : last);
    size_t len = mote__varint_size(count + m) + (rlen - body) + add;
    if (len > TEXT_BLOCK_MAX)
        return MOTE_OK;
    uint8_t *v;
    if ((rc = op_add(o, key, kl, len, 0, &v)))
        return rc;
    size_t at = mote__varint_put(v, count + m);
    memcpy(v + at, raw + body, rlen - body);
    at += rlen - body;
    for (size_t j = 0; j < m; j++)
        at += encode_posting(v + at, &(post){e[j].k.id, e[j].pos, e[j].tf}, b->pos,
                             j ? e[j - 1].k.id : last);
    *done = 1;
    return MOTE_OK;
}

/* Merge the changes e[0..n) (one term, sorted) into the block that holds
 * e[0].id and those after it up to the next block; *used: how many changes
 * it took; *df: the change in the term's document count. */
static int apply_block(mote_cursor *c, opbuf *o, const text_batch *b, const tx_entry *e,
                       size_t n, size_t *used, int64_t *df, postings *old, postings *neu)
{
    const char *term = b->terms + b->t[e[0].term].off;
    size_t tlen = b->t[e[0].term].len;
    uint8_t key[KEY_MAX];
    size_t kl = post_key(key, term, tlen, e[0].k.id);
    mote_val k, v;
    uint64_t first = 0, next = UINT64_MAX;
    int have = 0;
    int rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_LE);
    if (!rc && !(rc = mote_cursor_get(c, &k, NULL)))
        have = is_block_of(&k, term, tlen, &first);
    if (rc && rc != MOTE_NOTFOUND)
        return rc;
    if (!have) { /* before the term's first block, if any */
        rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_GE);
        if (!rc && !(rc = mote_cursor_get(c, &k, NULL)))
            have = is_block_of(&k, term, tlen, &first);
        if (rc && rc != MOTE_NOTFOUND)
            return rc;
    }
    old->n = old->npos = 0;
    if (have) { /* its bytes, kept while the cursor moves on to the next block */
        if ((rc = mote_cursor_get(c, NULL, &v)) ||
            (rc = grow((void **)&old->raw, &old->rcap, v.size + 1, 1)))
            return rc;
        memcpy(old->raw, v.data, v.size);
        old->rlen = v.size;
        rc = mote_cursor_next(c);
        if (!rc && !(rc = mote_cursor_get(c, &k, NULL)) && !is_block_of(&k, term, tlen, &next))
            next = UINT64_MAX;
        if (rc && rc != MOTE_NOTFOUND)
            return rc;
    }
    size_t m = 0;
    while (m < n && e[m].k.id < next)
        m++;
    *used = m;
    if (have && first <= e[0].k.id) {
        int done;
        kl = post_key(key, term, tlen, first);
        if ((rc = append_block(o, b, e, m, key, kl, old->raw, old->rlen, first, &done)))
            return rc;
        if (done) {
            *df += (int64_t)m; /* new documents, one entry each */
            return MOTE_OK;
        }
    }
    if (have && (rc = decode_block(old->raw, old->rlen, first, old)))
        return rc;
    /* merge old postings with changes e[0..m): both ascend by id */
    neu->n = 0;
    neu->npos = 0;
    size_t i = 0, j = 0;
    while (i < old->n || j < m) {
        if (j < m && (i == old->n || e[j].k.id <= old->p[i].id)) {
            /* the changes of one document: what counts is whether it held
             * the term before them (their first one removes it) and after
             * them (their last one adds it, with its positions) */
            size_t g = j + 1;
            while (g < m && e[g].k.id == e[j].k.id)
                g++;
            int present = i < old->n && old->p[i].id == e[j].k.id, was = !e[j].add;
            if (was != present)
                return CORRUPT(present ? "text index: a document's term is indexed twice"
                                       : "text index: a removed document's term has no "
                                         "posting");
            i += present;
            const tx_entry *last = &e[g - 1];
            if (last->add) {
                if ((rc = grow((void **)&neu->p, &neu->cap, neu->n + 1, sizeof *neu->p)) ||
                    (rc = grow((void **)&neu->pos, &neu->pos_cap, neu->npos + last->tf,
                               sizeof *neu->pos)))
                    return rc;
                memcpy(neu->pos + neu->npos, b->pos + last->pos, last->tf * sizeof *neu->pos);
                neu->p[neu->n++] = (post){last->k.id, neu->npos, last->tf};
                neu->npos += last->tf;
            }
            *df += last->add - was;
            j = g;
        } else {
            const post *o = &old->p[i++];
            if ((rc = grow((void **)&neu->p, &neu->cap, neu->n + 1, sizeof *neu->p)) ||
                (rc = grow((void **)&neu->pos, &neu->pos_cap, neu->npos + o->tf,
                           sizeof *neu->pos)))
                return rc;
            memcpy(neu->pos + neu->npos, old->pos + o->pos, o->tf * sizeof *neu->pos);
            neu->p[neu->n++] = (post){o->id, neu->npos, o->tf};
            neu->npos += o->tf;
        }
    }
    if (have && (!neu->n || neu->p[0].id != first)) {
        kl = post_key(key, term, tlen, first);
        if ((rc = op_add(o, key, kl, 0, 1, NULL)))
            return rc;
    }
    return write_blocks(o, term, tlen, neu->p, neu->n, neu->pos);
}

int mote__text_apply(mote_txn *t, uint32_t tree, text_batch *b)
{
    int rc = MOTE_OK;
    mote_cursor *c = NULL;
    postings old = {0}, neu = {0};
    opbuf o = {0};
    uint8_t key[KEY_MAX];
    uint64_t tot[2];
    if (!b->nd)
        return MOTE_OK;
    if ((rc = get_varints(t, tree, "s", 1, tot, 2)) == MOTE_NOTFOUND)
        rc = MOTE_OK;
    qsort(b->d, b->nd, sizeof *b->d, cmp_key);
    for (size_t i = 0, g; !rc && i < b->nd; i = g) {
        /* one document's notes, in order: the first says whether it was
         * indexed (a removal, with the length it was indexed with), the
         * last whether it is now */
        const tx_doc *first = &b->d[i], *last;
        for (g = i + 1; g < b->nd && b->d[g].k.id == first->k.id; g++)
            ;
        last = &b->d[g - 1];
        uint64_t len = 0;
        doc_key(key, first->k.id);
        int exists = (rc = get_varints(t, tree, key, 9, &len, 1)) == MOTE_OK;
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        if (!rc && !first->add && (!exists || len != first->len))
            rc = CORRUPT("text index: a removed document is not in it as noted");
        if (!rc && first->add && exists)
            rc = CORRUPT("text index: an added document is in it already");
        if (rc)
            break;
        if (exists) {
            tot[0]--;
            tot[1] -= len;
        }
        if (last->add) {
            tot[0]++;
            tot[1] += last->len;
            rc = put_varints(&o, key, 9, &last->len, 1);
        } else if (exists) {
            rc = op_add(&o, key, 9, 0, 1, NULL);
        }
    }
    if (!rc)
        rc = tot[0] ? put_varints(&o, "s", 1, tot, 2) : op_add(&o, "s", 1, 0, 1, NULL);
    tx_entry *se = NULL;
    if (!rc && b->n && !(rc = sort_entries(b, &se)))
        rc = mote_cursor_open(t, tree, &c);
    for (size_t i = 0; !rc && i < b->n;) {
        const char *term = b->terms + b->t[se[i].term].off;
        size_t tlen = b->t[se[i].term].len, j = i + 1;
        while (j < b->n && se[j].term == se[i].term)
            j++;
        int64_t df = 0;
        for (size_t k = i, used = 0; !rc && k < j; k += used)
            rc = apply_block(c, &o, b, se + k, j - k, &used, &df, &old, &neu);
        if (!rc && df) {
            uint64_t have;
            key[0] = 't';
            memcpy(key + 1, term, tlen);
            if ((rc = get_varints(t, tree, key, 1 + tlen, &have, 1)) == MOTE_NOTFOUND)
                rc = MOTE_OK;
            if (!rc && (int64_t)have + df < 0)
                rc = CORRUPT("text index: a term's document count is too low");
            have += (uint64_t)df;
            if (!rc)
                rc = have ? put_varints(&o, key, 1 + tlen, &have, 1)
                          : op_add(&o, key, 1 + tlen, 0, 1, NULL);
        }
        i = j;
    }
    mote_cursor_close(c);
    mote__free(se);
    if (!rc)
        rc = op_write(t, tree, &o);
    mote__free(o.ops);
    mote__free(o.off);
    mote__free(o.buf);
    mote__free(old.p);
    mote__free(old.pos);
    mote__free(old.raw);
    mote__free(neu.p);
    mote__free(neu.pos);
    mote__text_batch_clear(b);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

int mote__text_each(mote_txn *t, uint32_t tree,
                    int (*fn)(void *ctx, const char *term, size_t tlen, uint64_t id,
                              const uint32_t *pos, uint32_t tf),
                    void *ctx)
{
    mote_cursor *c;
    postings ps = {0};
    int rc = mote_cursor_open(t, tree, &c);
    if (rc)
        return rc;
    for (rc = mote_cursor_seek(c, "p", 1, MOTE_SEEK_GE); !rc; rc = mote_cursor_next(c)) {
        mote_val k, v;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        const uint8_t *kp = k.data;
        if (!k.size || kp[0] != 'p')
            break;
        if (k.size < 11 || kp[k.size - 9] != 0) {
            rc = CORRUPT("text index: a block's key is damaged");
            break;
        }
        size_t tlen = k.size - 10;
        ps.n = ps.npos = 0;
        if ((rc = decode_block(v.data, v.size, mote__be64(kp + k.size - 8), &ps)))
            break;
        char term[MOTE_TOKEN_MAX];
        memcpy(term, kp + 1, tlen < sizeof term ? tlen : sizeof term);
        for (size_t i = 0; !rc && i < ps.n; i++)
            rc = fn(ctx, term, tlen, ps.p[i].id, ps.pos + ps.p[i].pos, ps.p[i].tf);
        if (rc)
            break;
    }
    mote_cursor_close(c);
    mote__free(ps.p);
    mote__free(ps.pos);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

/* A posting of the search: document, query term, tf. */
/* BM25 (text.c's opening comment): a unit's idf from its document count df
 * among tot[0] documents; document id's length norm, k1 (1 - b + b dl /
 * avgdl); one unit's part of a score. */
static double bm25_idf(const uint64_t tot[2], double df)
{
    double x = log(((double)tot[0] - df + 0.5) / (df + 0.5));
    return x > 0 ? x : 1e-6;
}

/* A document's length in tokens over the n trees (one: it must have one;
 * several: 0 where a property has no text). */
static int doc_length(mote_txn *t, const uint32_t *trees, unsigned n, uint64_t id, double *dl)
{
    uint8_t key[9];
    doc_key(key, id);
    *dl = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t v;
        int rc = get_varints(t, trees[i], key, 9, &v, 1);
        if (rc == MOTE_NOTFOUND && n > 1)
            continue;
        if (rc == MOTE_NOTFOUND)
            rc = CORRUPT("text index: a document with postings has no length");
        if (rc)
            return rc;
        *dl += (double)v;
    }
    return MOTE_OK;
}

/* BM25's length term of a document of dl tokens: k1 * (1 - b + b * dl / avgdl). */
static double bm25_len(double dl, const uint64_t tot[2])
{
    double avgdl = tot[0] ? (double)tot[1] / (double)tot[0] : 1;
    return TEXT_K1 * (1 - TEXT_B + TEXT_B * dl / avgdl);
}

static int bm25_norm(mote_txn *t, uint32_t tree, uint64_t id, const uint64_t tot[2],
                     double *norm)
{
    double dl;
    int rc = doc_length(t, &tree, 1, id, &dl);
    *norm = bm25_len(dl, tot);
    return rc;
}

static double bm25_part(double idf, double tf, double norm)
{
    return idf * (tf * (TEXT_K1 + 1)) / (tf + norm);
}

typedef struct hit {
    uint64_t id;
    uint32_t term, tf;
} hit;

static int cmp_hit(const void *x, const void *y)
{
    const hit *a = x, *b = y;
    return a->id != b->id ? (a->id < b->id ? -1 : 1) : (a->term > b->term) - (a->term < b->term);
}

typedef struct scored {
    uint64_t id;
    double score;
} scored;

static int cmp_scored(const void *x, const void *y)
{
    const scored *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

typedef struct qterms {
    char (*t)[MOTE_TOKEN_MAX];
    uint32_t *len;
    size_t n, cap, lcap;
} qterms;

static int qterms_push(qterms *q, const char *token, size_t len)
{
    int rc;
    if ((rc = grow((void **)&q->t, &q->cap, q->n + 1, sizeof *q->t)) ||
        (rc = grow((void **)&q->len, &q->lcap, q->n + 1, sizeof *q->len)))
        return rc;
    memcpy(q->t[q->n], token, len);
    q->len[q->n++] = (uint32_t)len;
    return 0;
}

static int add_qterm(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                     size_t end)
{
    (void)pos, (void)start, (void)end;
    qterms *q = ctx;
    for (size_t i = 0; i < q->n; i++)
        if (q->len[i] == len && !memcmp(q->t[i], token, len))
            return 0;
    return qterms_push(q, token, len);
}

/* Every posting of term, with positions, into ps (ascending ids). */
static int postings_all(mote_cursor *c, const char *term, size_t tlen, postings *ps)
{
    uint8_t key[KEY_MAX];
    size_t kl = post_key(key, term, tlen, 0);
    int rc;
    ps->n = ps->npos = 0;
    for (rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_GE); !rc; rc = mote_cursor_next(c)) {
        mote_val kv, vv;
        uint64_t first;
        if ((rc = mote_cursor_get(c, &kv, &vv)))
            break;
        if (!is_block_of(&kv, term, tlen, &first))
            break;
        if ((rc = decode_block(vv.data, vv.size, first, ps)))
            break;
    }
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

/* Append to h every posting of term (query term number qi). */
static int hits_all(mote_cursor *c, const char *term, size_t tlen, uint32_t qi, hit **h,
                    size_t *nh, size_t *hcap, postings *ps)
{
    int rc = postings_all(c, term, tlen, ps);
    if (!rc)
        rc = grow((void **)h, hcap, *nh + ps->n, sizeof **h);
    for (size_t j = 0; !rc && j < ps->n; j++)
        (*h)[(*nh)++] = (hit){ps->p[j].id, qi, ps->p[j].tf};
    return rc;
}

/* Append to h the postings of term (query term number qi) for the documents
 * cand[0..nc) (ascending) that hold it, reading only the blocks that may
 * hold them; *kept: how many do. For an AND query: the candidates are the
 * documents holding every rarer term. */
static int hits_among(mote_cursor *c, const char *term, size_t tlen, uint32_t qi,
                      const uint64_t *cand, size_t nc, hit **h, size_t *nh, size_t *hcap,
                      postings *ps, size_t *kept)
{
    uint8_t key[KEY_MAX];
    uint64_t first = 0, next = 0; /* the decoded block holds ids in [first, next) */
    int loaded = 0, rc = MOTE_OK;
    *kept = 0;
    for (size_t i = 0; !rc && i < nc; i++) {
        uint64_t id = cand[i];
        if (!loaded || id < first || id >= next) {
            mote_val k, v;
            size_t kl = post_key(key, term, tlen, id);
            ps->n = ps->npos = 0;
            loaded = 1;
            first = id;
            next = id + 1; /* no block: nothing up to here */
            if ((rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_LE)) == MOTE_NOTFOUND) {
                rc = MOTE_OK;
                continue;
            }
            if (rc || (rc = mote_cursor_get(c, &k, &v)))
                break;
            if (!is_block_of(&k, term, tlen, &first)) {
                first = id;
                continue;
            }
            if ((rc = decode_block(v.data, v.size, first, ps)))
                break;
            next = UINT64_MAX;
            if (!(rc = mote_cursor_next(c)) && !(rc = mote_cursor_get(c, &k, NULL)) &&
                !is_block_of(&k, term, tlen, &next))
                next = UINT64_MAX;
            if (rc == MOTE_NOTFOUND)
                rc = MOTE_OK;
        }
        size_t lo = 0, hi = ps->n; /* binary search of the block's ids */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ps->p[mid].id < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < ps->n && ps->p[lo].id == id) {
            if ((rc = grow((void **)h, hcap, *nh + 1, sizeof **h)))
                break;
            (*h)[(*nh)++] = (hit){id, qi, ps->p[lo].tf};
            ++*kept;
        }
    }
    return rc;
}

/* ---- the query language ------------------------------------------------------------
 *
 * A query text without syntax (no quote, parenthesis, star or upper-case
 * AND / OR / NOT word) is a list of words: the fast paths above. Otherwise
 * it is parsed:
 *
 *   or      := and ( "OR" and | and )*      the second form when the
 *   and     := not ( "AND" not | not )*     implicit operator is OR (the
 *   not     := primary ( "NOT" primary )*   default) or AND (MOTE_MATCH_ALL)
 *   primary := "(" or ")" | '"' phrase '"' | word | word "*"
 *
 * NOT binds tightest, then AND, then OR; "a NOT b": a and not b. A word
 * that tokenizes into several tokens is those tokens written apart; one
 * that gives none (punctuation) is left out. A phrase matches its tokens
 * at consecutive positions; "pre*" any term that starts with the token of
 * pre. Each phrase, word and prefix is scored as one unit, as FTS5 does:
 * its tf is its number of matches in the text, its df the texts it matches
 * (so BM25 equals FTS5's bm25() for the same query); a unit right of a NOT
 * scores nothing.
 */
enum { QL_TERM, QL_PREFIX, QL_PHRASE, QL_AND, QL_OR, QL_NOT };
enum { LX_END, LX_WORD, LX_PREFIX, LX_PHRASE, LX_LPAREN, LX_RPAREN, LX_AND, LX_OR, LX_NOT };

typedef struct qlnode {
    int kind, a, b;      /* operators: the operands' nodes */
    uint32_t tok, ntok;  /* units: their tokens in the parse's table */
} qlnode;

typedef struct qlparse {
    const char *s;
    size_t len, at;      /* the text, the lexer's position */
    int all;             /* the implicit operator: AND (1) or OR (0) */
    unsigned tok;        /* mote_tokenize's flags for words and phrases (stemming) */
    int lx;              /* the current lexeme, its text [ls, le) */
    size_t ls, le;
    qlnode *n;
    size_t nn, ncap;
    qterms tk;           /* the units' tokens, in order */
    int rc;
} qlparse;

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int lex_word_end(char c)
{
    return is_space(c) || c == '(' || c == ')' || c == '"';
}

/* The next lexeme into p->lx, p->ls, p->le; an error sets p->rc. */
static void lex(qlparse *p)
{
    while (p->at < p->len && is_space(p->s[p->at]))
        p->at++;
    p->ls = p->at;
    if (p->at == p->len) {
        p->lx = LX_END;
        p->le = p->at;
        return;
    }
    char c = p->s[p->at];
    if (c == '(' || c == ')') {
        p->lx = c == '(' ? LX_LPAREN : LX_RPAREN;
        p->le = ++p->at;
        return;
    }
    if (c == '"') {
        const char *close = memchr(p->s + p->at + 1, '"', p->len - p->at - 1);
        if (!close) {
            p->rc = mote__err(MOTE_INVALID, "match query: a quote at %zu is not closed", p->at);
            p->lx = LX_END;
            return;
        }
        p->lx = LX_PHRASE;
        p->ls = p->at + 1;
        p->le = (size_t)(close - p->s);
        p->at = p->le + 1;
        return;
    }
    size_t e = p->at;
    while (e < p->len && !lex_word_end(p->s[e]))
        e++;
    p->le = e;
    p->at = e;
    size_t n = e - p->ls;
    const char *w = p->s + p->ls;
    p->lx = n == 3 && !memcmp(w, "AND", 3)   ? LX_AND
            : n == 2 && !memcmp(w, "OR", 2)  ? LX_OR
            : n == 3 && !memcmp(w, "NOT", 3) ? LX_NOT
            : w[n - 1] == '*'                ? LX_PREFIX
                                             : LX_WORD;
    if (p->lx == LX_PREFIX)
        p->le--;
    for (size_t i = p->ls; p->lx >= LX_WORD && p->lx <= LX_PREFIX && i < p->le; i++)
        if (p->s[i] == '*') {
            p->rc = mote__err(MOTE_INVALID, "match query: a star inside a word at %zu "
                              "(a prefix is word*)", i);
            p->lx = LX_END;
            return;
        }
}

static int ql_node(qlparse *p, int kind, int a, int b, uint32_t tok, uint32_t ntok)
{
    if (p->rc || (p->rc = grow((void **)&p->n, &p->ncap, p->nn + 1, sizeof *p->n)))
        return -1;
    p->n[p->nn] = (qlnode){kind, a, b, tok, ntok};
    return (int)p->nn++;
}

/* Combine a and b (-1: nothing, as for punctuation) by op. */
static int ql_join(qlparse *p, int op, int a, int b)
{
    if (a < 0)
        return op == QL_NOT ? -1 : b;
    if (b < 0)
        return a;
    return ql_node(p, op, a, b, 0, 0);
}

static int ql_token(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                    size_t end)
{
    (void)pos, (void)start, (void)end;
    return qterms_push(&((qlparse *)ctx)->tk, token, len);
}

static int ql_or(qlparse *p);

/* A word, a prefix or a phrase at the current lexeme. */
static int ql_unit(qlparse *p)
{
    int kind = p->lx;
    size_t first = p->tk.n, at = p->ls;
    /* a prefix is matched as written: its stem would be another word */
    if ((p->rc = mote_tokenize(p->s + p->ls, p->le - p->ls, kind == LX_PREFIX ? 0 : p->tok,
                               ql_token, p)))
        return -1;
    lex(p);
    size_t n = p->tk.n - first;
    if (kind == LX_PHRASE && n)
        return ql_node(p, n == 1 ? QL_TERM : QL_PHRASE, -1, -1, (uint32_t)first, (uint32_t)n);
    if (kind == LX_PREFIX) {
        if (n != 1) {
            p->rc = mote__err(MOTE_INVALID, "match query: a prefix at %zu must be one word", at);
            return -1;
        }
        return ql_node(p, QL_PREFIX, -1, -1, (uint32_t)first, 1);
    }
    int e = -1; /* a word of several tokens: each a word, joined by the implicit operator */
    for (size_t i = first; i < p->tk.n; i++)
        e = ql_join(p, p->all ? QL_AND : QL_OR, e,
                    ql_node(p, QL_TERM, -1, -1, (uint32_t)i, 1));
    return e;
}

static int ql_primary(qlparse *p)
{
    if (p->rc)
        return -1;
    if (p->lx == LX_LPAREN) {
        lex(p);
        int e = ql_or(p);
        if (!p->rc && p->lx != LX_RPAREN)
            p->rc = mote__err(MOTE_INVALID, "match query: expected ) at %zu", p->ls);
        lex(p);
        return e;
    }
    if (p->lx == LX_WORD || p->lx == LX_PREFIX || p->lx == LX_PHRASE)
        return ql_unit(p);
    p->rc = mote__err(MOTE_INVALID, "match query: expected a word, a \"phrase\" or ( at %zu%s",
                      p->ls, p->lx == LX_END ? " (the end)" : "");
    return -1;
}

static int starts_primary(int lx)
{
    return lx == LX_WORD || lx == LX_PREFIX || lx == LX_PHRASE || lx == LX_LPAREN;
}

static int ql_not(qlparse *p)
{
    int e = ql_primary(p);
    while (!p->rc && p->lx == LX_NOT) {
        lex(p);
        e = ql_join(p, QL_NOT, e, ql_primary(p));
    }
    return e;
}

static int ql_and(qlparse *p)
{
    int e = ql_not(p);
    while (!p->rc && (p->lx == LX_AND || (p->all && starts_primary(p->lx)))) {
        if (p->lx == LX_AND)
            lex(p);
        e = ql_join(p, QL_AND, e, ql_not(p));
    }
    return e;
}

static int ql_or(qlparse *p)
{
    int e = ql_and(p);
    while (!p->rc && (p->lx == LX_OR || (!p->all && starts_primary(p->lx)))) {
        if (p->lx == LX_OR)
            lex(p);
        e = ql_join(p, QL_OR, e, ql_and(p));
    }
    return e;
}

/* Parse q into p (free with ql_free); *root: its root node, -1 if it has
 * no words. MOTE_INVALID with the position of the first error. */
static int ql_parse(qlparse *p, const char *q, size_t len, int all, int *root)
{
    memset(p, 0, sizeof *p);
    p->s = q;
    p->len = len;
    p->all = all & MOTE_MATCH_ALL;
    p->tok = (unsigned)all & MOTE_TOKEN_STEM;
    lex(p);
    *root = ql_or(p);
    if (!p->rc && p->lx != LX_END)
        p->rc = mote__err(MOTE_INVALID, "match query: unexpected %s at %zu",
                          p->lx == LX_RPAREN ? ")" : "word", p->ls);
    return p->rc;
}

static void ql_free(qlparse *p)
{
    mote__free(p->n);
    mote__free(p->tk.t);
    mote__free(p->tk.len);
}

/* Does the query text use the language (else: a list of words)? */
static int ql_syntax(const char *q, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = q[i];
        if (c == '"' || c == '(' || c == ')' || c == '*')
            return 1;
        if ((i == 0 || is_space(q[i - 1])) && (c == 'A' || c == 'O' || c == 'N')) {
            size_t e = i;
            while (e < len && !is_space(q[e]))
                e++;
            if ((e - i == 3 && (!memcmp(q + i, "AND", 3) || !memcmp(q + i, "NOT", 3))) ||
                (e - i == 2 && !memcmp(q + i, "OR", 2)))
                return 1;
        }
    }
    return 0;
}

int mote_match_check(const char *q, size_t len, unsigned flags)
{
    if (!q && len)
        return mote__err(MOTE_INVALID, "mote_match_check: text is NULL");
    return mote__text_query_check(q, len, (flags & MOTE_MATCH_ALL) != 0);
}

int mote__text_query_check(const char *q, size_t len, int all)
{
    if (!ql_syntax(q, len))
        return MOTE_OK;
    qlparse p;
    int root, rc = ql_parse(&p, q, len, all, &root);
    ql_free(&p);
    return rc;
}

/* A unit's matches: documents ascending, each with its tf. */
typedef struct umatch {
    uint64_t *id;
    uint32_t *tf;
    double *wf;  /* several properties: the weighted counts (tf unused) */
    size_t n, cap, tcap, wcap;
    double idf;
    int scored;  /* not right of a NOT */
} umatch;

static int um_add(umatch *u, uint64_t id, uint32_t tf);

/* A unit's matches in each of n properties (part[i], ascending) into u:
 * each document once, with the sum of w[i] times its count in property i
 * (FTS5's bm25() with column weights: a hit counts its column's weight). */
static int um_merge(umatch *u, const umatch *part, unsigned n, const double *w)
{
    size_t at[TEXT_MATCH_MAX] = {0};
    for (;;) {
        uint64_t lo = UINT64_MAX;
        for (unsigned i = 0; i < n; i++)
            if (at[i] < part[i].n && part[i].id[at[i]] < lo)
                lo = part[i].id[at[i]];
        if (lo == UINT64_MAX)
            return MOTE_OK;
        double f = 0;
        for (unsigned i = 0; i < n; i++)
            if (at[i] < part[i].n && part[i].id[at[i]] == lo)
                f += w[i] * part[i].tf[at[i]++];
        int rc = um_add(u, lo, 0);
        if (!rc)
            rc = grow((void **)&u->wf, &u->wcap, u->n, sizeof *u->wf);
        if (rc)
            return rc;
        u->wf[u->n - 1] = f;
    }
}

static void um_free(umatch *u)
{
    mote__free(u->id);
    mote__free(u->tf);
    mote__free(u->wf);
    memset(u, 0, sizeof *u);
}

static int um_add(umatch *u, uint64_t id, uint32_t tf)
{
    int rc;
    if ((rc = grow((void **)&u->id, &u->cap, u->n + 1, sizeof *u->id)) ||
        (rc = grow((void **)&u->tf, &u->tcap, u->n + 1, sizeof *u->tf)))
        return rc;
    u->id[u->n] = id;
    u->tf[u->n++] = tf;
    return MOTE_OK;
}

static int cmp_hit_id(const void *x, const void *y)
{
    const hit *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* The matches of a unit (a term, a prefix or a phrase) into u. */
static int unit_matches(mote_txn *t, uint32_t tree, mote_cursor *c, const qlparse *p,
                        const qlnode *nd, umatch *u)
{
    int rc = MOTE_OK;
    if (nd->kind == QL_TERM) {
        postings ps = {0};
        rc = postings_all(c, p->tk.t[nd->tok], p->tk.len[nd->tok], &ps);
        for (size_t i = 0; !rc && i < ps.n; i++)
            rc = um_add(u, ps.p[i].id, ps.p[i].tf);
        mote__free(ps.p);
        mote__free(ps.pos);
        return rc;
    }
    if (nd->kind == QL_PREFIX) { /* every term from the prefix on that starts with it */
        const char *pre = p->tk.t[nd->tok];
        size_t pl = p->tk.len[nd->tok];
        uint8_t key[KEY_MAX];
        char term[MOTE_TOKEN_MAX];
        hit *h = NULL;
        size_t nh = 0, hcap = 0;
        postings ps = {0};
        key[0] = 't';
        memcpy(key + 1, pre, pl);
        mote_cursor *tc;
        if ((rc = mote_cursor_open(t, tree, &tc)))
            return rc;
        for (rc = mote_cursor_seek(tc, key, 1 + pl, MOTE_SEEK_GE); !rc; rc = mote_cursor_next(tc)) {
            mote_val k;
            if ((rc = mote_cursor_get(tc, &k, NULL)))
                break;
            const uint8_t *kp = k.data;
            if (k.size < 1 + pl || kp[0] != 't' || memcmp(kp + 1, pre, pl) ||
                k.size - 1 > MOTE_TOKEN_MAX)
                break;
            memcpy(term, kp + 1, k.size - 1);
            if ((rc = hits_all(c, term, k.size - 1, 0, &h, &nh, &hcap, &ps)))
                break;
        }
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        mote_cursor_close(tc);
        if (!rc && nh) { /* one match per document: the terms' counts added up */
            qsort(h, nh, sizeof *h, cmp_hit_id);
            for (size_t i = 0, j; !rc && i < nh; i = j) {
                uint32_t tf = 0;
                for (j = i; j < nh && h[j].id == h[i].id; j++)
                    tf += h[j].tf;
                rc = um_add(u, h[i].id, tf);
            }
        }
        mote__free(h);
        mote__free(ps.p);
        mote__free(ps.pos);
        return rc;
    }
    /* a phrase: its tokens at consecutive positions */
    uint32_t m = nd->ntok;
    postings *ps = mote__calloc(m, sizeof *ps);
    size_t *at = mote__calloc(m, sizeof *at);
    if (!ps || !at)
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    for (uint32_t j = 0; !rc && j < m; j++)
        rc = postings_all(c, p->tk.t[nd->tok + j], p->tk.len[nd->tok + j], &ps[j]);
    for (size_t i = 0; !rc && i < (m ? ps[0].n : 0); i++) {
        uint64_t id = ps[0].p[i].id;
        const post *pj[64];
        int all = m <= 64;
        for (uint32_t j = 1; all && j < m; j++) {
            while (at[j] < ps[j].n && ps[j].p[at[j]].id < id)
                at[j]++;
            all = at[j] < ps[j].n && ps[j].p[at[j]].id == id;
            if (all)
                pj[j] = &ps[j].p[at[j]];
        }
        if (!all)
            continue;
        uint32_t tf = 0;
        const uint32_t *p0 = ps[0].pos + ps[0].p[i].pos;
        for (uint32_t x = 0; x < ps[0].p[i].tf; x++) {
            int ok = 1;
            for (uint32_t j = 1; ok && j < m; j++) {
                const uint32_t *pp = ps[j].pos + pj[j]->pos;
                size_t lo = 0, hi = pj[j]->tf;
                uint64_t want = (uint64_t)p0[x] + j;
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (pp[mid] < want)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                ok = lo < pj[j]->tf && pp[lo] == want;
            }
            tf += (uint32_t)ok;
        }
        if (tf)
            rc = um_add(u, id, tf);
    }
    for (uint32_t j = 0; ps && j < m; j++) {
        mote__free(ps[j].p);
        mote__free(ps[j].pos);
    }
    mote__free(ps);
    mote__free(at);
    return rc;
}

/* The documents node e matches (ascending) into *out of *n; the units'
 * matches computed once into u (by node). */
static int eval_node(const qlparse *p, int e, umatch *u, int scored, uint64_t **out, size_t *n)
{
    const qlnode *nd = &p->n[e];
    *out = NULL;
    *n = 0;
    if (nd->kind <= QL_PHRASE) {
        u[e].scored |= scored;
        *out = mote__malloc((u[e].n + 1) * sizeof **out);
        if (!*out)
            return mote__err(MOTE_NOMEM, "out of memory searching text");
        if (u[e].n) /* (a unit without matches has no array) */
            memcpy(*out, u[e].id, u[e].n * sizeof **out);
        *n = u[e].n;
        return MOTE_OK;
    }
    uint64_t *a, *b;
    size_t na, nb;
    int rc = eval_node(p, nd->a, u, scored, &a, &na);
    if (!rc)
        rc = eval_node(p, nd->b, u, nd->kind == QL_NOT ? 0 : scored, &b, &nb);
    else
        b = NULL;
    uint64_t *r = rc ? NULL : mote__malloc((na + nb + 1) * sizeof *r);
    if (!rc && !r)
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    size_t i = 0, j = 0, k = 0;
    while (!rc && (i < na || j < nb)) {
        int take_a = j == nb || (i < na && a[i] < b[j]), both = i < na && j < nb && a[i] == b[j];
        if (both) {
            if (nd->kind != QL_NOT)
                r[k++] = a[i];
            i++, j++;
        } else if (take_a) {
            if (nd->kind != QL_AND)
                r[k++] = a[i];
            i++;
        } else {
            if (nd->kind == QL_OR)
                r[k++] = b[j];
            j++;
        }
    }
    mote__free(a);
    mote__free(b);
    if (rc) {
        mote__free(r);
        return rc;
    }
    *out = r;
    *n = k;
    return MOTE_OK;
}

/* A query in the language over the n trees (FTS5's columns; w: their
 * weights, NULL for one tree unweighted): the documents its expression
 * matches, scored by its units (see above); tot: documents (with a text in
 * any of them) and tokens (in all). */
static int search_expr(mote_txn *t, const uint32_t *trees, const double *w, unsigned nt,
                       const char *q, size_t qlen, int all, const uint64_t tot[2], scored **out,
                       size_t *nout)
{
    qlparse p;
    int root;
    umatch *u = NULL;
    uint64_t *docs = NULL;
    size_t nd = 0, ns = 0;
    mote_cursor *c[TEXT_MATCH_MAX] = {0};
    scored *sc = NULL;
    int rc = ql_parse(&p, q, qlen, all, &root);
    if (!rc && root >= 0 && !(u = mote__calloc(p.nn, sizeof *u)))
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    for (unsigned j = 0; !rc && root >= 0 && j < nt; j++)
        rc = mote_cursor_open(t, trees[j], &c[j]);
    for (size_t i = 0; !rc && root >= 0 && i < p.nn; i++) {
        if (p.n[i].kind > QL_PHRASE)
            continue;
        if (!w) {
            rc = unit_matches(t, trees[0], c[0], &p, &p.n[i], &u[i]);
        } else { /* its matches in each property, merged */
            umatch part[TEXT_MATCH_MAX] = {0};
            for (unsigned j = 0; !rc && j < nt; j++)
                rc = unit_matches(t, trees[j], c[j], &p, &p.n[i], &part[j]);
            if (!rc)
                rc = um_merge(&u[i], part, nt, w);
            for (unsigned j = 0; j < nt; j++)
                um_free(&part[j]);
        }
        u[i].idf = bm25_idf(tot, (double)u[i].n);
    }
    if (!rc && root >= 0)
        rc = eval_node(&p, root, u, 1, &docs, &nd);
    if (!rc && nd && !(sc = mote__malloc(nd * sizeof *sc)))
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    for (size_t i = 0; !rc && i < nd; i++) {
        double s = 0, dl;
        if ((rc = doc_length(t, trees, nt, docs[i], &dl)))
            break;
        double norm = bm25_len(dl, tot);
        for (size_t x = 0; x < p.nn; x++) {
            if (p.n[x].kind > QL_PHRASE || !u[x].scored)
                continue;
            size_t lo = 0, hi = u[x].n;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (u[x].id[mid] < docs[i])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < u[x].n && u[x].id[lo] == docs[i])
                s += bm25_part(u[x].idf, u[x].wf ? u[x].wf[lo] : u[x].tf[lo], norm);
        }
        sc[ns++] = (scored){docs[i], s};
    }
    for (unsigned j = 0; j < nt; j++)
        mote_cursor_close(c[j]);
    for (size_t i = 0; u && i < p.nn; i++)
        um_free(&u[i]);
    mote__free(u);
    mote__free(docs);
    ql_free(&p);
    if (rc) {
        mote__free(sc);
        return rc;
    }
    *out = sc;
    *nout = ns;
    return MOTE_OK;
}

/* sc[0..ns) by score, best first, into the malloc'd arrays of a search's
 * result. */
static int ranked_out(scored *sc, size_t ns, uint64_t **ids, double **scores, size_t *n)
{
    if (ns) /* (none: sc may be NULL) */
        qsort(sc, ns, sizeof *sc, cmp_scored);
    uint64_t *oi = mote__malloc((ns + 1) * sizeof *oi);
    double *os = mote__malloc((ns + 1) * sizeof *os);
    if (!oi || !os) {
        mote__free(oi);
        mote__free(os);
        return mote__err(MOTE_NOMEM, "out of memory searching text");
    }
    for (size_t i = 0; i < ns; i++) {
        oi[i] = sc[i].id;
        os[i] = sc[i].score;
    }
    *ids = oi;
    *scores = os;
    *n = ns;
    return MOTE_OK;
}

/* The document at cursor c after a step that returned r: *id, or
 * UINT64_MAX past the documents ("d" keys). */
static int doc_at(mote_cursor *c, int r, uint64_t *id)
{
    *id = UINT64_MAX;
    if (r == MOTE_NOTFOUND)
        return MOTE_OK;
    mote_val k;
    if (r || (r = mote_cursor_get(c, &k, NULL)))
        return r;
    const uint8_t *kp = k.data;
    if (k.size && kp[0] == 'd' && k.size != 9)
        return CORRUPT("text index: a document key of %zu bytes", k.size);
    if (k.size == 9 && kp[0] == 'd')
        *id = mote__be64(kp + 1);
    return MOTE_OK;
}

/* How many documents any of the n trees holds: their "d" keys merged. */
static int docs_in_any(mote_txn *t, const uint32_t *trees, unsigned n, uint64_t *count)
{
    mote_cursor *c[TEXT_MATCH_MAX] = {0};
    uint64_t at[TEXT_MATCH_MAX];
    int rc = MOTE_OK;
    *count = 0;
    for (unsigned i = 0; i < n; i++)
        at[i] = UINT64_MAX;
    for (unsigned i = 0; !rc && i < n; i++)
        if (!(rc = mote_cursor_open(t, trees[i], &c[i])))
            rc = doc_at(c[i], mote_cursor_seek(c[i], "d", 1, MOTE_SEEK_GE), &at[i]);
    while (!rc) {
        uint64_t lo = UINT64_MAX;
        for (unsigned i = 0; i < n; i++)
            if (at[i] < lo)
                lo = at[i];
        if (lo == UINT64_MAX)
            break;
        ++*count;
        for (unsigned i = 0; !rc && i < n; i++)
            if (at[i] == lo)
                rc = doc_at(c[i], mote_cursor_next(c[i]), &at[i]);
    }
    for (unsigned i = 0; i < n; i++)
        mote_cursor_close(c[i]);
    return rc;
}

int mote__text_search_in(mote_txn *t, const uint32_t *trees, const double *w, unsigned n,
                         uint64_t objects, const char *q, size_t qlen, int flags, uint64_t **ids,
                         double **scores, size_t *nout)
{
    uint64_t tot[2] = {0, 0}, most = 0;
    int rc = MOTE_OK;
    *ids = NULL;
    *scores = NULL;
    *nout = 0;
    for (unsigned i = 0; !rc && i < n; i++) {
        uint64_t v[2];
        if ((rc = get_varints(t, trees[i], "s", 1, v, 2)) == MOTE_NOTFOUND) {
            rc = MOTE_OK; /* an empty index */
            continue;
        }
        tot[1] += v[1];
        most = v[0] > most ? v[0] : most;
    }
    if (rc || !most)
        return rc;
    /* the documents: with a text in any property (one property's own
     * count; every object, if one property's index holds them all; else
     * their lengths' keys merged) */
    if (n == 1 || most == objects)
        tot[0] = most;
    else if ((rc = docs_in_any(t, trees, n, &tot[0])))
        return rc;
    scored *sc = NULL;
    size_t ns = 0;
    if (!(rc = search_expr(t, trees, w, n, q, qlen, flags, tot, &sc, &ns)))
        rc = ranked_out(sc, ns, ids, scores, nout);
    mote__free(sc);
    return rc;
}

int mote__text_search(mote_txn *t, uint32_t tree, const char *q, size_t qlen, int all,
                      uint64_t **ids, double **scores, size_t *n)
{
    unsigned tok = (unsigned)all & MOTE_TOKEN_STEM; /* the index stems: so do the words */
    all &= MOTE_MATCH_ALL;
    qterms qt = {0};
    hit *h = NULL;
    size_t nh = 0, hcap = 0;
    scored *sc = NULL;
    double *idf = NULL;
    postings ps = {0};
    mote_cursor *c = NULL;
    uint64_t tot[2];
    *n = 0;
    *ids = NULL;
    *scores = NULL;
    size_t ns = 0;
    int rc = get_varints(t, tree, "s", 1, tot, 2);
    if (rc == MOTE_NOTFOUND) {
        rc = MOTE_OK;
        goto out; /* an empty index */
    }
    if (!rc && ql_syntax(q, qlen)) { /* the query language */
        if ((rc = search_expr(t, &tree, NULL, 1, q, qlen, all | (int)tok, tot, &sc, &ns)))
            goto out;
        goto ranked;
    }
    if (!rc) /* a list of words: its distinct terms */
        rc = mote_tokenize(q, qlen, tok, add_qterm, &qt);
    if (rc || !qt.n)
        goto out;
    if (!(idf = mote__calloc(qt.n, sizeof *idf))) {
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
        goto out;
    }
    rc = mote_cursor_open(t, tree, &c);
    /* every term's document count (its idf); with `all`, the terms by it,
     * rarest first: its postings are the candidates the others narrow */
    uint64_t *df = mote__calloc(qt.n, sizeof *df);
    size_t *by = mote__malloc(qt.n * sizeof *by);
    if (!rc && (!df || !by))
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    for (size_t i = 0; !rc && i < qt.n; i++) {
        uint8_t key[KEY_MAX];
        key[0] = 't';
        memcpy(key + 1, qt.t[i], qt.len[i]);
        if ((rc = get_varints(t, tree, key, 1 + qt.len[i], &df[i], 1)) == MOTE_NOTFOUND) {
            rc = MOTE_OK;
            df[i] = 0;
        }
        idf[i] = bm25_idf(tot, (double)df[i]);
        by[i] = i;
        for (size_t j = i; j > 0 && df[by[j]] < df[by[j - 1]]; j--) { /* insertion: few terms */
            size_t x2 = by[j];
            by[j] = by[j - 1];
            by[j - 1] = x2;
        }
    }
    if (!rc && all && qt.n > 1 && df[by[0]] > 0) {
        size_t i = by[0], kept = 0;
        rc = hits_all(c, qt.t[i], qt.len[i], (uint32_t)i, &h, &nh, &hcap, &ps);
        uint64_t *cand = NULL;
        for (size_t r = 1; !rc && r < qt.n && nh; r++) {
            /* the candidates: the documents that held every term so far */
            size_t nc = 0, from = nh - (r == 1 ? nh : kept);
            mote__free(cand);
            if (!(cand = mote__malloc((nh - from + 1) * sizeof *cand))) {
                rc = mote__err(MOTE_NOMEM, "out of memory searching text");
                break;
            }
            for (size_t x = from; x < nh; x++)
                cand[nc++] = h[x].id;
            size_t j = by[r];
            rc = hits_among(c, qt.t[j], qt.len[j], (uint32_t)j, cand, nc, &h, &nh, &hcap, &ps,
                            &kept);
            if (!rc && !kept)
                nh = 0; /* no document holds them all */
        }
        mote__free(cand);
        mote__free(df);
        mote__free(by);
        goto scored;
    }
    for (size_t i = 0; !rc && i < qt.n; i++) {
        if (!df[i]) {
            if (all)
                break; /* a term no document holds */
            continue;
        }
        rc = hits_all(c, qt.t[i], qt.len[i], (uint32_t)i, &h, &nh, &hcap, &ps);
    }
    if (all && !rc)
        for (size_t i = 0; i < qt.n; i++)
            if (!df[i])
                nh = 0;
    mote__free(df);
    mote__free(by);
scored:
    if (rc || !nh)
        goto out;
    qsort(h, nh, sizeof *h, cmp_hit);
    if (!(sc = mote__malloc(nh * sizeof *sc))) {
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
        goto out;
    }
    for (size_t i = 0; !rc && i < nh;) {
        size_t j = i + 1;
        while (j < nh && h[j].id == h[i].id)
            j++;
        if (!all || j - i == qt.n) {
            double s = 0, norm;
            rc = bm25_norm(t, tree, h[i].id, tot, &norm);
            for (size_t x = i; x < j; x++)
                s += bm25_part(idf[h[x].term], h[x].tf, norm);
            sc[ns++] = (scored){h[i].id, s};
        }
        i = j;
    }
    if (rc)
        goto out;
ranked:
    rc = ranked_out(sc, ns, ids, scores, n);
out:
    mote_cursor_close(c);
    mote__free(qt.t);
    mote__free(qt.len);
    mote__free(h);
    mote__free(sc);
    mote__free(idf);
    mote__free(ps.p);
    mote__free(ps.pos);
    return rc;
}

/* ---- verifying ---------------------------------------------------------------------- */

typedef struct vstate {
    mote_txn *t;
    uint32_t tree;
    text_stat *st;
    char term[MOTE_TOKEN_MAX];
    size_t tlen;
    uint64_t term_docs, last_id;
    int have_term;
    int bad;
    void (*report)(void *, const char *);
    void *ctx;
} vstate;

static void problem(vstate *v, const char *fmt, ...)
{
    v->bad++;
    if (!v->report)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    v->report(v->ctx, line);
}

static void end_term(vstate *v)
{
    if (!v->have_term)
        return;
    uint8_t key[KEY_MAX];
    uint64_t df;
    key[0] = 't';
    memcpy(key + 1, v->term, v->tlen);
    int rc = get_varints(v->t, v->tree, key, 1 + v->tlen, &df, 1);
    if (rc || df != v->term_docs)
        problem(v, "text index: term \"%.*s\" counts %llu documents, its postings %llu",
                (int)v->tlen, v->term, rc ? 0ull : (unsigned long long)df,
                (unsigned long long)v->term_docs);
    v->have_term = 0;
}

static int verify_posting(void *ctx, const char *term, size_t tlen, uint64_t id,
                          const uint32_t *pos, uint32_t tf)
{
    vstate *v = ctx;
    (void)pos, (void)tf;
    if (!v->have_term || v->tlen != tlen || memcmp(v->term, term, tlen)) {
        end_term(v);
        if (!tlen || tlen > MOTE_TOKEN_MAX)
            problem(v, "text index: a term of %zu bytes", tlen);
        v->tlen = tlen < MOTE_TOKEN_MAX ? tlen : MOTE_TOKEN_MAX;
        memcpy(v->term, term, v->tlen);
        v->have_term = 1;
        v->term_docs = 0;
        v->last_id = 0;
        v->st->terms++;
    } else if (id <= v->last_id) {
        problem(v, "text index: term \"%.*s\": document %llu after %llu", (int)tlen, term,
                (unsigned long long)id, (unsigned long long)v->last_id);
    }
    uint8_t key[9];
    doc_key(key, id);
    if (mote_kv_get(v->t, v->tree, key, 9, NULL) != MOTE_OK)
        problem(v, "text index: document %llu has postings but no length",
                (unsigned long long)id);
    v->last_id = id;
    v->term_docs++;
    v->st->postings++;
    return 0;
}

int mote__text_verify(mote_txn *t, uint32_t tree, text_stat *st,
                      void (*report)(void *ctx, const char *problem), void *ctx)
{
    memset(st, 0, sizeof *st);
    vstate v = {.t = t, .tree = tree, .st = st, .report = report, .ctx = ctx};
    int rc = mote__text_each(t, tree, verify_posting, &v);
    if (rc == MOTE_CORRUPT) {
        problem(&v, "text index: %s", mote_errmsg(NULL));
        rc = MOTE_OK;
    }
    if (rc)
        return rc;
    end_term(&v);
    /* blocks, terms, documents and their lengths */
    mote_cursor *c;
    if ((rc = mote_cursor_open(t, tree, &c)))
        return rc;
    uint64_t terms = 0, docs = 0, tokens = 0;
    for (rc = mote_cursor_first(c); !rc; rc = mote_cursor_next(c)) {
        mote_val k, val;
        if ((rc = mote_cursor_get(c, &k, &val)))
            break;
        const uint8_t *kp = k.data;
        if (kp[0] == 'p') {
            st->blocks++;
            if (val.size > TEXT_BLOCK_MAX) {
                st->big++;
                uint64_t cnt;
                if (mote__varint_get(val.data, (const uint8_t *)val.data + val.size, &cnt) &&
                    cnt > 1)
                    problem(&v, "text index: a block of %zu bytes holds %llu postings",
                            val.size, (unsigned long long)cnt);
            }
        } else if (kp[0] == 't') {
            terms++;
        } else if (kp[0] == 'd' && k.size == 9) {
            const uint8_t *p = val.data;
            uint64_t len = 0;
            if (!mote__varint_get(p, p + val.size, &len))
                problem(&v, "text index: a document's length is damaged");
            docs++;
            tokens += len;
        } else if (!(kp[0] == 's' && k.size == 1)) {
            problem(&v, "text index: an entry of unknown kind 0x%02x", kp[0]);
        }
    }
    mote_cursor_close(c);
    if (rc != MOTE_NOTFOUND)
        return rc;
    uint64_t tot[2];
    rc = get_varints(t, tree, "s", 1, tot, 2);
    if (rc == MOTE_NOTFOUND)
        tot[0] = tot[1] = 0, rc = MOTE_OK;
    if (rc == MOTE_CORRUPT)
        problem(&v, "text index: the totals are damaged"), rc = MOTE_OK;
    if (rc)
        return rc;
    if (terms != st->terms)
        problem(&v, "text index: %llu term counts for %llu terms with postings",
                (unsigned long long)terms, (unsigned long long)st->terms);
    if (tot[0] != docs || tot[1] != tokens)
        problem(&v, "text index: totals say %llu documents and %llu tokens, there are %llu "
                "and %llu", (unsigned long long)tot[0], (unsigned long long)tot[1],
                (unsigned long long)docs, (unsigned long long)tokens);
    st->docs = docs;
    st->tokens = tokens;
    return v.bad ? MOTE_CORRUPT : MOTE_OK;
}

/* ---- checking a document ---------------------------------------------------------- */

int mote__text_check_doc(mote_txn *t, uint32_t tree, uint64_t id, const char *utf8, size_t len,
                         unsigned tok, uint64_t *terms)
{
    text_batch tb = {0}; /* its terms only */
    noting g = {.b = &tb};
    postings ps = {0};
    mote_cursor *c = NULL;
    uint64_t dl;
    uint8_t key[KEY_MAX];
    *terms = 0;
    int rc = mote_tokenize(utf8, len, tok, note_token, &g);
    if (!rc) {
        if (g.n)
            qsort(g.o, g.n, sizeof *g.o, cmp_occ);
        doc_key(key, id);
        rc = get_varints(t, tree, key, 9, &dl, 1);
        if (rc == MOTE_NOTFOUND)
            rc = mote__err(MOTE_CORRUPT, "not in the index");
        else if (!rc && dl != g.n)
            rc = mote__err(MOTE_CORRUPT, "indexed with %llu tokens, its text has %zu",
                           (unsigned long long)dl, g.n);
    }
    if (!rc)
        rc = mote_cursor_open(t, tree, &c);
    for (size_t i = 0; !rc && i < g.n;) {
        const char *term = tb.terms + tb.t[g.o[i].term].off;
        size_t tlen = tb.t[g.o[i].term].len, j = i + 1;
        while (j < g.n && g.o[j].term == g.o[i].term)
            j++;
        ++*terms;
        size_t kl = post_key(key, term, tlen, id);
        mote_val k, v;
        uint64_t first;
        ps.n = ps.npos = 0;
        rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_LE);
        if (!rc && !(rc = mote_cursor_get(c, &k, &v)) && is_block_of(&k, term, tlen, &first))
            rc = decode_block(v.data, v.size, first, &ps);
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        size_t at = 0;
        while (at < ps.n && ps.p[at].id != id)
            at++;
        if (!rc && at == ps.n)
            rc = mote__err(MOTE_CORRUPT, "term \"%.*s\" has no posting of it", (int)tlen, term);
        if (!rc && ps.p[at].tf != j - i)
            rc = mote__err(MOTE_CORRUPT, "term \"%.*s\": %u positions indexed, %zu in the text",
                           (int)tlen, term, ps.p[at].tf, j - i);
        for (size_t x = i; !rc && x < j; x++)
            if (ps.pos[ps.p[at].pos + (x - i)] != g.o[x].pos)
                rc = mote__err(MOTE_CORRUPT, "term \"%.*s\": its positions differ from the text",
                               (int)tlen, term);
        i = j;
    }
    mote_cursor_close(c);
    mote__free(g.o);
    mote__text_batch_free(&tb);
    mote__free(ps.p);
    mote__free(ps.pos);
    return rc;
}

/* ---- the object layer's part -------------------------------------------------------- */

/* One index's notes in a write transaction. */
typedef struct textw {
    uint32_t tree;
    text_batch b;
} textw;

int mote__text_note_value(mote_txn *t, const mprop *p, uint64_t id, const mote_value *v,
                          int add)
{
    if (!p->text_tree || !v || v->null)
        return MOTE_OK;
    objtxn *x = OTX(t);
    size_t i = 0;
    while (i < x->ntext && x->text[i].tree != p->text_tree)
        i++;
    if (i == x->ntext) { /* slots past ntext hold empty batches (their memory kept) */
        size_t old = x->text_cap;
        int rc = grow((void **)&x->text, &x->text_cap, x->ntext + 1, sizeof *x->text);
        if (rc)
            return rc;
        memset(x->text + old, 0, (x->text_cap - old) * sizeof *x->text);
        x->text[x->ntext++].tree = p->text_tree;
    }
    x->text[i].b.tok = p->flags & MOTE_P_STEM ? MOTE_TOKEN_STEM : 0;
    return mote__text_note(&x->text[i].b, id, v->v.s.p, v->v.s.n, add);
}

int mote__text_flush_big(mote_txn *t)
{
    objtxn *x = OTX(t);
    int rc = MOTE_OK;
    for (size_t i = 0; !rc && i < x->ntext; i++)
        if (x->text[i].b.n >= TEXT_BATCH_MAX)
            rc = mote__text_apply(t, x->text[i].tree, &x->text[i].b);
    return rc;
}

int mote__text_flush(mote_txn *t)
{
    objtxn *x = OTX(t);
    int rc = MOTE_OK;
    for (size_t i = 0; !rc && i < x->ntext; i++)
        rc = mote__text_apply(t, x->text[i].tree, &x->text[i].b);
    mote__text_reset(x);
    return rc;
}

void mote__text_reset(objtxn *x)
{
    for (size_t i = 0; i < x->ntext; i++)
        mote__text_batch_clear(&x->text[i].b);
    x->ntext = 0; /* the batches' memory is kept in text[ntext..text_cap) */
}

void mote__text_free(objtxn *x)
{
    for (size_t i = 0; i < x->text_cap; i++)
        mote__text_batch_free(&x->text[i].b);
    mote__free(x->text);
    x->text = NULL;
    x->ntext = x->text_cap = 0;
}

int mote_text_stat(mote_txn *t, mote_entity *e, unsigned prop, mote_tstat *out)
{
    IMPLICIT(t, e, 0, mote_text_stat(t_, e, prop, out));
    if (!out)
        return mote__err(MOTE_INVALID, "mote_text_stat: NULL argument");
    memset(out, 0, sizeof *out);
    int rc = mote__obj_check(t, e, 0);
    if (rc)
        return rc;
    if (prop >= e->nall)
        return mote__err(MOTE_INVALID, "%s: no property %u", e->name, prop);
    const mprop *p = &e->props[prop];
    if (!p->text_tree)
        return MOTE_NOTFOUND;
    if (t->write && (rc = mote__text_flush(t)))
        return rc;
    mote_cursor *c;
    if ((rc = mote_cursor_open(t, p->text_tree, &c)))
        return rc;
    for (rc = mote_cursor_first(c); !rc; rc = mote_cursor_next(c)) {
        mote_val k, v;
        uint64_t x = 0;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        out->bytes += k.size + v.size;
        const uint8_t *kp = k.data, *vp = v.data;
        if (kp[0] == 'p' && mote__varint_get(vp, vp + v.size, &x)) {
            out->blocks++;
            out->postings += x;
        } else if (kp[0] == 't') {
            out->terms++;
        } else if (kp[0] == 'd' && mote__varint_get(vp, vp + v.size, &x)) {
            out->texts++;
            out->tokens += x;
        }
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}
