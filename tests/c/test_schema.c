/*
 * test_schema.c — stored data is never dropped implicitly: definitions that
 * lack stored properties (kept properties), rename round trips, explicit
 * drops, handles outdated by another definition, and the id ranges.
 */
#include "object.h" /* AUTO_ID_LIMIT */
#include "test.h"

static mote_value I(int64_t i) { mote_value v = {0}; v.v.i = i; return v; }
static mote_value S(const char *s) { mote_value v = {0}; v.v.s.p = s; v.v.s.n = strlen(s); return v; }

/* v1 of a Person: a name (indexed), an age, a unique handle, friends. */
static const mote_prop_def v1[] = {
    {"name", MOTE_T_STRING, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    {"age", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
    {"handle", MOTE_T_STRING, MOTE_P_UNIQUE | MOTE_P_INDEXED | MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"friends", MOTE_T_TOMANY, 0, 0, NULL, "P", {0}, NULL},
};
/* An old deployment's class: it knows only the age, in another order. */
static const mote_prop_def only_age[] = {
    {"age", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
};

static mote_entity *open_def(mote_store *s, const mote_prop_def *d, unsigned n, int write)
{
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, write ? 0 : MOTE_TXN_RDONLY, &t));
    OK(mote_entity_open(t, "P", d, n, &e));
    if (write)
        OK(mote_commit(t));
    else
        mote_abort(t);
    return e;
}

/* The string value of property prop of object id ("" if absent, "<null>"). */
static const char *str_of(mote_store *s, mote_entity *e, uint64_t id, unsigned prop, char *buf)
{
    mote_txn *t;
    mote_record r;
    mote_value v;
    int absent = 0;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_get(t, e, id, &r));
    OK(mote_record_get(&r, prop, &v, &absent));
    if (v.null)
        snprintf(buf, 64, "<null%s>", absent ? ",absent" : "");
    else
        snprintf(buf, 64, "%.*s", (int)v.v.s.n, (const char *)v.v.s.p);
    mote_abort(t);
    return buf;
}

static void check_clean(mote_store *s)
{
    OK(mote_check(s, NULL, NULL));
}

static uint64_t count_eq(mote_store *s, mote_entity *e, unsigned prop, mote_value v)
{
    mote_txn *t;
    mote_query *q;
    int c;
    uint64_t n;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_query_new(e, &q));
    OK(mote_query_cond(q, prop, MOTE_EQ, &v, 1, 0, &c));
    OK(mote_query_where(q, c));
    OK(mote_query_count(t, q, &n));
    mote_query_free(q);
    mote_abort(t);
    return n;
}

/* A definition lacking stored properties opens (even read-only, without a
 * write), carries them through updates, maintains their indexes and links,
 * and new objects hold NULL in them. */
