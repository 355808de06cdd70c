/*
 * test_text.c — full-text search: the tokenizer (mote_tokenize). A table of
 * texts and the tokens a reader of mote.h's rules expects, written by hand;
 * positions and byte ranges; damaged UTF-8; long tokens; stopping; bad
 * arguments. (The Python tests check every code point against the
 * generator's definition, tools/gen_unicode.py.)
 */
#include "test.h"
#include "tokenize.h"

/* The tokens of a text joined by '|', with positions and ranges checked. */
typedef struct joined {
    char out[4096];
    size_t used;
    uint32_t next_pos;
    size_t last_end;
    size_t text_len;
} joined;

static int join_token(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                      size_t end)
{
    joined *j = ctx;
    CHECK(len >= 1 && len <= MOTE_TOKEN_MAX);
    CHECK(pos == j->next_pos++);
    CHECK(start < end && end <= j->text_len && start >= j->last_end);
    j->last_end = end;
    CHECK(j->used + len + 2 < sizeof j->out);
    if (j->used)
        j->out[j->used++] = '|';
    memcpy(j->out + j->used, token, len);
    j->used += len;
    j->out[j->used] = 0;
    return 0;
}

static const char *tokens_of(joined *j, const char *text, size_t len, unsigned flags)
{
    memset(j, 0, sizeof *j);
    j->text_len = len;
    OK(mote_tokenize(text, len, flags, join_token, j));
    return j->out;
}

static void expect(const char *text, unsigned flags, const char *want)
{
    joined j;
    const char *got = tokens_of(&j, text, strlen(text), flags);
    if (strcmp(got, want)) {
        fprintf(stderr, "tokens of \"%s\" (flags %u): \"%s\", expected \"%s\"\n", text, flags,
                got, want);
        abort();
    }
}

TEST(text_tokenize_table)
{
    enum { K = MOTE_TOKEN_KEEP_DIACRITICS };
    static const struct {
        const char *text;
        unsigned flags;
        const char *want;
    } cases[] = {
        {"", 0, ""},
        {"  \t\n ", 0, ""},
        {"Hello, World!", 0, "hello|world"},
        {"ERR_CONN_TIMEOUT at 3.14s", 0, "err|conn|timeout|at|3|14s"},
        {"e-mail user@example.com", 0, "e|mail|user|example|com"},
        {"Élan vital, CAFÉ crème", 0, "elan|vital|cafe|creme"},
        {"Élan vital, CAFÉ crème", K, "élan|vital|café|crème"},
        {"cafe\xcc\x81", 0, "cafe"},               /* e + U+0301 */
        {"cafe\xcc\x81", K, "cafe\xcc\x81"},       /* kept as it is */
        {"\xcc\x81\xcc\x81 x", 0, "x"},            /* diacritics alone: no token */
        {"Straße STRASSE", 0, "straße|strasse"},  /* ß stays ß */
        {"ΣΟΦΊΑ σοφία σοφός", 0, "σοφια|σοφια|σοφοσ"}, /* final sigma folds too */
        {"Йод и ЁЖ", 0, "йод|и|ёж"},              /* Cyrillic keeps its marks */
        {"ÅNGSTRÖM Øre ĳ", 0, "angstrom|øre|ĳ"},  /* Ø has no decomposition */
        {"中文分词 test", 0, "中|文|分|词|test"},
        {"これはテストです", 0, "こ|れ|は|テ|ス|ト|で|す"},
        {"한국어 텍스트", 0, "한국어|텍스트"},      /* Hangul: words */
        {"हिन्दी भाषा", 0, "हिन्दी|भाषा"},            /* vowel signs belong to the word */
        {"x\xf0\x9f\x98\x80y \xf0\x90\x90\x80", 0, "x|y|\xf0\x90\x90\xa8"}, /* an emoji separates; Deseret capital long I folds to its small letter */
        {"ＡＢＣ１２３", 0, "ａｂｃ１２３"},        /* fullwidth: folded, not narrowed */
        {"\xef\xa3\xbf private", 0, "\xef\xa3\xbf|private"}, /* U+F8FF, private use */
        {"a\xc0\xafz", 0, "a|z"},                  /* overlong '/' */
        {"a\xed\xa0\x80z", 0, "a|z"},              /* a surrogate */
        {"a\xf4\x90\x80\x80z", 0, "a|z"},          /* past U+10FFFF */
        {"a\xffz\xe4\xb8", 0, "a|z"},              /* stray byte, cut-short sequence */
        {"İstanbul", 0, "istanbul"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect(cases[i].text, cases[i].flags, cases[i].want);
}

/* Each token's range, in order. */
typedef struct ranges {
    size_t n, start[8], end[8];
} ranges;

static int collect_range(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                         size_t end)
{
    (void)token, (void)len, (void)pos;
    ranges *r = ctx;
    CHECK(r->n < 8);
    r->start[r->n] = start;
    r->end[r->n++] = end;
    return 0;
}

TEST(text_tokenize_ranges_and_nul)
{
    /* a NUL separates like a space; a range covers the token's run, its
     * dropped diacritics included */
    static const char text[] = "ab\0Cd\xc3\xa9\xcc\x81  z";
    joined j;
    CHECK(!strcmp(tokens_of(&j, text, sizeof text - 1, 0), "ab|cde|z"));
    CHECK(j.next_pos == 3 && j.last_end == sizeof text - 1);
    ranges r = {0};
    OK(mote_tokenize(text, sizeof text - 1, 0, collect_range, &r));
    CHECK(r.n == 3);
    CHECK(r.start[0] == 0 && r.end[0] == 2);
    CHECK(r.start[1] == 3 && r.end[1] == 9);
    CHECK(r.start[2] == 11 && r.end[2] == 12);
}

/* English stemming (MOTE_TOKEN_STEM): the examples of Porter's paper, one
 * or more per rule, the two departures of his own implementation (bli,
 * logi), words too short or too long to stem, tokens past ASCII, and the
 * ranges of a stemmed token (its run's). */
TEST(text_tokenize_stems)
{
    static const char *const pairs[][2] = {
        {"caresses", "caress"}, {"ponies", "poni"}, {"ties", "ti"}, {"caress", "caress"},
        {"cats", "cat"}, {"feed", "feed"}, {"agreed", "agre"}, {"plastered", "plaster"},
        {"bled", "bled"}, {"motoring", "motor"}, {"sing", "sing"}, {"conflated", "conflat"},
        {"troubled", "troubl"}, {"sized", "size"}, {"hopping", "hop"}, {"tanned", "tan"},
        {"falling", "fall"}, {"hissing", "hiss"}, {"fizzed", "fizz"}, {"failing", "fail"},
        {"filing", "file"}, {"happy", "happi"}, {"sky", "sky"}, {"relational", "relat"},
        {"conditional", "condit"}, {"rational", "ration"}, {"valenci", "valenc"},
        {"hesitanci", "hesit"}, {"digitizer", "digit"}, {"conformabli", "conform"},
        {"radicalli", "radic"}, {"differentli", "differ"}, {"vileli", "vile"},
        {"analogousli", "analog"}, {"vietnamization", "vietnam"}, {"predication", "predic"},
        {"operator", "oper"}, {"feudalism", "feudal"}, {"decisiveness", "decis"},
        {"hopefulness", "hope"}, {"callousness", "callous"}, {"formaliti", "formal"},
        {"sensitiviti", "sensit"}, {"sensibiliti", "sensibl"}, {"triplicate", "triplic"},
        {"formative", "form"}, {"formalize", "formal"}, {"electriciti", "electr"},
        {"electrical", "electr"}, {"hopeful", "hope"}, {"goodness", "good"},
        {"revival", "reviv"}, {"allowance", "allow"}, {"inference", "infer"},
        {"airliner", "airlin"}, {"gyroscopic", "gyroscop"}, {"adjustable", "adjust"},
        {"defensible", "defens"}, {"irritant", "irrit"}, {"replacement", "replac"},
        {"adjustment", "adjust"}, {"dependent", "depend"}, {"adoption", "adopt"},
        {"homologou", "homolog"}, {"communism", "commun"}, {"activate", "activ"},
        {"angulariti", "angular"}, {"homologous", "homolog"}, {"effective", "effect"},
        {"bowdlerize", "bowdler"}, {"probate", "probat"}, {"rate", "rate"},
        {"cease", "ceas"}, {"controll", "control"}, {"roll", "roll"},
        {"generalizations", "gener"}, {"oscillators", "oscil"}, {"connections", "connect"},
        {"connected", "connect"}, {"connecting", "connect"}, {"archaeology", "archaeolog"},
        {"is", "is"}, {"as", "as"}, {"abc123s", "abc123"},
    };
    joined j;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const char *got = tokens_of(&j, pairs[i][0], strlen(pairs[i][0]), MOTE_TOKEN_STEM);
        if (strcmp(got, pairs[i][1]))
            printf("%s: %s, expected %s\n", pairs[i][0], got, pairs[i][1]);
        CHECK(!strcmp(got, pairs[i][1]));
    }
    /* folded first (case, diacritics), then stemmed; Greek passes */
    static const char mixed[] = "Running CONNECTIONS Caf\xc3\xa9s "
                                "\xce\xbb\xcf\x8c\xce\xb3\xce\xbf\xcf\x82";
    CHECK(!strcmp(tokens_of(&j, mixed, sizeof mixed - 1, MOTE_TOKEN_STEM),
                  "run|connect|cafe|\xce\xbb\xce\xbf\xce\xb3\xce\xbf\xcf\x83"));
    char longw[80];
    memset(longw, 'a', 65);
    memcpy(longw + 65, "ing", 3); /* 68 bytes: past 64, not stemmed */
    CHECK(strlen(tokens_of(&j, longw, 68, MOTE_TOKEN_STEM)) == 68);
    ranges r = {0};
    OK(mote_tokenize("the connections", 15, MOTE_TOKEN_STEM, collect_range, &r));
    CHECK(r.n == 2 && r.start[1] == 4 && r.end[1] == 15);
}

TEST(text_tokenize_long_tokens)
{
    /* a run longer than MOTE_TOKEN_MAX bytes gives its longest prefix of
     * whole characters: 300 ASCII letters give 255 of them, 200 two-byte
     * letters (é: e with diacritics removed, é kept) give 255 or 254 bytes */
    char text[1024];
    memset(text, 'Q', 300);
    memcpy(text + 300, " next", 5);
    joined j;
    const char *got = tokens_of(&j, text, 305, 0);
    CHECK(strlen(got) == MOTE_TOKEN_MAX + 5 && got[MOTE_TOKEN_MAX] == '|');
    for (size_t i = 0; i < MOTE_TOKEN_MAX; i++)
        CHECK(got[i] == 'q');
    CHECK(!strcmp(got + MOTE_TOKEN_MAX + 1, "next"));
    ranges r = {0};
    OK(mote_tokenize(text, 305, 0, collect_range, &r));
    CHECK(r.n == 2 && r.end[0] == 300 && r.start[1] == 301);
    for (size_t i = 0; i < 200; i++)
        memcpy(text + 2 * i, "\xc3\xa9", 2);
    got = tokens_of(&j, text, 400, MOTE_TOKEN_KEEP_DIACRITICS);
    CHECK(strlen(got) == 254 && !memcmp(got, "\xc3\xa9", 2) && j.next_pos == 1);
    got = tokens_of(&j, text, 400, 0);
    CHECK(strlen(got) == 200 && got[199] == 'e');
}

static int stop_at_second(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                          size_t end)
{
    (void)token, (void)len, (void)start, (void)end;
    ++*(int *)ctx;
    return pos == 1 ? 42 : 0;
}

TEST(text_tokenize_stops_and_refuses)
{
    int calls = 0;
    CHECK_RC(mote_tokenize("one two three", 13, 0, stop_at_second, &calls), 42);
    CHECK(calls == 2);
    CHECK_RC(mote_tokenize("x", 1, 0, NULL, NULL), MOTE_INVALID);
    CHECK_RC(mote_tokenize(NULL, 1, 0, stop_at_second, &calls), MOTE_INVALID);
    CHECK_RC(mote_tokenize("x", 1, 4, stop_at_second, &calls), MOTE_INVALID);
    calls = 0;
    OK(mote_tokenize(NULL, 0, 0, stop_at_second, &calls));
    CHECK(calls == 0);
    /* the ASCII fast path agrees with the classes and foldings */
    for (uint32_t c = 0; c < 0x80; c++) {
        int word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        CHECK(mote__uni_class(c) == word);
        CHECK(mote__uni_fold(c, 1) == (c >= 'A' && c <= 'Z' ? c + 32 : c));
    }
    CHECK(mote__uni_class(0x110000) == 0 && !strcmp(mote__uni_version(), "14.0.0"));
}

/* ---- the index (text.c) against a model ------------------------------------------- */

#include <math.h>

#include "text.h"

#define M_DOCS 400
#define M_WORDS 30

/* The model: each document's text (NULL: not in the index). */
typedef struct tmodel {
    char *text[M_DOCS + 1];
} tmodel;

static char *random_text(uint64_t *rs)
{
    size_t n = 1 + test_rand(rs) % 40, cap = 16 * n + 8;
    int long_one = test_rand(rs) % 50 == 0; /* a posting longer than a block */
    if (long_one)
        cap += 8 * 900;
    char *t = malloc(cap), *p = t;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = test_rand(rs) % 1000;
        unsigned w = (unsigned)(r * r / 1000 * M_WORDS / 1000); /* skewed: w0 most often */
        p += sprintf(p, "%sW%u%s", i ? (r & 1 ? " " : ", ") : "", w, r % 7 ? "" : "!");
    }
    if (long_one)
        for (int i = 0; i < 900; i++)
            p += sprintf(p, " w3");
    *p = 0;
    return t;
}

