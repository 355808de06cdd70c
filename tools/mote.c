/*
 * mote — command-line tool for MoteDB stores.
 *
 *   mote stat FILE            txnid, page size, pages used/free, trees, bytes;
 *                             per entity: objects, record bytes per object
 *   mote check FILE           full consistency check; exit 0 = consistent,
 *                             1 = problems (listed), 2 = cannot open
 *   mote compact FILE [OUT]   write a compacted copy (default FILE.compact)
 *   mote dump FILE [ENTITY]   objects as JSON lines, using the stored schema:
 *                             {"_entity": "Note", "id": 1, "level": 10, ...}
 *                             bytes and vectors as arrays of numbers,
 *                             timestamps as ns, dates as days, decimals as
 *                             strings, JSON properties inline
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static mote_store *open_ro(const char *path)
{
    mote_options o = {MOTE_RDONLY, 0, 0, NULL};
    mote_store *s;
    int rc = mote_open(path, &o, &s);
    if (rc) {
        fprintf(stderr, "mote: cannot open %s: %s\n", path, mote_last_open_error());
        return NULL;
    }
    return s;
}

/* mote stat: objects and record bytes of each entity. */
typedef struct obj_sizes {
    uint64_t n, bytes;
} obj_sizes;

static int add_size(void *ctx, const mote_record *r)
{
    obj_sizes *z = ctx;
    z->n++;
    z->bytes += r->size;
    return 0;
}

static int stat_entity(void *ctx, const char *name)
{
    mote_txn *t = ctx;
    mote_entity *e;
    obj_sizes z = {0, 0};
    int rc = mote_entity_stored(t, name, &e);
    if (!rc)
        rc = mote_scan(t, e, add_size, &z);
    if (rc) {
        printf("entity %s: unreadable (%s)\n", name, mote_strerror(rc));
        return 0;
    }
    printf("entity %s: %llu objects, %llu record bytes", name, (unsigned long long)z.n,
           (unsigned long long)z.bytes);
    if (z.n)
        printf(" (%.1f bytes per object)", (double)z.bytes / (double)z.n);
    printf("\n");
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: mote stat FILE\n"
                    "       mote check FILE\n"
                    "       mote compact FILE [OUT]\n"
                    "       mote dump FILE [ENTITY]\n");
    return 2;
}

static void json_str(const unsigned char *p, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar((int)c);
    }
    putchar('"');
}

static int dump_one(void *ctx, const mote_record *r)
{
    const char *name = ctx;
    unsigned np = mote_entity_nprops(r->e);
    printf("{\"_entity\": ");
    json_str((const unsigned char *)name, strlen(name));
    printf(", \"id\": %llu", (unsigned long long)r->id);
    for (unsigned i = 0; i < np; i++) {
        mote_prop_def d;
        mote_value v;
        if (mote_entity_prop_def(r->e, i, &d) || mote_record_get(r, i, &v, NULL))
            return 1;
        printf(", ");
        json_str((const unsigned char *)d.name, strlen(d.name));
        printf(": ");
        if (v.null) {
            printf("null");
            continue;
        }
        switch (d.type) {
        case MOTE_T_BOOL: printf(v.v.i ? "true" : "false"); break;
        case MOTE_T_FLOAT32:
        case MOTE_T_FLOAT64:
            if (v.v.f != v.v.f || v.v.f - v.v.f != 0)
                printf("\"%g\"", v.v.f); /* NaN, inf: not JSON numbers */
            else
                printf("%.17g", v.v.f);
            break;
        case MOTE_T_STRING:
        case MOTE_T_DECIMAL: json_str(v.v.s.p, v.v.s.n); break;
        case MOTE_T_JSON: fwrite(v.v.s.p, 1, v.v.s.n, stdout); break;
        case MOTE_T_BYTES:
        case MOTE_T_VECTOR:
            putchar('[');
            if (d.type == MOTE_T_BYTES) {
                for (size_t k = 0; k < v.v.s.n; k++)
                    printf("%s%u", k ? ", " : "", ((const unsigned char *)v.v.s.p)[k]);
            } else {
                for (size_t k = 0; k + 4 <= v.v.s.n; k += 4) {
                    float f;
                    memcpy(&f, (const char *)v.v.s.p + k, 4);
                    printf("%s%.9g", k ? ", " : "", f);
                }
            }
            putchar(']');
            break;
        default: printf("%lld", (long long)v.v.i);
        }
    }
    printf("}\n");
    return 0;
}

