/*
 * test_model.c — randomized model test: thousands of random operations on
 * three trees (puts, replaces, deletes, aborted transactions, reopen),
 * compared after every step with a plain sorted-array model, including
 * cursors in both directions, seeks, ranks, nth and range counts; then
 * mote_check. Keys have shared prefixes and random lengths; some values
 * need overflow pages.
 */
#include "kv.h" /* mote__kv_apply */
#include "test.h"

typedef struct ent {
    uint8_t k[24];
    uint32_t klen;
    uint8_t *v;
    uint32_t vlen;
} ent;

typedef struct model {
    ent *e[3];
    int n[3], cap[3];
} model;

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl)
{
    uint32_t m = al < bl ? al : bl;
    int r = m ? memcmp(a, b, m) : 0;
    return r ? r : (al > bl) - (al < bl);
}

/* index of first entry >= key */
static int lower(const model *m, int t, const uint8_t *k, uint32_t kl)
{
    int lo = 0, hi = m->n[t];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (kcmp(m->e[t][mid].k, m->e[t][mid].klen, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void m_put(model *m, int t, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl)
{
    int i = lower(m, t, k, kl);
    if (i < m->n[t] && !kcmp(m->e[t][i].k, m->e[t][i].klen, k, kl)) {
        free(m->e[t][i].v);
    } else {
        if (m->n[t] == m->cap[t]) {
            m->cap[t] = m->cap[t] ? m->cap[t] * 2 : 64;
            m->e[t] = realloc(m->e[t], (size_t)m->cap[t] * sizeof(ent));
        }
        memmove(&m->e[t][i + 1], &m->e[t][i], (size_t)(m->n[t] - i) * sizeof(ent));
        m->n[t]++;
        memcpy(m->e[t][i].k, k, kl);
        m->e[t][i].klen = kl;
    }
    m->e[t][i].v = malloc(vl ? vl : 1);
    memcpy(m->e[t][i].v, v, vl);
    m->e[t][i].vlen = vl;
}

static int m_del(model *m, int t, const uint8_t *k, uint32_t kl)
{
    int i = lower(m, t, k, kl);
    if (i >= m->n[t] || kcmp(m->e[t][i].k, m->e[t][i].klen, k, kl))
        return 0;
    free(m->e[t][i].v);
    memmove(&m->e[t][i], &m->e[t][i + 1], (size_t)(m->n[t] - i - 1) * sizeof(ent));
    m->n[t]--;
    return 1;
}

static void m_copy(model *dst, const model *src)
{
    for (int t = 0; t < 3; t++) {
        dst->n[t] = dst->cap[t] = src->n[t];
        dst->e[t] = malloc((size_t)(src->n[t] + 1) * sizeof(ent));
        for (int i = 0; i < src->n[t]; i++) {
            dst->e[t][i] = src->e[t][i];
            dst->e[t][i].v = malloc(src->e[t][i].vlen + 1);
            memcpy(dst->e[t][i].v, src->e[t][i].v, src->e[t][i].vlen);
        }
    }
}

static void m_free(model *m)
{
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < m->n[t]; i++)
            free(m->e[t][i].v);
        free(m->e[t]);
        m->e[t] = NULL;
        m->n[t] = m->cap[t] = 0;
    }
}

static uint32_t rand_key(uint64_t *rs, uint8_t *k)
{
    uint32_t kl = (uint32_t)(test_rand(rs) % 24);
    for (uint32_t i = 0; i < kl; i++)
        k[i] = (uint8_t)('a' + test_rand(rs) % (i < 3 ? 3 : 26));
    return kl;
}

static uint8_t vbuf[40000];

static uint32_t rand_val(uint64_t *rs)
{
    uint64_t r = test_rand(rs) % 100;
    uint32_t vl = r < 3 ? 1500 + (uint32_t)(test_rand(rs) % 30000) : (uint32_t)(test_rand(rs) % 200);
    uint8_t b = (uint8_t)test_rand(rs);
    for (uint32_t i = 0; i < vl; i++)
        vbuf[i] = (uint8_t)(b + i * 13);
    return vl;
}

static void compare(mote_txn *t, const uint32_t *trees, const model *m, uint64_t *rs)
{
    for (int ti = 0; ti < 3; ti++) {
        mote_cursor *c;
        OK(mote_cursor_open(t, trees[ti], &c));
        int i = 0, rc;
        for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c), i++) {
            mote_val k, v;
            OK(mote_cursor_get(c, &k, &v));
            CHECK(i < m->n[ti]);
            const ent *e = &m->e[ti][i];
            CHECK(k.size == e->klen && !kcmp(k.data, (uint32_t)k.size, e->k, e->klen));
            CHECK(v.size == e->vlen && (!v.size || !memcmp(v.data, e->v, v.size)));
        }
        CHECK_RC(rc, MOTE_NOTFOUND);
        CHECK(i == m->n[ti]);
        for (rc = mote_cursor_last(c), i = m->n[ti] - 1; rc == MOTE_OK; rc = mote_cursor_prev(c), i--) {
            mote_val k;
            OK(mote_cursor_get(c, &k, NULL));
            CHECK(i >= 0 && k.size == m->e[ti][i].klen);
        }
        CHECK(i == -1);
        uint64_t cnt;
        OK(mote_kv_count(t, trees[ti], NULL, 0, NULL, 0, &cnt));
        CHECK(cnt == (uint64_t)m->n[ti]);
        for (int q = 0; q < 20; q++) {
            uint8_t a[24], b[24];
            uint32_t al = rand_key(rs, a), bl = rand_key(rs, b);
            int ia = lower(m, ti, a, al), ib = lower(m, ti, b, bl);
            OK(mote_kv_count(t, trees[ti], a, al, b, bl, &cnt));
            CHECK(cnt == (uint64_t)(ib > ia ? ib - ia : 0));
            /* seeks */
            int mode = (int)(test_rand(rs) % 4), want;
            int eq = ia < m->n[ti] && !kcmp(m->e[ti][ia].k, m->e[ti][ia].klen, a, al);
            if (mode == MOTE_SEEK_GE) want = ia;
            else if (mode == MOTE_SEEK_GT) want = ia + eq;
            else if (mode == MOTE_SEEK_LE) want = ia + eq - 1;
            else want = ia - 1;
            rc = mote_cursor_seek(c, a, al, mode);
            if (want < 0 || want >= m->n[ti]) {
                CHECK_RC(rc, MOTE_NOTFOUND);
            } else {
                OK(rc);
                mote_val k;
                uint64_t r;
                OK(mote_cursor_get(c, &k, NULL));
                CHECK(!kcmp(k.data, (uint32_t)k.size, m->e[ti][want].k, m->e[ti][want].klen));
                OK(mote_cursor_rank(c, &r));
                CHECK(r == (uint64_t)want);
            }
            if (m->n[ti]) {
                int nth = (int)(test_rand(rs) % (uint64_t)m->n[ti]);
                mote_val k;
                OK(mote_cursor_nth(c, (uint64_t)nth));
                OK(mote_cursor_get(c, &k, NULL));
                CHECK(!kcmp(k.data, (uint32_t)k.size, m->e[ti][nth].k, m->e[ti][nth].klen));
            }
        }
        mote_cursor_close(c);
    }
}

