/*
 * make_corpus.c — writes the fuzzers' seed corpus: store images of several
 * shapes (tiny, multi-level, overflow values, unclean, new, commit chains, a vector
 * index, a full-text index) for fuzz_file, deltas for fuzz_delta, and a
 * few op programs for fuzz_api. Usage: make_corpus DIR (creates DIR/file,
 * DIR/delta and DIR/api). Not built by meson; from the repository, after
 * `make build`:
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -Ibuild/include -Isrc -Itests/c \
 *      -o make_corpus tests/fuzz/make_corpus.c tests/c/memio.c build/libmote.a -lpthread -lm
 * The corpus is committed; rerun only when the format changes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "delta_base.h"
#include "memio.h"
#include "mote.h"

static void save(const char *dir, const char *name, uint8_t mode, const uint8_t *img,
                 size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s-%u", dir, name, mode);
    FILE *f = fopen(p, "wb");
    fputc(mode, f);
    fwrite(img, 1, len, f);
    fclose(f);
}

/* A new store at `path` in the in-memory file system m (initialized here). */
static mote_store *create(memio *m, const char *path)
{
    memio_init(m);
    mote_options o = {MOTE_CREATE, 0, 0, &m->io};
    mote_store *s;
    if (mote_open(path, &o, &s))
        exit(1);
    return s;
}

static void store(const char *dir, const char *name, int n, size_t vlen, int clean)
{
    memio m;
    mote_store *s = create(&m, "/c/s.mote");
    static uint8_t v[20000];
    for (int round = 0; round < 2; round++) {
        mote_txn *t;
        uint32_t tree;
        mote_begin(s, 0, &t);
        mote_kv_tree(t, round ? "t" : "notes", MOTE_TREE_CREATE, &tree);
        for (int i = 0; i < n; i++) {
            uint32_t k = (uint32_t)i * 2654435761u;
            memset(v, i, vlen);
            mote_kv_put(t, tree, &k, 4, v, i % 7 == 0 ? vlen : vlen % 200, 0);
        }
        mote_kv_put(t, tree, "k", 1, "v", 1, 0);
        if (mote_commit(t))
            exit(2);
    }
    size_t len;
    const uint8_t *img = memio_get(&m, "/c/s.mote", &len);
    uint8_t *copy = malloc(len);
    memcpy(copy, img, len);
    mote_close(s);
    if (clean)
        img = memio_get(&m, "/c/s.mote", &len);
    else
        img = copy;
    save(dir, name, 0, img, len);
    save(dir, name, 1, img, len);
    free(copy);
    memio_free(&m);
}