typedef struct dump_ctx {
    mote_txn *t;
    const char *only;
    int rc;
} dump_ctx;

static int dump_entity(void *ctx, const char *name)
{
    dump_ctx *d = ctx;
    if (d->only && strcmp(d->only, name))
        return 0;
    mote_entity *e;
    d->rc = mote_entity_stored(d->t, name, &e);
    if (!d->rc)
        d->rc = mote_scan(d->t, e, dump_one, (void *)name);
    return d->rc;
}

static int cmd_dump(const char *path, const char *entity)
{
    mote_store *s = open_ro(path);
    if (!s)
        return 2;
    dump_ctx d = {NULL, entity, 0};
    int rc = mote_begin(s, MOTE_TXN_RDONLY, &d.t);
    if (!rc)
        rc = mote_entity_list(d.t, dump_entity, &d);
    if (!rc && entity && !d.rc) {
        mote_entity *e;
        rc = mote_entity_stored(d.t, entity, &e); /* report a missing entity */
    }
    if (rc)
        fprintf(stderr, "mote: dump failed: %s\n", mote_errmsg(s));
    mote_abort(d.t);
    mote_close(s);
    return rc ? 1 : 0;
}

static void print_problem(void *ctx, const char *msg)
{
    (void)ctx;
    printf("problem: %s\n", msg);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *cmd = argv[1], *path = argv[2];
    if (!strcmp(cmd, "stat") && argc == 3) {
        mote_store *s = open_ro(path);
        if (!s)
            return 2;
        mote_stat st;
        int rc = mote_store_stat(s, &st);
        if (rc) {
            fprintf(stderr, "mote: %s\n", mote_errmsg(s));
            mote_close(s);
            return 1;
        }
        printf("file:        %s\n", path);
        printf("txnid:       %llu\n", (unsigned long long)st.txnid);
        printf("page size:   %u\n", st.page_size);
        printf("pages:       %llu (%llu used, %llu free)\n",
               (unsigned long long)st.pages,
               (unsigned long long)(st.pages - st.pages_free),
               (unsigned long long)st.pages_free);
        printf("file bytes:  %llu\n", (unsigned long long)st.file_bytes);
        printf("trees:       %llu\n", (unsigned long long)st.trees);
        printf("entries:     %llu\n", (unsigned long long)st.entries);
        printf("depth:       %u\n", st.depth);
        mote_txn *t;
        if (mote_begin(s, MOTE_TXN_RDONLY, &t) == MOTE_OK) {
            mote_entity_list(t, stat_entity, t);
            mote_abort(t);
        }
        mote_close(s);
        return 0;
    }
    if (!strcmp(cmd, "check") && argc == 3) {
        mote_store *s = open_ro(path);
        if (!s)
            return 2;
        int rc = mote_check(s, print_problem, NULL);
        if (rc == MOTE_OK)
            printf("%s: consistent\n", path);
        else
            printf("%s: %s\n", path, mote_errmsg(s));
        mote_close(s);
        return rc == MOTE_OK ? 0 : 1;
    }
    if (!strcmp(cmd, "compact") && (argc == 3 || argc == 4)) {
        char def[4096];
        const char *out = argc == 4 ? argv[3] : def;
        snprintf(def, sizeof def, "%s.compact", path);
        mote_store *s = open_ro(path);
        if (!s)
            return 2;
        int rc = mote_compact(s, out);
        if (rc)
            fprintf(stderr, "mote: compact failed: %s\n", mote_errmsg(s));
        else
            printf("%s -> %s\n", path, out);
        mote_close(s);
        return rc ? 1 : 0;
    }
    if (!strcmp(cmd, "dump") && (argc == 3 || argc == 4))
        return cmd_dump(path, argc == 4 ? argv[3] : NULL);
    return usage();
}