TEST(model_random_ops)
{
    const char *path = test_path("model.mote");
    uint64_t rs = 2024;
    model m = {0};
    int rounds = 120 * test_scale();
    mote_store *s = test_open(path, NULL);
    uint32_t trees[3];
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "one", MOTE_TREE_CREATE, &trees[0]));
    OK(mote_kv_tree(t, "two", MOTE_TREE_CREATE, &trees[1]));
    OK(mote_kv_tree(t, "three", MOTE_TREE_CREATE, &trees[2]));
    OK(mote_commit(t));
    long ops = 0;
    for (int round = 0; round < rounds; round++) {
        model before = {0};
        m_copy(&before, &m);
        int abort_it = test_rand(&rs) % 5 == 0;
        int nops = 1 + (int)(test_rand(&rs) % 400);
        OK(mote_begin(s, 0, &t));
        for (int o = 0; o < nops; o++, ops++) {
            int ti = (int)(test_rand(&rs) % 3);
            uint8_t k[24];
            uint32_t kl = rand_key(&rs, k);
            uint64_t r = test_rand(&rs) % 10;
            if (r < 6) {
                uint32_t vl = rand_val(&rs);
                OK(mote_kv_put(t, trees[ti], k, kl, vbuf, vl, 0));
                m_put(&m, ti, k, kl, vbuf, vl);
            } else if (r < 9 && m.n[ti]) { /* delete an existing key */
                ent *e = &m.e[ti][test_rand(&rs) % (uint64_t)m.n[ti]];
                uint8_t dk[24];
                uint32_t dkl = e->klen;
                memcpy(dk, e->k, dkl);
                OK(mote_kv_del(t, trees[ti], dk, dkl));
                CHECK(m_del(&m, ti, dk, dkl));
            } else {
                int had = m_del(&m, ti, k, kl);
                CHECK_RC(mote_kv_del(t, trees[ti], k, kl), had ? MOTE_OK : MOTE_NOTFOUND);
            }
        }
        compare(t, trees, &m, &rs);
        if (abort_it) {
            mote_abort(t);
            m_free(&m);
            m = before;
        } else {
            OK(mote_commit(t));
            m_free(&before);
        }
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        compare(t, trees, &m, &rs);
        mote_abort(t);
        if (test_rand(&rs) % 6 == 0) {
            OK(mote_close(s));
            s = test_open(path, NULL);
        }
        if (round % 10 == 9)
            OK(mote_check(s, NULL, NULL));
    }
    OK(mote_check(s, NULL, NULL));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    printf("%ld ops, %llu entries, depth %u, %llu pages (%llu free)\n", ops,
           (unsigned long long)st.entries, st.depth, (unsigned long long)st.pages,
           (unsigned long long)st.pages_free);
    OK(mote_close(s));
    m_free(&m);
}

