/*
 * text.h — full-text indexes (issue 19): an inverted index of one string
 * property kept in one kv tree, changed in sorted batches, searched with
 * BM25 ranking. The tree's layout and the rules are in text.c's opening
 * comment. This part is the index itself; declaring one on a property
 * (schema.c) and noting the texts that puts and removes change (object.c,
 * the end of text.c) are the object layer's.
 */
#ifndef MOTE_TEXT_H
#define MOTE_TEXT_H

#include "kv.h"

/* BM25's parameters (SQLite FTS5's bm25() defaults). */
#define TEXT_K1 1.2
#define TEXT_B 0.75
/* Bytes of one block of postings (a kv value, below a quarter of a 4 KB
 * page with the longest key: no overflow pages). */
#define TEXT_BLOCK_MAX 700u

/* The changes to one index that a write transaction collects before it
 * writes them in one sorted pass (mote__text_apply). */
typedef struct text_batch {
    struct tx_entry *e; /* one per (term, document, add or remove) */
    size_t n, cap;
    struct tx_doc *d;   /* one per (document, add or remove) */
    size_t nd, dcap;
    struct tx_term *t;  /* the distinct terms, each once */
    size_t nt, tcap;
    char *terms;        /* their bytes */
    unsigned tok;       /* mote_tokenize's flags for its texts (MOTE_TOKEN_STEM) */
    size_t terms_len, terms_cap;
    uint32_t *slots;    /* a hash table of the terms: index + 1, 0 if free */
    size_t nslots;      /* a power of two, at least twice nt (0: none yet) */
    uint32_t *pos;      /* the added terms' positions */
    size_t npos, pos_cap;
} text_batch;
/* A batch that holds this many entries is written early (object.h,
 * mote__text_flush_big). */
#define TEXT_BATCH_MAX (1u << 20)

/* Note that document id's text (utf8[0..len)) enters the index (`add`
 * non-zero) or leaves it (the text it was indexed with). An update is the
 * removal of the old text, then the addition of the new one; a document
 * may change several times in one batch (what counts is whether it was
 * indexed before the first note, and its text after the last). After an
 * error (MOTE_NOMEM) the batch holds part of a note: the transaction must
 * fail, and the batch be emptied. */
int mote__text_note(text_batch *b, uint64_t id, const char *utf8, size_t len, int add);
/* Write the batch into tree (a write transaction's) as a new segment
 * (text.c, SEGMENTS; merging segments if a level fills) and empty it. A
 * removal of a document the tree does not hold: MOTE_CORRUPT. */
int mote__text_apply(mote_txn *t, uint32_t tree, text_batch *b);
/* Empty the batch, keeping its memory; free it. */
void mote__text_batch_clear(text_batch *b);
void mote__text_batch_free(text_batch *b);

/* The documents of tree that hold at least one of the terms of query
 * text q (tokenized as documents are; all of them with `all`'s bit
 * MOTE_MATCH_ALL; its bit MOTE_TOKEN_STEM: the index stems), by BM25
 * score, highest first (equal scores: lower id first), the `want` best of
 * them (0: all): malloc'd arrays *ids and *scores of *n (NULL when none). */
int mote__text_search(mote_txn *t, uint32_t tree, const char *q, size_t qlen, int all,
                      size_t want, uint64_t **ids, double **scores, size_t *n);

/* The same over the n (1..TEXT_MATCH_MAX) trees of an entity's properties,
 * as the columns of one FTS5 table: a unit (term, prefix, phrase) matches a
 * document if it matches in any of them, its count is the sum over them of
 * w[i] times its count in tree i, and a document's length is the sum of its
 * lengths; the documents are those with a text in any of them (`objects`:
 * how many objects the entity has, all of them if one tree holds that
 * many; read only when n > 1). The query goes through the query language
 * (also a list of words). */
#define TEXT_MATCH_MAX MOTE_MATCH_PROPS_MAX
int mote__text_search_in(mote_txn *t, const uint32_t *trees, const double *w, unsigned n,
                         uint64_t objects, const char *q, size_t qlen, int flags, size_t want,
                         uint64_t **ids, double **scores, size_t *nout);

/* MOTE_FORMAT (its message says how to rebuild it) if tree holds an index
 * of the earlier layout (one block chain per term), else MOTE_OK (damaged
 * totals are mote__text_verify's to report). */
int mote__text_layout(mote_txn *t, uint32_t tree);

/* MOTE_OK if query text q is well formed (text.c, "the query language"),
 * else MOTE_INVALID with a message naming the position. */
int mote__text_query_check(const char *q, size_t len, int all);

/* The index's totals: documents, tokens, distinct terms, postings, blocks
 * (big: those over TEXT_BLOCK_MAX bytes, one posting each), segments. */
typedef struct text_stat {
    uint64_t docs, tokens, terms, postings, blocks, big, segments;
} text_stat;
/* Check tree's structure (blocks ordered and well formed, in segments of
 * the directory, each term's document-count change in a segment equal to
 * its postings', the segments laid over each other consistent, documents
 * and tokens equal to the totals) and fill *st; each problem goes to report
 * (may be NULL) and makes the result MOTE_CORRUPT. MOTE_FORMAT for an
 * index of the earlier layout. */
int mote__text_verify(mote_txn *t, uint32_t tree, text_stat *st,
                      void (*report)(void *ctx, const char *problem), void *ctx);
/* Is document id indexed in tree with text utf8[0..len): its length, and
 * each of its terms with its positions? MOTE_CORRUPT with a message saying
 * what differs. *terms: its distinct terms (a check adds them up: the
 * index's postings must number as many). */
int mote__text_check_doc(mote_txn *t, uint32_t tree, uint64_t id, const char *utf8, size_t len,
                         unsigned tok, uint64_t *terms);
/* Each posting of tree in order: fn(ctx, term, term_len, id, positions,
 * tf) (positions ascending); non-zero from fn stops (returned). For tests
 * and mote check. */
int mote__text_each(mote_txn *t, uint32_t tree,
                    int (*fn)(void *ctx, const char *term, size_t tlen, uint64_t id,
                              const uint32_t *pos, uint32_t tf),
                    void *ctx);

#endif