TEST(schema_kept_properties)
{
    const char *p = test_path("kept.mote");
    mote_store *s = test_open(p, NULL);
    mote_entity *e = open_def(s, v1, 4, 1);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    mote_value a[4] = {S("Ada"), I(36), S("@ada"), {0}}, b[4] = {S("Bob"), I(40), S("@bob"), {0}};
    uint64_t ida, idb;
    OK(mote_put(t, e, 0, a, 0, &ida));
    OK(mote_put(t, e, 0, b, 0, &idb));
    OK(mote_link(t, e, 3, ida, idb));
    OK(mote_commit(t));
    mote_stat before, after;
    OK(mote_store_stat(s, &before));
    OK(mote_close(s));

    /* read-only store, old class: opens, changes nothing */
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    s = test_open(p, &ro);
    mote_entity *old = open_def(s, only_age, 1, 0);
    CHECK(mote_entity_nprops(old) == 1);
    OK(mote_close(s));
    s = test_open(p, NULL);
    old = open_def(s, only_age, 1, 1);
    OK(mote_store_stat(s, &after));
    CHECK(after.txnid == before.txnid); /* nothing was written */

    /* updates through the old class keep name, handle and links */
    OK(mote_begin(s, 0, &t));
    mote_value age[1] = {I(37)};
    OK(mote_put(t, old, ida, age, MOTE_PUT_UPDATE, NULL));
    mote_value many[2] = {I(41), I(42)};
    uint64_t both[2] = {ida, idb}, nid;
    OK(mote_put_many(t, old, 2, both, many, MOTE_PUT_UPDATE, NULL, NULL));
    OK(mote_put(t, old, 0, age, 0, &nid)); /* a new object: NULL in the kept ones */
    unsigned which = 0;
    OK(mote_update(t, old, idb, &which, age, 1));
    OK(mote_commit(t));
    check_clean(s);

    e = open_def(s, v1, 4, 1);
    char buf[64];
    CHECK(!strcmp(str_of(s, e, ida, 0, buf), "Ada"));
    CHECK(!strcmp(str_of(s, e, ida, 2, buf), "@ada"));
    CHECK(!strcmp(str_of(s, e, idb, 0, buf), "Bob"));
    /* name is not nullable: the new object's NULL reads as absent */
    CHECK(!strcmp(str_of(s, e, nid, 0, buf), "<null,absent>"));
    CHECK(!strcmp(str_of(s, e, nid, 2, buf), "<null>"));
    CHECK(count_eq(s, e, 0, S("Ada")) == 1); /* the index kept up */
    CHECK(count_eq(s, e, 2, S("@bob")) == 1);
    uint64_t *ids;
    size_t n;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_links(t, e, 3, ida, &ids, &n));
    CHECK(n == 1 && ids[0] == idb);
    mote_free(ids);
    mote_abort(t);

    /* removal through the old class removes the kept index entries and links */
    OK(mote_begin(s, 0, &t));
    OK(mote_remove(t, old, idb));
    OK(mote_commit(t));
    check_clean(s);
    CHECK(count_eq(s, e, 0, S("Bob")) == 0);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_links(t, e, 3, ida, &ids, &n));
    CHECK(n == 0);
    mote_free(ids);
    mote_abort(t);
    OK(mote_close(s));
}

/* v1 -> v2 (renamed) -> v1 -> v2: every value stays reachable from each. */
TEST(schema_rename_round_trip)
{
    static const mote_prop_def n1[] = {{"name", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL}};
    static const mote_prop_def n2[] = {{"full_name", MOTE_T_STRING, 0, 0, "name", NULL, {0}, NULL}};
    mote_store *s = test_open(test_path("rename.mote"), NULL);
    mote_txn *t;
    mote_entity *e1 = open_def(s, n1, 1, 1), *e2;
    uint64_t id1, id2, id3;
    char buf[64];
    OK(mote_begin(s, 0, &t));
    mote_value v = S("Ada");
    OK(mote_put(t, e1, 0, &v, 0, &id1));
    OK(mote_commit(t));
    e2 = open_def(s, n2, 1, 1);
    CHECK(!strcmp(str_of(s, e2, id1, 0, buf), "Ada"));
    OK(mote_begin(s, 0, &t));
    v = S("Grace");
    OK(mote_put(t, e2, 0, &v, 0, &id2));
    OK(mote_commit(t));
    e1 = open_def(s, n1, 1, 1); /* the old name is a former name: same property */
    CHECK(!strcmp(str_of(s, e1, id2, 0, buf), "Grace"));
    OK(mote_begin(s, 0, &t));
    v = S("Linus");
    OK(mote_put(t, e1, 0, &v, 0, &id3));
    OK(mote_commit(t));
    e2 = open_def(s, n2, 1, 1);
    CHECK(!strcmp(str_of(s, e2, id1, 0, buf), "Ada"));
    CHECK(!strcmp(str_of(s, e2, id3, 0, buf), "Linus"));
    /* once both names have been used, either opens without a write */
    mote_stat a, b;
    OK(mote_store_stat(s, &a));
    open_def(s, n1, 1, 1);
    open_def(s, n2, 1, 1);
    OK(mote_store_stat(s, &b));
    CHECK(a.txnid == b.txnid);
    /* a new property may take a former name: it is then a different one */
    static const mote_prop_def both[] = {{"full_name", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL},
                                         {"name", MOTE_T_STRING, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL}};
    mote_entity *e3 = open_def(s, both, 2, 1);
    CHECK(!strcmp(str_of(s, e3, id1, 0, buf), "Ada"));
    CHECK(!strcmp(str_of(s, e3, id1, 1, buf), "<null,absent>"));
    check_clean(s);
    OK(mote_close(s));
}

