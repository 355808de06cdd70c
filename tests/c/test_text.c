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
    CHECK_RC(mote_tokenize("x", 1, 2, stop_at_second, &calls), MOTE_INVALID);
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