TEST(model_cursor_survives_writes)
{
    /* a cursor in a write txn keeps walking while its txn changes the tree */
    mote_store *s = test_open(test_path("cw.mote"), NULL);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (int i = 0; i < 5000; i++) {
        char k[16];
        snprintf(k, sizeof k, "%06d", i);
        OK(mote_kv_put(t, tr, k, 6, "v", 1, 0));
    }
    mote_cursor *c;
    OK(mote_cursor_open(t, tr, &c));
    int seen = 0;
    for (int rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k;
        OK(mote_cursor_get(c, &k, NULL));
        char key[8] = {0};
        memcpy(key, k.data, 6);
        /* delete every visited even key, insert a key behind the cursor */
        if (atoi(key) % 2 == 0)
            OK(mote_kv_del(t, tr, key, 6));
        OK(mote_kv_put(t, tr, "!", 1, "x", 1, 0));
        seen++;
    }
    CHECK(seen == 5000);
    uint64_t n;
    OK(mote_kv_count(t, tr, NULL, 0, NULL, 0, &n));
    CHECK(n == 2501);
    mote_cursor_close(c);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

/*
 * Sorted batches (mote__kv_apply, the path of the object layer's bulk
 * operations) against the same ops done one at a time on a twin tree:
 * random batch sizes, puts that replace or insert, deletes of present and
 * absent keys, values that need overflow pages, phases that empty the tree
 * (root shrink), commits and a reopen. After every batch both trees hold the
 * same entries and the same count; mote_check passes at the end.
 */
static uint32_t tree_id(mote_txn *t, const char *name)
{
    uint32_t id;
    OK(mote_kv_tree(t, name, MOTE_TREE_CREATE, &id));
    return id;
}

static int op_cmp(const void *a, const void *b)
{
    const mote_kvop *x = a, *y = b;
    return kcmp(x->key, x->klen, y->key, y->klen);
}

static void trees_equal(mote_txn *t, uint32_t a, uint32_t b)
{
    mote_cursor *ca, *cb;
    OK(mote_cursor_open(t, a, &ca));
    OK(mote_cursor_open(t, b, &cb));
    int ra = mote_cursor_first(ca), rb = mote_cursor_first(cb);
    size_t n = 0;
    while (ra == MOTE_OK && rb == MOTE_OK) {
        mote_val ka, va, kb, vb;
        OK(mote_cursor_get(ca, &ka, &va));
        OK(mote_cursor_get(cb, &kb, &vb));
        CHECK(ka.size == kb.size && !memcmp(ka.data, kb.data, ka.size));
        CHECK(va.size == vb.size && !memcmp(va.data, vb.data, va.size));
        ra = mote_cursor_next(ca);
        rb = mote_cursor_next(cb);
        n++;
    }
    CHECK(ra == MOTE_NOTFOUND && rb == MOTE_NOTFOUND);
    uint64_t na, nb;
    OK(mote_kv_count(t, a, NULL, 0, NULL, 0, &na));
    OK(mote_kv_count(t, b, NULL, 0, NULL, 0, &nb));
    CHECK(na == n && nb == n);
    mote_cursor_close(ca);
    mote_cursor_close(cb);
}

/* Leaf validation as it was spelled before its fast path: mote__cell on
 * every cell, then the node's checks. 1 if valid. */
static int ref_leaf_valid(const uint8_t *n, uint32_t cap)
{
    unsigned nk = n_nkeys(n);
    uint32_t area = n_area(n), holes = n_holes(n), live = 0;
    if (n_type(n) != NODE_LEAF || n[1] != 0 || NH + 2u * nk + area > cap || holes > area)
        return 0;
    for (unsigned i = 0; i < nk; i++) {
        cell c;
        if (mote__cell(n, cap, i, &c) || n_off(n, i) < cap - area ||
            (c.ovf && ptr_pgno(c.val) < 2))
            return 0;
        live += c.size;
    }
    return live + holes == area;
}

/* mote__node_validate on leaves of a real store with random bytes changed
 * (in the header and offsets half the time): it accepts exactly what the
 * reference accepts. */
TEST(model_leaf_validation)
{
    const char *path = test_path("v.mote");
    mote_store *s = test_open(path, NULL);
    uint64_t rng = 3;
    static uint8_t val[3000];
    mote_txn *t;
    uint32_t tree;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "v", MOTE_TREE_CREATE, &tree));
    for (int i = 0; i < 3000; i++) {
        char k[24];
        int kl = snprintf(k, sizeof k, "key %d", (int)(test_rand(&rng) % 100000));
        size_t vl = test_rand(&rng) % 40 == 0 ? 1500 + test_rand(&rng) % 1500
                                             : test_rand(&rng) % 200;
        OK(mote_kv_put(t, tree, k, (size_t)kl, val, vl, 0));
        if (i % 3 == 0) {
            kl = snprintf(k, sizeof k, "key %d", (int)(test_rand(&rng) % 100000));
            int rc = mote_kv_del(t, tree, k, (size_t)kl);
            CHECK(rc == MOTE_OK || rc == MOTE_NOTFOUND);
        }
    }
    OK(mote_commit(t));
    OK(mote_close(s));
    FILE *f = fopen(path, "rb");
    CHECK(f);
    enum { P = 4096 };
    static uint8_t page[P], copy[P];
    int leaves = 0, accepted = 0, refused = 0;
    for (uint32_t pgno = 0; fread(page, 1, P, f) == P; pgno++) {
        if (page[0] != NODE_LEAF || mote__node_validate(page, P, 0, pgno) != MOTE_OK)
            continue;
        leaves++;
        CHECK(ref_leaf_valid(page, P));
        for (int m = 0; m < 300; m++) {
            memcpy(copy, page, P);
            int nchange = 1 + (int)(test_rand(&rng) % 3);
            uint32_t head = NH + 2u * n_nkeys(page);
            for (int j = 0; j < nchange; j++) {
                uint32_t at = (uint32_t)(m % 2 ? test_rand(&rng) % head : test_rand(&rng) % P);
                copy[at] = (uint8_t)test_rand(&rng);
            }
            int ok = mote__node_validate(copy, P, 0, pgno) == MOTE_OK;
            CHECK(ok == ref_leaf_valid(copy, P));
            accepted += ok;
            refused += !ok;
        }
    }
    fclose(f);
    printf("%d leaves, %d changed copies accepted, %d refused\n", leaves, accepted, refused);
    CHECK(leaves > 20 && accepted > 100 && refused > 1000);
}