/* A read transaction says what differs when a definition needs a write. */
TEST(schema_read_txn_names_differences)
{
    const char *p = test_path("ro.mote");
    mote_store *s = test_open(p, NULL);
    open_def(s, v1, 4, 1);
    mote_prop_def v[5];
    memcpy(v, v1, sizeof v1);
    v[0].flags = 0;                                            /* name loses its index */
    v[4] = (mote_prop_def){"email", MOTE_T_STRING, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL}; /* new */
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_entity_open(t, "P", v, 5, &e), MOTE_SCHEMA);
    const char *m = mote_errmsg(s);
    CHECK(strstr(m, "new property email") && strstr(m, "name loses its index"));
    mote_abort(t);
    v[0].type = MOTE_T_BYTES; /* a type change is refused either way */
    OK(mote_begin(s, 0, &t));
    CHECK_RC(mote_entity_open(t, "P", v, 5, &e), MOTE_SCHEMA);
    CHECK(strstr(mote_errmsg(s), "P.name: stored as string, now declared bytes"));
    mote_abort(t);
    OK(mote_close(s));
}

/* Dropping a property is explicit: its values, index and links go. */
TEST(schema_drop_property)
{
    const char *p = test_path("drop.mote");
    mote_store *s = test_open(p, NULL);
    mote_entity *e = open_def(s, v1, 4, 1);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    uint64_t ids[20];
    for (int i = 0; i < 20; i++) {
        char h[16];
        snprintf(h, sizeof h, "@%d", i);
        mote_value v[4] = {S(big), I(i), S(h), {0}};
        OK(mote_put(t, e, 0, v, 0, &ids[i]));
        if (i)
            OK(mote_link(t, e, 3, ids[i], ids[0]));
    }
    OK(mote_commit(t));
    /* an object made by a definition lacking name: NULL in a property that
     * is not nullable, which the drop's rewrite of every object carries */
    mote_entity *old = open_def(s, only_age, 1, 1);
    mote_value age = I(99);
    uint64_t lacking;
    OK(mote_begin(s, 0, &t));
    OK(mote_put(t, old, 0, &age, 0, &lacking));
    OK(mote_commit(t));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    uint64_t trees = st.trees;

    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_entity_drop_prop(t, "P", "name"), MOTE_READONLY);
    mote_abort(t);
    OK(mote_begin(s, 0, &t));
    CHECK_RC(mote_entity_drop_prop(t, "P", "nope"), MOTE_NOTFOUND);
    CHECK_RC(mote_entity_drop_prop(t, "Q", "name"), MOTE_NOTFOUND);
    OK(mote_entity_drop_prop(t, "P", "name"));
    OK(mote_entity_drop_prop(t, "P", "friends"));
    CHECK_RC(mote_count(t, e, &st.entries), MOTE_SCHEMA); /* e is outdated in t */
    OK(mote_commit(t));
    check_clean(s);
    OK(mote_store_stat(s, &st));
    CHECK(st.trees == trees - 2); /* the name index and the link tree */

    /* the stored view has age and handle; every record lost the 300 bytes */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    mote_entity *sv;
    OK(mote_entity_stored(t, "P", &sv));
    CHECK(mote_entity_nprops(sv) == 2 && mote_entity_prop(sv, "name") < 0);
    mote_record r;
    OK(mote_get(t, sv, ids[3], &r));
    CHECK(r.size < 100);
    uint64_t *back;
    size_t n;
    mote_abort(t);
    /* the old handle is outdated; v1 opened again has an empty name */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_count(t, e, &st.entries), MOTE_SCHEMA);
    mote_abort(t);
    e = open_def(s, v1, 4, 1);
    char buf[64];
    CHECK(!strcmp(str_of(s, e, ids[3], 0, buf), ""));
    CHECK(!strcmp(str_of(s, e, ids[3], 2, buf), "@3"));
    CHECK(!strcmp(str_of(s, e, lacking, 2, buf), "<null>"));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_backlinks(t, e, 3, ids[0], &back, &n));
    CHECK(n == 0);
    mote_free(back);
    mote_abort(t);
    check_clean(s);
    OK(mote_close(s));
}

