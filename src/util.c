/*
 * util.c — error messages (one buffer per thread) and hookable allocation.
 *
 * Each thread keeps the message of its last failing call and, when that
 * failure came from the operating system, its errno and the file it was on
 * (mote_last_oserror). Every failure goes through mote__err or mote__oserr,
 * and mote__err clears the OS cause, so the two never describe different
 * failures. The path has its own buffer, not a pointer: the store it belongs
 * to may be gone (a failed open frees its handle before returning).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static _Thread_local char errbuf[512];
static _Thread_local int os_errno;
static _Thread_local char os_path[PATH_MAX];

int (*mote__alloc_hook)(size_t n);

void *mote__malloc(size_t n)
{
    if (mote__alloc_hook && mote__alloc_hook(n))
        return NULL;
    return malloc(n);
}

void *mote__calloc(size_t n, size_t m)
{
    if (mote__alloc_hook && mote__alloc_hook(n * m))
        return NULL;
    return calloc(n, m);
}

void *mote__realloc(void *p, size_t n)
{
    if (mote__alloc_hook && mote__alloc_hook(n))
        return NULL;
    return realloc(p, n);
}

void mote__free(void *p) { free(p); }

int mote__grow(uint8_t **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return MOTE_OK;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    uint8_t *nb = mote__realloc(*b, n);
    if (!nb)
        return mote__err(MOTE_NOMEM, "out of memory");
    *b = nb;
    *cap = n;
    return MOTE_OK;
}

void mote_free(void *p) { free(p); }

int mote__err(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    os_errno = 0;
    os_path[0] = 0;
    return rc;
}

int mote__oserr(int rc, int err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    os_errno = err;
    if (path != os_path) /* (a caller may pass the recorded path back) */
        snprintf(os_path, sizeof os_path, "%s", path ? path : "");
    return rc;
}

int mote__corrupt(const char *file, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    return mote__err(MOTE_CORRUPT, "file is damaged: %s (found at %s:%d)", msg,
                     base ? base + 1 : file, line);
}

void mote__problem(mote_problems *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->n++;
    if (p->report && p->n <= 1000)
        p->report(p->ctx, msg);
}

int mote__ioerr(int neg_errno, const char *what, const char *path)
{
    int e = -neg_errno;
    int rc = e == ENOSPC || e == EDQUOT ? MOTE_NOSPACE
           : e == ENOMEM               ? MOTE_NOMEM
                                       : MOTE_IO;
    /* a short transfer has no errno of its own: it counts as EIO */
    return mote__oserr(rc, e > 0 ? e : EIO, path, "%s of %s failed: %s", what,
                       path ? path : "store", e > 0 ? strerror(e) : "short transfer");
}

int mote_last_oserror(const char **path)
{
    if (path)
        *path = os_errno && os_path[0] ? os_path : NULL;
    return os_errno;
}

const char *mote_errmsg(const mote_store *store)
{
    (void)store;
    return errbuf;
}

void mote_clear_error(void)
{
    errbuf[0] = 0;
    os_errno = 0;
    os_path[0] = 0;
}

const char *mote_last_open_error(void) { return errbuf; }

const char *mote_strerror(int rc)
{
    switch (rc) {
    case MOTE_OK: return "MOTE_OK: success";
    case MOTE_NOTFOUND: return "MOTE_NOTFOUND: not found";
    case MOTE_EXISTS: return "MOTE_EXISTS: key exists";
    case MOTE_INVALID: return "MOTE_INVALID: invalid argument";
    case MOTE_NOMEM: return "MOTE_NOMEM: out of memory";
    case MOTE_IO: return "MOTE_IO: input/output error";
    case MOTE_NOSPACE: return "MOTE_NOSPACE: no space left on device";
    case MOTE_CORRUPT: return "MOTE_CORRUPT: file is damaged";
    case MOTE_LOCKED: return "MOTE_LOCKED: store is locked by another process";
    case MOTE_READONLY: return "MOTE_READONLY: store or transaction is read-only";
    case MOTE_POISONED: return "MOTE_POISONED: a sync failed; close and reopen the store";
    case MOTE_TOOBIG: return "MOTE_TOOBIG: key or value too large";
    case MOTE_FORMAT: return "MOTE_FORMAT: not a MoteDB file or unsupported version";
    case MOTE_BUSY: return "MOTE_BUSY: conflicts with open transactions or handles";
    case MOTE_FULL: return "MOTE_FULL: a format limit was reached";
    case MOTE_SCHEMA: return "MOTE_SCHEMA: incompatible schema";
    case MOTE_UNIQUE: return "MOTE_UNIQUE: unique constraint violated";
    case MOTE_RANGE: return "MOTE_RANGE: value out of range";
    case MOTE_TYPE: return "MOTE_TYPE: value of the wrong type";
    case MOTE_FORKED: return "MOTE_FORKED: handle opened before fork; open the store again";
    case MOTE_WOULDBLOCK: return "MOTE_WOULDBLOCK: the read needs a page from the file";
    default: return "unknown MoteDB result code";
    }
}