/* mote__kvops_sort against qsort: keys with long shared prefixes, keys that
 * are prefixes of others, empty keys, repeats, sizes around the small-part
 * cutoff and already sorted or reversed input. */
TEST(model_kvops_sort)
{
    enum { MAXN = 5000 };
    uint64_t rng = 11;
    mote_kvop *ops = malloc(MAXN * sizeof *ops), *ref = malloc(MAXN * sizeof *ref);
    uint8_t (*keys)[40] = malloc(MAXN * 40);
    CHECK(ops && ref && keys);
    static const size_t sizes[] = {0, 1, 2, 3, 11, 12, 13, 40, 257, 1000, MAXN};
    for (int round = 0; round < 60; round++) {
        size_t n = sizes[round % (sizeof sizes / sizeof *sizes)];
        int shape = round % 5;
        for (size_t i = 0; i < n; i++) {
            uint8_t *k = keys[i];
            uint32_t kl;
            uint64_t x = test_rand(&rng);
            if (shape == 0) { /* a text index: one long common start, a number */
                kl = (uint32_t)snprintf((char *)k, 40, "Insert from B, item %llu",
                                        (unsigned long long)(x % 20000));
            } else if (shape == 1) { /* a level index: few values, then an id */
                k[0] = 0x21;
                k[1] = (uint8_t)(10 * (1 + x % 5));
                for (int j = 0; j < 8; j++)
                    k[2 + j] = (uint8_t)((i + 1) >> (8 * (7 - j)));
                kl = 10;
            } else { /* short random keys over a tiny alphabet: prefixes, repeats */
                kl = (uint32_t)(x % (shape == 2 ? 5 : 40));
                for (uint32_t j = 0; j < kl; j++)
                    k[j] = (uint8_t)(shape == 2 ? 'a' + test_rand(&rng) % 3 : test_rand(&rng));
            }
            ops[i] = (mote_kvop){k, kl, (int)(i & 1), NULL, i}; /* vlen tags the op */
        }
        if (round % 11 == 7 || round % 11 == 8)
            qsort(ops, n, sizeof *ops, op_cmp); /* already sorted */
        if (round % 11 == 8)
            for (size_t i = 0; i < n / 2; i++) { /* then reversed */
                mote_kvop tmp = ops[i];
                ops[i] = ops[n - 1 - i];
                ops[n - 1 - i] = tmp;
            }
        memcpy(ref, ops, n * sizeof *ops);
        qsort(ref, n, sizeof *ref, op_cmp);
        OK(mote__kvops_sort(ops, n));
        /* in order, the same keys, and every op exactly once */
        static unsigned char seen[MAXN];
        memset(seen, 0, sizeof seen);
        for (size_t i = 0; i < n; i++) {
            CHECK(op_cmp(&ops[i], &ref[i]) == 0);
            CHECK(ops[i].vlen < n && !seen[ops[i].vlen]);
            seen[ops[i].vlen] = 1;
            CHECK(ops[i].key == keys[ops[i].vlen] && ops[i].del == (int)(ops[i].vlen & 1));
        }
    }
    free(ops);
    free(ref);
    free(keys);
}

