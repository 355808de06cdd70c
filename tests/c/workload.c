/* workload.c — see workload.h. */
#include "workload.h"

#include "kv.h"

void wl_value(int key, uint32_t ver, int32_t len, uint8_t *out)
{
    uint64_t rs = ((uint64_t)key << 32 | ver) * 0x9E3779B97F4A7C15ull + 1;
    for (int32_t i = 0; i < len; i++)
        out[i] = i % 64 == 0 ? (uint8_t)test_rand(&rs) : (uint8_t)(out[i - 1] + 1);
}

void wl_init(wl *w, uint64_t seed, int ncommits, int max_ops, int big)
{
    wl_init_keys(w, seed, ncommits, max_ops, big, 48);
}

static void wl_make(wl *w, uint64_t seed, int ncommits, int max_ops, int big, int nkeys,
                    int filled);

void wl_init_keys(wl *w, uint64_t seed, int ncommits, int max_ops, int big, int nkeys)
{
    wl_make(w, seed, ncommits, max_ops, big, nkeys, 0);
}

void wl_init_filled(wl *w, uint64_t seed, int ncommits, int max_ops, int nkeys)
{
    wl_make(w, seed, ncommits, max_ops, 0, nkeys, 1);
}

static void wl_make(wl *w, uint64_t seed, int ncommits, int max_ops, int big, int nkeys,
                    int filled)
{
    w->nkeys = nkeys;
    w->seed = seed;
    w->ncommits = ncommits;
    w->max_ops = max_ops;
    w->big = big;
    w->states = calloc((size_t)ncommits + 1, sizeof *w->states);
    for (int k = 0; k < WL_KEYS; k++)
        w->states[0].len[k] = -1;
    w->states[0].nkeys = nkeys;
    uint64_t rs = seed;
    for (int c = 0; c < ncommits; c++) {
        wl_state *st = &w->states[c + 1];
        *st = w->states[c];
        int fill = filled && c == 0;
        int nops = fill ? nkeys : 1 + (int)(test_rand(&rs) % (uint64_t)max_ops);
        for (int o = 0; o < nops; o++) {
            int k = fill ? o : (int)(test_rand(&rs) % (uint64_t)nkeys);
            if (!fill && test_rand(&rs) % 4 == 0) {
                st->len[k] = -1;
            } else {
                uint64_t r = test_rand(&rs) % 100;
                st->len[k] = big && r < 5 ? 2000 + (int32_t)(test_rand(&rs) % 12000)
                           : (int32_t)(r * 3);
                st->ver[k] = (uint32_t)(c + 1) * 1000 + (uint32_t)o;
            }
        }
    }
}

void wl_free(wl *w) { free(w->states); }

static uint8_t vbuf[16384];

/* Begin commit c's transaction and make its changes (states[c] ->
 * states[c + 1]); the transaction, or NULL and w->last_rc. */
static mote_txn *wl_apply(wl *w, mote_store *s, int c)
{
    mote_txn *t;
    uint32_t tree;
    if ((w->last_rc = mote_begin(s, 0, &t)))
        return NULL;
    if ((w->last_rc = mote_kv_tree(t, "wl", MOTE_TREE_CREATE, &tree))) {
        mote_abort(t);
        return NULL;
    }
    const wl_state *prev = &w->states[c], *next = &w->states[c + 1];
    int rc = 0;
    for (int k = 0; k < w->nkeys && !rc; k++) {
        uint8_t key[2] = {(uint8_t)(k >> 8), (uint8_t)k};
        if (next->len[k] < 0 ? prev->len[k] < 0
                             : next->len[k] == prev->len[k] && next->ver[k] == prev->ver[k])
            continue;
        if (next->len[k] < 0) {
            rc = mote_kv_del(t, tree, key, 2);
        } else {
            wl_value(k, next->ver[k], next->len[k], vbuf);
            rc = mote_kv_put(t, tree, key, 2, vbuf, (size_t)next->len[k], 0);
        }
    }
    if (rc) {
        if (getenv("MOTE_TEST_VERBOSE"))
            fprintf(stderr, "commit %d op: %s\n", c, mote_errmsg(s));
        w->last_rc = rc;
        mote_abort(t);
        return NULL;
    }
    return t;
}