/* The postings the model gives, flattened in the index's order: a line
 * "term id pos,pos,..." each, sorted as the index sorts them. */
typedef struct mline {
    char term[16];
    uint64_t id;
    char pos[8192];
} mline;

typedef struct mtok {
    char term[1024][16];
    uint32_t pos[1024];
    size_t n;
} mtok;

static int mtok_add(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                    size_t end)
{
    (void)start, (void)end;
    mtok *m = ctx;
    CHECK(len < 16 && m->n < 1024);
    memcpy(m->term[m->n], token, len);
    m->term[m->n][len] = 0;
    m->pos[m->n++] = pos;
    return 0;
}

static int cmp_mline(const void *x, const void *y)
{
    const mline *a = x, *b = y;
    int c = strcmp(a->term, b->term);
    return c ? c : (a->id > b->id) - (a->id < b->id);
}

static mline *model_lines(const tmodel *m, size_t *n, uint64_t *docs, uint64_t *tokens)
{
    size_t cap = 64, k = 0;
    mline *l = malloc(cap * sizeof *l);
    static mtok mt;
    *docs = *tokens = 0;
    for (uint64_t id = 1; id <= M_DOCS; id++) {
        if (!m->text[id])
            continue;
        mt.n = 0;
        OK(mote_tokenize(m->text[id], strlen(m->text[id]), 0, mtok_add, &mt));
        ++*docs;
        *tokens += mt.n;
        for (size_t i = 0; i < mt.n; i++) {
            size_t j = 0;
            while (j < i && strcmp(mt.term[j], mt.term[i]))
                j++;
            if (j < i)
                continue; /* the term's first occurrence makes its line */
            if (k == cap)
                l = realloc(l, (cap *= 2) * sizeof *l);
            mline *x = &l[k++];
            strcpy(x->term, mt.term[i]);
            x->id = id;
            char *p = x->pos;
            for (size_t q = i; q < mt.n; q++)
                if (!strcmp(mt.term[q], mt.term[i]))
                    p += sprintf(p, "%u,", mt.pos[q]);
        }
    }
    qsort(l, k, sizeof *l, cmp_mline);
    *n = k;
    return l;
}

