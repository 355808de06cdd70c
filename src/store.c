/*
 * store.c — the lifecycle of a store and its transactions: mote_open and
 * mote_close, mote_begin, mote_commit and mote_abort. The one place that
 * knows every layer, so that none below has to know the ones above it.
 *
 * Open: the pager opens (or creates, or recovers) the file, in one block
 * with the object layer's state (its entity handles and its write
 * transaction's buffers, see object.h). Close: refused while transactions
 * are open; the object layer frees what it holds, the file shrinks if it
 * is worth it (check.c), then the pager marks the clean close and closes.
 *
 * Commit of a write transaction, in order:
 *   1. the key/value layer writes its deferred puts (index entries);
 *   2. the object layer saves the id sequences the transaction changed;
 *   3. the cursors are detached and the deferred puts freed;
 *   4. the pager commits: pages, root slot, one fdatasync (or rolls back);
 *   5. the object layer settles its handles: those the transaction created
 *      or evolved become usable (or dead if it did not commit), those it
 *      superseded stale.
 * A failure in 1 or 2 aborts the transaction; a failed earlier write
 * (t->failed) allows only an abort. Abort: 3, the pager's rollback, 5.
 */
#include "check.h"
#include "object.h"

int mote_open(const char *path, const mote_options *opts, mote_store **out)
{
    if (!out)
        return mote__err(MOTE_INVALID, "mote_open: out is NULL");
    *out = NULL;
    mote_store *s;
    int rc = mote__store_open(path, opts, sizeof(objstore), &s);
    if (!rc)
        *out = s;
    return rc;
}

int mote_store_readonly(const mote_store *s)
{
    return s && (s->flags & MOTE_RDONLY) != 0;
}

int mote_close(mote_store *s)
{
    if (!s)
        return MOTE_OK;
    int rc = mote__store_busy(s);
    if (rc)
        return rc;
    mote__objects_detach(s);
    mote__shrink(s);
    mote__store_close(s);
    return MOTE_OK;
}

int mote_begin(mote_store *s, unsigned flags, mote_txn **out)
{
    if (!out)
        return mote__err(MOTE_INVALID, "mote_begin: out is NULL");
    *out = NULL;
    if (!s)
        return mote__err(MOTE_INVALID, "mote_begin: store is NULL");
    if (flags & ~(MOTE_TXN_RDONLY | MOTE_TXN_LAZY | MOTE_TXN_CACHED))
        return mote__err(MOTE_INVALID, "mote_begin: unknown flags 0x%x", flags);
    if ((flags & MOTE_TXN_RDONLY) && (flags & MOTE_TXN_LAZY))
        return mote__err(MOTE_INVALID, "mote_begin: MOTE_TXN_LAZY is for write "
                         "transactions, not with MOTE_TXN_RDONLY");
    if ((flags & MOTE_TXN_CACHED) && !(flags & MOTE_TXN_RDONLY))
        return mote__err(MOTE_INVALID, "mote_begin: MOTE_TXN_CACHED is for read "
                         "transactions (with MOTE_TXN_RDONLY)");
    int rc = mote__txn_begin(s, (flags & MOTE_TXN_RDONLY) ? 0 : (flags & MOTE_TXN_LAZY) ? 2 : 1,
                             out);
    if (!rc)
        (*out)->cached_only = (flags & MOTE_TXN_CACHED) != 0;
    return rc;
}

/* Roll t back and free it (steps 3, rollback, 5). */
static void end_aborted(mote_txn *t)
{
    mote_store *s = t->s;
    int write = t->write;
    objend oe;
    if (write)
        mote__objects_take(t, &oe);
    mote__kv_txn_end(t);
    mote__txn_abort(t);
    if (write)
        mote__objects_end(s, &oe, 0);
}

/* What mote_commit and mote_commit_nowait do first: a failed, read or
 * forked transaction ended (*t_out NULL, the result returned), else its
 * changes flushed and its object-layer state taken into oe (*t_out = t). */
static int commit_begin(mote_txn *t, objend *oe, mote_txn **t_out)
{
    *t_out = NULL;
    if (!t)
        return mote__err(MOTE_INVALID, "mote_commit: transaction is NULL");
    if (store_forked(t->s)) /* writes nothing, releases nothing (pager.h) */
        return mote__forked_err(t->s);
    if (t->failed) {
        int rc = mote__err(t->failed, "commit of a failed transaction: rolled back");
        end_aborted(t);
        return rc;
    }
    if (!t->write) { /* a read transaction: commit is abort */
        end_aborted(t);
        return MOTE_OK;
    }
    int rc = mote__kv_flush(t);
    if (!rc)
        rc = mote__entities_flush(t);
    if (!rc)
        rc = mote__kv_ident_ensure(t);
    if (rc) {
        end_aborted(t);
        return rc;
    }
    mote__objects_take(t, oe);
    mote__kv_txn_end(t);
    *t_out = t;
    return MOTE_OK;
}

int mote_commit(mote_txn *t)
{
    objend oe;
    int rc = commit_begin(t, &oe, &t);
    if (rc || !t)
        return rc;
    mote_store *s = t->s;
    rc = mote__txn_commit(t); /* frees t */
    mote__objects_end(s, &oe, rc == MOTE_OK);
    return rc;
}

struct mote_ticket {
    mote_store *s;
    uint64_t txnid;
    snap *sn;
};

int mote_commit_nowait(mote_txn *t, mote_ticket **ticket)
{
    if (!ticket) {
        mote_abort(t);
        return mote__err(MOTE_INVALID, "mote_commit_nowait: ticket is NULL (rolled back)");
    }
    *ticket = NULL;
    objend oe;
    int rc = commit_begin(t, &oe, &t);
    if (rc || !t)
        return rc;
    mote_store *s = t->s;
    uint64_t txnid;
    snap *sn;
    rc = mote__txn_commit_write(t, &txnid, &sn); /* frees t */
    /* written: the next transaction builds on it, with its handles */
    mote__objects_end(s, &oe, rc == MOTE_OK);
    if (rc || !txnid) /* failed, or done (a checkpoint synced at once, no sync) */
        return rc;
    mote_ticket *k = mote__malloc(sizeof *k);
    if (!k) /* no ticket to wait with: wait now */
        return mote__commit_wait(s, txnid, sn);
    *k = (mote_ticket){s, txnid, sn};
    *ticket = k;
    pthread_mutex_lock(&s->mu);
    s->nticket++;
    pthread_mutex_unlock(&s->mu);
    return MOTE_OK;
}

int mote_commit_wait(mote_ticket *ticket)
{
    if (!ticket)
        return MOTE_OK;
    mote_store *s = ticket->s;
    int rc = mote__commit_wait(s, ticket->txnid, ticket->sn);
    mote__free(ticket);
    pthread_mutex_lock(&s->mu);
    s->nticket--;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void mote_abort(mote_txn *t)
{
    if (t && !store_forked(t->s))
        end_aborted(t);
}