/* A handle outdated by another definition's change: unusable in that
 * transaction at once, elsewhere after its commit; an abort restores it.
 * mote_entity_pending says which handles are their transaction's. */
TEST(schema_outdated_handles)
{
    mote_store *s = test_open(test_path("stale.mote"), NULL);
    mote_txn *w, *r;
    mote_entity *e, *e2;
    OK(mote_begin(s, 0, &w));
    OK(mote_entity_open(w, "P", v1, 4, &e)); /* created */
    CHECK(mote_entity_pending(e) == 1);
    OK(mote_commit(w));
    CHECK(mote_entity_pending(e) == 0 && mote_entity_pending(NULL) == 0);
    OK(mote_begin(s, 0, &w));
    OK(mote_entity_open(w, "P", v1, 4, &e2)); /* as stored: the same handle */
    CHECK(e2 == e && mote_entity_pending(e) == 0);
    mote_abort(w);
    mote_prop_def v[5];
    memcpy(v, v1, sizeof v1);
    v[4] = (mote_prop_def){"email", MOTE_T_STRING, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL};
    uint64_t n;
    OK(mote_begin(s, 0, &w));
    OK(mote_entity_open(w, "P", v, 5, &e2)); /* changed */
    CHECK(mote_entity_pending(e2) == 1 && mote_entity_pending(e) == 0);
    CHECK_RC(mote_count(w, e, &n), MOTE_SCHEMA);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &r));
    OK(mote_count(r, e, &n)); /* readers see the committed schema */
    CHECK_RC(mote_count(r, e2, &n), MOTE_SCHEMA);
    mote_abort(r);
    mote_abort(w);
    CHECK(mote_entity_pending(e2) == 0); /* rolled back: dead, not pending */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &r));
    OK(mote_count(r, e, &n));
    mote_abort(r);
    OK(mote_begin(s, 0, &w));
    OK(mote_entity_open(w, "P", v, 5, &e2));
    OK(mote_commit(w));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &r));
    CHECK_RC(mote_count(r, e, &n), MOTE_SCHEMA);
    CHECK(strstr(mote_errmsg(s), "open it again"));
    OK(mote_count(r, e2, &n));
    mote_abort(r);
    /* the lacking definition gets a handle of its own, without a write */
    mote_entity *e3 = open_def(s, v1, 4, 0);
    CHECK(e3 != e && e3 != e2);
    OK(mote_close(s));
}