typedef struct cmpstate {
    mline *l;
    size_t n, at;
} cmpstate;

static int compare_posting(void *ctx, const char *term, size_t tlen, uint64_t id,
                           const uint32_t *pos, uint32_t tf)
{
    cmpstate *c = ctx;
    CHECK(c->at < c->n);
    const mline *x = &c->l[c->at++];
    char p[8192], *q = p;
    for (uint32_t i = 0; i < tf; i++)
        q += sprintf(q, "%u,", pos[i]);
    if (strlen(x->term) != tlen || memcmp(x->term, term, tlen) || x->id != id || strcmp(x->pos, p)) {
        fprintf(stderr, "posting %zu: index \"%.*s\" %llu %s, model \"%s\" %llu %s\n", c->at - 1,
                (int)tlen, term, (unsigned long long)id, p, x->term, (unsigned long long)x->id,
                x->pos);
        abort();
    }
    return 0;
}

/* BM25 of the model's documents for query terms q[0..nq), FTS5's formula,
 * computed here from the texts; ids and scores of the best k. */
static size_t model_search(const tmodel *m, const char (*q)[16], size_t nq, int all, size_t k,
                           const int *keep, uint64_t *ids, double *scores)
{
    static mtok mt;
    static uint32_t tf[M_DOCS + 1][4], dl[M_DOCS + 1];
    double N = 0, tokens = 0, df[4] = {0};
    for (uint64_t id = 1; id <= M_DOCS; id++) {
        memset(tf[id], 0, sizeof tf[id]);
        if (!m->text[id])
            continue;
        mt.n = 0;
        OK(mote_tokenize(m->text[id], strlen(m->text[id]), 0, mtok_add, &mt));
        N++;
        tokens += (double)mt.n;
        dl[id] = (uint32_t)mt.n;
        for (size_t i = 0; i < mt.n; i++)
            for (size_t j = 0; j < nq; j++)
                tf[id][j] += !strcmp(mt.term[i], q[j]);
        for (size_t j = 0; j < nq; j++)
            df[j] += tf[id][j] > 0;
    }
    size_t n = 0;
    static uint64_t rid[M_DOCS];
    static double rs[M_DOCS];
    for (uint64_t id = 1; id <= M_DOCS; id++) {
        if (!m->text[id])
            continue;
        size_t held = 0;
        double s = 0;
        for (size_t j = 0; j < nq; j++) {
            if (!tf[id][j])
                continue;
            held++;
            double idf = log((N - df[j] + 0.5) / (df[j] + 0.5));
            if (idf <= 0)
                idf = 1e-6;
            s += idf * (tf[id][j] * (1.2 + 1)) /
                 (tf[id][j] + 1.2 * (1 - 0.75 + 0.75 * dl[id] / (tokens / N)));
        }
        if (held && (!all || held == nq) && (!keep || keep[id])) {
            /* insert in order: score descending, id ascending */
            size_t at = n;
            while (at > 0 && rs[at - 1] < s)
                at--;
            memmove(rid + at + 1, rid + at, (n - at) * sizeof *rid);
            memmove(rs + at + 1, rs + at, (n - at) * sizeof *rs);
            rid[at] = id;
            rs[at] = s;
            n++;
        }
    }
    n = n < k ? n : k;
    memcpy(ids, rid, n * sizeof *ids);
    memcpy(scores, rs, n * sizeof *scores);
    return n;
}

/* The first n results (ids, scores) are the model's (mids, msc): scores
 * equal to 1e-9; where the ids' order differs, the scores are equal to the
 * last bits (equal scores come lower id first, computed in either way). */
static void same_ranking(const char *qtext, const uint64_t *ids, const double *sc,
                         const uint64_t *mids, const double *msc, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (fabs(sc[i] - msc[i]) > 1e-9 * fabs(msc[i]))
            fprintf(stderr, "query \"%s\": result %zu: %.17g, model %.17g\n", qtext, i, sc[i],
                    msc[i]);
        CHECK(fabs(sc[i] - msc[i]) <= 1e-9 * fabs(msc[i]));
        if (ids[i] != mids[i])
            CHECK(i + 1 < n && fabs(sc[i] - sc[i + 1]) <= 1e-9 * sc[i]);
    }
}

static void check_against_model(mote_store *s, uint32_t tree, const tmodel *m, uint64_t *rs)
{
    mote_txn *t;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    text_stat st;
    OK(mote__text_verify(t, tree, &st, NULL, NULL));
    size_t n;
    uint64_t docs, tokens;
    mline *l = model_lines(m, &n, &docs, &tokens);
    CHECK(st.docs == docs && st.tokens == tokens && st.postings == n);
    cmpstate c = {l, n, 0};
    OK(mote__text_each(t, tree, compare_posting, &c));
    CHECK(c.at == n);
    free(l);
    for (int r = 0; r < 8; r++) {
        char q[16][16] = {{0}}, qtext[64] = "";
        size_t nq = 1 + test_rand(rs) % 3;
        for (size_t j = 0; j < nq; j++) {
            unsigned w = (unsigned)(test_rand(rs) % (M_WORDS + 2)); /* some held by none */
            snprintf(q[j], sizeof q[j], "w%u", w);
            for (size_t x = 0; x < j; x++)
                if (!strcmp(q[x], q[j]))
                    snprintf(q[j], sizeof q[j], "w%u", M_WORDS + 5 + (unsigned)j);
            strcat(qtext, j ? " " : "");
            strcat(qtext, q[j]);
        }
        int all = (int)(test_rand(rs) & 1);
        size_t k = 1 + test_rand(rs) % 20;
        uint64_t *ids, mids[20];
        double *sc, msc[20];
        size_t got, want = model_search(m, (const char(*)[16])q, nq, all, k, NULL, mids, msc);
        OK(mote__text_search(t, tree, qtext, strlen(qtext), all, 0, &ids, &sc, &got));
        CHECK(got >= want && (got == want || want == k));
        same_ranking(qtext, ids, sc, mids, msc, want);
        uint64_t *top; /* the k best alone: the full ranking's first k */
        double *tsc;
        size_t ntop;
        OK(mote__text_search(t, tree, qtext, strlen(qtext), all, k, &top, &tsc, &ntop));
        CHECK(ntop == (got < k ? got : k));
        for (size_t j = 0; j < ntop; j++)
            CHECK(top[j] == ids[j] && tsc[j] == sc[j]);
        mote_free(top);
        mote_free(tsc);
        mote_free(ids);
        mote_free(sc);
    }
    mote_abort(t);
}

