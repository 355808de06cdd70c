/*
 * fuzz_api.c — libFuzzer target: the input is a program of key/value
 * operations (put, delete, get, count, commit, abort, reopen, crash) run
 * against the engine on the in-memory shim and against a simple model
 * (an array indexed by a one-byte key). After every commit, reopen and
 * crash, the store must equal the model of the last commit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memio.h"
#include "mote.h"

#define NK 256

typedef struct mstate {
    int32_t len[NK]; /* -1 absent */
    uint8_t fill[NK];
} mstate;

static mstate committed, working;
static uint8_t vbuf[9000];

static void fail(const char *why)
{
    (void)why;
    __builtin_trap();
}

static void check_store(mote_store *s, const mstate *m)
{
    mote_txn *t;
    uint32_t tree;
    if (mote_begin(s, MOTE_TXN_RDONLY, &t))
        fail("begin");
    int rc = mote_kv_tree(t, "f", 0, &tree);
    for (int k = 0; k < NK; k++) {
        uint8_t key = (uint8_t)k;
        mote_val v;
        int g = rc ? MOTE_NOTFOUND : mote_kv_get(t, tree, &key, 1, &v);
        if (m->len[k] < 0) {
            if (g != MOTE_NOTFOUND)
                fail("present");
            continue;
        }
        if (g != MOTE_OK || v.size != (size_t)m->len[k])
            fail("value");
        for (size_t i = 0; i < v.size; i++)
            if (((const uint8_t *)v.data)[i] != (uint8_t)(m->fill[k] + i))
                fail("bytes");
    }
    mote_abort(t);
    if (mote_check(s, NULL, NULL))
        fail("check");
}

static mote_store *reopen(memio *m, const uint8_t *img, size_t len)
{
    if (img)
        memio_set(m, "/a/s.mote", img, len);
    mote_options o = {MOTE_CREATE, 0, 8, &m->io};
    mote_store *s;
    if (mote_open("/a/s.mote", &o, &s))
        fail("open");
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memio m;
    memio_init(&m);
    for (int k = 0; k < NK; k++)
        committed.len[k] = -1;
    working = committed;
    mote_store *s = reopen(&m, NULL, 0);
    mote_txn *t = NULL;
    uint32_t tree = 0;
    for (size_t i = 0; i + 3 <= size; i += 3) {
        uint8_t op = data[i] % 8, key = data[i + 1], arg = data[i + 2];
        if (!t && op < 4) {
            if (mote_begin(s, 0, &t) || mote_kv_tree(t, "f", MOTE_TREE_CREATE, &tree))
                fail("begin write");
            working = committed;
        }
        switch (op) {
        case 0:
        case 1: { /* put; big values sometimes */
            int32_t len = arg < 240 ? arg : (arg - 239) * 500;
            for (int32_t x = 0; x < len; x++)
                vbuf[x] = (uint8_t)(key ^ arg) + (uint8_t)x;
            if (mote_kv_put(t, tree, &key, 1, vbuf, (size_t)len, 0))
                fail("put");
            working.len[key] = len;
            working.fill[key] = (uint8_t)(key ^ arg);
            break;
        }
        case 2: { /* delete */
            int rc = mote_kv_del(t, tree, &key, 1);
            if (rc != (working.len[key] >= 0 ? MOTE_OK : MOTE_NOTFOUND))
                fail("del");
            working.len[key] = -1;
            break;
        }
        case 3: { /* count */
            uint64_t n, want = 0;
            for (int k = 0; k < NK; k++)
                want += working.len[k] >= 0;
            if (mote_kv_count(t, tree, NULL, 0, NULL, 0, &n) || n != want)
                fail("count");
            break;
        }
        case 4: /* commit */
        case 5: /* abort */
            if (t) {
                if (op == 4) {
                    mote_ticket *k = NULL; /* in two steps, sometimes */
                    if ((key & 1) ? mote_commit_nowait(t, &k) || mote_commit_wait(k)
                                  : mote_commit(t))
                        fail("commit");
                    committed = working;
                } else {
                    mote_abort(t);
                }
                t = NULL;
                check_store(s, &committed);
            }
            break;
        case 6: /* clean reopen */
            if (t)
                mote_abort(t);
            t = NULL;
            mote_close(s);
            s = reopen(&m, NULL, 0);
            check_store(s, &committed);
            break;
        case 7: { /* crash: the disk keeps what was synced (+ any unsynced sectors) */
            if (t)
                mote_abort(t);
            t = NULL;
            size_t len;
            uint8_t *img = memio_crash_image(&m, "/a/s.mote", (uint64_t)key << 8 | arg, 0, &len);
            mote_close(s);
            memio_free(&m);
            memio_init(&m);
            s = reopen(&m, img, len);
            free(img);
            check_store(s, &committed);
            break;
        }
        }
    }
    if (t)
        mote_abort(t);
    mote_close(s);
    memio_free(&m);
    return 0;
}