/* Keys left sparse by deletes in ascending order (every 100th of 10,000
 * kept, as bench-objects trims its stores) end up in few leaves: an
 * underfull leaf merges with its left sibling, which the deletes have left
 * as it stays. Merged with the right one (still full) first, nothing fit:
 * 54 of the 79 pages stayed in use for the 100 keys. A sorted batch and
 * single deletes alike. */
TEST(model_sparse_deletes_pack)
{
    static uint8_t keys[10000][8];
    static mote_kvop ops[10000];
    for (int batch = 0; batch < 2; batch++) {
        mote_store *s = test_open(test_path(batch ? "sparse1.mote" : "sparse0.mote"), NULL);
        mote_txn *t;
        mote_stat st;
        OK(mote_begin(s, 0, &t));
        uint32_t tr = tree_id(t, "t");
        for (int i = 0; i < 10000; i++) {
            snprintf((char *)keys[i], sizeof keys[i], "k%05d", i);
            OK(mote_kv_put(t, tr, keys[i], 6, "a value of 20 bytes.", 20, 0));
        }
        OK(mote_commit(t));
        OK(mote_store_stat(s, &st));
        uint64_t full = st.pages - st.pages_free;
        size_t m = 0;
        for (int i = 0; i < 10000; i++)
            if (i % 100)
                ops[m++] = (mote_kvop){keys[i], 6, 1, NULL, 0};
        OK(mote_begin(s, 0, &t));
        uint64_t missing = 0;
        if (batch)
            OK(mote__kv_apply(t, tr, ops, m, &missing));
        for (size_t j = 0; !batch && j < m; j++)
            OK(mote_kv_del(t, tr, ops[j].key, ops[j].klen));
        OK(mote_commit(t));
        CHECK(missing == 0);
        OK(mote_store_stat(s, &st));
        uint64_t used = st.pages - st.pages_free;
        printf("%s deletes: %llu pages for 10,000 keys, %llu for the 100 left\n",
               batch ? "batch" : "single", (unsigned long long)full, (unsigned long long)used);
        CHECK(used <= 6);
        OK(mote_check(s, NULL, NULL));
        OK(mote_close(s));
    }
}

/* Sorted ops (repeated keys allowed: the first of each is kept) done one
 * at a time on tree `one` and as one batch on its twin `bat`: the same
 * misses, the same entries after. */
static void apply_twins(mote_txn *t, uint32_t one, uint32_t bat, mote_kvop *ops, size_t n)
{
    size_t m = 0; /* drop repeated keys: a batch names each key once */
    for (size_t i = 0; i < n; i++)
        if (!m || kcmp(ops[m - 1].key, ops[m - 1].klen, ops[i].key, ops[i].klen))
            ops[m++] = ops[i];
    uint64_t miss_one = 0, miss_bat = 0;
    for (size_t i = 0; i < m; i++) {
        if (ops[i].del) {
            int rc = mote_kv_del(t, one, ops[i].key, ops[i].klen);
            CHECK(rc == MOTE_OK || rc == MOTE_NOTFOUND);
            miss_one += rc == MOTE_NOTFOUND;
        } else {
            OK(mote_kv_put(t, one, ops[i].key, ops[i].klen, ops[i].val, ops[i].vlen, 0));
        }
    }
    OK(mote__kv_apply(t, bat, ops, m, &miss_bat));
    CHECK(miss_one == miss_bat);
    trees_equal(t, one, bat);
}

