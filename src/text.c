/*
 * text.c — full-text indexes: an inverted index of one string property in
 * one kv tree, with BM25 ranking (issue 19).
 *
 * THE TREE. Documents are objects (their ids); terms are the tokens of
 * mote_tokenize (tokenize.c: never empty, no 0x00 byte, at most 255 bytes).
 *
 *   "s"                        the totals: varint documents, varint tokens,
 *                              varint layout (TEXT_LAYOUT, 2)
 *   "d" first-id               a block of documents' lengths: varint
 *                              count, then per document varint id minus
 *                              the previous one (the first: minus
 *                              first-id, so 0) and varint tokens
 *   "g" seg                    a segment (u32 BE, SEGMENTS): varint level
 *   "q" seg term 0x00 first-id a block of the term's postings in segment
 *                              seg, first-id (u64 BE) its lowest document:
 *                              varint count << 1 | (first block of the
 *                              term in the segment), on the first block the
 *                              change in the term's document count that
 *                              the segment makes (zigzag varint), then per
 *                              posting varint id minus the previous one
 *                              (the first: minus first-id, so 0) << 1 |
 *                              one, then if one (kind NEW, tf 1) its
 *                              position, else varint tf << 2 | kind and tf
 *                              positions, each a varint minus the previous
 *                              (the first as it is)
 *
 * A term's blocks in a segment partition its postings there by id: block i
 * holds the ids from its first-id up to the next block's first-id,
 * excluded. A block is at most TEXT_BLOCK_MAX bytes unless one posting
 * alone is longer (a document that holds a term thousands of times); it is
 * then alone in its block, a value over a quarter page in overflow pages.
 * Since 0x00 ends the term in a block's key, a term's blocks are adjacent
 * and no other term's key falls between them ("ab" 0x00 ... sorts before
 * "ab" "c" ...).
 *
 * SEGMENTS. Each write transaction's changes are a new segment, written
 * once: its keys sort after every older segment's, so its blocks fill
 * leaves one after another (appended), and no block another transaction
 * wrote is read or rewritten. A posting says what its document's text does
 * against everything older: holds the term and did not (NEW, kind 0), did
 * too (UPD, 1: its positions now), or no longer does (DEL, 2: none). A
 * search reads a term's blocks in every segment, oldest first, and lays
 * each over what it has (`fold`: NEW then UPD is NEW, NEW then DEL is
 * nothing, UPD then UPD is UPD, UPD then DEL is DEL, DEL then NEW is UPD;
 * anything else is damage); what rests on no older segment must hold its
 * term (`settle`). A term's document count is the sum of the changes its
 * first blocks carry. When a level holds TEXT_FANIN (8) segments they are
 * merged into one of the next level, under a new id after all others
 * (merge_levels runs after every segment written, so the levels below are
 * empty then; a level never rises from an older segment to a newer one):
 * each posting is rewritten once per level, about log8 of the documents
 * times, and a search reads at most 7 segments per level. A merge that
 * takes the oldest segment drops what its documents no longer hold. The
 * layout before this one (one block chain per term rewritten in place, a
 * "t" count per term; schema format 4 or 7) rebuilt half the leaves of the
 * tree in every transaction of a bulk load: bench/text, 98,172 passages in
 * transactions of 1,000, build 2.27 -> 0.92 s, file 52.7 -> 37.5 MB
 * (free pages left by the rewrites 1,366 -> 57). Such an index is rebuilt
 * when its entity is opened in a write transaction (schema.c; a reader
 * gets MOTE_SCHEMA, a search on it MOTE_FORMAT).
 *
 * Lengths' blocks partition the documents by id in the same way (at most
 * TEXT_BLOCK_MAX bytes; a batch's changes merged into the block that holds
 * their ids, which is split when it grows): a key and a cell per document
 * had been a tenth of a large index. With both, bench/text's 91,201
 * passages take 9.5 MB of index against FTS5's 9.8 (0.97x; postings 8.2
 * MB of it, lengths 0.2).
 *
 * WRITES. A write transaction collects its changes in a text_batch: a
 * document added gives one entry per distinct term, with its positions,
 * and one for the document (its length); a document removed, the same
 * from the text it was indexed with, without positions. mote__text_apply
 * sorts them by (term, id, note) and writes each term's postings as the
 * new segment's blocks, one sorted batch of puts (mote__kv_apply), then the
 * documents' lengths and the totals.
 *
 * SEARCH. BM25 as SQLite FTS5's bm25() computes it, so that rankings can
 * be compared: for each query term with df documents among N,
 * idf = ln((N - df + 0.5) / (df + 0.5)), or 1e-6 where that is not
 * positive; a document's score is the sum over the terms it holds of
 * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), with dl its
 * length in tokens and avgdl the mean. FTS5 returns the negated sum (lower
 * is better); here higher is better. The postings of every term are read
 * into one array, sorted by id, and each document's length read with one
 * cursor moving forward. An AND of words reads the rarest word's postings
 * and, for the others, only the blocks that hold those documents
 * (posting_of: the newest segment with a posting of the document decides).
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

#define KEY_MAX (1 + 4 + MOTE_TOKEN_MAX + 1 + 8)
/* The layout of the index's entries (the totals' third number; the first
 * layout, of one block chain per term and a count per term, had none). */
#define TEXT_LAYOUT 2u

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

static void wr_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The key of a block of segment seg: 'q' seg term 0x00 first-id. */
static size_t post_key(uint8_t *k, uint32_t seg, const char *term, size_t tlen, uint64_t id)
{
    k[0] = 'q';
    wr_be32(k + 1, seg);
    memcpy(k + 5, term, tlen);
    k[5 + tlen] = 0;
    mote__wr_be64(k + 6 + tlen, id);
    return tlen + 14;
}

/* The key of segment seg in the directory: 'g' seg. */
static void seg_key(uint8_t *k, uint32_t seg)
{
    k[0] = 'g';
    wr_be32(k + 1, seg);
}

/* Is key a block (of segment seg, if not NULL *seg... see block_key)? */
static int block_key(const mote_val *key, uint32_t *seg, const uint8_t **term, size_t *tlen,
                     uint64_t *first)
{
    const uint8_t *k = key->data;
    if (key->size < 15 || k[0] != 'q' || k[key->size - 9])
        return 0;
    *seg = be32(k + 1);
    *term = k + 5;
    *tlen = key->size - 14;
    *first = mote__be64(k + key->size - 8);
    return 1;
}

/* Is key a block of term in segment seg? Its first id into *first. */
static int is_block_of(const mote_val *key, uint32_t seg, const char *term, size_t tlen,
                       uint64_t *first)
{
    const uint8_t *k = key->data;
    if (key->size != tlen + 14 || k[0] != 'q' || be32(k + 1) != seg ||
        memcmp(k + 5, term, tlen) || k[5 + tlen])
        return 0;
    *first = mote__be64(k + 6 + tlen);
    return 1;
}

/* What a posting says of its document, against the segments before its
 * own (SEGMENTS): it holds the term now and did not (NEW), did too (UPD:
 * new positions), or no longer does (DEL: no positions). NONE: nothing
 * left of it (merging a NEW with a later DEL). */
enum { PK_NEW, PK_UPD, PK_DEL, PK_NONE };

/* A decoded posting; its positions in a side array. */
typedef struct post {
    uint64_t id;
    size_t pos;
    uint32_t tf;
    uint8_t kind;
} post;

typedef struct postings {
    post *p;
    size_t n, cap;
    uint32_t *pos;
    size_t npos, pos_cap;
} postings;

/* Decode a block (first: the id in its key) onto the end of out; *df
 * (may be NULL) += its document-count change if it is its term's first
 * block in the segment (then *first_block is set; NULL: not asked). */