TEST(text_index_model)
{
    const char *path = test_path("text.mote");
    mote_store *s;
    OK(mote_open(path, NULL, &s));
    mote_txn *t;
    uint32_t tree;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "ft", MOTE_TREE_CREATE, &tree));
    OK(mote_commit(t));
    static tmodel m, before;
    uint64_t rs = 2026;
    text_batch b = {0};
    int rounds = 120 * test_scale();
    for (int round = 0; round < rounds; round++) {
        before = m; /* shares the texts: a change makes a new one */
        char *owned[M_DOCS * 4];
        size_t nowned = 0;
        OK(mote_begin(s, 0, &t));
        int ops = 1 + (int)(test_rand(&rs) % (round % 10 == 0 ? 300 : 12));
        for (int o = 0; o < ops; o++) {
            uint64_t id = 1 + test_rand(&rs) % M_DOCS;
            int what = (int)(test_rand(&rs) % 3); /* 0 put, 1 remove, 2 put twice */
            for (int rep = 0; rep < (what == 2 ? 2 : 1); rep++) {
                if (m.text[id])
                    OK(mote__text_note(&b, id, m.text[id], strlen(m.text[id]), 0));
                if (what == 1) {
                    m.text[id] = NULL;
                    break;
                }
                char *x = random_text(&rs);
                CHECK(nowned < sizeof owned / sizeof *owned);
                owned[nowned++] = x;
                m.text[id] = x;
                OK(mote__text_note(&b, id, x, strlen(x), 1));
            }
        }
        OK(mote__text_apply(t, tree, &b));
        if (test_rand(&rs) % 6 == 0) {
            mote_abort(t);
            m = before;
            for (size_t i = 0; i < nowned; i++)
                free(owned[i]);
        } else {
            OK(mote_commit(t));
            /* free the texts no document holds now: the replaced ones, and
             * those of this round that a later change replaced */
            for (uint64_t id = 1; id <= M_DOCS; id++)
                if (before.text[id] && before.text[id] != m.text[id])
                    free(before.text[id]);
            for (size_t i = 0; i < nowned; i++) {
                uint64_t id = 1;
                while (id <= M_DOCS && m.text[id] != owned[i])
                    id++;
                if (id > M_DOCS)
                    free(owned[i]);
            }
        }
        if (round % 10 == 9 || round == rounds - 1)
            check_against_model(s, tree, &m, &rs);
    }
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    text_stat st;
    OK(mote__text_verify(t, tree, &st, NULL, NULL));
    printf("text index: %llu documents, %llu tokens, %llu terms, %llu postings in %llu blocks "
           "of %llu segments\n", (unsigned long long)st.docs, (unsigned long long)st.tokens,
           (unsigned long long)st.terms, (unsigned long long)st.postings,
           (unsigned long long)st.blocks, (unsigned long long)st.segments);
    CHECK(st.blocks > st.terms); /* terms spread over several blocks */
    /* ~100 commits, each a segment: merged so that no level holds 8
     * (TEXT_FANIN) of them; the directory's entries ('g' seg: varint level) */
    unsigned per_level[64] = {0}, top = 0;
    mote_cursor *c;
    OK(mote_cursor_open(t, tree, &c));
    for (int r = mote_cursor_seek(c, "g", 1, MOTE_SEEK_GE); r == MOTE_OK; r = mote_cursor_next(c)) {
        mote_val k, v;
        OK(mote_cursor_get(c, &k, &v));
        if (((const char *)k.data)[0] != 'g')
            break;
        unsigned lvl = ((const uint8_t *)v.data)[0];
        CHECK(v.size == 1 && lvl < 64 && ++per_level[lvl] < 8);
        top = lvl > top ? lvl : top;
    }
    mote_cursor_close(c);
    CHECK(top >= 1); /* merges happened */
    CHECK(st.big > 0);            /* and postings longer than a block */
    mote_abort(t);
    for (uint64_t id = 1; id <= M_DOCS; id++)
        free(m.text[id]);
    mote__text_batch_free(&b);
    OK(mote_close(s));
}

/* ---- full-text indexes of objects (mote_query_match) -------------------------------- */

enum { FT_TOPIC, FT_TEXT, FT_NPROPS };
static const mote_prop_def ft_props[FT_NPROPS] = {
    [FT_TOPIC] = {.name = "topic", .type = MOTE_T_INT32, .flags = MOTE_P_INDEXED},
    [FT_TEXT] = {.name = "text", .type = MOTE_T_STRING,
                 .flags = MOTE_P_FULLTEXT | MOTE_P_NULLABLE},
};

typedef struct omodel {
    tmodel m;              /* texts of objects with one (NULL: none, or no object) */
    int present[M_DOCS + 1];
    int topic[M_DOCS + 1];
} omodel;

static void ft_put(mote_txn *t, mote_entity *e, omodel *om, uint64_t id, int topic,
                   char *text)
{
    mote_value v[FT_NPROPS] = {{0}};
    v[FT_TOPIC].v.i = topic;
    v[FT_TEXT].null = !text;
    if (text) {
        v[FT_TEXT].v.s.p = text;
        v[FT_TEXT].v.s.n = strlen(text);
    }
    OK(mote_put(t, e, id, v, MOTE_PUT_UPSERT, NULL));
    om->present[id] = 1;
    om->topic[id] = topic;
    om->m.text[id] = text;
}

static size_t ft_results; /* matches found in all: the test finds some */

/* Match `qtext` (terms q) with k, all, and topic == topic when topic >= 0,
 * in t: the same ids and scores as the model's. */
static void ft_match(mote_txn *t, mote_entity *e, const omodel *om, const char (*q)[16],
                     size_t nq, int all, size_t k, int topic)
{
    char qtext[80] = "";
    for (size_t j = 0; j < nq; j++) {
        strcat(qtext, j ? " " : "");
        strcat(qtext, q[j]);
    }
    static int keep[M_DOCS + 1];
    for (uint64_t id = 1; id <= M_DOCS; id++)
        keep[id] = topic < 0 || (om->present[id] && om->topic[id] == topic);
    uint64_t mids[40];
    double msc[40];
    size_t want = model_search(&om->m, q, nq, all, k, keep, mids, msc);
    mote_query *qq;
    OK(mote_query_new(e, &qq));
    if (topic >= 0) {
        int c;
        mote_value v = {0};
        v.v.i = topic;
        OK(mote_query_cond(qq, FT_TOPIC, MOTE_EQ, &v, 1, 0, &c));
        OK(mote_query_where(qq, c));
    }
    OK(mote_query_match(qq, FT_TEXT, qtext, strlen(qtext), k, all ? MOTE_MATCH_ALL : 0));
    CHECK(!strcmp(mote_query_plan(t, qq), topic >= 0 ? "full-text match, filtered"
                                                      : "full-text match"));
    uint64_t *ids, count;
    double *sc;
    size_t n;
    OK(mote_query_scored(t, qq, &ids, &sc, &n));
    OK(mote_query_count(t, qq, &count));
    CHECK(n == want && count == want);
    ft_results += n;
    same_ranking(qtext, ids, sc, mids, msc, n);
    mote_free(ids);
    mote_free(sc);
    mote_query_free(qq);
}

static void ft_check(mote_store *s, mote_entity *e, const omodel *om, uint64_t *rs)
{
    OK(mote_check(s, NULL, NULL));
    mote_txn *t;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    for (int r = 0; r < 6; r++) {
        char q[3][16];
        size_t nq = 1 + test_rand(rs) % 3;
        for (size_t j = 0; j < nq; j++)
            snprintf(q[j], sizeof q[j], "w%u", (unsigned)(j * 11 + test_rand(rs) % 11));
        ft_match(t, e, om, (const char(*)[16])q, nq, (int)(test_rand(rs) & 1),
                 1 + test_rand(rs) % 30, r % 2 ? (int)(test_rand(rs) % 4) : -1);
    }
    mote_abort(t);
}