TEST(model_sorted_batches)
{
    const char *path = test_path("b.mote");
    mote_store *s = test_open(path, NULL);
    uint64_t rng = 7;
    enum { MAXB = 3000, MAXKEYS = 4000 * 9 }; /* batch size; distinct keys */
    mote_kvop *ops = malloc(MAXKEYS * sizeof *ops);
    uint8_t (*keys)[16] = malloc(MAXKEYS * 16);
    static uint8_t big[3000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7);
    uint32_t one, bat;
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    one = tree_id(t, "one");
    bat = tree_id(t, "batch");
    for (int round = 0; round < 120; round++) {
        int phase = round % 12; /* 0-7 mostly puts, 8-11 mostly deletes */
        size_t n = 1 + test_rand(&rng) % (round % 3 == 0 ? MAXB : 60);
        for (size_t i = 0; i < n; i++) {
            uint32_t kl = 4 + (uint32_t)(test_rand(&rng) % 9);
            uint64_t x = test_rand(&rng) % 4000; /* few distinct keys: replaces, hits */
            memset(keys[i], 0, 16);
            keys[i][0] = 'k';
            keys[i][1] = (uint8_t)(x >> 8);
            keys[i][2] = (uint8_t)x;
            keys[i][3] = (uint8_t)(x % 3);
            ops[i].key = keys[i];
            ops[i].klen = kl;
            ops[i].del = (int)(test_rand(&rng) % 10) < (phase >= 8 ? 9 : 2);
            size_t vl = test_rand(&rng) % 50 == 0 ? 1200 + test_rand(&rng) % 1500
                                                  : test_rand(&rng) % 40;
            ops[i].val = big + test_rand(&rng) % 100;
            ops[i].vlen = ops[i].del ? 0 : vl;
        }
        if (round % 2) /* the library's sort half the time (mote__kv_apply checks the order) */
            qsort(ops, n, sizeof *ops, op_cmp);
        else
            OK(mote__kvops_sort(ops, n));
        apply_twins(t, one, bat, ops, n);
        if (round % 10 == 9) {
            OK(mote_commit(t));
            if (round % 30 == 29) {
                OK(mote_close(s));
                s = test_open(path, NULL);
            }
            OK(mote_begin(s, 0, &t));
        }
    }
    /* every key deleted in one batch: the tree ends as an empty root leaf */
    size_t m = 0;
    mote_cursor *c;
    OK(mote_cursor_open(t, bat, &c));
    for (int rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k;
        OK(mote_cursor_get(c, &k, NULL));
        CHECK(m < MAXKEYS && k.size <= 16);
        memcpy(keys[m], k.data, k.size);
        ops[m] = (mote_kvop){keys[m], (uint32_t)k.size, 1, NULL, 0};
        OK(mote_kv_del(t, one, k.data, k.size));
        m++;
    }
    mote_cursor_close(c);
    CHECK(m > 100);
    OK(mote__kv_apply(t, bat, ops, m, NULL));
    trees_equal(t, one, bat);
    /* out of order: refused before anything is written */
    uint8_t k1[] = "b", k2[] = "a";
    mote_kvop bad[2] = {{k1, 1, 0, "x", 1}, {k2, 1, 0, "y", 1}};
    CHECK(mote__kv_apply(t, bat, bad, 2, NULL) == MOTE_INVALID);
    CHECK(mote_kv_get(t, bat, "b", 1, NULL) == MOTE_NOTFOUND);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    free(ops);
    free(keys);
}

/*
 * Values of 1,000 to 1,400 bytes, on both sides of the inline limit (key,
 * value and 8 bytes within a third of a node: 1,358 bytes at 4 KB pages),
 * so that leaves hold two or three cells of up to a third of a node each:
 * puts, replaces and deletes one at a time on one tree and in sorted
 * batches on its twin, commits, reopens. Both trees hold the same entries
 * after every batch; mote_check passes; and values under the limit take no
 * overflow page (300 of 1,300 bytes: fewer pages than values; each took a
 * page of its own under the quarter-page limit before 2026-12-06).
 */