int wl_run(wl *w, mote_store *s, int from, int *inflight)
{
    *inflight = 0;
    w->last_rc = 0;
    for (int c = from; c < w->ncommits; c++) {
        *inflight = 1;
        mote_txn *t = wl_apply(w, s, c);
        if (!t)
            return c;
        if ((w->last_rc = mote_commit(t))) {
            if (getenv("MOTE_TEST_VERBOSE"))
                fprintf(stderr, "commit %d: %s\n", c, mote_errmsg(s));
            return c;
        }
        *inflight = 0;
    }
    return w->ncommits;
}

int wl_run_grouped(wl *w, mote_store *s, int from, int group, int *tried)
{
    int acked = from;
    *tried = from;
    w->last_rc = 0;
    for (int c = from; c < w->ncommits && !w->last_rc;) {
        uint64_t txnid[WL_GROUP_MAX];
        snap *sn[WL_GROUP_MAX];
        int n = 0, rc = 0, done = c; /* done: commits written (or durable) */
        for (int j = 0; j < group && j < WL_GROUP_MAX && c < w->ncommits && !rc; j++, c++) {
            *tried = c + 1;
            mote_txn *t = wl_apply(w, s, c);
            if (!t) {
                rc = w->last_rc;
                break;
            }
            uint64_t id;
            snap *x;
            if (!(rc = mote__kv_flush(t))) { /* mote_commit's steps, but for the wait */
                mote__kv_txn_end(t);
                rc = mote__txn_commit_write(t, &id, &x);
            } else {
                mote_abort(t);
            }
            if (rc)
                break;
            done = c + 1;
            if (id) {
                txnid[n] = id;
                sn[n++] = x;
            } else { /* durable at once (a checkpoint), and all before it */
                acked = c + 1;
            }
        }
        int wrc = 0;
        for (int j = 0; j < n; j++) /* the first wait syncs them all */
            if (!wrc)
                wrc = mote__commit_wait(s, txnid[j], sn[j]);
            else /* not acknowledged (the first failure's error stays) */
                mote__commit_forget(s, sn[j]);
        if (!wrc)
            acked = done; /* the commits written before a failure are durable too */
        w->last_rc = rc ? rc : wrc;
    }
    return acked;
}

int wl_matches(mote_store *s, const wl_state *st)
{
    int nkeys = st->nkeys;
    mote_txn *t;
    uint32_t tree;
    if (mote_begin(s, MOTE_TXN_RDONLY, &t))
        return 0;
    int rc = mote_kv_tree(t, "wl", 0, &tree), ok = 1;
    if (rc == MOTE_NOTFOUND) {
        for (int k = 0; k < nkeys; k++)
            ok &= st->len[k] < 0;
        mote_abort(t);
        return ok;
    }
    if (rc) {
        mote_abort(t);
        return 0;
    }
    uint64_t cnt = 0, want = 0;
    for (int k = 0; k < nkeys && ok; k++) {
        uint8_t key[2] = {(uint8_t)(k >> 8), (uint8_t)k};
        mote_val v;
        rc = mote_kv_get(t, tree, key, 2, &v);
        if (st->len[k] < 0) {
            ok &= rc == MOTE_NOTFOUND;
            continue;
        }
        want++;
        wl_value(k, st->ver[k], st->len[k], vbuf);
        ok &= rc == MOTE_OK && v.size == (size_t)st->len[k] &&
              (v.size == 0 || !memcmp(v.data, vbuf, v.size));
    }
    if (ok)
        ok = mote_kv_count(t, tree, NULL, 0, NULL, 0, &cnt) == MOTE_OK && cnt == want;
    mote_abort(t);
    return ok;
}