TEST(text_match_objects)
{
    const char *path = test_path("ftobj.mote");
    mote_store *s;
    mote_txn *t;
    mote_entity *e;
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    OK(mote_commit(t));
    static omodel om, before;
    char *owned[20000];
    size_t nowned = 0;
    uint64_t rs = 77;
    for (int round = 0; round < 40 * test_scale(); round++) {
        before = om;
        OK(mote_begin(s, 0, &t));
        int ops = 1 + (int)(test_rand(&rs) % (round % 8 == 0 ? 200 : 10));
        for (int o = 0; o < ops; o++) {
            uint64_t id = 1 + test_rand(&rs) % M_DOCS;
            unsigned what = (unsigned)(test_rand(&rs) % 10);
            if (what < 5) { /* put, a text or (1 in 10) none */
                char *x = test_rand(&rs) % 10 ? random_text(&rs) : NULL;
                if (x) {
                    CHECK(nowned < sizeof owned / sizeof *owned);
                    owned[nowned++] = x;
                }
                ft_put(t, e, &om, id, (int)(test_rand(&rs) % 4), x);
            } else if (what < 7 && om.present[id]) { /* the text alone */
                char *x = random_text(&rs);
                owned[nowned++] = x;
                mote_value v = {0};
                v.v.s.p = x;
                v.v.s.n = strlen(x);
                unsigned prop = FT_TEXT;
                OK(mote_update(t, e, id, &prop, &v, 1));
                om.m.text[id] = x;
            } else if (what < 9) {
                int rc = mote_remove(t, e, id);
                CHECK(rc == (om.present[id] ? MOTE_OK : MOTE_NOTFOUND));
                om.present[id] = 0;
                om.m.text[id] = NULL;
            } else { /* a batch: upserts of some, then removes of others */
                uint64_t ids[6];
                mote_value v[6 * FT_NPROPS];
                memset(v, 0, sizeof v);
                for (int i = 0; i < 6; i++) {
                    ids[i] = 1 + (id + 61 * (uint64_t)i) % M_DOCS;
                    char *x = random_text(&rs);
                    owned[nowned++] = x;
                    v[i * FT_NPROPS + FT_TOPIC].v.i = i % 4;
                    v[i * FT_NPROPS + FT_TEXT].v.s.p = x;
                    v[i * FT_NPROPS + FT_TEXT].v.s.n = strlen(x);
                    om.present[ids[i]] = 1;
                    om.topic[ids[i]] = i % 4;
                    om.m.text[ids[i]] = x;
                }
                OK(mote_put_many(t, e, 6, ids, v, MOTE_PUT_UPSERT, NULL, NULL));
                uint64_t rm[3] = {1 + (id + 7) % M_DOCS, 1 + (id + 13) % M_DOCS, ids[2]};
                OK(mote_remove_many(t, e, rm, 3, NULL));
                for (int i = 0; i < 3; i++) {
                    om.present[rm[i]] = 0;
                    om.m.text[rm[i]] = NULL;
                }
            }
        }
        if (round % 5 == 2) { /* a match inside the write transaction sees its changes */
            char q[2][16] = {"w0", "w1"};
            ft_match(t, e, &om, (const char(*)[16])q, 2, 0, 25, -1);
        }
        if (test_rand(&rs) % 5 == 0) {
            mote_abort(t);
            om = before;
        } else {
            OK(mote_commit(t));
        }
        if (round % 8 == 7)
            ft_check(s, e, &om, &rs);
    }
    /* after a reopen, the same */
    OK(mote_close(s));
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    mote_abort(t);
    ft_check(s, e, &om, &rs);
    /* the index dropped, then declared again over the stored texts */
    mote_prop_def plain[FT_NPROPS];
    memcpy(plain, ft_props, sizeof plain);
    plain[FT_TEXT].flags = MOTE_P_NULLABLE;
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", plain, FT_NPROPS, &e));
    mote_query *qq;
    OK(mote_query_new(e, &qq));
    CHECK_RC(mote_query_match(qq, FT_TEXT, "w1", 2, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match(qq, FT_TOPIC, "w1", 2, 5, 0), MOTE_TYPE);
    mote_query_free(qq);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    OK(mote_commit(t));
    ft_check(s, e, &om, &rs);
    /* errors */
    OK(mote_query_new(e, &qq));
    CHECK_RC(mote_query_match(qq, FT_TEXT, "w1", 2, 0, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match(qq, FT_TEXT, "w1", 2, 5, 4), MOTE_INVALID);
    CHECK_RC(mote_query_match(qq, FT_TEXT, NULL, 2, 5, 0), MOTE_INVALID);
    OK(mote_query_match(qq, FT_TEXT, "", 0, 5, 0)); /* no terms: no matches */
    uint64_t count;
    OK(mote_query_count(NULL, qq, &count));
    CHECK(count == 0);
    CHECK_RC(mote_query_order(qq, FT_TOPIC, 0), MOTE_INVALID);
    mote_query_free(qq);
    mote_prop_def bad[FT_NPROPS];
    memcpy(bad, ft_props, sizeof bad);
    bad[FT_TOPIC].flags |= MOTE_P_FULLTEXT;
    OK(mote_begin(s, 0, &t));
    CHECK_RC(mote_entity_open(t, "Bad", bad, FT_NPROPS, &e), MOTE_INVALID);
    mote_abort(t);
    OK(mote_close(s));
    for (size_t i = 0; i < nowned; i++)
        free(owned[i]);
    printf("%zu matches compared\n", ft_results);
    CHECK(ft_results > 500);
}

static void count_problem(void *ctx, const char *problem)
{
    (void)problem;
    ++*(int *)ctx;
}

/* The tree of Note.text's full-text index ("@t:<entity id>:<property id>"). */
static uint32_t text_tree_of(mote_txn *t)
{
    uint32_t tree = 0;
    char tn[32];
    for (unsigned eid = 1; !tree && eid < 10; eid++)
        for (unsigned pid = 0; !tree && pid < 4; pid++) {
            snprintf(tn, sizeof tn, "@t:%u:%u", eid, pid);
            if (mote_kv_tree(t, tn, 0, &tree))
                tree = 0;
        }
    CHECK(tree);
    return tree;
}

/* A new store at path with n Note objects of random texts (seed rs), in
 * one commit; *e opened in it. */
static mote_store *ft_store(const char *path, omodel *om, uint64_t n, uint64_t rs,
                            mote_entity **e)
{
    mote_store *s;
    mote_txn *t;
    remove(path);
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, e));
    for (uint64_t id = 1; id <= n; id++)
        ft_put(t, *e, om, id, 1, random_text(&rs));
    OK(mote_commit(t));
    return s;
}

/* mote check finds a full-text index that differs from the objects' texts:
 * a document's length gone, a block gone, a term's count wrong. */
TEST(text_check_finds_damage)
{
    const char *path = test_path("ftdamage.mote");
    for (int damage = 0; damage < 4; damage++) {
        mote_txn *t;
        mote_entity *e;
        static omodel om;
        mote_store *s = ft_store(path, &om, 50, 5, &e);
        OK(mote_check(s, NULL, NULL));
        OK(mote_begin(s, 0, &t));
        uint32_t tree = text_tree_of(t);
        mote_cursor *c;
        mote_val k, v;
        uint8_t key[300], val[1024];
        OK(mote_cursor_open(t, tree, &c));
        /* a document's length, a block, a segment's entry: gone; a term's
         * first block that counts one document more than its postings */
        const char *start = damage == 0 ? "d" : damage == 2 ? "g" : "q";
        OK(mote_cursor_seek(c, start, 1, MOTE_SEEK_GE));
        OK(mote_cursor_get(c, &k, &v));
        memcpy(key, k.data, k.size);
        size_t kl = k.size, vl = v.size;
        CHECK(vl <= sizeof val);
        memcpy(val, v.data, vl);
        mote_cursor_close(c);
        if (damage < 3) {
            OK(mote_kv_del(t, tree, key, kl));
        } else {
            CHECK((val[0] & 1) && val[0] < 128 && val[1] < 120); /* count << 1 | 1, zigzag df */
            val[1] += 2;
            OK(mote_kv_put(t, tree, key, kl, val, vl, 0));
        }
        OK(mote_commit(t));
        int problems = 0;
        CHECK_RC(mote_check(s, count_problem, &problems), MOTE_CORRUPT);
        CHECK(problems >= 1);
        OK(mote_close(s));
        for (uint64_t id = 1; id <= 50; id++)
            free(om.m.text[id]);
    }
}

/* Hybrid search: a match and a nearest clause on one query give the
 * objects of both lists fused by Reciprocal Rank Fusion, filtered like
 * each list, then offset and limit. Checked against the two lists run
 * apart and fused here. */
enum { HY_TOPIC, HY_TEXT, HY_VEC, HY_NPROPS };
static const mote_prop_def hy_props[HY_NPROPS] = {
    [HY_TOPIC] = {.name = "topic", .type = MOTE_T_INT32, .flags = MOTE_P_INDEXED},
    [HY_TEXT] = {.name = "text", .type = MOTE_T_STRING, .flags = MOTE_P_FULLTEXT},
    [HY_VEC] = {.name = "vec", .type = MOTE_T_VECTOR, .dim = 2},
};