static int decode_block(const uint8_t *b, size_t len, uint64_t first, postings *out, int64_t *df,
                        int *first_block)
{
    const uint8_t *p = b, *end = b + len;
    uint64_t head, count, id = first, v;
    unsigned u;
    if (!(u = mote__varint_get(p, end, &head)) || (count = head >> 1) == 0 || count > len)
        return CORRUPT("text index: a block's count is damaged");
    p += u;
    if (first_block)
        *first_block = (int)(head & 1);
    if (head & 1) { /* the term's first block in its segment: the count change, zigzag */
        if (!(u = mote__varint_get(p, end, &v)))
            return CORRUPT("text index: a block is cut short");
        p += u;
        if (df)
            *df += (v & 1) ? -(int64_t)(v >> 1) - 1 : (int64_t)(v >> 1);
    }
    int rc;
    if ((rc = grow((void **)&out->p, &out->cap, out->n + count, sizeof *out->p)))
        return rc;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t d, x = 1 << 2 | PK_NEW; /* (one: NEW, one position) */
        if (!(u = mote__varint_get(p, end, &d)))
            return CORRUPT("text index: a block is cut short");
        p += u;
        int one = (int)(d & 1);
        d >>= 1;
        if ((i == 0 && d != 0) || (i > 0 && (d == 0 || id + d < id)))
            return CORRUPT("text index: a block's ids do not ascend");
        id += d;
        if (!one && !(u = mote__varint_get(p, end, &x)))
            return CORRUPT("text index: a block is cut short");
        p += one ? 0 : u;
        uint64_t kind = x & 3, tf = x >> 2;
        if (kind == PK_NONE || (kind == PK_DEL) != (tf == 0) || tf > (uint64_t)(end - p))
            return CORRUPT("text index: a posting's count is damaged");
        if ((rc = grow((void **)&out->pos, &out->pos_cap, out->npos + tf, sizeof *out->pos)))
            return rc;
        out->p[out->n++] = (post){id, out->npos, (uint32_t)tf, (uint8_t)kind};
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

/* A posting's bytes: varint (id - prev) << 1 | one, one when it is NEW
 * with one position, then that position; else then varint tf << 2 | kind
 * and its tf positions. (Most postings are one word's one place in a text:
 * a byte less each. An id more than 2^63 past the previous one starts a
 * block: write_blocks.) */
static size_t posting_size(const post *p, const uint32_t *pos, uint64_t prev)
{
    int one = p->kind == PK_NEW && p->tf == 1;
    size_t n = mote__varint_size((p->id - prev) << 1 | (uint64_t)one);
    if (!one)
        n += mote__varint_size((uint64_t)p->tf << 2 | p->kind);
    for (uint32_t j = 0, at = 0; j < p->tf; j++) {
        n += mote__varint_size(pos[p->pos + j] - at);
        at = pos[p->pos + j];
    }
    return n;
}

static size_t encode_posting(uint8_t *o, const post *p, const uint32_t *pos, uint64_t prev)
{
    int one = p->kind == PK_NEW && p->tf == 1;
    size_t n = mote__varint_put(o, (p->id - prev) << 1 | (uint64_t)one);
    if (!one)
        n += mote__varint_put(o + n, (uint64_t)p->tf << 2 | p->kind);
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
    int sorted = 1; /* (an apply makes them in order: no sort) */
    for (size_t i = 1; sorted && i < o->n; i++)
        sorted = cmp_op(&o->ops[i - 1], &o->ops[i]) <= 0;
    if (!sorted)
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

/* ---- documents' lengths ------------------------------------------------------------ */

/* The documents' lengths, in blocks: 'd' first-id (u64 BE) -> varint count,
 * then per document varint id minus the previous one (the first: minus
 * first-id, so 0) and varint tokens; at most TEXT_BLOCK_MAX bytes. A block
 * holds the ids from its first-id up to the next block's, excluded. (One
 * entry per document cost its key and a cell, ~12 bytes a text, more than
 * the rest of its share of a large index's bytes beside postings.) */
/* A block read forward as ascending ids are asked for (doc_len,
 * posting_in): its bytes, the ids it stands for [first, next), where its
 * entries start (body) and where the reading is (at: the next entry, after
 * `seen` of `count`, the last of them prev). */
typedef struct bscan {
    uint8_t *raw;
    size_t rlen, rcap, body, at;
    uint64_t first, next, count, seen, prev;
    int loaded;
} bscan;

/* The block's bytes v, whose first id is first, taken to be read (the
 * caller sets body, at and count from its head). */
static int bscan_take(bscan *b, const mote_val *v, uint64_t first)
{
    int rc = grow((void **)&b->raw, &b->rcap, v->size + 1, 1);
    if (rc)
        return rc;
    memcpy(b->raw, v->data, v->size);
    b->rlen = v->size;
    b->prev = b->first = first;
    b->seen = 0;
    return MOTE_OK;
}

/* Where to read on for id (from the start if id is not past the last
 * entry read), *end the block's end; NULL if nothing is left to read (no
 * block there: its bytes may be NULL). */
static const uint8_t *bscan_from(bscan *b, uint64_t id, const uint8_t **end)
{
    if (b->seen && id <= b->prev) {
        b->at = b->body;
        b->seen = 0;
        b->prev = b->first;
    }
    if (b->seen == b->count)
        return NULL;
    *end = b->raw + b->rlen;
    return b->raw + b->at;
}

typedef struct dblock {
    uint64_t *id, *len;
    size_t n, cap, lcap;
    bscan s; /* doc_len's */
} dblock;

static void dblock_free(dblock *d)
{
    mote__free(d->id);
    mote__free(d->len);
    mote__free(d->s.raw);
    memset(d, 0, sizeof *d);
}

static size_t dkey(uint8_t *k, uint64_t id)
{
    k[0] = 'd';
    mote__wr_be64(k + 1, id);
    return 9;
}

/* Is key a block of lengths? Its first id into *first. */
static int is_dblock(const mote_val *key, uint64_t *first)
{
    const uint8_t *k = key->data;
    if (key->size != 9 || k[0] != 'd')
        return 0;
    *first = mote__be64(k + 1);
    return 1;
}

/* Decode a block of lengths onto the end of d. */
static int dblock_decode(const uint8_t *b, size_t len, uint64_t first, dblock *d)
{
    const uint8_t *p = b, *end = b + len;
    uint64_t count, id = first, x, l;
    unsigned u;
    int rc;
    if (!(u = mote__varint_get(p, end, &count)) || count == 0 || count > len)
        return CORRUPT("text index: a block of lengths is damaged");
    p += u;
    if ((rc = grow((void **)&d->id, &d->cap, d->n + count, sizeof *d->id)) ||
        (rc = grow((void **)&d->len, &d->lcap, d->n + count, sizeof *d->len)))
        return rc;
    for (uint64_t i = 0; i < count; i++) {
        if (!(u = mote__varint_get(p, end, &x)) || (i == 0 && x) || (i && (!x || id + x < id)))
            return CORRUPT("text index: a block of lengths is damaged");
        p += u;
        id += x;
        if (!(u = mote__varint_get(p, end, &l)))
            return CORRUPT("text index: a block of lengths is damaged");
        p += u;
        d->id[d->n] = id;
        d->len[d->n++] = l;
    }
    return p == end ? MOTE_OK : CORRUPT("text index: a block of lengths is damaged");
}

/* Document id's length through cursor c (*found: 0 if it has none), from
 * its block, read forward from where the last id asked for was (ids asked
 * in ascending order read each block once; a result set spread over the
 * ids reads only up to each). */
static int doc_len(mote_cursor *c, dblock *d, uint64_t id, uint64_t *len, int *found)
{
    *found = 0;
    if (!d->s.loaded || id < d->s.first || id >= d->s.next) {
        uint8_t key[9];
        mote_val k, v;
        uint64_t first;
        unsigned u;
        d->s.loaded = 1;
        d->s.first = id;
        d->s.next = id + 1;
        d->s.count = d->s.seen = 0;
        int rc = mote_cursor_seek(c, key, dkey(key, id), MOTE_SEEK_LE);
        if (rc == MOTE_NOTFOUND)
            return MOTE_OK;
        if (rc || (rc = mote_cursor_get(c, &k, &v)))
            return rc;
        if (!is_dblock(&k, &first))
            return MOTE_OK;
        if ((rc = bscan_take(&d->s, &v, first)))
            return rc;
        if (!(u = mote__varint_get(d->s.raw, d->s.raw + d->s.rlen, &d->s.count)) || !d->s.count)
            return CORRUPT("text index: a block of lengths is damaged");
        d->s.body = d->s.at = u;
        d->s.next = UINT64_MAX;
        if (!(rc = mote_cursor_next(c)) && !(rc = mote_cursor_get(c, &k, NULL)) &&
            !is_dblock(&k, &d->s.next))
            d->s.next = UINT64_MAX;
        if (rc && rc != MOTE_NOTFOUND)
            return rc;
    }
    const uint8_t *end, *p = bscan_from(&d->s, id, &end);
    if (!p)
        return MOTE_OK;
    while (d->s.seen < d->s.count) {
        uint64_t x, l;
        unsigned u, w;
        if (!(u = mote__varint_get(p, end, &x)) || !(w = mote__varint_get(p + u, end, &l)) ||
            (d->s.seen == 0) != (x == 0) || d->s.prev + x < d->s.prev)
            return CORRUPT("text index: a block of lengths is damaged");
        uint64_t nid = d->s.prev + x;
        if (nid > id)
            break; /* not there: the next call starts at this entry */
        p += u + w;
        d->s.prev = nid;
        d->s.seen++;
        if (nid == id) {
            *len = l;
            *found = 1;
            break;
        }
    }
    d->s.at = (size_t)(p - d->s.raw);
    return MOTE_OK;
}

/* Write lengths (ids ascending, n >= 0) as blocks of at most TEXT_BLOCK_MAX
 * bytes. */
static int dblock_write(opbuf *o, const uint64_t *id, const uint64_t *len, size_t n)
{
    uint8_t key[9];
    for (size_t i = 0; i < n;) {
        size_t j = i, bytes = 0;
        for (; j < n; j++) {
            size_t s = mote__varint_size(id[j] - (j > i ? id[j - 1] : id[i])) +
                       mote__varint_size(len[j]);
            if (j > i && mote__varint_size(j - i + 1) + bytes + s > TEXT_BLOCK_MAX)
                break;
            bytes += s;
        }
        uint8_t *v;
        int rc = op_add(o, key, dkey(key, id[i]), mote__varint_size(j - i) + bytes, 0, &v);
        if (rc)
            return rc;
        size_t at = mote__varint_put(v, j - i);
        for (size_t k = i; k < j; k++) {
            at += mote__varint_put(v + at, id[k] - (k > i ? id[k - 1] : id[i]));
            at += mote__varint_put(v + at, len[k]);
        }
        i = j;
    }
    return MOTE_OK;
}

/* The documents' changes (b->d, sorted by id and note): each run of them
 * that falls in one block merged into its lengths and written back (split
 * if it grew; its key deleted if its first id changed or nothing is left);
 * the totals follow. */
static int apply_docs(mote_txn *t, uint32_t tree, text_batch *b, opbuf *o, uint64_t tot[2])
{
    mote_cursor *c;
    dblock old = {0}, neu = {0};
    int rc = mote_cursor_open(t, tree, &c);
    for (size_t i = 0; !rc && i < b->nd;) {
        uint8_t key[9];
        mote_val k, v;
        uint64_t first = 0, next = UINT64_MAX;
        int have = 0;
        size_t kl = dkey(key, b->d[i].k.id);
        old.n = neu.n = 0;
        /* the block that holds the first change's id, else the first one */
        if (!(rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_LE)) && !(rc = mote_cursor_get(c, &k, &v)))
            have = is_dblock(&k, &first);
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        if (!rc && !have && !(rc = mote_cursor_seek(c, key, kl, MOTE_SEEK_GE)) &&
            !(rc = mote_cursor_get(c, &k, &v)))
            have = is_dblock(&k, &first);
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        if (!rc && have && !(rc = dblock_decode(v.data, v.size, first, &old)) &&
            !(rc = mote_cursor_next(c)) && !(rc = mote_cursor_get(c, &k, NULL)) &&
            !is_dblock(&k, &next))
            next = UINT64_MAX;
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        size_t e = i, a = 0;
        while (e < b->nd && b->d[e].k.id < next)
            e++;
        if (!rc && ((rc = grow((void **)&neu.id, &neu.cap, old.n + (e - i) + 1, 8)) ||
                    (rc = grow((void **)&neu.len, &neu.lcap, old.n + (e - i) + 1, 8))))
            break;
        for (size_t x = i, g; !rc && x < e; x = g) {
            /* one document's notes, in order: the first says whether it was
             * indexed (a removal, with the length it was indexed with), the
             * last whether it is now */
            for (g = x + 1; g < e && b->d[g].k.id == b->d[x].k.id; g++)
                ;
            const tx_doc *fst = &b->d[x], *lst = &b->d[g - 1];
            while (a < old.n && old.id[a] < fst->k.id) {
                neu.id[neu.n] = old.id[a];
                neu.len[neu.n++] = old.len[a++];
            }
            int exists = a < old.n && old.id[a] == fst->k.id;
            uint64_t len = exists ? old.len[a] : 0;
            a += exists;
            if (!fst->add && (!exists || len != fst->len))
                rc = CORRUPT("text index: a removed document is not in it as noted");
            else if (fst->add && exists)
                rc = CORRUPT("text index: an added document is in it already");
            if (rc)
                break;
            if (exists) {
                tot[0]--;
                tot[1] -= len;
            }
            if (lst->add) {
                tot[0]++;
                tot[1] += lst->len;
                neu.id[neu.n] = lst->k.id;
                neu.len[neu.n++] = lst->len;
            }
        }
        while (!rc && a < old.n) {
            neu.id[neu.n] = old.id[a];
            neu.len[neu.n++] = old.len[a++];
        }
        if (!rc)
            rc = dblock_write(o, neu.id, neu.len, neu.n);
        if (!rc && have && (!neu.n || neu.id[0] != first))
            rc = op_add(o, key, dkey(key, first), 0, 1, NULL);
        i = e;
    }
    mote_cursor_close(c);
    dblock_free(&old);
    dblock_free(&neu);
    return rc;
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

/* Write postings ps[0..n) (n >= 1) of term in segment seg as blocks of at
 * most TEXT_BLOCK_MAX bytes (a posting longer than that alone in its
 * block); the first carries df, the term's document-count change. */
static int write_blocks(opbuf *o, uint32_t seg, const char *term, size_t tlen, const post *ps,
                        size_t n, const uint32_t *pos, int64_t df)
{
    uint8_t key[KEY_MAX];
    uint64_t zz = df < 0 ? ((uint64_t)(-(df + 1)) << 1) | 1 : (uint64_t)df << 1;
    for (size_t i = 0; i < n;) {
        /* how many postings fit, at least one */
        size_t head = i ? 0 : mote__varint_size(zz), j = i, bytes = 0;
        for (uint64_t prev = ps[i].id; j < n; j++) {
            if (ps[j].id - prev >= 1ull << 63) /* (posting_size) */
                break;
            size_t s = posting_size(&ps[j], pos, prev);
            if (j > i && mote__varint_size((j - i + 1) << 1) + head + bytes + s > TEXT_BLOCK_MAX)
                break;
            bytes += s;
            prev = ps[j].id;
        }
        size_t kl = post_key(key, seg, term, tlen, ps[i].id);
        size_t len = mote__varint_size((uint64_t)(j - i) << 1) + head + bytes;
        uint8_t *v;
        int rc = op_add(o, key, kl, len, 0, &v);
        if (rc)
            return rc;
        size_t at = mote__varint_put(v, (uint64_t)(j - i) << 1 | (i == 0));
        if (i == 0)
            at += mote__varint_put(v + at, zz);
        for (size_t k = i; k < j; k++)
            at += encode_posting(v + at, &ps[k], pos, k == i ? ps[i].id : ps[k - 1].id);
        i = j;
    }
    return MOTE_OK;
}

/* The totals ("s": documents, tokens, the layout); MOTE_NOTFOUND if the
 * index is empty, MOTE_FORMAT if an earlier layout made it. */
static int get_totals(mote_txn *t, uint32_t tree, uint64_t tot[3])
{
    mote_val val;
    tot[0] = tot[1] = tot[2] = 0;
    int rc = mote_kv_get(t, tree, "s", 1, &val);
    if (rc)
        return rc;
    const uint8_t *p = val.data, *end = p + val.size;
    int n = 0;
    for (; n < 3 && p < end; n++) {
        unsigned u = mote__varint_get(p, end, &tot[n]);
        if (!u)
            return CORRUPT("text index: the totals are damaged");
        p += u;
    }
    if (n == 2 && p == end)
        return mote__err(MOTE_FORMAT, "this full-text index was made by an earlier version of "
                         "MoteDB (its postings are laid out differently): opening its entity "
                         "in a write transaction rebuilds it");
    if (n != 3 || p != end || tot[2] != TEXT_LAYOUT)
        return CORRUPT("text index: the totals are damaged");
    return MOTE_OK;
}

int mote__text_layout(mote_txn *t, uint32_t tree)
{
    uint64_t tot[3];
    int rc = get_totals(t, tree, tot);
    return rc == MOTE_NOTFOUND || rc == MOTE_CORRUPT ? MOTE_OK : rc;
}

/* ---- segments ---------------------------------------------------------------------- */

/* The live segments, oldest (lowest id) first, and their levels. */
typedef struct seglist {
    uint32_t *id;
    uint8_t *lvl;
    size_t n, cap, lcap;
} seglist;

static void segs_free(seglist *S)
{
    mote__free(S->id);
    mote__free(S->lvl);
    memset(S, 0, sizeof *S);
}

/* Read the directory: levels never rise from an older segment to a newer
 * one (SEGMENTS). */
static int segs_read(mote_txn *t, uint32_t tree, seglist *S)
{
    mote_cursor *c;
    S->n = 0;
    int rc = mote_cursor_open(t, tree, &c);
    if (rc)
        return rc;
    for (rc = mote_cursor_seek(c, "g", 1, MOTE_SEEK_GE); !rc; rc = mote_cursor_next(c)) {
        mote_val k, v;
        uint64_t lvl = 0;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        const uint8_t *kp = k.data, *vp = v.data;
        if (!k.size || kp[0] != 'g')
            break;
        if (k.size != 5 || mote__varint_get(vp, vp + v.size, &lvl) != v.size || lvl > 63 ||
            (S->n && lvl > S->lvl[S->n - 1])) {
            rc = CORRUPT("text index: a segment's entry is damaged");
            break;
        }
        if ((rc = grow((void **)&S->id, &S->cap, S->n + 1, sizeof *S->id)) ||
            (rc = grow((void **)&S->lvl, &S->lcap, S->n + 1, sizeof *S->lvl)))
            break;
        S->id[S->n] = be32(kp + 1);
        S->lvl[S->n++] = (uint8_t)lvl;
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

/* A posting appended to out, its positions copied. */
static int push_post(postings *out, const post *p, const uint32_t *pos, uint8_t kind)
{
    uint32_t tf = kind == PK_DEL ? 0 : p->tf;
    int rc;
    if ((rc = grow((void **)&out->p, &out->cap, out->n + 1, sizeof *out->p)) ||
        (rc = grow((void **)&out->pos, &out->pos_cap, out->npos + tf, sizeof *out->pos)))
        return rc;
    if (tf) /* (a DEL's arrays may be NULL) */
        memcpy(out->pos + out->npos, pos + p->pos, tf * sizeof *out->pos);
    out->p[out->n++] = (post){p->id, out->npos, tf, kind};
    out->npos += tf;
    return MOTE_OK;
}

/* A document's posting in an older segment, then one in a newer: what the
 * two say together (SEGMENTS); -1 if they contradict each other. */
static int combine(int older, int newer)
{
    if (older == PK_NEW)
        return newer == PK_UPD ? PK_NEW : newer == PK_DEL ? PK_NONE : -1;
    if (older == PK_UPD)
        return newer == PK_UPD ? PK_UPD : newer == PK_DEL ? PK_DEL : -1;
    return newer == PK_NEW ? PK_UPD : -1; /* older: DEL */
}

/* The postings of a newer segment laid over those of older ones (both
 * ascending), into out (emptied first); documents left with nothing are
 * dropped. */
static int fold(const postings *older, const postings *newer, postings *out)
{
    size_t i = 0, j = 0;
    int rc = MOTE_OK;
    out->n = out->npos = 0;
    while (!rc && (i < older->n || j < newer->n)) {
        if (j == newer->n || (i < older->n && older->p[i].id < newer->p[j].id)) {
            rc = push_post(out, &older->p[i], older->pos, older->p[i].kind);
            i++;
        } else if (i == older->n || newer->p[j].id < older->p[i].id) {
            rc = push_post(out, &newer->p[j], newer->pos, newer->p[j].kind);
            j++;
        } else {
            int k = combine(older->p[i].kind, newer->p[j].kind);
            if (k < 0)
                return CORRUPT("text index: document %llu's postings contradict each other",
                               (unsigned long long)newer->p[j].id);
            if (k != PK_NONE)
                rc = push_post(out, &newer->p[j], newer->pos, (uint8_t)k);
            i++, j++;
        }
    }
    return rc;
}

/* Postings that rest on no older segment: every one must hold its term
 * (UPD becomes NEW; a DEL has nothing to remove); df, if not NULL, must be
 * their number. */
static int settle(postings *ps, const int64_t *df)
{
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->p[i].kind == PK_DEL)
            return CORRUPT("text index: document %llu's term is removed but was never added",
                           (unsigned long long)ps->p[i].id);
        ps->p[i].kind = PK_NEW;
    }
    if (df && *df != (int64_t)ps->n)
        return CORRUPT("text index: a term counts %lld documents, its postings %zu",
                       (long long)*df, ps->n);
    return MOTE_OK;
}

/* Read every block of term in segment seg onto the end of ps (from the
 * cursor's position if `here`, else from a seek); *df += its change. Each
 * block's key is deleted into o if o is not NULL (a merge). The cursor is
 * left past them. */
static int read_term(mote_cursor *c, uint32_t seg, const char *term, size_t tlen, int here,
                     postings *ps, int64_t *df, opbuf *o)
{
    uint8_t key[KEY_MAX];
    int rc = MOTE_OK, first = 1;
    if (!here)
        rc = mote_cursor_seek(c, key, post_key(key, seg, term, tlen, 0), MOTE_SEEK_GE);
    for (; !rc; rc = mote_cursor_next(c)) {
        mote_val k, v;
        uint64_t id;
        int head;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        if (!is_block_of(&k, seg, term, tlen, &id))
            break;
        if (ps->n && id <= ps->p[ps->n - 1].id && !first)
            return CORRUPT("text index: a term's blocks overlap");
        if ((rc = decode_block(v.data, v.size, id, ps, df, &head)))
            break;
        if (head != first)
            return CORRUPT("text index: a term's blocks are out of order");
        first = 0;
        if (o && (rc = op_add(o, k.data, k.size, 0, 1, NULL)))
            break;
    }
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

/* Key k, where the cursor of segment seg stands: *in is 1 if it is a block
 * of seg (else the cursor is past the segment), and then its term becomes
 * term[0..*tlen) if none was yet (*have 0) or if it sorts before it. */
static int least_term(const mote_val *k, uint32_t seg, char *term, size_t *tlen, int *have,
                      int *in)
{
    uint32_t ks;
    const uint8_t *tp;
    size_t tl;
    uint64_t first;
    *in = block_key(k, &ks, &tp, &tl, &first) && ks == seg;
    if (!*in)
        return MOTE_OK;
    if (tl > MOTE_TOKEN_MAX)
        return CORRUPT("text index: a block's key is damaged");
    if (!*have || term_cmp((const char *)tp, tl, term, *tlen) < 0) {
        memcpy(term, tp, tl);
        *tlen = tl;
        *have = 1;
    }
    return MOTE_OK;
}

/* Segments of one level merged into the next when there are this many. */
#define TEXT_FANIN 8u

/* Merge segments S[a..z) (all of one level, the newest of which takes the
 * result at the next level) into one: each term's postings read from every
 * one of them, laid over each other oldest first, written under the
 * newest's id; the others' blocks and entries deleted. `base`: no older
 * segment remains, so the result rests on nothing (settle). */
static int merge_segs(mote_txn *t, uint32_t tree, const seglist *S, size_t a, size_t z)
{
    size_t k = z - a;
    /* the newest segments: the result goes after them all, under a new id
     * (appended: its leaves fill), else in the place of the newest input */
    uint32_t out = z == S->n && S->id[z - 1] != UINT32_MAX ? S->id[z - 1] + 1 : S->id[z - 1];
    int base = a == 0, rc = MOTE_OK;
    mote_cursor **c = mote__calloc(k, sizeof *c);
    int *live = mote__calloc(k, sizeof *live);
    postings *part = mote__calloc(k, sizeof *part);
    postings acc = {0}, tmp = {0};
    opbuf o = {0};
    uint8_t key[KEY_MAX];
    char term[MOTE_TOKEN_MAX];
    if (!c || !live || !part)
        rc = mote__err(MOTE_NOMEM, "out of memory merging a text index");
    for (size_t i = 0; !rc && i < k; i++) { /* each at its segment's first block */
        uint8_t sk[5] = {'q'};
        wr_be32(sk + 1, S->id[a + i]);
        if (!(rc = mote_cursor_open(t, tree, &c[i])))
            rc = mote_cursor_seek(c[i], sk, 5, MOTE_SEEK_GE);
        live[i] = !rc;
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
    }
    while (!rc) {
        /* the smallest term any of them is at (those past their segment drop out) */
        size_t tlen = 0;
        int have = 0;
        for (size_t i = 0; !rc && i < k; i++) {
            mote_val kv;
            if (!live[i])
                continue;
            if ((rc = mote_cursor_get(c[i], &kv, NULL)) == MOTE_NOTFOUND) {
                live[i] = 0, rc = MOTE_OK; /* past the tree's end */
                continue;
            }
            if (!rc)
                rc = least_term(&kv, S->id[a + i], term, &tlen, &have, &live[i]);
        }
        if (rc || !have)
            break;
        int64_t df = 0;
        acc.n = acc.npos = 0;
        for (size_t i = 0; !rc && i < k; i++) {
            if (!live[i])
                continue;
            part[i].n = part[i].npos = 0;
            if ((rc = read_term(c[i], S->id[a + i], term, tlen, 1, &part[i], &df, &o)) ||
                !part[i].n)
                continue;
            if (!acc.n) { /* the oldest with the term: taken as it is */
                postings x = acc;
                acc = part[i];
                part[i] = x;
            } else if (!(rc = fold(&acc, &part[i], &tmp))) {
                postings x = acc;
                acc = tmp;
                tmp = x;
            }
        }
        if (!rc && base)
            rc = settle(&acc, &df);
        if (!rc && acc.n)
            rc = write_blocks(&o, out, term, tlen, acc.p, acc.n, acc.pos, df);
    }
    for (size_t i = 0; !rc && i < k; i++) {
        seg_key(key, S->id[a + i]);
        if (S->id[a + i] != out)
            rc = op_add(&o, key, 5, 0, 1, NULL);
    }
    if (!rc) { /* the result's entry, at the next level */
        uint8_t *v;
        seg_key(key, out);
        if (!(rc = op_add(&o, key, 5, 1, 0, &v)))
            *v = (uint8_t)(S->lvl[a] + 1);
    }
    for (size_t i = 0; c && i < k; i++)
        mote_cursor_close(c[i]);
    if (!rc)
        rc = op_write(t, tree, &o);
    for (size_t i = 0; part && i < k; i++) {
        mote__free(part[i].p);
        mote__free(part[i].pos);
    }
    mote__free(c);
    mote__free(live);
    mote__free(part);
    mote__free(acc.p);
    mote__free(acc.pos);
    mote__free(tmp.p);
    mote__free(tmp.pos);
    mote__free(o.ops);
    mote__free(o.off);
    mote__free(o.buf);
    return rc;
}

/* Merge while a level holds TEXT_FANIN segments or more. */
static int merge_levels(mote_txn *t, uint32_t tree)
{
    seglist S = {0};
    int rc;
    while (!(rc = segs_read(t, tree, &S))) {
        size_t a = 0, z = 0;
        for (size_t i = 0; i < S.n && z - a < TEXT_FANIN; i = z) {
            for (a = i, z = i + 1; z < S.n && S.lvl[z] == S.lvl[a]; z++)
                ;
        }
        if (z - a < TEXT_FANIN || S.lvl[a] == 63)
            break;
        if ((rc = merge_segs(t, tree, &S, a, z)))
            break;
    }
    segs_free(&S);
    return rc;
}

int mote__text_apply(mote_txn *t, uint32_t tree, text_batch *b)
{
    int rc = MOTE_OK;
    postings neu = {0};
    seglist S = {0};
    opbuf o = {0};
    uint8_t key[KEY_MAX];
    uint64_t tot[3];
    if (!b->nd)
        return MOTE_OK;
    if ((rc = get_totals(t, tree, tot)) == MOTE_NOTFOUND)
        rc = MOTE_OK;
    qsort(b->d, b->nd, sizeof *b->d, cmp_key);
    if (!rc)
        rc = apply_docs(t, tree, b, &o, tot);
    /* the postings: a new segment (SEGMENTS); its entry at level 0 first,
     * taken back if no block comes (every write in key order: 'd', 'g',
     * 'q', 's') */
    tx_entry *se = NULL;
    uint32_t seg = 1;
    int wrote = 0;
    size_t gn = o.n, glen = o.len;
    if (!rc && b->n && !(rc = sort_entries(b, &se)) && !(rc = segs_read(t, tree, &S)) && S.n &&
        (seg = S.id[S.n - 1] + 1) == 0)
        rc = mote__err(MOTE_FULL, "text index: no segment number left (compact the store)");
    if (!rc) {
        uint8_t *v;
        seg_key(key, seg);
        if (!(rc = op_add(&o, key, 5, 1, 0, &v)))
            *v = 0;
    }
    for (size_t i = 0; !rc && i < b->n;) {
        const char *term = b->terms + b->t[se[i].term].off;
        size_t tlen = b->t[se[i].term].len, j = i + 1;
        while (j < b->n && se[j].term == se[i].term)
            j++;
        int64_t df = 0;
        size_t npos = 0;
        neu.n = neu.npos = 0;
        for (size_t x = i; x < j; x++)
            npos += se[x].add ? se[x].tf : 0;
        if ((rc = grow((void **)&neu.p, &neu.cap, j - i, sizeof *neu.p)) ||
            (rc = grow((void **)&neu.pos, &neu.pos_cap, npos + 1, sizeof *neu.pos)))
            break;
        for (size_t x = i, g; !rc && x < j; x = g) {
            /* one document's changes: whether it held the term before them
             * (their first removes it) and after them (their last adds it) */
            for (g = x + 1; g < j && se[g].k.id == se[x].k.id; g++)
                ;
            const tx_entry *end = &se[g - 1];
            int was = !se[x].add, now = end->add;
            if (!was && !now)
                continue;
            uint8_t kind = !was ? PK_NEW : now ? PK_UPD : PK_DEL;
            uint32_t tf = now ? end->tf : 0; /* (room made above) */
            df += (kind == PK_NEW) - (kind == PK_DEL);
            if (tf)
                memcpy(neu.pos + neu.npos, b->pos + end->pos, tf * sizeof *neu.pos);
            neu.p[neu.n++] = (post){end->k.id, neu.npos, tf, kind};
            neu.npos += tf;
        }
        if (!rc && neu.n) {
            rc = write_blocks(&o, seg, term, tlen, neu.p, neu.n, neu.pos, df);
            wrote = 1;
        }
        i = j;
    }
    if (!rc && !wrote)
        o.n = gn, o.len = glen;
    tot[2] = TEXT_LAYOUT;
    if (!rc)
        rc = tot[0] ? put_varints(&o, "s", 1, tot, 3) : op_add(&o, "s", 1, 0, 1, NULL);
    mote__free(se);
    if (!rc)
        rc = op_write(t, tree, &o);
    if (!rc && wrote)
        rc = merge_levels(t, tree);
    mote__free(o.ops);
    mote__free(o.off);
    mote__free(o.buf);
    mote__free(neu.p);
    mote__free(neu.pos);
    segs_free(&S);
    mote__text_batch_clear(b);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

/* A posting of the search: document, query term, tf. */
/* BM25 (text.c's opening comment): a unit's idf from its document count df
 * among tot[0] documents; document id's length norm, k1 (1 - b + b dl /
 * avgdl); one unit's part of a score. */
static double bm25_idf(const uint64_t tot[2], double df)
{
    double x = log(((double)tot[0] - df + 0.5) / (df + 0.5));
    return x > 0 ? x : 1e-6;
}

/* BM25's length term of a document of dl tokens: k1 * (1 - b + b * dl / avgdl). */
static double bm25_len(double dl, const uint64_t tot[2])
{
    double avgdl = tot[0] ? (double)tot[1] / (double)tot[0] : 1;
    return TEXT_K1 * (1 - TEXT_B + TEXT_B * dl / avgdl);
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

/* qterms ix[] compared by their terms (terms_from's sort; qsort has no
 * context argument) */
static _Thread_local const qterms *tl_terms;

static int cmp_qterm(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return term_cmp(tl_terms->t[a], tl_terms->len[a], tl_terms->t[b], tl_terms->len[b]);
}


/* What searches read an index with: a cursor, its segments, scratch. */
typedef struct treader {
    mote_txn *t;
    uint32_t tree;
    mote_cursor *c;
    seglist S;
    postings part, tmp;
    struct sblock *sb; /* per segment: a decoded block (posting_of) */
    size_t sbcap;
    dblock dl;         /* a decoded block of lengths (doc_length) */
} treader;

/* A segment's block that posting_in reads forward (s), and the posting it
 * found last, decoded (ps). */
typedef struct sblock {
    postings ps;
    bscan s;
} sblock;

static int reader_open(treader *r, mote_txn *t, uint32_t tree)
{
    memset(r, 0, sizeof *r);
    r->t = t;
    r->tree = tree;
    int rc = segs_read(t, tree, &r->S);
    if (!rc)
        rc = mote_cursor_open(t, tree, &r->c);
    if (!rc && r->S.n && !(r->sb = mote__calloc(r->S.n, sizeof *r->sb)))
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    return rc;
}

static void reader_close(treader *r)
{
    mote_cursor_close(r->c);
    for (size_t i = 0; r->sb && i < r->S.n; i++) {
        mote__free(r->sb[i].ps.p);
        mote__free(r->sb[i].ps.pos);
        mote__free(r->sb[i].s.raw);
    }
    mote__free(r->sb);
    segs_free(&r->S);
    mote__free(r->part.p);
    mote__free(r->part.pos);
    mote__free(r->tmp.p);
    mote__free(r->tmp.pos);
    dblock_free(&r->dl);
    memset(r, 0, sizeof *r);
}

/* A document's length in tokens over the indexes of readers r[0..n) (one:
 * it must have one; several: 0 where a property has no text). */
static int doc_length(treader *r, unsigned n, uint64_t id, double *dl)
{
    *dl = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t v;
        int found, rc = doc_len(r[i].c, &r[i].dl, id, &v, &found);
        if (rc)
            return rc;
        if (!found && n == 1)
            return CORRUPT("text index: a document with postings has no length");
        *dl += found ? (double)v : 0;
    }
    return MOTE_OK;
}

/* Every posting of term, with positions, into ps (ascending ids): each
 * segment's laid over the older ones' (SEGMENTS). A segment's postings are
 * decoded onto the end of ps; only when they do not all come after the
 * older ones' (an update of an older document) are they moved aside and
 * folded in (most segments hold the documents added since the older ones:
 * no posting is copied). */
static int postings_all(treader *r, const char *term, size_t tlen, postings *ps)
{
    int rc = MOTE_OK;
    int64_t df = 0;
    ps->n = ps->npos = 0;
    for (size_t i = 0; !rc && i < r->S.n; i++) {
        size_t n0 = ps->n, pos0 = ps->npos;
        if ((rc = read_term(r->c, r->S.id[i], term, tlen, 0, ps, &df, NULL)) || !n0 ||
            ps->n == n0 || ps->p[n0].id > ps->p[n0 - 1].id)
            continue;
        r->part.n = r->part.npos = 0; /* the segment's postings, aside */
        for (size_t j = n0; !rc && j < ps->n; j++)
            rc = push_post(&r->part, &ps->p[j], ps->pos, ps->p[j].kind);
        ps->n = n0;
        ps->npos = pos0;
        if (!rc && !(rc = fold(ps, &r->part, &r->tmp))) {
            postings x = *ps;
            *ps = r->tmp;
            r->tmp = x;
        }
    }
    return rc ? rc : settle(ps, &df);
}

/* Term's document count: the changes its first block in each segment
 * carries, added up. */
static int term_df(treader *r, const char *term, size_t tlen, uint64_t *out)
{
    uint8_t key[KEY_MAX];
    int64_t df = 0;
    int rc = MOTE_OK;
    for (size_t i = 0; !rc && i < r->S.n; i++) {
        mote_val k, v;
        uint64_t first, head, z;
        unsigned u;
        rc = mote_cursor_seek(r->c, key, post_key(key, r->S.id[i], term, tlen, 0), MOTE_SEEK_GE);
        if (!rc && !(rc = mote_cursor_get(r->c, &k, &v)) &&
            is_block_of(&k, r->S.id[i], term, tlen, &first)) {
            const uint8_t *p = v.data, *end = p + v.size;
            if (!(u = mote__varint_get(p, end, &head)) || !(head & 1) ||
                !mote__varint_get(p + u, end, &z))
                return CORRUPT("text index: a term's first block is damaged");
            df += (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
        }
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
    }
    if (!rc && df < 0)
        return CORRUPT("text index: a term counts fewer than no documents");
    *out = (uint64_t)df;
    return rc;
}

/* Document id's posting of term in segment i (NULL if none there), from
 * its block, read forward from where the last id asked for was (ids asked
 * for in ascending order read each block once, and decode only the
 * positions of the postings found). sblock i must have been reset (loaded
 * = 0) for a new term. */
static int posting_in(treader *r, size_t i, const char *term, size_t tlen, uint64_t id,
                      const post **out)
{
    sblock *b = &r->sb[i];
    *out = NULL;
    if (!b->s.loaded || id < b->s.first || id >= b->s.next) {
        uint8_t key[KEY_MAX];
        mote_val k, v;
        uint64_t first, head, z;
        unsigned u;
        b->s.loaded = 1;
        b->s.first = id;
        b->s.count = b->s.seen = 0;
        size_t kl = post_key(key, r->S.id[i], term, tlen, id);
        int rc = mote_cursor_seek(r->c, key, kl, MOTE_SEEK_LE);
        if (!rc && !(rc = mote_cursor_get(r->c, &k, &v)) &&
            !is_block_of(&k, r->S.id[i], term, tlen, &first))
            rc = MOTE_NOTFOUND;
        if (rc == MOTE_NOTFOUND) { /* no block up to id: none up to the next one's first id */
            b->s.next = UINT64_MAX;
            rc = mote_cursor_seek(r->c, key, kl, MOTE_SEEK_GE);
            if (!rc && !(rc = mote_cursor_get(r->c, &k, NULL)) &&
                !is_block_of(&k, r->S.id[i], term, tlen, &b->s.next))
                b->s.next = UINT64_MAX;
            return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
        }
        if (rc || (rc = bscan_take(&b->s, &v, first)))
            return rc;
        const uint8_t *p = b->s.raw, *end = p + b->s.rlen;
        if (!(u = mote__varint_get(p, end, &head)) || !(head >> 1) ||
            ((head & 1) && !mote__varint_get(p + u, end, &z)))
            return CORRUPT("text index: a block's count is damaged");
        b->s.body = b->s.at = u + ((head & 1) ? mote__varint_size(z) : 0);
        b->s.count = head >> 1;
        b->s.next = UINT64_MAX;
        if (!(rc = mote_cursor_next(r->c)) && !(rc = mote_cursor_get(r->c, &k, NULL)) &&
            !is_block_of(&k, r->S.id[i], term, tlen, &b->s.next))
            b->s.next = UINT64_MAX;
        if (rc && rc != MOTE_NOTFOUND)
            return rc;
    }
    const uint8_t *end, *p = bscan_from(&b->s, id, &end);
    if (!p)
        return MOTE_OK;
    while (b->s.seen < b->s.count) {
        const uint8_t *start = p;
        uint64_t d, x = 1 << 2 | PK_NEW, v;
        unsigned u;
        if (!(u = mote__varint_fast(p, end, &d)))
            return CORRUPT("text index: a block is cut short");
        p += u;
        int one = (int)(d & 1);
        uint64_t nid = b->s.prev + (d >> 1);
        if (!one) {
            if (!(u = mote__varint_fast(p, end, &x)))
                return CORRUPT("text index: a block is cut short");
            p += u;
        }
        uint64_t kind = x & 3, tf = x >> 2;
        if (kind == PK_NONE || (kind == PK_DEL) != (tf == 0) || tf > (uint64_t)(end - p) ||
            (b->s.seen && nid <= b->s.prev))
            return CORRUPT("text index: a posting's count is damaged");
        if (nid > id) { /* not there: the next call starts at this posting */
            p = start;
            break;
        }
        if (nid < id) { /* passed over: its positions skipped, a byte at a time (each
                         * position's last byte is the one below 0x80) */
            for (uint64_t j = 0; j < tf; p++) {
                if (p == end)
                    return CORRUPT("text index: a posting's positions are damaged");
                j += *p < 0x80;
            }
            b->s.prev = nid;
            b->s.seen++;
            continue;
        }
        int rc; /* found: it and its positions, decoded */
        b->ps.n = b->ps.npos = 0;
        if ((rc = grow((void **)&b->ps.p, &b->ps.cap, 1, sizeof *b->ps.p)) ||
            (rc = grow((void **)&b->ps.pos, &b->ps.pos_cap, tf + 1, sizeof *b->ps.pos)))
            return rc;
        b->ps.p[b->ps.n++] = (post){nid, 0, (uint32_t)tf, (uint8_t)kind};
        for (uint64_t j = 0, at = 0; j < tf; j++) {
            if (!(u = mote__varint_get(p, end, &v)) || (j && v == 0) || at + v > UINT32_MAX)
                return CORRUPT("text index: a posting's positions are damaged");
            p += u;
            at += v;
            b->ps.pos[b->ps.npos++] = (uint32_t)at;
        }
        b->s.prev = nid;
        b->s.seen++;
        *out = &b->ps.p[0];
        break;
    }
    b->s.at = (size_t)(p - b->s.raw);
    return MOTE_OK;
}

/* Does document id hold term? *out: its posting (NULL: no), and *pos its
 * positions' array: the newest segment with a posting of it decides. */
static int posting_of(treader *r, const char *term, size_t tlen, uint64_t id, const post **out,
                      const uint32_t **pos)
{
    *out = NULL;
    for (size_t i = r->S.n; i-- > 0;) {
        const bscan *s = &r->sb[i].s;
        if (s->loaded && id >= s->first && id < s->next && s->seen == s->count &&
            (!s->count || id > s->prev))
            continue; /* the block that would hold it is read to its end (most
                       * segments, for most ids: without a call) */
        const post *p;
        int rc = posting_in(r, i, term, tlen, id, &p);
        if (rc)
            return rc;
        if (p) {
            if (p->kind != PK_DEL) {
                *out = p;
                *pos = r->sb[i].ps.pos;
            }
            return MOTE_OK;
        }
    }
    return MOTE_OK;
}

/* Forget the blocks posting_of decoded (another term comes). */
static void reader_reset(treader *r)
{
    for (size_t i = 0; i < r->S.n; i++)
        r->sb[i].s.loaded = 0;
}

/* The terms of the index that start with pre[0..pl), each once, ascending,
 * into the malloc'd *out (MOTE_TOKEN_MAX bytes each) and *lens. */
static int terms_from(treader *r, const char *pre, size_t pl, char (**out)[MOTE_TOKEN_MAX],
                      uint32_t **lens, size_t *n)
{
    qterms q = {0};
    int rc = MOTE_OK;
    for (size_t i = 0; !rc && i < r->S.n; i++) {
        uint8_t key[KEY_MAX];
        key[0] = 'q';
        wr_be32(key + 1, r->S.id[i]);
        memcpy(key + 5, pre, pl);
        size_t kl = 5 + pl;
        for (rc = mote_cursor_seek(r->c, key, kl, MOTE_SEEK_GE); !rc;
             rc = mote_cursor_seek(r->c, key, kl, MOTE_SEEK_GE)) {
            mote_val k;
            uint32_t seg;
            const uint8_t *tp;
            size_t tl;
            uint64_t first;
            if ((rc = mote_cursor_get(r->c, &k, NULL)))
                break;
            if (!block_key(&k, &seg, &tp, &tl, &first) || seg != r->S.id[i] || tl < pl ||
                tl > MOTE_TOKEN_MAX || memcmp(tp, pre, pl))
                break;
            if ((rc = qterms_push(&q, (const char *)tp, tl)))
                break;
            memcpy(key + 5, tp, tl); /* past the term's blocks */
            key[5 + tl] = 1;
            kl = 6 + tl;
        }
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
    }
    if (!rc && q.n > 1) { /* sorted, each once */
        size_t *ix = mote__malloc(q.n * sizeof *ix);
        qterms u = {0};
        if (!ix)
            rc = mote__err(MOTE_NOMEM, "out of memory searching text");
        for (size_t i = 0; ix && i < q.n; i++)
            ix[i] = i;
        tl_terms = &q;
        if (ix)
            qsort(ix, q.n, sizeof *ix, cmp_qterm);
        for (size_t i = 0; !rc && i < q.n; i++)
            if (!i || cmp_qterm(&ix[i - 1], &ix[i]))
                rc = qterms_push(&u, q.t[ix[i]], q.len[ix[i]]);
        mote__free(ix);
        mote__free(q.t);
        mote__free(q.len);
        q = u;
    }
    *out = q.t;
    *lens = q.len;
    *n = rc ? 0 : q.n;
    return rc;
}

/* Append to h every posting of term (query term number qi). */
static int hits_all(treader *r, const char *term, size_t tlen, uint32_t qi, hit **h, size_t *nh,
                    size_t *hcap, postings *ps)
{
    int rc = postings_all(r, term, tlen, ps);
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
static int hits_among(treader *r, const char *term, size_t tlen, uint32_t qi,
                      const uint64_t *cand, size_t nc, hit **h, size_t *nh, size_t *hcap,
                      size_t *kept)
{
    int rc = MOTE_OK;
    *kept = 0;
    reader_reset(r);
    for (size_t i = 0; !rc && i < nc; i++) {
        const post *p;
        const uint32_t *pos;
        if ((rc = posting_of(r, term, tlen, cand[i], &p, &pos)) || !p)
            continue;
        if ((rc = grow((void **)h, hcap, *nh + 1, sizeof **h)))
            break;
        (*h)[(*nh)++] = (hit){cand[i], qi, p->tf};
        ++*kept;
    }
    return rc;
}

int mote__text_each(mote_txn *t, uint32_t tree,
                    int (*fn)(void *ctx, const char *term, size_t tlen, uint64_t id,
                              const uint32_t *pos, uint32_t tf),
                    void *ctx)
{
    treader r;
    postings ps = {0};
    char term[MOTE_TOKEN_MAX];
    size_t tlen = 0;
    int rc = reader_open(&r, t, tree), have = 0;
    /* the terms in order: the smallest past the last one in any segment */
    while (!rc) {
        size_t best = 0;
        int found = 0;
        char next[MOTE_TOKEN_MAX];
        for (size_t i = 0; !rc && i < r.S.n; i++) {
            uint8_t key[KEY_MAX];
            mote_val k;
            int in;
            key[0] = 'q';
            wr_be32(key + 1, r.S.id[i]);
            memcpy(key + 5, term, tlen);
            key[5 + tlen] = 1; /* past term's blocks (nothing before the first) */
            rc = mote_cursor_seek(r.c, key, have ? 6 + tlen : 5, MOTE_SEEK_GE);
            if (!rc)
                rc = mote_cursor_get(r.c, &k, NULL);
            if (rc == MOTE_NOTFOUND) {
                rc = MOTE_OK;
                continue;
            }
            if (!rc)
                rc = least_term(&k, r.S.id[i], next, &best, &found, &in);
        }
        if (rc || !found)
            break;
        memcpy(term, next, best);
        tlen = best;
        have = 1;
        if ((rc = postings_all(&r, term, tlen, &ps)))
            break;
        for (size_t i = 0; !rc && i < ps.n; i++)
            rc = fn(ctx, term, tlen, ps.p[i].id, ps.pos + ps.p[i].pos, ps.p[i].tf);
    }
    reader_close(&r);
    mote__free(ps.p);
    mote__free(ps.pos);
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
static int unit_matches(treader *r, const qlparse *p, const qlnode *nd, umatch *u)
{
    int rc = MOTE_OK;
    if (nd->kind == QL_TERM) {
        postings ps = {0};
        rc = postings_all(r, p->tk.t[nd->tok], p->tk.len[nd->tok], &ps);
        for (size_t i = 0; !rc && i < ps.n; i++)
            rc = um_add(u, ps.p[i].id, ps.p[i].tf);
        mote__free(ps.p);
        mote__free(ps.pos);
        return rc;
    }
    if (nd->kind == QL_PREFIX) { /* every term that starts with the prefix */
        char (*terms)[MOTE_TOKEN_MAX] = NULL;
        uint32_t *lens = NULL;
        size_t nterms = 0;
        hit *h = NULL;
        size_t nh = 0, hcap = 0;
        postings ps = {0};
        rc = terms_from(r, p->tk.t[nd->tok], p->tk.len[nd->tok], &terms, &lens, &nterms);
        for (size_t i = 0; !rc && i < nterms; i++)
            rc = hits_all(r, terms[i], lens[i], 0, &h, &nh, &hcap, &ps);
        if (!rc && nh) { /* one match per document: the terms' counts added up */
            qsort(h, nh, sizeof *h, cmp_hit_id);
            for (size_t i = 0, j; !rc && i < nh; i = j) {
                uint32_t tf = 0;
                for (j = i; j < nh && h[j].id == h[i].id; j++)
                    tf += h[j].tf;
                rc = um_add(u, h[i].id, tf);
            }
        }
        mote__free(terms);
        mote__free(lens);
        mote__free(h);
        mote__free(ps.p);
        mote__free(ps.pos);
        return rc;
    }
    /* a phrase: its tokens at consecutive positions. The rarest token's
     * postings whole, as the phrase's starts (each position less the
     * token's place in the phrase); each other token keeps, in place, the
     * starts where it stands at its place, reading only the blocks of the
     * documents left (posting_of), as an AND of words reads */
    uint32_t m = nd->ntok, rare = 0;
    uint64_t best = UINT64_MAX;
    postings c = {0};
    for (uint32_t j = 0; !rc && m > 1 && j < m; j++) {
        uint64_t df;
        if (!(rc = term_df(r, p->tk.t[nd->tok + j], p->tk.len[nd->tok + j], &df)) && df < best)
            best = df, rare = j;
    }
    if (!rc)
        rc = postings_all(r, p->tk.t[nd->tok + rare], p->tk.len[nd->tok + rare], &c);
    for (size_t i = 0; !rc && i < c.n; i++) { /* positions -> starts */
        uint32_t *x = c.pos + c.p[i].pos, kept = 0;
        for (uint32_t y = 0; y < c.p[i].tf; y++)
            if (x[y] >= rare)
                x[kept++] = x[y] - rare;
        c.p[i].tf = kept;
    }
    for (uint32_t j = 0; !rc && j < m; j++) {
        if (j == rare)
            continue;
        reader_reset(r);
        for (size_t i = 0; !rc && i < c.n; i++) {
            const post *q;
            const uint32_t *pos;
            if (!c.p[i].tf)
                continue;
            if ((rc = posting_of(r, p->tk.t[nd->tok + j], p->tk.len[nd->tok + j], c.p[i].id, &q,
                                 &pos)))
                break;
            uint32_t *x = c.pos + c.p[i].pos, kept = 0, b = 0;
            for (uint32_t y = 0; q && y < c.p[i].tf; y++) { /* both ascending */
                uint64_t want = (uint64_t)x[y] + j;
                while (b < q->tf && pos[q->pos + b] < want)
                    b++;
                if (b < q->tf && pos[q->pos + b] == want)
                    x[kept++] = x[y];
            }
            c.p[i].tf = kept;
        }
    }
    for (size_t i = 0; !rc && i < c.n; i++)
        if (c.p[i].tf)
            rc = um_add(u, c.p[i].id, c.p[i].tf);
    mote__free(c.p);
    mote__free(c.pos);
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
    treader r[TEXT_MATCH_MAX];
    unsigned nr = 0;
    scored *sc = NULL;
    int rc = ql_parse(&p, q, qlen, all, &root);
    if (!rc && root >= 0 && !(u = mote__calloc(p.nn, sizeof *u)))
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    for (; !rc && root >= 0 && nr < nt; nr++)
        rc = reader_open(&r[nr], t, trees[nr]);
    for (size_t i = 0; !rc && root >= 0 && i < p.nn; i++) {
        if (p.n[i].kind > QL_PHRASE)
            continue;
        if (!w) {
            rc = unit_matches(&r[0], &p, &p.n[i], &u[i]);
        } else { /* its matches in each property, merged */
            umatch part[TEXT_MATCH_MAX] = {0};
            for (unsigned j = 0; !rc && j < nt; j++)
                rc = unit_matches(&r[j], &p, &p.n[i], &part[j]);
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
        if ((rc = doc_length(r, nt, docs[i], &dl)))
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
    for (unsigned j = 0; j < nr; j++)
        reader_close(&r[j]);
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

/* Heap h[0..n) with its worst match (by cmp_scored) on top: h[i] sifted
 * down to its place. */
static void worst_down(scored *h, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && cmp_scored(&h[c + 1], &h[c]) > 0)
            c++;
        if (cmp_scored(&h[c], &h[i]) <= 0)
            return;
        scored x = h[i];
        h[i] = h[c];
        h[c] = x;
        i = c;
    }
}

/* The `want` best of sc[0..ns) (0: all of them) by score, best first, into
 * the malloc'd arrays of a search's result. Fewer than all: the best kept in
 * a heap as the others pass (a phrase of common words matches thousands of
 * documents, an application shows ten). */
static int ranked_out(scored *sc, size_t ns, size_t want, uint64_t **ids, double **scores,
                      size_t *n)
{
    if (want && want < ns) {
        for (size_t i = want / 2; i-- > 0;)
            worst_down(sc, want, i);
        for (size_t i = want; i < ns; i++)
            if (cmp_scored(&sc[i], &sc[0]) < 0) {
                sc[0] = sc[i];
                worst_down(sc, want, 0);
            }
        ns = want;
    }
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

/* How many documents any of the n trees holds: their lengths' ids merged. */
static int docs_in_any(mote_txn *t, const uint32_t *trees, unsigned n, uint64_t *count)
{
    mote_cursor *c[TEXT_MATCH_MAX] = {0};
    dblock d[TEXT_MATCH_MAX];
    size_t at[TEXT_MATCH_MAX];
    int live[TEXT_MATCH_MAX], rc = MOTE_OK;
    *count = 0;
    memset(d, 0, sizeof d);
    for (unsigned i = 0; i < n; i++)
        at[i] = 0, live[i] = 0;
    /* each tree's blocks in order, one decoded at a time */
    for (unsigned i = 0; !rc && i < n; i++) {
        if ((rc = mote_cursor_open(t, trees[i], &c[i])))
            break;
        rc = mote_cursor_seek(c[i], "d", 1, MOTE_SEEK_GE);
        live[i] = !rc;
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
    }
    for (;;) {
        uint64_t lo = UINT64_MAX;
        for (unsigned i = 0; !rc && i < n; i++) {
            while (live[i] && at[i] == d[i].n) { /* the next block */
                mote_val k, v;
                uint64_t first;
                d[i].n = at[i] = 0;
                if ((rc = mote_cursor_get(c[i], &k, &v)) || !is_dblock(&k, &first)) {
                    live[i] = 0;
                    rc = rc == MOTE_NOTFOUND ? MOTE_OK : rc;
                    break;
                }
                if ((rc = dblock_decode(v.data, v.size, first, &d[i])))
                    break;
                if ((rc = mote_cursor_next(c[i])) == MOTE_NOTFOUND)
                    rc = MOTE_OK; /* (the next get finds it unset) */
            }
            if (live[i] && at[i] < d[i].n && d[i].id[at[i]] < lo)
                lo = d[i].id[at[i]];
        }
        if (rc || lo == UINT64_MAX)
            break;
        ++*count;
        for (unsigned i = 0; i < n; i++)
            if (live[i] && at[i] < d[i].n && d[i].id[at[i]] == lo)
                at[i]++;
    }
    for (unsigned i = 0; i < n; i++) {
        mote_cursor_close(c[i]);
        dblock_free(&d[i]);
    }
    return rc;
}

int mote__text_search_in(mote_txn *t, const uint32_t *trees, const double *w, unsigned n,
                         uint64_t objects, const char *q, size_t qlen, int flags, size_t want,
                         uint64_t **ids, double **scores, size_t *nout)
{
    uint64_t tot[2] = {0, 0}, most = 0;
    int rc = MOTE_OK;
    *ids = NULL;
    *scores = NULL;
    *nout = 0;
    for (unsigned i = 0; !rc && i < n; i++) {
        uint64_t v[3];
        if ((rc = get_totals(t, trees[i], v)) == MOTE_NOTFOUND) {
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
        rc = ranked_out(sc, ns, want, ids, scores, nout);
    mote__free(sc);
    return rc;
}

int mote__text_search(mote_txn *t, uint32_t tree, const char *q, size_t qlen, int all,
                      size_t want, uint64_t **ids, double **scores, size_t *n)
{
    unsigned tok = (unsigned)all & MOTE_TOKEN_STEM; /* the index stems: so do the words */
    all &= MOTE_MATCH_ALL;
    qterms qt = {0};
    hit *h = NULL;
    size_t nh = 0, hcap = 0;
    scored *sc = NULL;
    double *idf = NULL;
    postings ps = {0};
    treader r;
    uint64_t tot[3];
    *n = 0;
    *ids = NULL;
    *scores = NULL;
    size_t ns = 0;
    memset(&r, 0, sizeof r);
    int rc = get_totals(t, tree, tot);
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
    rc = reader_open(&r, t, tree);
    /* every term's document count (its idf); with `all`, the terms by it,
     * rarest first: its postings are the candidates the others narrow */
    uint64_t *df = mote__calloc(qt.n, sizeof *df);
    size_t *by = mote__malloc(qt.n * sizeof *by);
    if (!rc && (!df || !by))
        rc = mote__err(MOTE_NOMEM, "out of memory searching text");
    int ordered = all && qt.n > 1; /* AND of several: counts first, from the blocks' heads */
    for (size_t i = 0; !rc && ordered && i < qt.n; i++) {
        if ((rc = term_df(&r, qt.t[i], qt.len[i], &df[i])))
            break;
        idf[i] = bm25_idf(tot, (double)df[i]);
        by[i] = i;
        for (size_t j = i; j > 0 && df[by[j]] < df[by[j - 1]]; j--) { /* insertion: few terms */
            size_t x2 = by[j];
            by[j] = by[j - 1];
            by[j - 1] = x2;
        }
    }
    if (!rc && ordered && df[by[0]] > 0) {
        size_t i = by[0], kept = 0;
        rc = hits_all(&r, qt.t[i], qt.len[i], (uint32_t)i, &h, &nh, &hcap, &ps);
        uint64_t *cand = NULL;
        for (size_t x = 1; !rc && x < qt.n && nh; x++) {
            /* the candidates: the documents that held every term so far */
            size_t nc = 0, from = nh - (x == 1 ? nh : kept);
            mote__free(cand);
            if (!(cand = mote__malloc((nh - from + 1) * sizeof *cand))) {
                rc = mote__err(MOTE_NOMEM, "out of memory searching text");
                break;
            }
            for (size_t y = from; y < nh; y++)
                cand[nc++] = h[y].id;
            size_t j = by[x];
            rc = hits_among(&r, qt.t[j], qt.len[j], (uint32_t)j, cand, nc, &h, &nh, &hcap,
                            &kept);
            if (!rc && !kept)
                nh = 0; /* no document holds them all */
        }
        mote__free(cand);
    } else if (!ordered) { /* every term's postings; its count is their number */
        for (size_t i = 0; !rc && i < qt.n; i++) {
            size_t before = nh;
            rc = hits_all(&r, qt.t[i], qt.len[i], (uint32_t)i, &h, &nh, &hcap, &ps);
            df[i] = nh - before;
            idf[i] = bm25_idf(tot, (double)df[i]);
            if (!rc && all && !df[i])
                nh = 0; /* one term, that no document holds */
        }
    }
    mote__free(df);
    mote__free(by);
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
            double s = 0, dl;
            rc = doc_length(&r, 1, h[i].id, &dl);
            double norm = bm25_len(dl, tot);
            for (size_t x = i; x < j; x++)
                s += bm25_part(idf[h[x].term], h[x].tf, norm);
            sc[ns++] = (scored){h[i].id, s};
        }
        i = j;
    }
    if (rc)
        goto out;
ranked:
    rc = ranked_out(sc, ns, want, ids, scores, n);
out:
    reader_close(&r);
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
    uint64_t last_id;
    int have_term;
    int bad;
    void (*report)(void *, const char *);
    void *ctx;
    mote_cursor *c; /* the documents' lengths (verify_posting) */
    dblock dl;
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

/* Each posting of the index (all segments laid over each other). */
static int verify_posting(void *ctx, const char *term, size_t tlen, uint64_t id,
                          const uint32_t *pos, uint32_t tf)
{
    vstate *v = ctx;
    (void)pos, (void)tf;
    if (!v->have_term || v->tlen != tlen || memcmp(v->term, term, tlen)) {
        if (!tlen || tlen > MOTE_TOKEN_MAX)
            problem(v, "text index: a term of %zu bytes", tlen);
        v->tlen = tlen < MOTE_TOKEN_MAX ? tlen : MOTE_TOKEN_MAX;
        memcpy(v->term, term, v->tlen);
        v->have_term = 1;
        v->last_id = 0;
        v->st->terms++;
    } else if (id <= v->last_id) {
        problem(v, "text index: term \"%.*s\": document %llu after %llu", (int)tlen, term,
                (unsigned long long)id, (unsigned long long)v->last_id);
    }
    uint64_t len;
    int found;
    if (doc_len(v->c, &v->dl, id, &len, &found) || !found)
        problem(v, "text index: document %llu has postings but no length",
                (unsigned long long)id);
    v->last_id = id;
    v->st->postings++;
    return 0;
}

/* A block of the walk over every entry: in a segment of the directory,
 * after the term's previous block in it, the first of them carrying the
 * term's count change (equal to its postings' kinds added up). */
static void verify_block(vstate *v, const seglist *S, const mote_val *k, const mote_val *val,
                         uint64_t *blocks_in, postings *ps, int64_t *df, int64_t *sum,
                         char *last_term, size_t *last_tlen, uint32_t *last_seg)
{
    uint32_t seg;
    const uint8_t *tp;
    size_t tl;
    uint64_t first;
    if (!block_key(k, &seg, &tp, &tl, &first) || !tl || tl > MOTE_TOKEN_MAX) {
        problem(v, "text index: a block's key is damaged");
        return;
    }
    size_t lo = 0, hi = S->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (S->id[mid] < seg)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == S->n || S->id[lo] != seg)
        problem(v, "text index: a block of segment %u, which the directory does not hold", seg);
    else
        blocks_in[lo]++;
    int same = seg == *last_seg && tl == *last_tlen && !memcmp(tp, last_term, tl), head;
    if (!same) {
        if (*last_tlen && *df != *sum)
            problem(v, "text index: term \"%.*s\" in segment %u counts %lld documents, its "
                    "postings %lld", (int)*last_tlen, last_term, *last_seg, (long long)*df,
                    (long long)*sum);
        ps->n = ps->npos = 0;
        *df = *sum = 0;
        memcpy(last_term, tp, tl);
        *last_tlen = tl;
        *last_seg = seg;
    }
    size_t from = ps->n;
    if (decode_block(val->data, val->size, first, ps, df, &head)) {
        problem(v, "text index: %s", mote_errmsg(NULL));
        return;
    }
    if (head == same)
        problem(v, "text index: term \"%.*s\" in segment %u: %s", (int)tl, (const char *)tp, seg,
                same ? "a block after the first carries a count" : "its first block has no count");
    if (same && from && ps->p[from].id <= ps->p[from - 1].id)
        problem(v, "text index: term \"%.*s\" in segment %u: blocks overlap", (int)tl,
                (const char *)tp, seg);
    for (size_t i = from; i < ps->n; i++)
        *sum += (ps->p[i].kind == PK_NEW) - (ps->p[i].kind == PK_DEL);
    v->st->blocks++;
    if (val->size > TEXT_BLOCK_MAX) {
        v->st->big++;
        if (ps->n - from > 1)
            problem(v, "text index: a block of %zu bytes holds %zu postings", val->size,
                    ps->n - from);
    }
}

int mote__text_verify(mote_txn *t, uint32_t tree, text_stat *st,
                      void (*report)(void *ctx, const char *problem), void *ctx)
{
    memset(st, 0, sizeof *st);
    vstate v = {.t = t, .tree = tree, .st = st, .report = report, .ctx = ctx};
    seglist S = {0};
    uint64_t tot[3];
    int rc = get_totals(t, tree, tot);
    if (rc == MOTE_NOTFOUND)
        tot[0] = tot[1] = 0, rc = MOTE_OK;
    if (rc == MOTE_CORRUPT)
        problem(&v, "text index: the totals are damaged"), rc = MOTE_OK;
    if (rc == MOTE_FORMAT)
        return rc; /* an earlier layout: its message says what to do */
    if (!rc && (rc = segs_read(t, tree, &S)) == MOTE_CORRUPT)
        problem(&v, "text index: the directory of segments is damaged"), rc = MOTE_OK;
    if (!rc)
        rc = mote_cursor_open(t, tree, &v.c);
    if (!rc && (rc = mote__text_each(t, tree, verify_posting, &v)) == MOTE_CORRUPT) {
        problem(&v, "text index: %s", mote_errmsg(NULL));
        rc = MOTE_OK;
    }
    mote_cursor_close(v.c);
    dblock_free(&v.dl);
    /* every entry: blocks, segments, documents and their lengths */
    mote_cursor *c = NULL;
    uint64_t *blocks_in = rc ? NULL : mote__calloc(S.n + 1, sizeof *blocks_in);
    postings ps = {0};
    int64_t df = 0, sum = 0;
    char last_term[MOTE_TOKEN_MAX];
    size_t last_tlen = 0;
    uint32_t last_seg = 0;
    uint64_t docs = 0, tokens = 0, last_doc = 0;
    dblock dlen = {0};
    if (!rc && !blocks_in)
        rc = mote__err(MOTE_NOMEM, "out of memory checking a text index");
    if (!rc)
        rc = mote_cursor_open(t, tree, &c);
    for (rc = rc ? rc : mote_cursor_first(c); !rc; rc = mote_cursor_next(c)) {
        mote_val k, val;
        if ((rc = mote_cursor_get(c, &k, &val)))
            break;
        const uint8_t *kp = k.data;
        if (kp[0] == 'q') {
            verify_block(&v, &S, &k, &val, blocks_in, &ps, &df, &sum, last_term, &last_tlen,
                         &last_seg);
        } else if (kp[0] == 'd' && k.size == 9) {
            uint64_t first, prev = docs ? last_doc : 0;
            dlen.n = 0;
            is_dblock(&k, &first);
            if (dblock_decode(val.data, val.size, first, &dlen)) {
                problem(&v, "text index: %s", mote_errmsg(NULL));
                continue;
            }
            if (docs && first <= prev)
                problem(&v, "text index: blocks of lengths overlap at document %llu",
                        (unsigned long long)first);
            for (size_t i = 0; i < dlen.n; i++)
                tokens += dlen.len[i];
            docs += dlen.n;
            last_doc = dlen.id[dlen.n - 1];
        } else if (!(kp[0] == 's' && k.size == 1) && !(kp[0] == 'g' && k.size == 5)) {
            problem(&v, "text index: an entry of unknown kind 0x%02x", kp[0]);
        }
    }
    mote_cursor_close(c);
    if (rc == MOTE_NOTFOUND) {
        rc = MOTE_OK;
        if (last_tlen && df != sum)
            problem(&v, "text index: term \"%.*s\" in segment %u counts %lld documents, its "
                    "postings %lld", (int)last_tlen, last_term, last_seg, (long long)df,
                    (long long)sum);
        for (size_t i = 0; i < S.n; i++)
            if (!blocks_in[i])
                problem(&v, "text index: segment %u has no blocks", S.id[i]);
        if (tot[0] != docs || tot[1] != tokens)
            problem(&v, "text index: totals say %llu documents and %llu tokens, there are %llu "
                    "and %llu", (unsigned long long)tot[0], (unsigned long long)tot[1],
                    (unsigned long long)docs, (unsigned long long)tokens);
        st->docs = docs;
        st->tokens = tokens;
        st->segments = S.n;
    }
    mote__free(blocks_in);
    mote__free(ps.p);
    mote__free(ps.pos);
    dblock_free(&dlen);
    segs_free(&S);
    if (rc)
        return rc;
    return v.bad ? MOTE_CORRUPT : MOTE_OK;
}

/* ---- checking a document ---------------------------------------------------------- */

int mote__text_check_doc(mote_txn *t, uint32_t tree, uint64_t id, const char *utf8, size_t len,
                         unsigned tok, uint64_t *terms)
{
    text_batch tb = {0}; /* its terms only */
    noting g = {.b = &tb};
    treader r;
    uint64_t dl;
    *terms = 0;
    memset(&r, 0, sizeof r);
    int rc = mote_tokenize(utf8, len, tok, note_token, &g);
    if (!rc) {
        if (g.n)
            qsort(g.o, g.n, sizeof *g.o, cmp_occ);
        int found;
        if (!(rc = reader_open(&r, t, tree)) && !(rc = doc_len(r.c, &r.dl, id, &dl, &found)) &&
            !found)
            rc = mote__err(MOTE_CORRUPT, "not in the index");
        else if (!rc && dl != g.n)
            rc = mote__err(MOTE_CORRUPT, "indexed with %llu tokens, its text has %zu",
                           (unsigned long long)dl, g.n);
    }
    for (size_t i = 0; !rc && i < g.n;) {
        const char *term = tb.terms + tb.t[g.o[i].term].off;
        size_t tlen = tb.t[g.o[i].term].len, j = i + 1;
        while (j < g.n && g.o[j].term == g.o[i].term)
            j++;
        ++*terms;
        const post *p;
        const uint32_t *pos = NULL;
        reader_reset(&r);
        rc = posting_of(&r, term, tlen, id, &p, &pos);
        if (!rc && !p)
            rc = mote__err(MOTE_CORRUPT, "term \"%.*s\" has no posting of it", (int)tlen, term);
        if (!rc && p->tf != j - i)
            rc = mote__err(MOTE_CORRUPT, "term \"%.*s\": %u positions indexed, %zu in the text",
                           (int)tlen, term, p->tf, j - i);
        for (size_t x = i; !rc && x < j; x++)
            if (pos[p->pos + (x - i)] != g.o[x].pos)
                rc = mote__err(MOTE_CORRUPT, "term \"%.*s\": its positions differ from the text",
                               (int)tlen, term);
        i = j;
    }
    reader_close(&r);
    mote__free(g.o);
    mote__text_batch_free(&tb);
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

/* mote_text_stat's count of terms and postings (text_each gives a term's
 * postings one after another). */
typedef struct tcount {
    mote_tstat *out;
    char last[MOTE_TOKEN_MAX];
    size_t len;
} tcount;

static int count_posting(void *ctx, const char *term, size_t tlen, uint64_t id,
                         const uint32_t *pos, uint32_t tf)
{
    tcount *c = ctx;
    (void)id, (void)pos, (void)tf;
    if (!c->out->postings || tlen != c->len || memcmp(term, c->last, tlen)) {
        c->out->terms++;
        c->len = tlen < MOTE_TOKEN_MAX ? tlen : MOTE_TOKEN_MAX;
        memcpy(c->last, term, c->len);
    }
    c->out->postings++;
    return 0;
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
        if (kp[0] == 'q') {
            out->blocks++;
        } else if (kp[0] == 'g') {
            out->segments++;
        } else if (kp[0] == 'd' && k.size == 9 && mote__varint_get(vp, vp + v.size, &x)) {
            dblock d = {0}; /* (a damaged block is mote check's to report) */
            if (!dblock_decode(vp, v.size, mote__be64(kp + 1), &d))
                for (size_t i = 0; i < d.n; i++)
                    out->tokens += d.len[i];
            out->texts += d.n;
            dblock_free(&d);
        }
    }
    mote_cursor_close(c);
    if (rc == MOTE_NOTFOUND) { /* terms and postings: the segments laid over each other */
        tcount tc = {.out = out};
        rc = mote__text_each(t, p->text_tree, count_posting, &tc);
    }
    return rc;
}
