/* kv_basics.c — open a store, write a few keys in one transaction, read
 * them back in key order. Build: see meson.build; run: ./kv_basics FILE */
#include <stdio.h>
#include <string.h>

#include "mote.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "example.mote";
    mote_store *store;
    int rc = mote_open(path, NULL, &store);
    if (rc) {
        fprintf(stderr, "open: %s\n", mote_last_open_error());
        return 1;
    }
    mote_txn *txn;
    uint32_t notes;
    rc = mote_begin(store, 0, &txn);
    if (!rc)
        rc = mote_kv_tree(txn, "notes", MOTE_TREE_CREATE, &notes);
    const char *words[] = {"pear", "apple", "fig"};
    for (int i = 0; !rc && i < 3; i++)
        rc = mote_kv_put(txn, notes, words[i], strlen(words[i]), &i, sizeof i, 0);
    if (!rc)
        rc = mote_commit(txn); /* durable: one fdatasync */
    else
        mote_abort(txn);
    if (rc) {
        fprintf(stderr, "write: %s\n", mote_errmsg(store));
        mote_close(store);
        return 1;
    }

    mote_cursor *cur;
    mote_begin(store, MOTE_TXN_RDONLY, &txn);
    mote_cursor_open(txn, notes, &cur);
    for (rc = mote_cursor_first(cur); rc == MOTE_OK; rc = mote_cursor_next(cur)) {
        mote_val k, v;
        mote_cursor_get(cur, &k, &v);
        printf("%.*s\n", (int)k.size, (const char *)k.data);
    }
    mote_cursor_close(cur);
    mote_abort(txn);
    return mote_close(store) ? 1 : 0;
}