/* Explicit ids anywhere in 1 .. 2^64-1; automatic ids below 2^63. */
TEST(schema_id_ranges)
{
    mote_store *s = test_open(test_path("ids.mote"), NULL);
    mote_entity *e = open_def(s, only_age, 1, 1);
    mote_txn *t;
    mote_value v = I(1);
    uint64_t id;
    OK(mote_begin(s, 0, &t));
    OK(mote_put(t, e, UINT64_MAX, &v, MOTE_PUT_INSERT, NULL));
    OK(mote_put(t, e, AUTO_ID_LIMIT, &v, MOTE_PUT_INSERT, NULL));
    OK(mote_put(t, e, 0, &v, 0, &id));
    CHECK(id == 1); /* ids above the automatic range do not move it */
    OK(mote_put(t, e, 100, &v, 0, NULL));
    OK(mote_put(t, e, 0, &v, 0, &id));
    CHECK(id == 101);
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    OK(mote_put(t, e, 0, &v, 0, &id)); /* the sequence came back from the store */
    CHECK(id == 102);
    OK(mote_put(t, e, AUTO_ID_LIMIT - 2, &v, 0, NULL));
    mote_value two[2] = {I(1), I(2)};
    uint64_t got[2];
    CHECK_RC(mote_put_many(t, e, 2, NULL, two, 0, got, NULL), MOTE_FULL);
    OK(mote_put(t, e, 0, &v, 0, &id));
    CHECK(id == AUTO_ID_LIMIT - 1);
    CHECK_RC(mote_put(t, e, 0, &v, 0, &id), MOTE_FULL);
    CHECK(strstr(mote_errmsg(s), "automatic ids are used up"));
    OK(mote_put(t, e, UINT64_MAX - 1, &v, 0, NULL)); /* explicit ones still work */
    OK(mote_commit(t));
    check_clean(s);
    OK(mote_close(s));
}

/* A value an object never had (it predates the property) stays absent when
 * the object is written again without it: through a definition that lacks
 * the property, a partial update of another one, or a drop's rewrite. */
TEST(schema_absent_stays_absent)
{
    static const mote_prop_def a1[] = {{"a", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL}};
    static const mote_prop_def a2[] = {{"a", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
                                       {"b", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
                                       {"c", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL}};
    static const mote_prop_def lacks_b[] = {{"a", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
                                            {"c", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL}};
    mote_store *s = test_open(test_path("absent.mote"), NULL);
    mote_txn *t;
    mote_entity *e = open_def(s, a1, 1, 1);
    mote_value v = I(1);
    uint64_t id, id2;
    OK(mote_begin(s, 0, &t));
    OK(mote_put(t, e, 0, &v, 0, &id));
    OK(mote_put(t, e, 0, &v, 0, &id2));
    OK(mote_commit(t));
    mote_entity *full = open_def(s, a2, 3, 1); /* b and c added: absent in both */
    mote_entity *lb = open_def(s, lacks_b, 2, 1);
    OK(mote_begin(s, 0, &t));
    mote_value two[2] = {I(2), S("x")};
    OK(mote_put(t, lb, id, two, MOTE_PUT_UPDATE, NULL)); /* b is kept: carried */
    unsigned which = 0;
    mote_value a = I(3);
    OK(mote_update(t, full, id2, &which, &a, 1)); /* b and c left alone */
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_drop_prop(t, "P", "c"));
    OK(mote_commit(t));
    check_clean(s);
    full = open_def(s, a2, 3, 1);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    uint64_t both[2] = {id, id2};
    for (int k = 0; k < 2; k++) {
        mote_record r;
        mote_value x;
        int absent = 0;
        OK(mote_get(t, full, both[k], &r));
        OK(mote_record_get(&r, 1, &x, &absent));
        CHECK(absent); /* not a stored 0 */
        OK(mote_record_get(&r, 2, &x, &absent));
        CHECK(absent);
    }
    mote_abort(t);
    OK(mote_close(s));
}

/* Over-limit values say what the limit is. */
TEST(schema_limits_in_messages)
{
    mote_store *s = test_open(test_path("lim.mote"), NULL);
    static const mote_prop_def d[] = {{"s", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL}};
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "L", d, 1, &e));
    mote_value v = {0};
    v.v.s.p = "x"; /* never read: the size is refused first */
    v.v.s.n = (size_t)MOTE_MAX_VALUE + 1;
    CHECK_RC(mote_put(t, e, 0, &v, 0, NULL), MOTE_TOOBIG);
    CHECK(strstr(mote_errmsg(s), "L.s: a value of 1073741825 bytes is over the limit of "
                                 "1073741824 bytes (1 GiB) per value"));
    mote_abort(t);
    OK(mote_close(s));
}
