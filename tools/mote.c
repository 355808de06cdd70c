/*
 * mote — command-line tool for MoteDB stores.
 *
 *   mote stat FILE            txnid, page size, pages used/free, trees, bytes
 *   mote check FILE           full consistency check; exit 0 = consistent,
 *                             1 = problems (listed), 2 = cannot open
 *   mote compact FILE [OUT]   write a compacted copy (default FILE.compact)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static int usage(void)
{
    fprintf(stderr, "usage: mote stat FILE\n"
                    "       mote check FILE\n"
                    "       mote compact FILE [OUT]\n");
    return 2;
}

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
    return usage();
}