static void hy_query(mote_entity *e, int topic, uint64_t km, uint64_t kn, int match, int near,
                     mote_query **out)
{
    static const float at[2] = {0.3f, 0.7f};
    OK(mote_query_new(e, out));
    if (topic >= 0) {
        int c;
        mote_value v = {0};
        v.v.i = topic;
        OK(mote_query_cond(*out, HY_TOPIC, MOTE_EQ, &v, 1, 0, &c));
        OK(mote_query_where(*out, c));
    }
    if (match)
        OK(mote_query_match(*out, HY_TEXT, "w1 w3", 5, km, 0));
    if (near)
        OK(mote_query_nearest(*out, HY_VEC, at, 2, kn, MOTE_DIST_EUCLIDEAN));
}

/* A hybrid query's list (ih, sh) against the two lists fused here, as
 * mote.h says: every id of either list, its score from its ranks (RRF) or
 * its scaled scores (weighted), best first, ties by lower id. */
static void check_fused(int how, double arg, const uint64_t *im, const double *sm, size_t nm,
                        const uint64_t *in, const double *sn, size_t nn, const uint64_t *ih,
                        const double *sh, size_t nh)
{
    uint64_t want[64];
    double wsc[64], lo[2] = {sm[0], sn[0]}, hi[2] = {sm[0], sn[0]};
    size_t nw = 0;
    for (size_t i = 0; i < nm; i++) {
        lo[0] = sm[i] < lo[0] ? sm[i] : lo[0];
        hi[0] = sm[i] > hi[0] ? sm[i] : hi[0];
    }
    for (size_t i = 0; i < nn; i++) {
        lo[1] = sn[i] < lo[1] ? sn[i] : lo[1];
        hi[1] = sn[i] > hi[1] ? sn[i] : hi[1];
    }
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < (l ? nn : nm); i++) {
            uint64_t id = l ? in[i] : im[i];
            double v = l ? sn[i] : sm[i];
            size_t w = 0;
            while (w < nw && want[w] != id)
                w++;
            if (w == nw) {
                want[nw] = id;
                wsc[nw++] = 0;
            }
            if (how == MOTE_FUSE_RRF)
                wsc[w] += 1.0 / ((arg > 0 ? arg : MOTE_RRF_K) + (double)(i + 1));
            else
                wsc[w] += (l ? 1 - arg : arg) *
                          (hi[l] > lo[l] ? (l ? hi[l] - v : v - lo[l]) / (hi[l] - lo[l]) : 1.0);
        }
    CHECK(nh == nw);
    for (size_t i = 0; i < nh; i++) {
        size_t w = 0;
        while (w < nw && want[w] != ih[i])
            w++;
        CHECK(w < nw && fabs(sh[i] - wsc[w]) < 1e-12);
        if (i)
            CHECK(sh[i - 1] > sh[i] || (sh[i - 1] == sh[i] && ih[i - 1] < ih[i]));
    }
}

TEST(text_hybrid_fusion)
{
    const char *path = test_path("hybrid.mote");
    mote_store *s;
    mote_txn *t;
    mote_entity *e;
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "H", hy_props, HY_NPROPS, &e));
    uint64_t rs = 9;
    char *texts[300];
    for (int i = 0; i < 300; i++) {
        mote_value v[HY_NPROPS] = {{0}};
        float vec[2] = {(float)(test_rand(&rs) % 1000) / 1000, (float)(test_rand(&rs) % 1000) / 1000};
        texts[i] = random_text(&rs);
        v[HY_TOPIC].v.i = i % 3;
        v[HY_TEXT].v.s.p = texts[i];
        v[HY_TEXT].v.s.n = strlen(texts[i]);
        v[HY_VEC].v.s.p = vec;
        v[HY_VEC].v.s.n = sizeof vec;
        OK(mote_put(t, e, 0, v, MOTE_PUT_INSERT, NULL));
    }
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    for (int topic = -1; topic < 3; topic++) {
        uint64_t km = 10 + (uint64_t)topic * 7 + 7, kn = 12;
        mote_query *qm, *qn, *qh;
        hy_query(e, topic, km, kn, 1, 0, &qm);
        hy_query(e, topic, km, kn, 0, 1, &qn);
        hy_query(e, topic, km, kn, 1, 1, &qh);
        CHECK(!strncmp(mote_query_plan(t, qh), "hybrid", 6));
        uint64_t *im, *in, *ih;
        double *sm, *sn, *sh;
        size_t nm, nn, nh;
        OK(mote_query_scored(t, qm, &im, &sm, &nm));
        OK(mote_query_scored(t, qn, &in, &sn, &nn));
        CHECK(nm > 3 && nn == kn);
        static const struct {
            int how;
            double arg;
        } fusions[] = {{MOTE_FUSE_WEIGHTED, 0.3}, {MOTE_FUSE_WEIGHTED, 1},
                       {MOTE_FUSE_WEIGHTED, 0}, {MOTE_FUSE_RRF, 10}, {MOTE_FUSE_RRF, 0}};
        for (size_t fu = 0; fu < sizeof fusions / sizeof *fusions; fu++) {
            OK(mote_query_fusion(qh, fusions[fu].how, fusions[fu].arg));
            OK(mote_query_scored(t, qh, &ih, &sh, &nh));
            check_fused(fusions[fu].how, fusions[fu].arg, im, sm, nm, in, sn, nn, ih, sh, nh);
            if (fu + 1 < sizeof fusions / sizeof *fusions) {
                mote_free(ih);
                mote_free(sh);
            }
        }
        /* offset and limit apply to the fused list; count agrees */
        uint64_t count, *iw;
        double *sw;
        size_t nwin;
        OK(mote_query_count(t, qh, &count));
        CHECK(count == nh);
        OK(mote_query_limit(qh, 2, 5));
        OK(mote_query_scored(t, qh, &iw, &sw, &nwin));
        CHECK(nwin == 5 && !memcmp(iw, ih + 2, 5 * sizeof *iw));
        mote_free(iw);
        mote_free(sw);
        mote_free(im);
        mote_free(sm);
        mote_free(in);
        mote_free(sn);
        mote_free(ih);
        mote_free(sh);
        mote_query_free(qm);
        mote_query_free(qn);
        mote_query_free(qh);
    }
    mote_query *qe;
    OK(mote_query_new(e, &qe));
    CHECK(mote_query_fusion(qe, 2, 0.5) == MOTE_INVALID);
    CHECK(mote_query_fusion(qe, MOTE_FUSE_WEIGHTED, 1.5) == MOTE_INVALID);
    CHECK(mote_query_fusion(qe, MOTE_FUSE_WEIGHTED, NAN) == MOTE_INVALID);
    CHECK(mote_query_fusion(qe, MOTE_FUSE_RRF, -1) == MOTE_INVALID);
    CHECK(mote_query_fusion(NULL, MOTE_FUSE_RRF, 0) == MOTE_INVALID);
    mote_query_free(qe);
    mote_abort(t);
    OK(mote_close(s));
    for (int i = 0; i < 300; i++)
        free(texts[i]);
}

/* A full-text index that stems (MOTE_P_STEM): "connection" finds every
 * form of connect, a phrase of stems, a prefix as written; mote check;
 * declaring the option over stored objects builds the index again, and
 * dropping it too; the flag alone is refused. */
static size_t match_ids(mote_txn *t, mote_entity *e, const char *text, unsigned flags,
                        uint64_t **ids, double **sc);

static uint64_t stem_hits(mote_txn *t, mote_entity *e, const char *text)
{
    uint64_t *ids, bits = 0;
    double *sc;
    size_t n = match_ids(t, e, text, 0, &ids, &sc);
    for (size_t i = 0; i < n; i++)
        bits |= 1ull << ids[i];
    mote_free(ids);
    mote_free(sc);
    return bits;
}

