/* objects.c — the object layer: an agent's notes with an indexed level,
 * stored, queried (level >= 20, newest first, 2 at a time) and counted.
 * Run: ./objects FILE */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mote.h"

static const mote_prop_def note_def[] = {
    {"created", MOTE_T_TIMESTAMP, 0, 0, NULL, NULL, {0}, NULL},
    {"level", MOTE_T_INT16, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    {"text", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL},
    {"topic", MOTE_T_STRING, MOTE_P_NULLABLE | MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
};

static int print_note(void *ctx, const mote_record *r)
{
    (void)ctx;
    mote_value level, text;
    mote_record_get(r, 1, &level, NULL);
    mote_record_get(r, 2, &text, NULL);
    printf("#%llu level %lld: %.*s\n", (unsigned long long)r->id, (long long)level.v.i,
           (int)text.v.s.n, (const char *)text.v.s.p);
    return 0;
}

static int fail(mote_store *s, const char *what)
{
    fprintf(stderr, "%s: %s\n", what, mote_errmsg(s));
    mote_close(s);
    return 1;
}

int main(int argc, char **argv)
{
    mote_store *s;
    if (mote_open(argc > 1 ? argv[1] : "notes.mote", NULL, &s)) {
        fprintf(stderr, "open: %s\n", mote_last_open_error());
        return 1;
    }
    mote_txn *t;
    mote_entity *note;
    if (mote_begin(s, 0, &t) || mote_entity_open(t, "Note", note_def, 4, &note))
        return fail(s, "entity");
    const char *texts[] = {"user likes tea", "meeting at 10", "deadline friday",
                           "call back", "buy milk"};
    for (int i = 0; i < 5; i++) {
        mote_value v[4] = {{0}};
        v[0].v.i = (int64_t)time(NULL) * 1000000000 + i;
        v[1].v.i = 10 * (i + 1);
        v[2].v.s.p = texts[i];
        v[2].v.s.n = strlen(texts[i]);
        v[3].null = 1;
        if (mote_put(t, note, 0, v, MOTE_PUT_UPSERT, NULL))
            return fail(s, "put");
    }
    if (mote_commit(t)) /* one durable commit for all five */
        return fail(s, "commit");

    mote_query *q;
    int cond;
    mote_value min = {0};
    min.v.i = 20;
    mote_query_new(note, &q);
    mote_query_cond(q, 1, MOTE_GE, &min, 1, 0, &cond);
    mote_query_where(q, cond);
    mote_query_order(q, 0, MOTE_Q_DESC);
    mote_query_limit(q, 0, 2);
    uint64_t n;
    mote_begin(s, MOTE_TXN_RDONLY, &t);
    if (mote_query_find(t, q, print_note, NULL) || mote_count(t, note, &n))
        return fail(s, "query");
    printf("%llu notes in all\n", (unsigned long long)n);
    mote_abort(t);
    mote_query_free(q);
    return mote_close(s) ? 1 : 0;
}