TEST(model_values_near_the_inline_limit)
{
    const char *path = test_path("inl.mote");
    mote_store *s = test_open(path, NULL);
    uint64_t rng = 11;
    enum { MAXB = 200 };
    mote_kvop ops[MAXB];
    uint8_t keys[MAXB][8];
    static uint8_t big[1500];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 13 + 5);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t one = tree_id(t, "one"), bat = tree_id(t, "batch");
    for (int round = 0; round < 90; round++) {
        int phase = round % 9; /* 0-5 mostly puts, 6-8 mostly deletes */
        size_t n = 1 + test_rand(&rng) % (round % 4 == 0 ? MAXB : 12);
        for (size_t i = 0; i < n; i++) {
            uint64_t x = test_rand(&rng) % 700;
            snprintf((char *)keys[i], sizeof keys[i], "k%06u", (unsigned)x);
            ops[i].key = keys[i];
            ops[i].klen = 7;
            ops[i].del = (int)(test_rand(&rng) % 10) < (phase >= 6 ? 8 : 2);
            ops[i].val = big + test_rand(&rng) % 100;
            ops[i].vlen = ops[i].del ? 0 : 1000 + (uint32_t)(test_rand(&rng) % 401);
        }
        qsort(ops, n, sizeof *ops, op_cmp);
        apply_twins(t, one, bat, ops, n);
        if (round % 10 == 9) {
            OK(mote_commit(t));
            OK(mote_check(s, NULL, NULL));
            if (round % 30 == 29) {
                OK(mote_close(s));
                s = test_open(path, NULL);
            }
            OK(mote_begin(s, 0, &t));
        }
    }
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));

    s = test_open(test_path("inl2.mote"), NULL);
    OK(mote_begin(s, 0, &t));
    uint32_t tr = tree_id(t, "t");
    for (int i = 0; i < 300; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%06d", i);
        OK(mote_kv_put(t, tr, k, 7, big, 1300, 0));
    }
    OK(mote_commit(t));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    printf("300 values of 1,300 bytes: %llu pages in use\n",
           (unsigned long long)(st.pages - st.pages_free));
    CHECK(st.pages - st.pages_free < 200); /* three to a leaf: ~100 leaves */
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

/*
 * mote__cursor_find_id, the object fetch of queries and batches: runs of
 * ascending lookups (hits and misses, short and long steps, jumps back),
 * against a model, on a tree of several levels whose ids are dense in
 * places and sparse in others, with keys of other lengths in between (they
 * make the dense-id guess wrong) and neighbouring trees on both sides; some
 * values are overflow pages. Then the same while the transaction writes.
 */
enum { FIND_IDS = 30000 };

static uint32_t find_vlen(uint64_t id) { return id % 997 == 0 ? 9000 : (uint32_t)(id % 40); }

static void find_value(uint64_t id, uint8_t *v)
{
    for (uint32_t i = 0; i < find_vlen(id); i++)
        v[i] = (uint8_t)(id * 31 + i);
}

static void find_put(mote_txn *t, uint32_t tree, uint64_t id, int extra, uint8_t *v)
{
    uint8_t k[9];
    mote__wr_be64(k, id);
    k[8] = 0x5a;
    find_value(id, v);
    OK(mote_kv_put(t, tree, k, extra ? 9 : 8, v, extra ? 3 : find_vlen(id), 0));
}

/* A lookup of id gave rc and got: as the model says? */
static void found_check(int rc, const mote_val *got, const unsigned char *present, uint64_t id,
                        uint8_t *v)
{
    if (id < FIND_IDS + 100 && present[id]) {
        CHECK_RC(rc, MOTE_OK);
        find_value(id, v);
        CHECK(got->size == find_vlen(id) && memcmp(got->data, v, got->size) == 0);
    } else {
        CHECK_RC(rc, MOTE_NOTFOUND);
    }
}

static void find_check(mote_cursor *c, const unsigned char *present, uint64_t id, uint8_t *v)
{
    mote_val got;
    found_check(mote__cursor_find_id(c, id, &got), &got, present, id, v);
}

/* The same id by a get (a descent from the root; its leaf guessed by
 * dense ids first, node.h leaf_find). */
static void get_check(mote_txn *t, uint32_t tree, const unsigned char *present, uint64_t id,
                      uint8_t *v)
{
    uint8_t k[8];
    mote_val got;
    mote__wr_be64(k, id);
    found_check(mote_kv_get(t, tree, k, 8, &got), &got, present, id, v);
}