/* A store with objects: two entities, indexes, a relation, NULLs. */
static void objects(const char *dir)
{
    memio m;
    mote_store *s = create(&m, "/c/o.mote");
    static const mote_prop_def props[] = {
        {"level", MOTE_T_INT16, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
        {"text", MOTE_T_STRING, MOTE_P_INDEXED | MOTE_P_UNIQUE, 0, NULL, NULL, {0}, NULL},
        {"note", MOTE_T_STRING, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
        {"parent", MOTE_T_TOONE, 0, 0, NULL, "Note", {0}, NULL},
        {"links", MOTE_T_TOMANY, 0, 0, NULL, "Note", {0}, NULL},
        {"f", MOTE_T_FLOAT64, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    };
    mote_txn *t;
    mote_entity *e;
    if (mote_begin(s, 0, &t) || mote_entity_open(t, "Note", props, 6, &e))
        exit(3);
    for (int i = 0; i < 60; i++) {
        char txt[32];
        snprintf(txt, sizeof txt, "text %d", i);
        mote_value v[6];
        memset(v, 0, sizeof v);
        v[0].v.i = i % 5 * 10;
        v[1].v.s.p = txt;
        v[1].v.s.n = strlen(txt);
        v[2].null = i % 2;
        v[2].v.s.p = "note";
        v[2].v.s.n = 4;
        v[3].v.i = i / 2;
        v[5].v.f = i * 0.5;
        if (mote_put(t, e, 0, v, 0, NULL))
            exit(4);
        if (i > 2)
            mote_link(t, e, 4, (uint64_t)i, (uint64_t)(i - 2));
    }
    if (mote_commit(t))
        exit(5);
    size_t len;
    const uint8_t *img = memio_get(&m, "/c/o.mote", &len);
    save(dir, "objects", 0, img, len);
    save(dir, "objects", 1, img, len);
    mote_close(s);
    memio_free(&m);
}

/* A store with a vector index (hnsw.c): 300 objects, some removed (their
 * neighbours' lists repaired), in two commits. */
static void vectors(const char *dir)
{
    memio m;
    mote_store *s = create(&m, "/c/v.mote");
    static const mote_prop_def props[] = {
        {"tag", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
        {"vec", MOTE_T_VECTOR, MOTE_P_NULLABLE | MOTE_P_HNSW, 8, NULL, NULL,
         {MOTE_DIST_EUCLIDEAN, 4, 0}, NULL},
    };
    mote_txn *t;
    mote_entity *e;
    if (mote_begin(s, 0, &t) || mote_entity_open(t, "Emb", props, 2, &e))
        exit(8);
    for (int i = 0; i < 300; i++) {
        float x[8];
        for (int j = 0; j < 8; j++)
            x[j] = (float)((i * 7 + j * 13) % 17) - 8.0f;
        mote_value v[2];
        memset(v, 0, sizeof v);
        v[0].v.i = i % 10;
        v[1].v.s.p = x;
        v[1].v.s.n = sizeof x;
        v[1].null = i % 29 == 0;
        if (mote_put(t, e, 0, v, 0, NULL))
            exit(9);
    }
    if (mote_commit(t) || mote_begin(s, 0, &t))
        exit(10);
    for (uint64_t id = 5; id <= 300; id += 11)
        mote_remove(t, e, id);
    if (mote_commit(t))
        exit(11);
    size_t len;
    const uint8_t *img = memio_get(&m, "/c/v.mote", &len);
    save(dir, "vectors", 0, img, len);
    save(dir, "vectors", 1, img, len);
    mote_close(s);
    memio_free(&m);
}

/* A store with a full-text index (text.c): 300 texts over a small
 * vocabulary (terms in several blocks), some removed and some changed, in
 * two commits, then ten commits of a few changes each (segments of two
 * levels, one merge). */
static void texts(const char *dir)
{
    memio m;
    mote_store *s = create(&m, "/c/t.mote");
    static const mote_prop_def props[] = {
        {"body", MOTE_T_STRING, MOTE_P_FULLTEXT | MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    };
    static const char *const words[] = {"alpha", "beta", "gamma", "delta", "Épsilon", "中"};
    mote_txn *t;
    mote_entity *e;
    if (mote_begin(s, 0, &t) || mote_entity_open(t, "Doc", props, 1, &e))
        exit(12);
    for (uint64_t id = 1; id <= 300; id++) {
        char b[256];
        size_t n = 0;
        for (uint64_t w = 0; w < 3 + id % 9; w++)
            n += (size_t)snprintf(b + n, sizeof b - n, "%s ", words[(id * 7 + w * w) % 6]);
        mote_value v = {0};
        v.v.s.p = b;
        v.v.s.n = n;
        v.null = id % 31 == 0;
        if (mote_put(t, e, id, &v, 0, NULL))
            exit(13);
    }
    if (mote_commit(t) || mote_begin(s, 0, &t))
        exit(14);
    for (uint64_t id = 3; id <= 300; id += 13) {
        mote_remove(t, e, id);
        mote_value v = {0};
        v.v.s.p = "beta beta gamma";
        v.v.s.n = 15;
        mote_put(t, e, id + 1, &v, 0, NULL);
    }
    if (mote_commit(t))
        exit(15);
    for (uint64_t c = 0; c < 10; c++) {
        if (mote_begin(s, 0, &t))
            exit(16);
        for (uint64_t id = 5 + c; id <= 300; id += 37) {
            mote_value v = {0};
            v.v.s.p = c % 2 ? "gamma delta alpha" : "delta Épsilon";
            v.v.s.n = strlen(v.v.s.p);
            mote_put(t, e, id, &v, MOTE_PUT_UPSERT, NULL);
        }
        if (mote_commit(t))
            exit(17);
    }
    size_t len;
    const uint8_t *img = memio_get(&m, "/c/t.mote", &len);
    save(dir, "texts", 0, img, len);
    save(dir, "texts", 1, img, len);
    mote_close(s);
    memio_free(&m);
}

/* New stores (pager.h FRESH): the creation page alone, a lazy commit
 * beside it in slot 1, and the first durable commit in both slots. */
static void fresh(const char *dir)
{
    memio m;
    mote_store *s = create(&m, "/c/f.mote");
    size_t len;
    const uint8_t *img = memio_get(&m, "/c/f.mote", &len);
    save(dir, "created", 0, img, len);
    mote_txn *t;
    uint32_t tree;
    if (mote_begin(s, MOTE_TXN_LAZY, &t) || mote_kv_tree(t, "lazy", MOTE_TREE_CREATE, &tree) ||
        mote_commit(t))
        exit(6);
    img = memio_get(&m, "/c/f.mote", &len);
    save(dir, "created-lazy", 0, img, len);
    if (mote_begin(s, 0, &t) || mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tree) ||
        mote_kv_put(t, tree, "k", 1, "v", 1, 0) || mote_commit(t))
        exit(7);
    img = memio_get(&m, "/c/f.mote", &len);
    save(dir, "first-commit", 0, img, len);
    save(dir, "first-commit", 1, img, len);
    mote_close(s);
    memio_free(&m);
}

/* A store with a commit chain (pager.h COMMIT CHAIN): 300 entries, then
 * `singles` single-put commits (records since a checkpoint, and one past
 * CHAIN_MAX: a checkpoint and a new chain), closed or not. */
static void chain(const char *dir, const char *name, int singles, int clean)
{
    memio m;
    mote_store *s = create(&m, "/c/s.mote");
    mote_txn *t;
    uint32_t tree;
    static uint8_t v[100];
    mote_begin(s, 0, &t);
    mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tree);
    for (uint32_t i = 0; i < 300; i++)
        mote_kv_put(t, tree, &i, 4, v, sizeof v, 0);
    if (mote_commit(t))
        exit(2);
    for (uint32_t i = 0; i < (uint32_t)singles; i++) {
        uint32_t k = i * 2654435761u;
        mote_begin(s, 0, &t);
        mote_kv_put(t, tree, &k, 4, v, sizeof v, 0);
        if (mote_commit(t))
            exit(2);
    }
    size_t len;
    const uint8_t *img = memio_get(&m, "/c/s.mote", &len);
    uint8_t *copy = malloc(len);
    memcpy(copy, img, len);
    mote_close(s);
    if (clean)
        img = memio_get(&m, "/c/s.mote", &len);
    else
        img = copy;
    save(dir, name, 0, img, len);
    save(dir, name, 1, img, len);
    free(copy);
    memio_free(&m);
}

/* Deltas for fuzz_delta: full ones (of the base, and of the base a few
 * commits on) and one from the base's commit, with and without the
 * checksum mode. */
static void deltas(const char *dir)
{
    memio m;
    mote_store *s = delta_base(&m, "/c/s.mote");
    mote_stat st;
    if (mote_store_stat(s, &st) || mote_delta(s, 0, "/c/full.delta", MOTE_NOSYNC, NULL))
        exit(20);
    delta_base_commits(s, 3, 4);
    if (mote_delta(s, st.txnid, "/c/since.delta", MOTE_NOSYNC, NULL) ||
        mote_delta(s, 0, "/c/full2.delta", MOTE_NOSYNC, NULL))
        exit(21);
    const char *names[] = {"full", "since", "full2"};
    for (int i = 0; i < 3; i++) {
        char p[64];
        snprintf(p, sizeof p, "/c/%s.delta", names[i]);
        size_t len;
        const uint8_t *img = memio_get(&m, p, &len);
        if (!img)
            exit(22);
        for (uint8_t mode = 0; mode < 2; mode++) /* (a full one as such, the other to the copy) */
            save(dir, names[i], (uint8_t)(mode | (i == 1 ? 2 : 0)), img, len);
    }
    mote_close(s);
    memio_free(&m);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char d[512];
    mkdir(argv[1], 0755);
    snprintf(d, sizeof d, "%s/file", argv[1]);
    mkdir(d, 0755);
    store(d, "tiny", 10, 30, 1);
    store(d, "tiny-unclean", 10, 30, 0);
    store(d, "levels", 600, 60, 1);
    store(d, "overflow", 40, 9000, 0);
    objects(d);
    vectors(d);
    texts(d);
    fresh(d);
    chain(d, "chain", 12, 1);
    chain(d, "chain-unclean", 40, 0);
    snprintf(d, sizeof d, "%s/delta", argv[1]);
    mkdir(d, 0755);
    deltas(d);
    snprintf(d, sizeof d, "%s/api", argv[1]);
    mkdir(d, 0755);
    uint64_t rs = 5;
    for (int f = 0; f < 4; f++) {
        char p[600];
        snprintf(p, sizeof p, "%s/prog-%d", d, f);
        FILE *fp = fopen(p, "wb");
        for (int i = 0; i < 600; i++) {
            rs ^= rs << 13;
            rs ^= rs >> 7;
            rs ^= rs << 17;
            fputc((int)(rs & 0xff), fp);
        }
        fclose(fp);
    }
    return 0;
}