TEST(text_stemming_index)
{
    mote_prop_def props[FT_NPROPS];
    memcpy(props, ft_props, sizeof props);
    props[FT_TEXT].flags |= MOTE_P_STEM;
    const char *path = test_path("stem.mote");
    mote_store *s;
    mote_txn *t;
    mote_entity *e;
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", props, FT_NPROPS, &e));
    static const char *const texts[] = {
        NULL, "the connection failed", "we connected twice", "connecting is slow",
        "a disconnection", "connections were generalized", "nothing here"};
    for (uint64_t id = 1; id <= 6; id++) {
        mote_value v[FT_NPROPS] = {{0}};
        v[FT_TEXT].v.s.p = texts[id];
        v[FT_TEXT].v.s.n = strlen(texts[id]);
        OK(mote_put(t, e, id, v, MOTE_PUT_INSERT, NULL));
    }
    CHECK(stem_hits(t, e, "connection") == 0x2e); /* 1, 2, 3, 5: connect; in this transaction */
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK(stem_hits(t, e, "CONNECTS") == 0x2e);
    CHECK(stem_hits(t, e, "\"connection failing\"") == 0x2);
    CHECK(stem_hits(t, e, "generalizations AND connect") == 0x20);
    CHECK(stem_hits(t, e, "connecti*") == 0); /* as written, against the stems: none */
    CHECK(stem_hits(t, e, "gener*") == 0x20);
    CHECK(stem_hits(t, e, "connect*") == 0x2e);
    CHECK(stem_hits(t, e, "disconnect") == 0x10);
    mote_abort(t);
    OK(mote_check(s, NULL, NULL));
    /* the option goes: the index keeps words as written */
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    CHECK(stem_hits(t, e, "connection") == 0x2);
    CHECK(stem_hits(t, e, "connected") == 0x4);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    /* and comes back */
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", props, FT_NPROPS, &e));
    CHECK(stem_hits(t, e, "connected") == 0x2e);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_entity_open(t, "Note", props, FT_NPROPS, &e));
    CHECK(stem_hits(t, e, "connections") == 0x2e);
    mote_abort(t);
    /* stemming without the index */
    mote_prop_def bad[FT_NPROPS];
    memcpy(bad, ft_props, sizeof bad);
    bad[FT_TEXT].flags = MOTE_P_STEM;
    OK(mote_begin(s, 0, &t));
    CHECK_RC(mote_entity_open(t, "Other", bad, FT_NPROPS, &e), MOTE_INVALID);
    mote_abort(t);
    OK(mote_close(s));
}

/* The match language (text.c): random texts of its pieces are refused
 * with MOTE_INVALID or run; identities hold (x NOT x matches nothing,
 * parentheses and quotes around one word change nothing, a OR a is a). */
static size_t match_ids(mote_txn *t, mote_entity *e, const char *text, unsigned flags,
                        uint64_t **ids, double **sc)
{
    mote_query *q;
    size_t n;
    OK(mote_query_new(e, &q));
    OK(mote_query_match(q, FT_TEXT, text, strlen(text), 1000, flags));
    OK(mote_query_scored(t, q, ids, sc, &n));
    mote_query_free(q);
    for (size_t i = 1; i < n; i++)
        CHECK((*sc)[i - 1] > (*sc)[i] || ((*sc)[i - 1] == (*sc)[i] && (*ids)[i - 1] < (*ids)[i]));
    return n;
}

static void same_matches(mote_txn *t, mote_entity *e, const char *a, const char *b)
{
    uint64_t *ia, *ib;
    double *sa, *sb;
    size_t na = match_ids(t, e, a, 0, &ia, &sa), nb = match_ids(t, e, b, 0, &ib, &sb);
    if (na != nb || (na && memcmp(ia, ib, na * sizeof *ia))) {
        fprintf(stderr, "\"%s\" and \"%s\" differ: %zu and %zu matches\n", a, b, na, nb);
        abort();
    }
    mote_free(ia);
    mote_free(ib);
    mote_free(sa);
    mote_free(sb);
}

/* The ids and scores of a match of q over props (weights w, NULL: 1). */
static size_t match_in(mote_txn *t, mote_entity *e, const unsigned *props, const double *w,
                       unsigned n, const char *q, uint64_t **ids, double **sc)
{
    mote_query *qq;
    size_t cnt;
    OK(mote_query_new(e, &qq));
    OK(mote_query_match_in(qq, props, w, n, q, strlen(q), 1000, 0));
    OK(mote_query_scored(t, qq, ids, sc, &cnt));
    mote_query_free(qq);
    return cnt;
}

/* A match over several properties (FTS5's columns, scores equal to FTS5's
 * in the Python tests): a unit matches in any property, so "a AND b" holds
 * with a in the title and b in the body; a property that holds no text
 * changes nothing (the same ids and scores as the match over the other);
 * a weight scales tf alone; a write transaction sees its own changes; and
 * the arguments are checked. */
TEST(text_match_several_properties)
{
    enum { TITLE, BODY, PLAIN, STEMMED, NP };
    static const mote_prop_def props[NP] = {
        {.name = "title", .type = MOTE_T_STRING, .flags = MOTE_P_NULLABLE | MOTE_P_FULLTEXT},
        {.name = "body", .type = MOTE_T_STRING, .flags = MOTE_P_NULLABLE | MOTE_P_FULLTEXT},
        {.name = "plain", .type = MOTE_T_STRING, .flags = MOTE_P_NULLABLE},
        {.name = "stemmed", .type = MOTE_T_STRING,
         .flags = MOTE_P_NULLABLE | MOTE_P_FULLTEXT | MOTE_P_STEM},
    };
    mote_store *s;
    mote_txn *t;
    mote_entity *e;
    OK(mote_open(test_path("ftmulti.mote"), NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Doc", props, NP, &e));
    static const char *words[] = {"alpha", "beta", "gamma", "delta", "kappa", "zeta"};
    uint64_t rs = 3;
    char texts[200][64];
    for (int i = 0; i < 200; i++) { /* titles only, for now */
        int len = 0, nw = 1 + (int)(test_rand(&rs) % 6);
        for (int w = 0; w < nw; w++)
            len += snprintf(texts[i] + len, sizeof texts[i] - (size_t)len, "%s ",
                            words[test_rand(&rs) % 6]);
        mote_value v[NP] = {{0}};
        for (int p = 0; p < NP; p++)
            v[p].null = p != TITLE;
        v[TITLE].v.s.p = texts[i];
        v[TITLE].v.s.n = strlen(texts[i]);
        OK(mote_put(t, e, 0, v, MOTE_PUT_INSERT, NULL));
    }
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    unsigned tb[2] = {TITLE, BODY};
    double w2[2] = {2.5, 1};
    uint64_t *a, *b;
    double *sa, *sb;
    const char *qs[] = {"alpha", "beta gamma", "\"alpha beta\" OR kap*", "zeta NOT delta"};
    for (int i = 0; i < 4; i++) { /* bodies empty: the title's match, unchanged */
        mote_query *qq;
        size_t na, nb;
        OK(mote_query_new(e, &qq));
        OK(mote_query_match(qq, TITLE, qs[i], strlen(qs[i]), 1000, 0));
        OK(mote_query_scored(t, qq, &a, &sa, &na));
        mote_query_free(qq);
        nb = match_in(t, e, tb, NULL, 2, qs[i], &b, &sb);
        CHECK(na == nb && na > 0);
        for (size_t j = 0; j < na; j++)
            CHECK(a[j] == b[j] && fabs(sa[j] - sb[j]) <= 1e-12 * sa[j]);
        mote_free(b);
        mote_free(sb);
        /* weight 2.5: the same objects, each tf times 2.5 (idf and norm as
         * they were), so every score higher */
        nb = match_in(t, e, tb, w2, 2, qs[i], &b, &sb);
        CHECK(nb == na);
        for (size_t j = 0; j < nb; j++) {
            size_t x = 0;
            while (x < na && a[x] != b[j])
                x++;
            CHECK(x < na && sb[j] > sa[x] * 1.01);
        }
        mote_free(a);
        mote_free(sa);
        mote_free(b);
        mote_free(sb);
    }
    mote_abort(t);
    /* bodies: "omega" in some; then "alpha AND omega" needs both properties */
    OK(mote_begin(s, 0, &t));
    size_t both = 0;
    for (uint64_t id = 1; id <= 200; id += 3) {
        unsigned prop = BODY;
        mote_value v = {0};
        v.v.s.p = "omega omega";
        v.v.s.n = 11;
        OK(mote_update(t, e, id, &prop, &v, 1));
        both += strstr(texts[id - 1], "alpha") != NULL;
    }
    size_t n = match_in(t, e, tb, NULL, 2, "alpha AND omega", &a, &sa); /* its own changes */
    CHECK(n == both && both > 0);
    for (size_t j = 0; j < n; j++)
        CHECK((a[j] - 1) % 3 == 0 && strstr(texts[a[j] - 1], "alpha"));
    mote_free(a);
    mote_free(sa);
    CHECK(match_in(t, e, &tb[0], NULL, 1, "alpha AND omega", &a, &sa) == 0);
    mote_free(a);
    mote_free(sa);
    OK(mote_commit(t));
    /* the arguments */
    mote_query *qq;
    OK(mote_query_new(e, &qq));
    unsigned dup[2] = {TITLE, TITLE}, plain[2] = {TITLE, PLAIN}, stem[2] = {TITLE, STEMMED};
    unsigned many[MOTE_MATCH_PROPS_MAX + 1] = {0}, none[2] = {TITLE, NP};
    double bad[2] = {1, -1}, nan2[2] = {1, NAN};
    CHECK_RC(mote_query_match_in(qq, tb, NULL, 0, "x", 1, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, many, NULL, MOTE_MATCH_PROPS_MAX + 1, "x", 1, 5, 0),
             MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, dup, NULL, 2, "x", 1, 5, 0), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(s), "once"));
    CHECK_RC(mote_query_match_in(qq, plain, NULL, 2, "x", 1, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, stem, NULL, 2, "x", 1, 5, 0), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(s), "stem"));
    CHECK_RC(mote_query_match_in(qq, none, NULL, 2, "x", 1, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, tb, bad, 2, "x", 1, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, tb, nan2, 2, "x", 1, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, NULL, NULL, 1, "x", 1, 5, 0), MOTE_INVALID);
    CHECK_RC(mote_query_match_in(qq, tb, NULL, 2, "(x", 2, 5, 0), MOTE_INVALID);
    mote_query_free(qq);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    printf("several properties: the title's match unchanged beside empty bodies, "
           "\"alpha AND omega\" across them: %zu objects\n", both);
}