TEST(model_cursor_find_id)
{
    mote_store *s = test_open(test_path("find.mote"), NULL);
    static unsigned char present[FIND_IDS + 100];
    uint8_t *v = malloc(9000);
    uint64_t rng = 5;
    uint32_t tr[3];
    mote_txn *t;
    CHECK(v);
    OK(mote_begin(s, 0, &t));
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "t%d", i);
        OK(mote_kv_tree(t, name, MOTE_TREE_CREATE, &tr[i]));
    }
    for (uint64_t id = 1; id < FIND_IDS; id++) {
        uint64_t zone = id / 1000 % 3; /* dense, every third, random */
        int keep = zone == 0 || (zone == 1 && id % 3 == 0) || (zone == 2 && test_rand(&rng) % 4 == 0);
        if (keep) {
            present[id] = 1;
            find_put(t, tr[1], id, 0, v);
        }
        if (id % 7 == 0) /* a 9-byte key right after id's 8 bytes */
            find_put(t, tr[1], id, 1, v);
        if (id % 50 == 0) { /* the neighbour trees */
            find_put(t, tr[0], id, 0, v);
            find_put(t, tr[2], id, 0, v);
        }
    }
    OK(mote_commit(t));
    for (int round = 0; round < 2; round++) { /* 0: read txn, 1: writes between finds */
        OK(mote_begin(s, round ? 0 : MOTE_TXN_RDONLY, &t));
        mote_cursor *c;
        OK(mote_cursor_open(t, tr[1], &c));
        for (int run = 0; run < 400; run++) {
            uint64_t id = test_rand(&rng) % (FIND_IDS + 50);
            for (int i = 0; i < 60; i++) {
                find_check(c, present, id, v);
                if (i % 4 == 0)
                    get_check(t, tr[1], present, id, v);
                uint64_t r = test_rand(&rng) % 17;
                /* small, large, the same, or past the branch above the leaf */
                id += r < 12 ? r % 4 + 1 : r < 15 ? r * 40 : r == 15 ? 0 : 1000 + test_rand(&rng) % 4000;
                if (round && r == 3) { /* a new id ahead, then a removed one */
                    uint64_t nid = id + 2;
                    if (nid < FIND_IDS) {
                        find_put(t, tr[1], nid, 0, v);
                        present[nid] = 1;
                    }
                    uint8_t k[8];
                    mote__wr_be64(k, id + 1);
                    int rc = mote_kv_del(t, tr[1], k, 8);
                    CHECK(rc == MOTE_OK || rc == MOTE_NOTFOUND);
                    if (id + 1 < FIND_IDS + 100)
                        present[id + 1] = 0;
                }
            }
        }
        find_check(c, present, 0, v); /* below every id */
        find_check(c, present, UINT64_MAX, v); /* above every id */
        mote_cursor_close(c);
        OK(mote_commit(t));
    }
    free(v);
    OK(mote_close(s));
}

/* Lookups in ascending order with gaps of every size in a tree of many
 * branches (mote__cur_find: the same leaf, the next one, or a descent from
 * the lowest branch on the cursor's stack whose range holds the key): every
 * even id is there, no odd one. */
TEST(model_find_ascending_across_branches)
{
    enum { N = 120000 };
    mote_store *s = test_open(test_path("asc.mote"), NULL);
    mote_txn *t;
    uint32_t tr;
    uint8_t k[8], v[24];
    memset(v, 3, sizeof v);
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "a", MOTE_TREE_CREATE, &tr));
    for (uint64_t id = 2; id <= N; id += 2) {
        mote__wr_be64(k, id);
        OK(mote_kv_put(t, tr, k, 8, v, sizeof v, 0));
    }
    OK(mote_commit(t));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    CHECK(st.depth >= 3); /* branches below the root: climbing matters */
    uint64_t rng = 77;
    long found = 0, absent = 0;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    mote_cursor *c;
    OK(mote_cursor_open(t, tr, &c));
    for (int run = 0; run < 200; run++) {
        uint64_t id = 1 + test_rand(&rng) % N;
        while (id <= N + 10) {
            mote_val got;
            int rc = mote__cursor_find_id(c, id, &got);
            if (id % 2 == 0 && id <= N) {
                CHECK_RC(rc, MOTE_OK);
                CHECK(got.size == sizeof v);
                found++;
            } else {
                CHECK_RC(rc, MOTE_NOTFOUND);
                absent++;
            }
            uint64_t r = test_rand(&rng) % 8; /* within a leaf, a few leaves, many branches */
            id += r < 3 ? 1 + r : r < 6 ? 50 + test_rand(&rng) % 400 : 1000 + test_rand(&rng) % 20000;
        }
    }
    printf("%ld found, %ld absent, depth %u\n", found, absent, st.depth);
    mote_cursor_close(c);
    mote_abort(t);
    OK(mote_close(s));
}