TEST(text_query_language_random)
{
    const char *path = test_path("lang.mote");
    mote_store *s;
    mote_txn *t;
    mote_entity *e;
    static omodel om;
    uint64_t rs = 404;
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    for (uint64_t id = 1; id <= 80; id++)
        ft_put(t, e, &om, id, 0, random_text(&rs));
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    static const char *const pieces[] = {"w1", "w2", "w3", "w0", "\"", "(", ")", "*", " ", " ",
                                         "AND", "OR", "NOT", "é", "中", "-", "W", "w"};
    size_t valid = 0, runs = 6000 * (size_t)test_scale();
    for (size_t r = 0; r < runs; r++) {
        char q[128] = "";
        size_t np = 1 + test_rand(&rs) % 12;
        for (size_t i = 0; i < np; i++) {
            strcat(q, pieces[test_rand(&rs) % (sizeof pieces / sizeof *pieces)]);
            if (test_rand(&rs) % 2)
                strcat(q, " ");
        }
        unsigned flags = (unsigned)(test_rand(&rs) % 2);
        int rc = mote_match_check(q, strlen(q), flags);
        CHECK(rc == MOTE_OK || rc == MOTE_INVALID);
        if (rc == MOTE_INVALID) {
            CHECK(strstr(mote_errmsg(NULL), " at "));
            continue;
        }
        valid++;
        uint64_t *ids;
        double *sc;
        size_t n = match_ids(t, e, q, flags, &ids, &sc);
        for (size_t i = 0; i < n; i++)
            CHECK(ids[i] >= 1 && ids[i] <= 80 && om.m.text[ids[i]]);
        mote_free(ids);
        mote_free(sc);
    }
    CHECK(valid > runs / 10);
    printf("%zu of %zu random match texts well formed\n", valid, runs);
    uint64_t *ids;
    double *sc;
    CHECK(match_ids(t, e, "w1 NOT w1", 0, &ids, &sc) == 0);
    mote_free(ids);
    mote_free(sc);
    CHECK(match_ids(t, e, "w1", 0, &ids, &sc) > 5);
    mote_free(ids);
    mote_free(sc);
    same_matches(t, e, "w1", "(w1)");
    same_matches(t, e, "w1", "\"w1\"");
    same_matches(t, e, "w1", "w1 OR w1");
    same_matches(t, e, "w1 w2", "w1 OR w2");
    same_matches(t, e, "w1 AND w2", "(w2 AND w1)");
    mote_abort(t);
    OK(mote_close(s));
    for (uint64_t id = 1; id <= 80; id++)
        free(om.m.text[id]);
}

/* Problems of a check that mention "earlier version". */
static void count_earlier(void *ctx, const char *problem)
{
    if (strstr(problem, "earlier version"))
        ++*(int *)ctx;
}

/* A full-text index of the earlier layout (schema format 4 or 7: one block
 * chain per term; text.c SEGMENTS): a read transaction cannot open its
 * entity (MOTE_SCHEMA saying why), mote_check names it, a write
 * transaction's open rebuilds it, and the matches are those of before. */
TEST(text_earlier_layout_rebuilt)
{
    const char *path = test_path("ftlayout.mote");
    mote_txn *t;
    mote_entity *e;
    static omodel om;
    mote_store *s = ft_store(path, &om, 60, 17, &e);
    uint64_t *before, *after;
    double *sb, *sa;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    size_t nb = match_ids(t, e, "w1 OR w2 OR w3", 0, &before, &sb);
    CHECK(nb > 0);
    mote_abort(t);
    /* the schema record says format 4; the index's totals have two numbers */
    OK(mote_begin(s, 0, &t));
    uint32_t stree, ttree;
    mote_val v;
    uint8_t rec[4096];
    OK(mote_kv_tree(t, "@schema", 0, &stree));
    OK(mote_kv_get(t, stree, "Note", 4, &v));
    CHECK(v.size <= sizeof rec);
    memcpy(rec, v.data, v.size);
    size_t rl = v.size;
    rec[0] = 4, rec[1] = rec[2] = rec[3] = 0;
    OK(mote_kv_put(t, stree, "Note", 4, rec, rl, 0));
    ttree = text_tree_of(t);
    OK(mote_kv_put(t, ttree, "s", 1, "\x3c\x64", 2, 0));
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e), MOTE_SCHEMA);
    CHECK(strstr(mote_errmsg(s), "earlier version"));
    mote_abort(t);
    int earlier = 0;
    CHECK_RC(mote_check(s, count_earlier, &earlier), MOTE_CORRUPT);
    CHECK(earlier == 1);
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_entity_open(t, "Note", ft_props, FT_NPROPS, &e));
    size_t na = match_ids(t, e, "w1 OR w2 OR w3", 0, &after, &sa);
    CHECK(na == nb && !memcmp(before, after, na * sizeof *after) &&
          !memcmp(sb, sa, na * sizeof *sa));
    mote_abort(t);
    mote_free(before);
    mote_free(after);
    mote_free(sb);
    mote_free(sa);
    OK(mote_close(s));
    for (uint64_t id = 1; id <= 60; id++)
        free(om.m.text[id]);
}
