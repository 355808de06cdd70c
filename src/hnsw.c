/*
 * hnsw.c — vector indexes: an HNSW graph over a vector property (flag
 * MOTE_P_HNSW), kept in the store and searched in memory.
 *
 * THE GRAPH. Hierarchical navigable small world (Malkov and Yashunin): every
 * indexed object is a node with a level drawn from a geometric distribution
 * (P(level >= l) = m^-l; here from a hash of its id, so a build is the same
 * every time); at each of its levels a node links to at most m others (2m
 * at level 0), chosen by the "heuristic": a candidate is kept when it is
 * nearer to the node than to every neighbour kept before it, which keeps
 * links to far clusters. A search enters at the top node, walks greedily
 * down the sparse levels and ends with a best-first search of breadth ef at
 * level 0. Inserting searches the same way (breadth ef_construction), links
 * the node to the neighbours the heuristic picks, filled up to m with the
 * nearest of those it passed over (the paper's "keep pruned connections"),
 * and adds the reverse links, pruning a list that grows past its limit with
 * the heuristic again, unfilled. (bench/vectors, 20,000 real-text vectors
 * of 384 floats, 300 queries: recall@10 at ef 24 0.921 -> 0.931, at ef 32
 * 0.950 -> 0.953, building unchanged; filling the pruned lists too gave
 * 0.945 and 0.962 but kept every list full, so that every later link
 * pruned: building +35%.)
 * Removing repairs: every node that links to a removed one replaces that
 * link by the best of its other links and the removed node's links (the
 * heuristic again), so no link ever names a removed object (mote check
 * verifies it). Finding who links to a node takes one pass over the graph
 * in memory, once per commit that removes anything, whatever the number of
 * nodes it removes.
 *
 * IN THE STORE (object.h: "@h:<eid>:<pid>"): one record per node (its level
 * and its lists, as ids) and the index's state ("m": parameters, entry node,
 * generation and stamp). Vectors are not copied: they are read from the
 * objects. So the index is a set of ordinary tree entries: checksummed
 * pages, transactional (an aborted transaction leaves no trace), crash
 * safe, and readers see the index of their snapshot. Costs: about 2 bytes
 * per link (sorted ids as varint differences) — m=16 gives ~50-70 bytes
 * per vector next to the vector's own 4 x dim.
 *
 * IN MEMORY. Searching through tree lookups would cost a descent per
 * visited node, so each open store keeps, per index, one graph image (the
 * cache, struct hgraph): vectors as float rows (the stored floats; for
 * cosine with the inverse norm in front, so a distance is one dot product
 * and two multiplications, and a result's exact distance, as exact search
 * computes it from the record, comes from its row), level-0 lists in one
 * array, node numbers (slots) instead of ids. It is built from the tree on first use (read
 * lock to search, write lock to change it) and names the version it holds
 * by the state's stamp, which a reader compares with its snapshot's: equal,
 * it searches the image; newer, it brings the image up to date; older (a
 * snapshot older than the last commit), the query is answered by exact
 * search instead, which is always right.
 *
 * WRITES. put / update / remove only note the object (mote__hnsw_note);
 * before the commit (and before an approximate search in the same
 * transaction) the notes are applied in one go (mote__hnsw_flush): noted
 * nodes are removed (one repair pass for all), then the objects that have a
 * vector are inserted, in id order. The changes go into an overlay over the
 * image (struct hover: the lists it changed, the nodes it added and
 * removed), never into the image itself, which readers of the committed
 * version go on using; the overlay's nodes are written to the tree as one
 * sorted batch, with the state (generation + 1, a new stamp). The overlay is
 * then registered as the image's pending change for that stamp: once the
 * commit is visible, the first one to need it (a reader whose snapshot
 * names the stamp, or the committing thread at the end) folds it into the
 * image, in time proportional to the change. An image that cannot follow
 * (another process committed) is built again from the tree. While a write
 * transaction's overlay rests on the image, the image changes only by that
 * overlay (it is "pinned"); a reader that would rebuild it searches exactly.
 *
 * QUANTIZED ROWS. A search of the image alone (every read, and a write
 * transaction that changed nothing in the index) walks the graph on 8-bit
 * copies of the rows, then ranks the ef nodes it kept by exact distances
 * from the float rows, nearest by bytes first, until the next one's byte
 * distance less twice the largest error seen so far (exact less byte) is
 * past the k-th exact distance (rerank): the results and their distances
 * are exact for what it found. A float row costs four 8-bit ones to read
 * (1,536 bytes at 384 floats); taking all ef of them, each fetched whole
 * one ahead, was a fifth of a query's time (perf). 100,000 real-text
 * vectors of 384 floats, ef 36, alternated builds: 15,400 -> 17,900
 * queries/s, recall@10 0.955 both (ef 24-48 the same recall); the
 * recall tests lose one hit in 12,000 (without the margin, clustered data
 * falls to 0.87).
 * A row's 8-bit copy is x, its vector (cosine: unit vector) less the
 * image's centre c, scaled so that its largest component is +-127, plus
 * 128, padded with 128s to a multiple of 64 bytes; beside it, in one pair,
 * the scale and |x|^2 (euclidean) or x.c. The query q' = q - c the same
 * without the 128, so a product is one pass of unsigned x signed bytes
 * (AVX-512 VNNI: 64 a instruction; vecmath.h) less 128 x the query's byte
 * sum, and a.q = x.q' + x.c + c.q, |a - q|^2 = |x|^2 + |q'|^2 - 2 x.q'. The
 * centre is the mean of the vectors the image got first (all of them at a
 * load; the first commit's when built by commits): vectors that share a
 * large part (far from the origin, or nearly one direction) keep their
 * differences in bytes (`hnsw_recall_far` fails without it: 0.64 recall).
 * A graph search reads a row from memory at every step (100,000 rows of 384
 * floats are 150 MB, far past the caches): a quarter of the bytes per step
 * and a cheaper product about doubled the queries per second at equal
 * recall (bench/vectors, 20,000 vectors of 384 floats: real text, cosine,
 * ef 32: 11,400 -> 23,900, recall 0.957 both; synthetic, euclidean, ef 32:
 * 15,700 -> 30,800, recall 0.996 / 0.997). The copies cost dim + 8 bytes
 * per vector in memory, none on disk; they are made wherever a float row
 * enters the image (load, folding an overlay). Writes search floats (the
 * overlay has no 8-bit rows): building is unchanged.
 *
 * HUGE PAGES. The image's large arrays (float rows, 8-bit rows, level-0
 * lists; 4 MB and up) ask for transparent huge pages (madvise), and the
 * 8-bit rows start on a cache line (a row of 384 bytes read 7 lines from
 * malloc's block, 6 aligned). A search steps to a row at random: with 4 KB
 * pages nearly every step missed the TLB as well (150 MB of rows against
 * a few thousand entries; in a virtual machine a miss walks two page
 * tables), and most systems leave huge pages to madvise. 100,000
 * clustered vectors of 384 floats, euclidean, ef 48 (scratch driver, four
 * alternated runs of 1,800 queries each, medians): 12,300-13,600 ->
 * 12,400-15,600 queries/s, the same results. Stores of a few thousand
 * vectors (one per agent) stay below the size where it applies.
 *
 * Nothing here is needed for correctness of results beyond the tree: the
 * image can always be thrown away and rebuilt (a failed allocation while
 * updating it does so).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "query.h"
#include "vecmath.h"

#define HMAXL 16           /* levels 0..15 */
#define HNONE UINT32_MAX
#define META_FORMAT 1
#define META_LEN 43

/* ---- id -> slot maps (linear probing, backward-shift deletion) --------------- */

typedef struct idmap {
    uint64_t *k; /* 0: empty */
    uint32_t *v;
    uint32_t cap, n; /* cap: a power of two, at least twice n */
} idmap;

static inline uint32_t map_home(const idmap *m, uint64_t k)
{
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

static uint32_t map_get(const idmap *m, uint64_t k)
{
    if (!m->cap)
        return HNONE;
    for (uint32_t i = map_home(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (m->k[i] == k)
            return m->v[i];
        if (!m->k[i])
            return HNONE;
    }
}

static void map_free(idmap *m)
{
    mote__free(m->k);
    mote__free(m->v);
    memset(m, 0, sizeof *m);
}

static int map_reserve(idmap *m, uint32_t n)
{
    if ((uint64_t)n * 2 < m->cap)
        return MOTE_OK;
    uint32_t cap = 64;
    while ((uint64_t)cap <= (uint64_t)n * 2)
        cap *= 2;
    idmap nm = {mote__calloc(cap, 8), mote__malloc((size_t)cap * 4), cap, 0};
    if (!nm.k || !nm.v) {
        map_free(&nm);
        return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->k[i]) {
            uint32_t j = map_home(&nm, m->k[i]);
            while (nm.k[j])
                j = (j + 1) & (cap - 1);
            nm.k[j] = m->k[i];
            nm.v[j] = m->v[i];
            nm.n++;
        }
    map_free(m);
    *m = nm;
    return MOTE_OK;
}

static int map_put(idmap *m, uint64_t k, uint32_t v)
{
    int rc = map_reserve(m, m->n + 1);
    if (rc)
        return rc;
    uint32_t i = map_home(m, k);
    while (m->k[i] && m->k[i] != k)
        i = (i + 1) & (m->cap - 1);
    m->n += !m->k[i];
    m->k[i] = k;
    m->v[i] = v;
    return MOTE_OK;
}

static void map_del(idmap *m, uint64_t k)
{
    if (!m->cap)
        return;
    uint32_t i = map_home(m, k), mask = m->cap - 1;
    while (m->k[i] != k) {
        if (!m->k[i])
            return;
        i = (i + 1) & mask;
    }
    m->n--;
    for (uint32_t j = (i + 1) & mask; m->k[j]; j = (j + 1) & mask) {
        uint32_t h = map_home(m, m->k[j]);
        /* move j back into the hole at i unless its home lies in (i, j] */
        if (((j - h) & mask) >= ((j - i) & mask)) {
            m->k[i] = m->k[j];
            m->v[i] = m->v[j];
            i = j;
        }
    }
    m->k[i] = 0;
}

/* ---- the image of a graph ------------------------------------------------------- */

typedef struct hparams {
    int metric;
    uint32_t dim, m, efc;
} hparams;

typedef struct hgraph {
    hparams P;
    uint32_t stride;       /* floats per row: off + dim rounded up to 8 */
    uint32_t off;          /* where a row's vector starts: 8 for cosine (row[0]
                              holds 1/|v|), else 0 (the vector alone) */
    uint32_t m0;           /* level-0 list limit: 2m */
    uint64_t gen, stamp;   /* the version of the index it holds */
    uint32_t n, cap;       /* slots used (live or free), allocated */
    uint64_t live;
    float *vec;            /* cap rows */
    uint32_t qdim;         /* bytes per 8-bit row: dim rounded up to 64 */
    uint8_t *q8;           /* cap 8-bit rows (QUANTIZED ROWS, above), 64-byte aligned */
    uint8_t *q8mem;        /* the allocation q8 is in */
    float *qs;             /* per slot, two floats (one line for both): its
                              8-bit row's scale, then, with x its vector less
                              the centre, |x|^2 (euclidean) or x . centre */
    float *qc;             /* the centre (the mean of the vectors the image got
                              first: for cosine unit vectors), dim floats, then
                              dim of scratch; NULL until the image has a row */
    uint64_t *id;          /* per slot; 0: a free slot */
    uint8_t *lvl;
    uint32_t *l0;          /* per slot: count, then m0 slots */
    uint32_t **up;         /* per slot: levels 1..lvl, (m + 1) each; NULL at level 0 */
    uint32_t *freel, nfree, freecap;
    idmap map;             /* id -> slot */
    uint32_t entry;        /* HNONE when empty */
    int top;               /* the entry's level; -1 when empty */
} hgraph;

static void graph_free(hgraph *g)
{
    if (!g)
        return;
    for (uint32_t s = 0; g->up && s < g->n; s++)
        mote__free(g->up[s]);
    mote__free(g->up);
    mote__free(g->vec);
    mote__free(g->q8mem);
    mote__free(g->qs);
    mote__free(g->qc);
    mote__free(g->id);
    mote__free(g->lvl);
    mote__free(g->l0);
    mote__free(g->freel);
    map_free(&g->map);
    mote__free(g);
}

static hgraph *graph_new(const hparams *P)
{
    hgraph *g = mote__calloc(1, sizeof *g);
    if (!g) {
        mote__err(MOTE_NOMEM, "out of memory (vector index)");
        return NULL;
    }
    g->P = *P;
    g->off = P->metric == MOTE_DIST_COSINE ? 8 : 0;
    g->stride = g->off + ((P->dim + 7) & ~7u);
    g->qdim = (P->dim + 63) & ~63u;
    g->m0 = 2 * P->m;
    g->entry = HNONE;
    g->top = -1;
    return g;
}

/* Huge pages for an array of the image (HUGE PAGES, above): the 2 MB
 * extents inside p[0..bytes), if it is large enough to gain. Advice only:
 * without it (another system, transparent huge pages off) nothing changes
 * but the speed. */
static void advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t H = (uintptr_t)2 << 20;
    if (bytes < 2 * H)
        return;
    uintptr_t a = ((uintptr_t)p + H - 1) & ~(H - 1), e = ((uintptr_t)p + bytes) & ~(H - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Room for cap slots (the new ones zeroed: free, empty lists). */
static int graph_grow(hgraph *g, uint32_t cap)
{
    if (cap <= g->cap)
        return MOTE_OK;
    if (cap < g->cap + g->cap / 2)
        cap = g->cap + g->cap / 2;
    if (cap < 64)
        cap = 64;
    size_t old = g->cap, add = cap - old;
    float *vec = mote__realloc(g->vec, (size_t)cap * g->stride * sizeof *vec);
    if (vec)
        g->vec = vec;
    uint64_t *id = vec ? mote__realloc(g->id, (size_t)cap * sizeof *id) : NULL;
    if (id)
        g->id = id;
    uint8_t *lvl = id ? mote__realloc(g->lvl, cap) : NULL;
    if (lvl)
        g->lvl = lvl;
    uint32_t *l0 = lvl ? mote__realloc(g->l0, (size_t)cap * (g->m0 + 1) * 4) : NULL;
    if (l0)
        g->l0 = l0;
    uint32_t **up = l0 ? mote__realloc(g->up, (size_t)cap * sizeof *up) : NULL;
    if (up)
        g->up = up;
    /* (not realloc: its block could start anywhere in a line) */
    uint8_t *q8mem = up ? mote__malloc((size_t)cap * g->qdim + 63) : NULL, *q8 = NULL;
    if (q8mem) {
        q8 = (uint8_t *)(((uintptr_t)q8mem + 63) & ~(uintptr_t)63);
        advise_huge(q8, (size_t)cap * g->qdim);
        if (old)
            memcpy(q8, g->q8, old * g->qdim);
        mote__free(g->q8mem);
        g->q8mem = q8mem;
        g->q8 = q8;
    }
    float *qs = q8 ? mote__realloc(g->qs, (size_t)cap * 2 * sizeof *qs) : NULL;
    if (!qs)
        return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    g->qs = qs;
    advise_huge(g->vec, (size_t)cap * g->stride * sizeof *vec);
    advise_huge(g->l0, (size_t)cap * (g->m0 + 1) * 4);
    memset(g->vec + old * g->stride, 0, add * g->stride * sizeof *vec);
    memset(g->id + old, 0, add * sizeof *id);
    memset(g->lvl + old, 0, add);
    memset(g->l0 + old * (g->m0 + 1), 0, add * (g->m0 + 1) * 4);
    memset(g->up + old, 0, add * sizeof *up);
    memset(g->q8 + old * g->qdim, 128, add * g->qdim);
    memset(g->qs + old * 2, 0, add * 2 * sizeof *g->qs);
    g->cap = cap;
    return MOTE_OK;
}

/* x[0..dim) in bytes (QUANTIZED ROWS): the largest component becomes
 * +-127, each byte is its value + bias (128 for a stored row, 0 for a
 * query's, read as signed), n - dim zeros (+ bias) follow. Returns the
 * scale (a byte's value times it is the component), 0 for a zero vector. */
/* |*x| as its bits (which order as the values do), 0 if *x is not finite
 * (all ones in the exponent) or is zero. */
static inline uint32_t finite_abs(const float *x)
{
    uint32_t b;
    memcpy(&b, x, 4);
    b &= 0x7fffffffu;
    return b < 0x7f800000u ? b : 0;
}

static float quantize(const float *x, uint32_t dim, uint32_t n, uint8_t *out, int bias)
{
    /* A component that is not finite (a damaged row, or a centre that
     * overflowed) counts as 0. Both loops test the bits (finite_abs),
     * without branches, so that they vectorize (a load of 100,000 rows of
     * 384 floats spent a third of a second here). */
    uint32_t mb = 0;
    for (uint32_t i = 0; i < dim; i++) {
        uint32_t b = finite_abs(x + i);
        mb = b > mb ? b : mb;
    }
    float m;
    memcpy(&m, &mb, 4);
    double k = m > 0 ? 127.0 / m : 0.0; /* (in float, a denormal m makes it infinite) */
    for (uint32_t i = 0; i < dim; i++) { /* rounded half away from zero */
        float y = finite_abs(x + i) ? (float)(x[i] * k) : 0.0f;
        out[i] = (uint8_t)((int)(y + copysignf(0.5f, y)) + bias);
    }
    memset(out + dim, bias, n - dim);
    return k > 0 ? m / 127.0f : 0.0f;
}

/* Slot i's float row (all of a loaded image's slots hold one). */
static const float *graph_row(const void *ctx, size_t i)
{
    const hgraph *g = ctx;
    return g->vec + i * g->stride;
}

/* The centre of the 8-bit rows, once: the mean of the vectors (cosine:
 * unit vectors) of the float rows that rows(ctx, i), i < n, gives (NULL:
 * none there). */
static int graph_centre(hgraph *g, const float *(*rows)(const void *ctx, size_t i),
                        const void *ctx, size_t n)
{
    uint32_t dim = g->P.dim;
    if (g->qc)
        return MOTE_OK;
    if (!(g->qc = mote__calloc((size_t)dim * 2, sizeof *g->qc)))
        return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    size_t got = 0;
    for (size_t k = 0; k < n; k++) {
        const float *row = rows(ctx, k);
        if (!row)
            continue;
        float mul = g->off ? row[0] : 1.0f;
        for (uint32_t i = 0; i < dim; i++)
            g->qc[i] += row[g->off + i] * mul;
        got++;
    }
    for (uint32_t i = 0; got && i < dim; i++)
        g->qc[i] /= (float)got;
    return MOTE_OK;
}

/* The vector of a float row (make_row; cosine: its unit vector) less the
 * centre, u - c, into x; sums: |x|^2, x.c and c.u. */
static void centred(const hgraph *g, const float *row, float *x, double sums[3])
{
    const float *v = row + g->off;
    float mul = g->off ? row[0] : 1.0f;
    sums[0] = sums[1] = sums[2] = 0;
    for (uint32_t i = 0; i < g->P.dim; i++) {
        float u = v[i] * mul;
        x[i] = u - g->qc[i];
        sums[0] += (double)x[i] * x[i];
        sums[1] += (double)x[i] * g->qc[i];
        sums[2] += (double)g->qc[i] * u;
    }
}

/* Slot s's 8-bit row, from its float row (graph_centre first): its vector
 * (cosine: unit vector) less the centre, so that vectors that share a large
 * part (far from the origin, or all in one direction) keep their
 * differences. */
static void graph_quant(hgraph *g, uint32_t s)
{
    float *x = g->qc + g->P.dim;
    double sums[3];
    centred(g, g->vec + (size_t)s * g->stride, x, sums);
    g->qs[2 * (size_t)s + 1] = (float)(g->P.metric == MOTE_DIST_EUCLIDEAN ? sums[0] : sums[1]);
    g->qs[2 * (size_t)s] = quantize(x, g->P.dim, g->qdim, g->q8 + (size_t)s * g->qdim, 128);
}

static inline uint32_t *graph_list(const hgraph *g, uint32_t s, int l)
{
    return l ? g->up[s] + (size_t)(l - 1) * (g->P.m + 1) : g->l0 + (size_t)s * (g->m0 + 1);
}

static inline uint32_t max_links(const hgraph *g, int l) { return l ? g->P.m : g->m0; }

/* ---- a write transaction's overlay ------------------------------------------------ */

typedef struct onode {
    uint64_t id;
    uint32_t slot;
    uint8_t lvl;
    uint8_t isnew;   /* added by the overlay (vector and lists here) */
    uint8_t del;     /* removed by the overlay */
    uint8_t dirty;   /* changed since it was last written to the tree */
    uint8_t stored;  /* has a record in the tree now */
    uint8_t arena;   /* a dense node: vec and list[0] are in the overlay's arena */
    float *vec;      /* isnew: its row */
    uint32_t *list[HMAXL]; /* changed lists (count, slots); NULL: the image's */
} onode;

typedef struct hover {
    uint32_t base;   /* the image's slots: a node of a slot from here on is new */
    onode *dense;    /* the nodes of slots base, base + 1, ... (all new) */
    uint32_t ndense, capdense;
    onode *nodes;    /* nodes of the image's slots it changed or took (free ones) */
    uint32_t n, cap;
    idmap at;        /* slot + 1 -> index in nodes */
    uint64_t *mine;  /* a bit per image slot: it has a node in nodes */
    idmap ids;       /* id -> slot of the nodes it added (and did not remove) */
    uint32_t freeuse;/* the image's free slots it took (from the end of its list) */
    uint32_t entry;
    int top;
    uint64_t live;
    /* The arena: the rows and level-0 lists of the dense nodes, in chunks of
     * 16, 32, 64, ... nodes, so that a search finds them by arithmetic on
     * the slot (and can fetch a row ahead) instead of through the node. */
    uint32_t stride, l0len; /* floats per row; uint32s per level-0 list */
    float *vch[27];
    uint32_t *lch[27];
} hover;

/* Dense node j's chunk of the arena, and its place in it (*at). */
static inline unsigned arena_chunk(uint32_t j, uint32_t *at)
{
    unsigned c = 31u - (unsigned)__builtin_clz(j / 16 + 1);
    *at = j - 16 * ((1u << c) - 1);
    return c;
}

static inline float *arena_row(const hover *o, uint32_t j)
{
    uint32_t at;
    unsigned c = arena_chunk(j, &at);
    return o->vch[c] + (size_t)at * o->stride;
}

static inline uint32_t *arena_l0(const hover *o, uint32_t j)
{
    uint32_t at;
    unsigned c = arena_chunk(j, &at);
    return o->lch[c] + (size_t)at * o->l0len;
}

static void onode_free(onode *x)
{
    if (!x->arena)
        mote__free(x->vec);
    for (int l = !!x->arena; l < HMAXL; l++)
        mote__free(x->list[l]);
}

static void over_free(hover *o)
{
    if (!o)
        return;
    for (uint32_t i = 0; i < o->n; i++)
        onode_free(&o->nodes[i]);
    for (uint32_t i = 0; i < o->ndense; i++)
        onode_free(&o->dense[i]);
    mote__free(o->nodes);
    mote__free(o->dense);
    for (int c = 0; c < 27; c++) {
        mote__free(o->vch[c]);
        mote__free(o->lch[c]);
    }
    mote__free(o->mine);
    map_free(&o->at);
    map_free(&o->ids);
    mote__free(o);
}

static hover *over_new(const hgraph *g)
{
    hover *o = mote__calloc(1, sizeof *o);
    if (o && !(o->mine = mote__calloc((size_t)g->n / 64 + 1, 8))) {
        mote__free(o);
        o = NULL;
    }
    if (!o) {
        mote__err(MOTE_NOMEM, "out of memory (vector index)");
        return NULL;
    }
    o->base = g->n;
    o->stride = g->stride;
    o->l0len = g->m0 + 1;
    o->entry = g->entry;
    o->top = g->top;
    o->live = g->live;
    return o;
}

static inline onode *over_find(const hover *o, uint32_t s)
{
    if (s >= o->base)
        return s - o->base < o->ndense ? &o->dense[s - o->base] : NULL;
    if (!((o->mine[s >> 6] >> (s & 63)) & 1))
        return NULL;
    return &o->nodes[map_get(&o->at, (uint64_t)s + 1)];
}

/* Node i of the overlay, over both arrays (i < o->n + o->ndense). */
static inline onode *over_at(const hover *o, uint32_t i)
{
    return i < o->n ? &o->nodes[i] : &o->dense[i - o->n];
}

/* A new, zeroed node for slot s: the next dense one (s = base + ndense), or
 * one of an image slot. NULL (message set) when out of memory. */
static onode *over_add(hover *o, uint32_t s)
{
    onode *x;
    if (s >= o->base) {
        if (o->ndense == o->capdense) {
            uint32_t cap = o->capdense ? o->capdense * 2 : 64;
            onode *nd = mote__realloc(o->dense, (size_t)cap * sizeof *nd);
            if (!nd)
                goto nomem;
            o->dense = nd;
            o->capdense = cap;
        }
        uint32_t at;
        unsigned c = arena_chunk(o->ndense, &at);
        size_t n = (size_t)16 << c;
        if (!o->vch[c] && !(o->vch[c] = mote__malloc(n * o->stride * sizeof(float))))
            goto nomem;
        if (!o->lch[c] && !(o->lch[c] = mote__malloc(n * o->l0len * 4)))
            goto nomem;
        x = &o->dense[o->ndense++];
        memset(x, 0, sizeof *x);
        x->slot = s;
        x->arena = 1;
        x->vec = arena_row(o, s - o->base);
        x->list[0] = arena_l0(o, s - o->base);
        memset(x->list[0], 0, (size_t)o->l0len * 4);
        return x;
    } else {
        if (o->n == o->cap) {
            uint32_t cap = o->cap ? o->cap * 2 : 64;
            onode *nn = mote__realloc(o->nodes, (size_t)cap * sizeof *nn);
            if (!nn)
                goto nomem;
            o->nodes = nn;
            o->cap = cap;
        }
        if (map_put(&o->at, (uint64_t)s + 1, o->n))
            return NULL;
        o->mine[s >> 6] |= 1ull << (s & 63);
        x = &o->nodes[o->n++];
    }
    memset(x, 0, sizeof *x);
    x->slot = s;
    return x;
nomem:
    mote__err(MOTE_NOMEM, "out of memory (vector index)");
    return NULL;
}

/* A view of a graph: the image, with a write transaction's overlay or not. */
typedef struct hview {
    const hgraph *g;
    hover *o;
} hview;

static inline const float *v_vec(const hview *v, uint32_t s)
{
    if (v->o && s >= v->o->base)
        return arena_row(v->o, s - v->o->base);
    if (!v->o || v->g->id[s])
        return v->g->vec + (size_t)s * v->g->stride;
    return over_find(v->o, s)->vec;
}

static inline const uint32_t *v_list(const hview *v, uint32_t s, int l)
{
    if (v->o) {
        if (!l && s >= v->o->base)
            return arena_l0(v->o, s - v->o->base);
        const onode *x = over_find(v->o, s);
        if (x && x->list[l])
            return x->list[l];
    }
    return graph_list(v->g, s, l);
}

static inline int v_lvl(const hview *v, uint32_t s)
{
    if (v->o && (s >= v->g->n || !v->g->id[s]))
        return over_find(v->o, s)->lvl;
    return v->g->lvl[s];
}

static inline uint64_t v_id(const hview *v, uint32_t s)
{
    if (v->o && (s >= v->g->n || !v->g->id[s]))
        return over_find(v->o, s)->id;
    return v->g->id[s];
}

static inline uint32_t v_nslots(const hview *v)
{
    return v->o ? v->o->base + v->o->ndense : v->g->n;
}

/* The overlay's node for slot s, made if needed (from the image's node). */
static onode *over_node(hview *v, uint32_t s)
{
    onode *x = over_find(v->o, s);
    if (x || !(x = over_add(v->o, s)))
        return x;
    x->id = v->g->id[s];
    x->lvl = v->g->lvl[s];
    x->stored = 1;
    return x;
}

/* Slot s's list at level l, to change (the overlay's copy). */
static uint32_t *over_list(hview *v, uint32_t s, int l)
{
    onode *x = over_node(v, s);
    if (!x)
        return NULL;
    x->dirty = 1;
    if (!x->list[l]) {
        uint32_t cap = max_links(v->g, l) + 1;
        uint32_t *L = mote__malloc((size_t)cap * 4);
        if (!L) {
            mote__err(MOTE_NOMEM, "out of memory (vector index)");
            return NULL;
        }
        memcpy(L, graph_list(v->g, s, l), (size_t)cap * 4);
        x->list[l] = L;
    }
    return x->list[l];
}

/* ---- distances, visited sets, heaps --------------------------------------------------- */

typedef struct hcand {
    float d;
    uint32_t s;
} hcand;

typedef struct hsearch {
    hview v;
    const vec_kernels *K;
    int metric;
    uint32_t dim;
    uint64_t *vis;           /* a bit per slot */
    uint32_t viscap;         /* bits */
    uint32_t *touched;       /* visited slots, to clear the bits again */
    size_t ntouched, tcap;
    hcand *cand, *top;       /* min-heap of candidates, max-heap of results */
    size_t nc, ccap, nt, tcap2;
    /* a filter: accept(actx, id) = 1 to take an object, 0 to pass it by,
     * < 0 an error (-code), which stops the search */
    int (*accept)(void *actx, uint64_t id);
    void *actx;
    int err;
    /* the query in bytes, when the search compares 8-bit rows (QUANTIZED
     * ROWS; a search of the image alone): its scale, 128 x its byte sum */
    const int8_t *qq;
    float qscale;
    int32_t qbias;
    float qnorm; /* |q'|^2, q' the query less the centre */
    float qcd;   /* the centre's product with the query */
} hsearch;

/* The distance between two rows (make_row): squared L2, the negated dot
 * product, or 1 - cos from the vectors and their inverse norms. */
static inline float dist(const hsearch *S, const float *a, const float *b)
{
    if (S->metric == MOTE_DIST_EUCLIDEAN)
        return S->K->l2sq((const uint8_t *)a, b, S->dim);
    if (S->metric == MOTE_DIST_DOT)
        return -S->K->dot((const uint8_t *)a, b, S->dim);
    return 1.0f - S->K->dot((const uint8_t *)(a + 8), b + 8, S->dim) * a[0] * b[0];
}

/* The distance from the query to slot s of the image, from the 8-bit rows. */
static inline float qdist(const hsearch *S, uint32_t s)
{
    const hgraph *g = S->v.g;
    int32_t raw = S->K->dot8(g->q8 + (size_t)s * g->qdim, S->qq, g->qdim) - S->qbias;
    const float *k = g->qs + 2 * (size_t)s;
    float d = (float)raw * k[0] * S->qscale;
    /* (a = x + c, q = q' + c: a.q = x.q' + x.c + c.q; |a - q|^2 = |x - q'|^2) */
    return S->metric == MOTE_DIST_COSINE      ? 1.0f - (d + k[1] + S->qcd)
           : S->metric == MOTE_DIST_EUCLIDEAN ? k[1] + S->qnorm - 2.0f * d
                                              : -(d + k[1] + S->qcd);
}

/* Fetch every line of p[0..n), aligned or not. */
static inline void fetch_bytes(const void *p, size_t n)
{
    const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = (const char *)p + n;
    for (; c < end; c += 64)
        __builtin_prefetch(c);
}

/* Fetch the 8-bit row of slot s, all its lines, and its scale and sum
 * (qdist reads both: a miss on either stalls the walk). */
static inline void fetch_q8(const hsearch *S, uint32_t s)
{
    const hgraph *g = S->v.g;
    __builtin_prefetch(g->qs + 2 * (size_t)s);
    fetch_bytes(g->q8 + (size_t)s * g->qdim, g->qdim);
}

/* Fetch the float row of slot s (its first line), and return it. */
static inline const float *fetch_row(const hsearch *S, uint32_t s, int direct)
{
    const hgraph *g = S->v.g;
    const float *row = direct ? g->vec + (size_t)s * g->stride : v_vec(&S->v, s);
    __builtin_prefetch(row);
    return row;
}

/* Fetch the list of slot s at level l, every line it may use. */
static inline void fetch_list(const hsearch *S, uint32_t s, int l, int direct)
{
    fetch_bytes(direct ? graph_list(S->v.g, s, l) : v_list(&S->v, s, l),
                ((size_t)max_links(S->v.g, l) + 1) * 4);
}

#define QAHEAD 3 /* 8-bit rows fetched ahead of the one compared */

static int search_init(hsearch *S, const hview *v)
{
    memset(S, 0, sizeof *S);
    S->v = *v;
    S->K = mote__vec_kernels();
    S->metric = v->g->P.metric;
    S->dim = v->g->P.dim;
    return MOTE_OK;
}

static void search_free(hsearch *S)
{
    mote__free(S->vis);
    mote__free(S->touched);
    mote__free(S->cand);
    mote__free(S->top);
    S->vis = NULL;
    S->touched = NULL;
    S->cand = S->top = NULL;
}

/* Ready for a search over the view's slots: no slot visited. */
static int search_reset(hsearch *S)
{
    uint32_t need = v_nslots(&S->v);
    for (size_t i = 0; i < S->ntouched; i++)
        S->vis[S->touched[i] >> 6] &= ~(1ull << (S->touched[i] & 63));
    S->ntouched = 0;
    S->nc = S->nt = 0;
    if (need > S->viscap) {
        uint32_t bits = need + need / 2 + 64;
        uint64_t *nv = mote__realloc(S->vis, ((size_t)bits / 64 + 1) * 8);
        if (!nv)
            return mote__err(MOTE_NOMEM, "out of memory (vector search)");
        memset(nv + S->viscap / 64, 0, ((size_t)bits / 64 + 1 - S->viscap / 64) * 8);
        S->vis = nv;
        S->viscap = bits / 64 * 64;
    }
    return MOTE_OK;
}

/* Mark slot s visited; 1 if it was already. */
static inline int visit(hsearch *S, uint32_t s)
{
    uint64_t b = 1ull << (s & 63), *w = &S->vis[s >> 6];
    if (*w & b)
        return 1;
    *w |= b;
    if (S->ntouched == S->tcap) {
        size_t cap = S->tcap ? S->tcap * 2 : 1024;
        uint32_t *t = mote__realloc(S->touched, cap * 4);
        if (!t) { /* forget the list: clear the whole set next time */
            memset(S->vis, 0, ((size_t)S->viscap / 64 + 1) * 8);
            S->ntouched = 0;
            return 0;
        }
        S->touched = t;
        S->tcap = cap;
    }
    S->touched[S->ntouched++] = s;
    return 0;
}

/* Room for more than n in *h (of *cap): doubled until there is (a search
 * asks for ef + 1 at once, and ef may be any size). */
static int heap_room(hcand **h, size_t *cap, size_t n)
{
    if (n < *cap)
        return MOTE_OK;
    size_t c = *cap ? *cap * 2 : 256;
    while (c <= n)
        c *= 2;
    hcand *nh = mote__realloc(*h, c * sizeof *nh);
    if (!nh)
        return mote__err(MOTE_NOMEM, "out of memory (vector search)");
    *h = nh;
    *cap = c;
    return MOTE_OK;
}

/* max: 1 for a max-heap (the farthest on top), 0 for a min-heap; ties by
 * slot, so that every order is the same whatever the heap's history */
static inline int above(hcand a, hcand b, int max)
{
    return max ? a.d > b.d || (a.d == b.d && a.s > b.s) : a.d < b.d || (a.d == b.d && a.s < b.s);
}

static inline void heap_push(hcand *h, size_t *n, hcand c, int max)
{
    size_t i = (*n)++;
    while (i > 0 && above(c, h[(i - 1) / 2], max)) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

/* Put `last` in place i, moving it down (h[0..n) with a hole at i). */
static inline void heap_down(hcand *h, size_t n, size_t i, hcand last, int max)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        hcand best = last;
        if (l < n && above(h[l], best, max)) {
            m = l;
            best = h[l];
        }
        if (r < n && above(h[r], best, max))
            m = r;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = last;
}

static inline hcand heap_pop(hcand *h, size_t *n, int max)
{
    hcand top = h[0];
    if (--*n)
        heap_down(h, *n, 0, h[*n], max);
    return top;
}

/* The top replaced by c (a full heap keeping the best: pop and push in one). */
static inline void heap_replace(hcand *h, size_t n, hcand c, int max) { heap_down(h, n, 0, c, max); }

/* ---- searching a level ---------------------------------------------------------------- */

/* Walk level l greedily from *ep (distance *dep) towards q. */
static void greedy(hsearch *S, const float *q, uint32_t *ep, float *dep, int l)
{
    for (int changed = 1; changed;) {
        changed = 0;
        const uint32_t *L = v_list(&S->v, *ep, l);
        for (uint32_t i = 1; S->qq && i <= L[0] && i <= QAHEAD; i++)
            fetch_q8(S, L[i]);
        for (uint32_t i = 1; i <= L[0]; i++) {
            if (S->qq && i + QAHEAD <= L[0])
                fetch_q8(S, L[i + QAHEAD]);
            float d = S->qq ? qdist(S, L[i]) : dist(S, v_vec(&S->v, L[i]), q);
            if (d < *dep) {
                *dep = d;
                *ep = L[i];
                changed = 1;
            }
        }
    }
}

/*
 * Best-first search of level l from ep for the ef nearest to q: S->top
 * holds them (a max-heap). With a filter, nodes it refuses are walked
 * through but not kept, and the search goes on until ef are kept or the
 * reachable graph is exhausted.
 */
static int search_level(hsearch *S, const float *q, uint32_t ep, float dep, size_t ef, int l)
{
    int rc = search_reset(S);
    if (rc || (rc = heap_room(&S->cand, &S->ccap, 1)) ||
        (rc = heap_room(&S->top, &S->tcap2, ef + 1)))
        return rc;
    const hgraph *g = S->v.g;
    int direct = !S->v.o; /* rows and lists straight from the image */
    visit(S, ep);
    heap_push(S->cand, &S->nc, (hcand){dep, ep}, 0);
    int ok = 1;
    if (S->accept && (ok = S->accept(S->actx, v_id(&S->v, ep))) < 0)
        return S->err = -ok;
    if (ok)
        heap_push(S->top, &S->nt, (hcand){dep, ep}, 1);
    float bound = S->nt ? S->top[0].d : INFINITY;
    while (S->nc) {
        hcand c = heap_pop(S->cand, &S->nc, 0);
        if (c.d > bound && S->nt >= ef)
            break;
        /* the next to come off the heap, unless a neighbour below is nearer:
         * its list (every line) is read while these distances are computed */
        if (S->nc)
            fetch_list(S, S->cand[0].s, l, direct);
        const uint32_t *L = direct ? graph_list(g, c.s, l) : v_list(&S->v, c.s, l);
        /* the neighbours not visited yet, then their distances: a float
         * row's first line is fetched as it is listed, an 8-bit row whole
         * QAHEAD neighbours before it is compared */
        uint32_t fresh[2 * 128];
        const float *rows[2 * 128];
        size_t nf = 0;
        for (uint32_t i = 1; i <= L[0]; i++)
            if (!visit(S, L[i])) {
                rows[nf] = S->qq ? NULL : fetch_row(S, L[i], direct);
                fresh[nf++] = L[i];
            }
        for (size_t i = 0; S->qq && i < nf && i < QAHEAD; i++)
            fetch_q8(S, fresh[i]);
        for (size_t i = 0; i < nf; i++) {
            uint32_t nb = fresh[i];
            if (S->qq && i + QAHEAD < nf)
                fetch_q8(S, fresh[i + QAHEAD]);
            float d = S->qq ? qdist(S, nb) : dist(S, rows[i], q);
            if (S->nt < ef || d < bound) {
                if ((rc = heap_room(&S->cand, &S->ccap, S->nc + 1)))
                    return rc;
                /* nearer than every candidate: it comes off the heap next */
                if (!S->nc || d < S->cand[0].d)
                    fetch_list(S, nb, l, direct);
                heap_push(S->cand, &S->nc, (hcand){d, nb}, 0);
                if (S->accept && (ok = S->accept(S->actx, v_id(&S->v, nb))) < 0)
                    return S->err = -ok;
                if (ok) {
                    if (S->nt < ef)
                        heap_push(S->top, &S->nt, (hcand){d, nb}, 1);
                    else
                        heap_replace(S->top, S->nt, (hcand){d, nb}, 1);
                }
                if (S->nt)
                    bound = S->top[0].d;
            }
        }
    }
    return MOTE_OK;
}

static int cmp_cand(const void *a, const void *b)
{
    const hcand *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d ? 1 : (x->s > y->s) - (x->s < y->s);
}

/* S->top's results into out (ascending: nearest first, ties by slot);
 * returns their number. S->top is left empty. */
static size_t take_results(hsearch *S, hcand *out)
{
    size_t n = S->nt;
    for (size_t i = n; i-- > 0;)
        out[i] = heap_pop(S->top, &S->nt, 1);
    return n;
}
/* The heuristic: of c[0..n) (ascending by distance to the base) keep at most
 * m, each nearer to the base than to every one kept before it; with fill,
 * then the nearest of those passed over while fewer than m are kept. In
 * place; returns the number kept. */
static size_t select_links(hsearch *S, hcand *c, size_t n, size_t m, int fill)
{
    size_t k = 0, nd = 0;
    hcand disc[256];
    for (size_t i = 0; i < n && k < m; i++) {
        const float *row = v_vec(&S->v, c[i].s);
        int good = 1;
        for (size_t j = 0; j < k && good; j++)
            good = dist(S, row, v_vec(&S->v, c[j].s)) >= c[i].d;
        if (good)
            c[k++] = c[i];
        else if (nd < m)
            disc[nd++] = c[i];
    }
    for (size_t j = 0; fill && j < nd && k < m; j++)
        c[k++] = disc[j];
    return k;
}

/* ---- inserting and removing (into the overlay) --------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A node's level: from a hash of its id, P(level >= l) = m^-l. */
static int node_level(uint64_t id, uint32_t m)
{
    double u = ((double)(mix64(id ^ 0x484E5357ull) >> 11) + 0.5) / 9007199254740992.0;
    int l = (int)(-log(u) / log((double)m));
    return l < HMAXL - 1 ? l : HMAXL - 1;
}

/* Scratch of one flush on one index. */
typedef struct hwork {
    hsearch S;
    hcand *c;              /* candidates */
    size_t ccap;
} hwork;

static int work_room(hwork *w, size_t n)
{
    return heap_room(&w->c, &w->ccap, n);
}

/* Link slot s to slot t at level l (d: their distance), pruning s's list
 * with the heuristic when it is full. */
static int add_link(hwork *w, uint32_t s, uint32_t t, float d, int l)
{
    hview *v = &w->S.v;
    uint32_t *L = over_list(v, s, l), lim = max_links(v->g, l);
    if (!L)
        return MOTE_NOMEM;
    for (uint32_t i = 1; i <= L[0]; i++)
        if (L[i] == t)
            return MOTE_OK;
    if (L[0] < lim) {
        L[++L[0]] = t;
        return MOTE_OK;
    }
    int rc = work_room(w, lim + 1);
    if (rc)
        return rc;
    const float *row = v_vec(v, s);
    size_t n = 0;
    for (uint32_t i = 1; i <= L[0]; i++)
        w->c[n++] = (hcand){dist(&w->S, v_vec(v, L[i]), row), L[i]};
    w->c[n++] = (hcand){d, t};
    qsort(w->c, n, sizeof *w->c, cmp_cand);
    n = select_links(&w->S, w->c, n, lim, 0);
    L[0] = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        L[i + 1] = w->c[i].s;
    return MOTE_OK;
}

/* A slot for a new node: one the image has free (not taken yet), else the
 * next past it. */
static uint32_t new_slot(hview *v)
{
    const hgraph *g = v->g;
    if (v->o->freeuse < g->nfree)
        return g->freel[g->nfree - 1 - v->o->freeuse++];
    return v->o->base + v->o->ndense;
}

/* Insert object id with its row (make_row) into the overlay. */
static int insert(hwork *w, uint64_t id, const float *row)
{
    hview *v = &w->S.v;
    hover *o = v->o;
    const hgraph *g = v->g;
    uint32_t s = new_slot(v);
    int lvl = node_level(id, g->P.m), rc;
    onode *x = over_add(o, s); /* (a slot free in the image or past it: no node yet) */
    if (!x)
        return MOTE_NOMEM;
    x->slot = s;
    x->id = id;
    x->lvl = (uint8_t)lvl;
    x->isnew = 1;
    x->dirty = 1;
    if (!x->arena && !(x->vec = mote__malloc((size_t)g->stride * sizeof(float))))
        return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    memcpy(x->vec, row, (size_t)g->stride * sizeof(float));
    for (int l = !!x->arena; l <= lvl; l++) {
        x->list[l] = mote__calloc(max_links(g, l) + 1, 4);
        if (!x->list[l])
            return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    }
    if ((rc = map_put(&o->ids, id, s)))
        return rc;
    o->live++;
    if (o->entry == HNONE) {
        o->entry = s;
        o->top = lvl;
        return MOTE_OK;
    }
    uint32_t ep = o->entry;
    float dep = dist(&w->S, v_vec(v, ep), row);
    for (int l = o->top; l > lvl; l--)
        greedy(&w->S, row, &ep, &dep, l);
    for (int l = lvl < o->top ? lvl : o->top; l >= 0; l--) {
        if ((rc = search_level(&w->S, row, ep, dep, g->P.efc, l)) ||
            (rc = work_room(w, w->S.nt + 1)))
            return rc;
        size_t n = take_results(&w->S, w->c);
        ep = w->c[0].s;
        dep = w->c[0].d;
        n = select_links(&w->S, w->c, n, g->P.m, 1);
        x = over_find(o, s); /* (the overlay's arrays may have moved) */
        uint32_t *L = x->list[l];
        L[0] = (uint32_t)n;
        for (size_t i = 0; i < n; i++)
            L[i + 1] = w->c[i].s;
        /* the reverse links; add_link may prune and reuse w->c: copy first */
        uint32_t nb[2 * 128 + 1];
        float nd[2 * 128 + 1];
        for (size_t i = 0; i < n; i++) {
            nb[i] = w->c[i].s;
            nd[i] = w->c[i].d;
        }
        for (size_t i = 0; i < n; i++)
            if ((rc = add_link(w, nb[i], s, nd[i], l)))
                return rc;
    }
    if (lvl > o->top) {
        o->entry = s;
        o->top = lvl;
    }
    return MOTE_OK;
}

static inline int bit(const uint64_t *b, uint32_t s) { return (int)(b[s >> 6] >> (s & 63)) & 1; }

/* Is slot s a live node of the view? */
static int live_slot(const hview *v, uint32_t s)
{
    const onode *x = v->o ? over_find(v->o, s) : NULL;
    if (x)
        return !x->del && (x->isnew || (s < v->g->n && v->g->id[s]));
    return s < v->g->n && v->g->id[s] != 0;
}

/*
 * Remove the nodes of slots dead[0..nd) (live ones): every list that names
 * one of them is rebuilt from its other links and the removed nodes' links,
 * with the heuristic; a new entry is chosen if the entry goes.
 */
static int remove_nodes(hwork *w, const uint32_t *dead, size_t nd)
{
    hview *v = &w->S.v;
    hover *o = v->o;
    const hgraph *g = v->g;
    uint32_t ns = v_nslots(v);
    uint64_t *gone = mote__calloc((size_t)ns / 64 + 1, 8);
    if (!gone)
        return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    int rc = MOTE_OK;
    for (size_t i = 0; i < nd; i++)
        gone[dead[i] >> 6] |= 1ull << (dead[i] & 63);
    for (uint32_t s = 0; s < ns && !rc; s++) {
        if (bit(gone, s) || !live_slot(v, s))
            continue;
        int lvl = v_lvl(v, s);
        for (int l = 0; l <= lvl && !rc; l++) {
            const uint32_t *L = v_list(v, s, l);
            int hit = 0;
            for (uint32_t i = 1; i <= L[0] && !hit; i++)
                hit = bit(gone, L[i]);
            if (!hit)
                continue;
            /* candidates: its surviving links, and the removed ones' links */
            size_t n = 0;
            uint32_t lim = max_links(g, l);
            const float *row = v_vec(v, s);
            for (uint32_t i = 1; i <= L[0] && !rc; i++) {
                const uint32_t *M = bit(gone, L[i]) ? v_list(v, L[i], l) : NULL;
                uint32_t from = M ? 1 : 0, to = M ? M[0] : 0;
                if (!M) { /* the link itself survives */
                    if ((rc = work_room(w, n + 1)))
                        break;
                    w->c[n++] = (hcand){0, L[i]};
                    continue;
                }
                for (uint32_t j = from; j <= to; j++)
                    if (M[j] != s && !bit(gone, M[j])) {
                        if ((rc = work_room(w, n + 1)))
                            break;
                        w->c[n++] = (hcand){0, M[j]};
                    }
            }
            if (rc)
                break;
            /* distinct, with distances */
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                int dup = 0;
                for (size_t j = 0; j < k && !dup; j++)
                    dup = w->c[j].s == w->c[i].s;
                if (!dup) {
                    w->c[k] = w->c[i];
                    w->c[k].d = dist(&w->S, v_vec(v, w->c[k].s), row);
                    k++;
                }
            }
            if (k > 1)
                qsort(w->c, k, sizeof *w->c, cmp_cand);
            k = select_links(&w->S, w->c, k, lim, 0);
            uint32_t *W = over_list(v, s, l);
            if (!W) {
                rc = MOTE_NOMEM;
                break;
            }
            W[0] = (uint32_t)k;
            for (size_t i = 0; i < k; i++)
                W[i + 1] = w->c[i].s;
        }
    }
    for (size_t i = 0; i < nd && !rc; i++) {
        onode *x = over_node(v, dead[i]);
        if (!x) {
            rc = MOTE_NOMEM;
            break;
        }
        x->del = 1;
        x->dirty = 1;
        if (x->isnew)
            map_del(&o->ids, x->id);
        o->live--;
    }
    if (!rc && o->entry != HNONE && bit(gone, o->entry)) { /* the highest node left */
        o->entry = HNONE;
        o->top = -1;
        for (uint32_t s = 0; s < ns; s++)
            if (!bit(gone, s) && live_slot(v, s) && v_lvl(v, s) > o->top) {
                o->entry = s;
                o->top = v_lvl(v, s);
            }
    }
    mote__free(gone);
    return rc;
}

/* ---- folding an overlay into the image -------------------------------------------------- */

/* The float row of an overlay's node i if it is a new one that stays. */
static const float *over_new_row(const void *ctx, size_t i)
{
    const onode *x = over_at(ctx, (uint32_t)i);
    return x->isnew && !x->del ? x->vec : NULL;
}

/* Make g the graph g + o (stamp, gen). On failure g is unusable (the caller
 * throws it away). */
static int graph_apply(hgraph *g, const hover *o, uint64_t gen, uint64_t stamp)
{
    int rc = graph_grow(g, o->base + o->ndense);
    if (rc)
        return rc;
    if ((rc = map_reserve(&g->map, (uint32_t)(g->map.n + o->ids.n))))
        return rc;
    if ((rc = graph_centre(g, over_new_row, o, (size_t)o->n + o->ndense)))
        return rc;
    g->nfree -= o->freeuse;
    g->n = o->base + o->ndense;
    for (uint32_t i = 0; i < o->n + o->ndense; i++) {
        const onode *x = over_at(o, i);
        uint32_t s = x->slot;
        if (x->del) { /* (a node it added and removed leaves its slot free) */
            if (!x->isnew) {
                map_del(&g->map, g->id[s]);
                g->id[s] = 0;
                mote__free(g->up[s]);
                g->up[s] = NULL;
                g->l0[(size_t)s * (g->m0 + 1)] = 0;
                g->lvl[s] = 0;
            }
            continue;
        }
        if (x->isnew) {
            memcpy(g->vec + (size_t)s * g->stride, x->vec, (size_t)g->stride * sizeof(float));
            graph_quant(g, s);
            g->id[s] = x->id;
            g->lvl[s] = x->lvl;
            mote__free(g->up[s]);
            g->up[s] = NULL;
            if (x->lvl) {
                g->up[s] = mote__malloc((size_t)x->lvl * (g->P.m + 1) * 4);
                if (!g->up[s])
                    return mote__err(MOTE_NOMEM, "out of memory (vector index)");
            }
            if ((rc = map_put(&g->map, x->id, s)))
                return rc;
        }
        for (int l = 0; l <= x->lvl; l++)
            if (x->list[l])
                memcpy(graph_list(g, s, l), x->list[l], ((size_t)max_links(g, l) + 1) * 4);
    }
    /* free slots: the image's untaken ones, then every slot now empty */
    uint32_t nfree = 0;
    for (uint32_t s = 0; s < g->n; s++)
        nfree += !g->id[s];
    if (nfree > g->freecap) {
        uint32_t *fl = mote__malloc((size_t)nfree * 4);
        if (!fl)
            return mote__err(MOTE_NOMEM, "out of memory (vector index)");
        mote__free(g->freel);
        g->freel = fl;
        g->freecap = nfree;
    }
    g->nfree = 0;
    for (uint32_t s = g->n; s-- > 0;)
        if (!g->id[s])
            g->freel[g->nfree++] = s;
    g->entry = o->entry;
    g->top = o->top;
    g->live = o->live;
    g->gen = gen;
    g->stamp = stamp;
    return MOTE_OK;
}

/* ---- the index's records ---------------------------------------------------------------- */

typedef struct hmeta {
    hparams P;
    uint64_t gen, stamp, count, entry;
    int top;
} hmeta;

static int meta_read(mote_txn *t, uint32_t tree, hmeta *M, int *found)
{
    mote_val v;
    *found = 0;
    int rc = mote_kv_get(t, tree, "m", 1, &v);
    if (rc == MOTE_NOTFOUND)
        return MOTE_OK;
    if (rc)
        return rc;
    const uint8_t *p = v.data;
    if (v.size != META_LEN || p[0] != META_FORMAT)
        return CORRUPT("vector index: state record of %zu bytes, format %u", v.size,
                       v.size ? p[0] : 0);
    M->P.metric = p[1];
    M->P.m = rd16(p + 2);
    M->P.efc = rd16(p + 4);
    M->P.dim = rd32(p + 6);
    M->gen = rd64(p + 10);
    M->stamp = rd64(p + 18);
    M->count = rd64(p + 26);
    M->entry = rd64(p + 34);
    M->top = p[42];
    if (M->P.metric < MOTE_DIST_COSINE || M->P.metric > MOTE_DIST_DOT || M->P.m < 2 ||
        M->P.m > 128 || !M->P.dim || M->top >= HMAXL || (!M->entry) != (!M->count))
        return CORRUPT("vector index: damaged state record");
    *found = 1;
    return MOTE_OK;
}

static void meta_encode(const hmeta *M, uint8_t *p)
{
    p[0] = META_FORMAT;
    p[1] = (uint8_t)M->P.metric;
    wr16(p + 2, (uint16_t)M->P.m);
    wr16(p + 4, (uint16_t)M->P.efc);
    wr32(p + 6, M->P.dim);
    wr64(p + 10, M->gen);
    wr64(p + 18, M->stamp);
    wr64(p + 26, M->count);
    wr64(p + 34, M->entry);
    p[42] = (uint8_t)(M->top < 0 ? 0 : M->top);
}

static void node_key(uint64_t id, uint8_t *k)
{
    k[0] = 'n';
    mote__wr_be64(k + 1, id);
}

/* A node's record (at most 1 + HMAXL * (10 + 10 * 256) bytes) from view v. */
static size_t node_encode(const hview *v, uint32_t s, int lvl, uint8_t *out)
{
    uint8_t *p = out;
    uint64_t ids[257];
    *p++ = (uint8_t)lvl;
    for (int l = 0; l <= lvl; l++) {
        const uint32_t *L = v_list(v, s, l);
        for (uint32_t i = 0; i < L[0]; i++)
            ids[i] = v_id(v, L[i + 1]);
        qsort(ids, L[0], 8, mote__cmp_u64);
        p += mote__varint_put(p, L[0]);
        for (uint32_t i = 0; i < L[0]; i++)
            p += mote__varint_put(p, i ? ids[i] - ids[i - 1] : ids[0]);
    }
    return (size_t)(p - out);
}

/* Decode a node's record: its level, and per level the neighbour ids into
 * ids (count at cnt[l]); lim: the list limits. */
static int node_decode(const uint8_t *p, size_t n, uint32_t m, int *lvl, uint32_t *cnt,
                       uint64_t ids[][257])
{
    const uint8_t *end = p + n;
    if (!n || p[0] >= HMAXL)
        return 0;
    *lvl = *p++;
    for (int l = 0; l <= *lvl; l++) {
        uint64_t c, x, prev = 0;
        unsigned a = mote__varint_get(p, end, &c);
        if (!a || c > (l ? m : 2 * m))
            return 0;
        p += a;
        cnt[l] = (uint32_t)c;
        for (uint64_t i = 0; i < c; i++) {
            if (!(a = mote__varint_get(p, end, &x)) || (i && !x) || (!i && !x))
                return 0;
            p += a;
            prev += x;
            if (prev < x) /* wrapped */
                return 0;
            ids[l][i] = prev;
        }
    }
    return p == end;
}

/* v (dim floats, as stored) as a row of stride floats: for cosine, 1/|v|
 * (0 for an all-zero vector), 7 zeros, then v; else v; zeros to the end.
 * The rows hold the stored floats themselves, so a distance from a row is
 * the one exact search computes from the record. */
static void make_row(int metric, const uint8_t *v, uint32_t dim, uint32_t stride, float *row)
{
    uint32_t off = metric == MOTE_DIST_COSINE ? 8 : 0;
    memset(row, 0, (size_t)stride * 4);
    memcpy(row + off, v, (size_t)dim * 4);
    if (!off)
        return;
    double ss = 0;
    for (uint32_t i = 0; i < dim; i++)
        ss += (double)row[off + i] * row[off + i];
    row[0] = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
}

/* The vector of object id (through cursor oc on the object tree): *vec
 * NULL if the object is absent or its vector NULL. */
static int object_vector(const mote_entity *e, unsigned prop, mote_cursor *oc, uint64_t id,
                         const uint8_t **vec)
{
    mote_record r;
    mote_value val;
    *vec = NULL;
    int rc = mote__obj_seek(e, oc, id, &r);
    if (rc == MOTE_NOTFOUND)
        return MOTE_OK;
    if (rc || (rc = mote_record_get(&r, prop, &val, NULL)) || !has_vector(&val))
        return rc;
    if (val.v.s.n != (size_t)e->props[prop].dim * 4)
        return CORRUPT("%s: object %llu holds a vector of %zu bytes", e->name,
                       (unsigned long long)id, val.v.s.n);
    *vec = val.v.s.p;
    return MOTE_OK;
}

/* The least a node's cell takes in a leaf: its 9-byte key, a 2-byte value
 * (level 0, no links), their lengths and its offset in the page. */
#define NODE_MIN_CELL 12u

/* Build the image of the index in tree (state M) as transaction t sees it. */
static int graph_load(mote_txn *t, const mote_entity *e, unsigned prop, uint32_t tree,
                      const hmeta *M, hgraph **out)
{
    hgraph *g = graph_new(&M->P);
    mote_cursor *c = NULL, *oc = NULL;
    uint64_t (*ids)[257] = mote__malloc(sizeof(uint64_t[HMAXL][257]));
    int rc = !g || !ids ? MOTE_NOMEM : MOTE_OK;
    /* every node is a cell of at least NODE_MIN_CELL bytes, and its object's
     * vector dim floats, in the snapshot's pages: a state that says more
     * nodes than those could hold is damaged, and must not size the image
     * (a damaged file's asked for gigabytes) */
    uint64_t bytes = mote__kv_bytes(t), per = NODE_MIN_CELL + 4ull * M->P.dim;
    if (!rc && (M->count > 0x7FFFFFF0ull || M->count > bytes / per))
        rc = CORRUPT("vector index: %llu nodes of %u dimensions, in a store of %llu bytes",
                     (unsigned long long)M->count, M->P.dim, (unsigned long long)bytes);
    if (!rc)
        rc = graph_grow(g, (uint32_t)M->count + 1);
    if (!rc)
        rc = map_reserve(&g->map, (uint32_t)M->count + 1);
    if (!rc)
        rc = mote_cursor_open(t, tree, &c);
    /* pass 1: the nodes, in id order, get slots 0, 1, ... */
    for (int pass = 1; pass <= 2 && !rc; pass++) {
        uint32_t s = 0;
        for (rc = mote_cursor_seek(c, "n", 1, MOTE_SEEK_GE); rc == MOTE_OK;
             rc = mote_cursor_next(c), s++) {
            mote_val k, v;
            if ((rc = mote__cursor_entry(c, &k, &v)))
                break;
            const uint8_t *kp = k.data;
            if (k.size != 9 || kp[0] != 'n') {
                rc = CORRUPT("vector index: a key of %zu bytes", k.size);
                break;
            }
            uint64_t id = mote__be64(kp + 1);
            int lvl;
            uint32_t cnt[HMAXL];
            if (!id || !node_decode(v.data, v.size, g->P.m, &lvl, cnt, ids)) {
                rc = CORRUPT("vector index: node %llu is damaged", (unsigned long long)id);
                break;
            }
            if (pass == 1) {
                if (s >= M->count) {
                    rc = CORRUPT("vector index: more nodes than its state says (%llu)",
                                 (unsigned long long)M->count);
                    break;
                }
                g->id[s] = id;
                g->lvl[s] = (uint8_t)lvl;
                if (lvl && !(g->up[s] = mote__calloc((size_t)lvl * (g->P.m + 1), 4))) {
                    rc = MOTE_NOMEM;
                    break;
                }
                g->n = s + 1;
                if ((rc = map_put(&g->map, id, s)))
                    break;
                continue;
            }
            for (int l = 0; l <= lvl; l++) {
                uint32_t *L = graph_list(g, s, l);
                L[0] = cnt[l];
                for (uint32_t i = 0; i < cnt[l]; i++) {
                    uint32_t to = map_get(&g->map, ids[l][i]);
                    if (to == HNONE || to == s || g->lvl[to] < l) {
                        rc = CORRUPT("vector index: node %llu links to %llu, %s",
                                     (unsigned long long)id, (unsigned long long)ids[l][i],
                                     to == HNONE ? "which is not a node"
                                     : to == s   ? "itself"
                                                 : "which is not on that level");
                        break;
                    }
                    L[i + 1] = to;
                }
                if (rc)
                    break;
            }
            if (rc)
                break;
        }
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        if (!rc && pass == 1 && g->n != M->count)
            rc = CORRUPT("vector index: %u nodes, its state says %llu", g->n,
                         (unsigned long long)M->count);
    }
    /* the vectors, from the objects */
    if (!rc)
        rc = mote_cursor_open(t, e->eid, &oc);
    for (uint32_t s = 0; !rc && s < g->n; s++) {
        const uint8_t *vec;
        if ((rc = object_vector(e, prop, oc, g->id[s], &vec)))
            break;
        if (!vec) {
            rc = CORRUPT("vector index of %s.%s: node %llu has no object or no vector",
                         e->name, e->props[prop].name, (unsigned long long)g->id[s]);
            break;
        }
        make_row(g->P.metric, vec, g->P.dim, g->stride, g->vec + (size_t)s * g->stride);
    }
    if (!rc)
        rc = graph_centre(g, graph_row, g, g->n);
    for (uint32_t s = 0; !rc && s < g->n; s++)
        graph_quant(g, s);
    if (!rc) {
        g->live = g->n;
        g->entry = M->count ? map_get(&g->map, M->entry) : HNONE;
        g->top = M->count ? M->top : -1;
        if (M->count && (g->entry == HNONE || g->lvl[g->entry] != M->top))
            rc = CORRUPT("vector index: its entry node %llu is not a node of level %d",
                         (unsigned long long)M->entry, M->top);
        g->gen = M->gen;
        g->stamp = M->stamp;
    }
    if (rc == MOTE_NOMEM)
        rc = mote__err(MOTE_NOMEM, "out of memory loading a vector index");
    mote_cursor_close(c);
    mote_cursor_close(oc);
    mote__free(ids);
    if (rc) {
        graph_free(g);
        return rc;
    }
    *out = g;
    return MOTE_OK;
}

/* ---- per store: the images; per write transaction: notes and overlays ---------------- */

typedef struct hindex {
    struct hindex *next;
    uint32_t eid;
    uint16_t pid;
    pthread_rwlock_t lock;  /* g, pending, pin */
    hgraph *g;              /* NULL: not loaded */
    /* the overlay of a transaction that is committing (or committed), with
     * the version it makes of g; owned here once set */
    hover *pending;
    uint64_t pend_gen, pend_stamp;
    uint64_t pin;           /* serial of the write transaction whose overlay rests on g */
    /* the state record last read by a read transaction (under hstate's mu):
     * every reader of the same snapshot (txnid) sees the same one */
    uint64_t mtxn;          /* 0: none */
    uint32_t mtree;
    int mfound;
    hmeta mM;
} hindex;

typedef struct hnote {
    mote_entity *e;
    uint32_t eid;
    uint16_t pid;
    uint64_t id;
} hnote;

/* A write transaction's work on one index. */
typedef struct hwrite {
    struct hwrite *next;
    hindex *x;
    hover *o;               /* owned by x once registered as its pending change */
    int registered;
    uint64_t serial, stamp; /* the transaction's, the version it writes */
    hmeta base;             /* the state it started from (if base_found) */
    int base_found;
    hwork w;
} hwrite;

typedef struct hstate {
    pthread_mutex_t mu;     /* the list of indexes */
    hindex *list;
    uint64_t nonce;         /* of this open store: stamps are unique */
    /* the current write transaction's (serial) notes and work */
    uint64_t serial;
    hnote *notes;
    size_t nnotes, capnotes;
    hwrite *writes;
} hstate;

static hstate *state_get(mote_store *s)
{
    objstore *os = OBJ(s);
    pthread_mutex_lock(&s->mu);
    hstate *H = os->hnsw;
    if (!H && (H = mote__calloc(1, sizeof *H))) {
        pthread_mutex_init(&H->mu, NULL);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        H->nonce = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                         ((uint64_t)getpid() << 42) ^ (uint64_t)(uintptr_t)s);
        os->hnsw = H;
    }
    pthread_mutex_unlock(&s->mu);
    if (!H)
        mote__err(MOTE_NOMEM, "out of memory (vector index)");
    return H;
}

static hindex *index_get(hstate *H, uint32_t eid, uint16_t pid)
{
    pthread_mutex_lock(&H->mu);
    hindex *x = H->list;
    while (x && (x->eid != eid || x->pid != pid))
        x = x->next;
    if (!x && (x = mote__calloc(1, sizeof *x))) {
        x->eid = eid;
        x->pid = pid;
        pthread_rwlock_init(&x->lock, NULL);
        x->next = H->list;
        H->list = x;
    }
    pthread_mutex_unlock(&H->mu);
    if (!x)
        mote__err(MOTE_NOMEM, "out of memory (vector index)");
    return x;
}

/* meta_read, for a read transaction through x's copy of the state record
 * when it read it last in the same snapshot. */
static int meta_get(hstate *H, hindex *x, mote_txn *t, uint32_t tree, hmeta *M, int *found)
{
    if (t->write)
        return meta_read(t, tree, M, found);
    pthread_mutex_lock(&H->mu);
    int hit = x->mtxn && x->mtxn == t->txnid && x->mtree == tree;
    if (hit) {
        *M = x->mM;
        *found = x->mfound;
    }
    pthread_mutex_unlock(&H->mu);
    if (hit)
        return MOTE_OK;
    int rc = meta_read(t, tree, M, found);
    if (!rc) {
        pthread_mutex_lock(&H->mu);
        x->mtxn = t->txnid;
        x->mtree = tree;
        x->mfound = *found;
        if (*found)
            x->mM = *M;
        pthread_mutex_unlock(&H->mu);
    }
    return rc;
}

static int same_params(const hparams *a, const hparams *b)
{
    return a->metric == b->metric && a->dim == b->dim && a->m == b->m && a->efc == b->efc;
}

/* Under x's write lock: make x->g the version of the index in `tree` that t
 * sees (state M; found = 0: no state yet, an empty graph with the
 * property's parameters). From x's pending change if it makes that
 * version, else built from the tree. */
static int image_follow(hindex *x, mote_txn *t, const mote_entity *e, unsigned prop,
                        uint32_t tree, const hmeta *M, int found)
{
    hmeta empty;
    if (!found) {
        const mprop *p = &e->props[prop];
        memset(&empty, 0, sizeof empty);
        empty.P = (hparams){p->hmetric, p->dim, p->hm, p->hefc};
        empty.top = -1;
        M = &empty;
    }
    if (x->g && x->g->stamp == M->stamp && same_params(&x->g->P, &M->P))
        return MOTE_OK;
    if (x->g && x->pending && found && x->pend_stamp == M->stamp) {
        int rc = graph_apply(x->g, x->pending, x->pend_gen, x->pend_stamp);
        over_free(x->pending);
        x->pending = NULL;
        if (!rc)
            return MOTE_OK;
        graph_free(x->g); /* half changed: built again when needed */
        x->g = NULL;
        return rc;
    }
    hgraph *g = NULL;
    int rc = MOTE_OK;
    if (!found) {
        if (!(g = graph_new(&M->P)))
            rc = MOTE_NOMEM;
    } else if (t->write) { /* the state before the transaction's changes (an
                            * image is of a committed version: its vectors too) */
        mote_txn *v = NULL;
        if (!(rc = mote__kv_base_view(t, &v)))
            rc = graph_load(v, e, prop, tree, M, &g);
        mote__kv_view_end(v);
    } else {
        rc = graph_load(t, e, prop, tree, M, &g);
    }
    if (rc)
        return rc;
    graph_free(x->g);
    x->g = g;
    return MOTE_OK;
}

static void write_free(hwrite *w)
{
    if (!w->registered)
        over_free(w->o);
    search_free(&w->w.S);
    mote__free(w->w.c);
    mote__free(w);
}

/* The end of w's transaction (committed or not): its change becomes the
 * image's version if nobody folded it in yet; the pin goes. */
static void write_end(hwrite *w, int committed)
{
    hindex *x = w->x;
    pthread_rwlock_wrlock(&x->lock);
    if (w->registered && x->pending && x->pend_stamp == w->stamp) {
        if (committed && x->g && graph_apply(x->g, x->pending, x->pend_gen, x->pend_stamp)) {
            graph_free(x->g); /* (built again when needed) */
            x->g = NULL;
        }
        over_free(x->pending);
        x->pending = NULL;
    }
    if (x->pin == w->serial)
        x->pin = 0;
    pthread_rwlock_unlock(&x->lock);
    write_free(w);
}

void mote__hnsw_detach(mote_store *s)
{
    hstate *H = OBJ(s)->hnsw;
    if (!H)
        return;
    for (hwrite *w = H->writes, *nx; w; w = nx) {
        nx = w->next;
        write_end(w, 0);
    }
    for (hindex *x = H->list, *nx; x; x = nx) {
        nx = x->next;
        graph_free(x->g);
        over_free(x->pending);
        pthread_rwlock_destroy(&x->lock);
        mote__free(x);
    }
    mote__free(H->notes);
    pthread_mutex_destroy(&H->mu);
    mote__free(H);
    OBJ(s)->hnsw = NULL;
}

/* ---- notes and the flush ------------------------------------------------------------- */

/* The writer's state, for write transaction t. */
static hstate *writer_state(mote_txn *t)
{
    hstate *H = state_get(t->s);
    if (H && H->serial != t->serial) { /* the first use in this transaction */
        for (hwrite *w = H->writes, *nx; w; w = nx) { /* (a transaction that ended */
            nx = w->next;                             /* without telling: none) */
            write_end(w, 0);
        }
        H->writes = NULL;
        H->serial = t->serial;
        H->nnotes = 0;
    }
    return H;
}

int mote__hnsw_note(mote_txn *t, mote_entity *e, unsigned prop, uint64_t id)
{
    hstate *H = writer_state(t);
    if (!H)
        return MOTE_NOMEM;
    if (H->nnotes == H->capnotes) {
        size_t cap = H->capnotes ? H->capnotes * 2 : 64;
        hnote *nn = mote__realloc(H->notes, cap * sizeof *nn);
        if (!nn)
            return mote__err(MOTE_NOMEM, "out of memory (vector index)");
        H->notes = nn;
        H->capnotes = cap;
    }
    H->notes[H->nnotes++] = (hnote){e, e->eid, e->props[prop].id, id};
    return MOTE_OK;
}

static int cmp_note(const void *a, const void *b)
{
    const hnote *x = a, *y = b;
    if (x->eid != y->eid)
        return x->eid < y->eid ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int prop_of(const mote_entity *e, uint16_t pid)
{
    for (unsigned i = 0; i < e->nall; i++)
        if (e->props[i].id == pid)
            return (int)i;
    return -1;
}

static hwrite *write_find(const hstate *H, uint32_t eid, uint16_t pid)
{
    hwrite *w = H->writes;
    while (w && (w->x->eid != eid || w->x->pid != pid))
        w = w->next;
    return w;
}

/* The write transaction's work on an index, made at its first flush: the
 * image brought to the transaction's version of the index, and pinned. */
static int write_get(mote_txn *t, hstate *H, const mote_entity *e, unsigned prop, hwrite **out)
{
    const mprop *p = &e->props[prop];
    if ((*out = write_find(H, e->eid, p->id)))
        return MOTE_OK;
    hindex *x = index_get(H, e->eid, p->id);
    hwrite *w = x ? mote__calloc(1, sizeof *w) : NULL;
    if (!w)
        return mote__err(MOTE_NOMEM, "out of memory (vector index)");
    w->x = x;
    w->serial = t->serial;
    w->stamp = mix64(H->nonce ^ mix64(t->serial));
    int rc = meta_read(t, p->vindex_tree, &w->base, &w->base_found);
    if (!rc) {
        pthread_rwlock_wrlock(&x->lock);
        rc = image_follow(x, t, e, prop, p->vindex_tree, &w->base, w->base_found);
        if (!rc && !(w->o = over_new(x->g)))
            rc = MOTE_NOMEM;
        if (!rc)
            x->pin = t->serial;
        pthread_rwlock_unlock(&x->lock);
    }
    if (!rc)
        rc = search_init(&w->w.S, &(hview){x->g, w->o});
    if (rc) {
        write_free(w);
        return rc;
    }
    w->next = H->writes;
    H->writes = w;
    *out = w;
    return MOTE_OK;
}

/* The slot of id's node in the view (with an overlay), HNONE if none. */
static uint32_t view_slot(const hview *v, uint64_t id)
{
    uint32_t s = map_get(&v->o->ids, id);
    if (s != HNONE)
        return s;
    s = map_get(&v->g->map, id);
    if (s == HNONE)
        return HNONE;
    const onode *x = over_find(v->o, s);
    return x && x->del ? HNONE : s;
}

static int all_finite(const uint8_t *v, uint32_t dim)
{
    for (uint32_t i = 0; i < dim; i++) {
        float f;
        memcpy(&f, v + 4 * (size_t)i, 4);
        if (!isfinite(f))
            return 0;
    }
    return 1;
}

/* Write the overlay's changed nodes (one sorted batch) and the new state. */
static int write_out(mote_txn *t, hwrite *w, uint32_t tree)
{
    hview *v = &w->w.S.v;
    hover *o = v->o;
    size_t n = 0, bytes = 0;
    uint32_t all = o->n + o->ndense;
    for (uint32_t i = 0; i < all; i++) {
        const onode *x = over_at(o, i);
        if (x->dirty && (!x->del || x->stored)) {
            n++;
            bytes += 9 + (x->del ? 0 : 1 + (size_t)(x->lvl + 1) * (10 + 10 * (size_t)v->g->m0));
        }
    }
    uint64_t *order = mote__malloc((n + 1) * 16);
    mote_kvop *ops = mote__malloc((n + 1) * sizeof *ops);
    uint8_t *buf = mote__malloc(bytes + 1);
    int rc = !order || !ops || !buf ? mote__err(MOTE_NOMEM, "out of memory (vector index)")
                                    : MOTE_OK;
    if (!rc) {
        size_t k = 0;
        for (uint32_t i = 0; i < all; i++) {
            const onode *x = over_at(o, i);
            if (x->dirty && (!x->del || x->stored)) {
                order[2 * k] = x->id;
                order[2 * k + 1] = i;
                k++;
            }
        }
        qsort(order, n, 16, mote__cmp_u64); /* by id, the first of each pair */
        uint8_t *p = buf;
        size_t w = 0; /* ops written */
        for (size_t j = 0; j < n; j++) {
            const onode *x = over_at(o, (uint32_t)order[2 * j + 1]);
            /* an id removed and inserted again has two nodes: the live one
             * is written (ids are taken from the list in order) */
            if (j + 1 < n && order[2 * j + 2] == x->id && x->del)
                continue;
            if (j > 0 && order[2 * j - 2] == x->id && x->del)
                continue;
            size_t jw = w++;
            node_key(x->id, p);
            ops[jw].key = p;
            ops[jw].klen = 9;
            p += 9;
            ops[jw].del = x->del;
            ops[jw].val = p;
            ops[jw].vlen = x->del ? 0 : node_encode(v, x->slot, x->lvl, p);
            p += ops[jw].vlen;
        }
        uint64_t missing = 0;
        rc = mote__kv_apply(t, tree, ops, w, &missing);
        if (!rc && missing)
            rc = CORRUPT("vector index: %llu nodes to remove were not in it",
                         (unsigned long long)missing);
    }
    if (!rc) {
        for (uint32_t i = 0; i < all; i++) {
            onode *x = over_at(o, i);
            if (x->dirty) {
                x->dirty = 0;
                x->stored = !x->del;
            }
        }
        hmeta M = w->base;
        M.P = v->g->P;
        M.gen = w->base.gen + 1;
        M.stamp = w->stamp;
        M.count = o->live;
        M.entry = o->entry == HNONE ? 0 : v_id(v, o->entry);
        M.top = o->top;
        uint8_t mb[META_LEN];
        meta_encode(&M, mb);
        rc = mote_kv_put(t, tree, "m", 1, mb, META_LEN, 0);
    }
    mote__free(order);
    mote__free(ops);
    mote__free(buf);
    return rc;
}

/* Apply the notes n[0..cnt) of one index (sorted by id): remove the noted
 * nodes, then insert the noted objects that have a vector. */
static int flush_index(mote_txn *t, hstate *H, const hnote *n, size_t cnt)
{
    mote_entity *e = n[0].e;
    int prop = prop_of(e, n[0].pid);
    if (prop < 0 || !e->props[prop].vindex_tree)
        return MOTE_OK; /* the index was dropped since */
    const mprop *p = &e->props[prop];
    hwrite *w;
    int rc = write_get(t, H, e, (unsigned)prop, &w);
    if (rc)
        return rc;
    hview *v = &w->w.S.v;
    uint32_t *dead = mote__malloc((cnt + 1) * 4);
    float *row = mote__malloc((size_t)v->g->stride * 4);
    mote_cursor *oc = NULL;
    if (!dead || !row)
        rc = mote__err(MOTE_NOMEM, "out of memory (vector index)");
    size_t nd = 0;
    for (size_t i = 0; !rc && i < cnt; i++) {
        uint32_t s = i && n[i].id == n[i - 1].id ? HNONE : view_slot(v, n[i].id);
        if (s != HNONE)
            dead[nd++] = s;
    }
    if (!rc && nd)
        rc = remove_nodes(&w->w, dead, nd);
    if (!rc)
        rc = mote_cursor_open(t, e->eid, &oc);
    for (size_t i = 0; !rc && i < cnt; i++) {
        if (i && n[i].id == n[i - 1].id)
            continue;
        const uint8_t *vec;
        if ((rc = object_vector(e, (unsigned)prop, oc, n[i].id, &vec)) || !vec)
            continue;
        if (!all_finite(vec, p->dim)) {
            rc = mote__err(MOTE_RANGE, "%s.%s: object %llu: a vector with NaN or infinity "
                           "cannot be indexed", e->name, p->name,
                           (unsigned long long)n[i].id);
            break;
        }
        make_row(v->g->P.metric, vec, v->g->P.dim, v->g->stride, row);
        rc = insert(&w->w, n[i].id, row);
    }
    mote_cursor_close(oc);
    mote__free(dead);
    mote__free(row);
    if (!rc)
        rc = write_out(t, w, p->vindex_tree);
    if (!rc && !w->registered) { /* once this commits, the image becomes g + o */
        pthread_rwlock_wrlock(&w->x->lock);
        over_free(w->x->pending); /* (none: a pending change is folded in before a pin) */
        w->x->pending = w->o;
        w->x->pend_gen = w->base.gen + 1;
        w->x->pend_stamp = w->stamp;
        w->registered = 1;
        pthread_rwlock_unlock(&w->x->lock);
    }
    return rc;
}

int mote__hnsw_flush(mote_txn *t)
{
    hstate *H = OBJ(t->s)->hnsw;
    if (!H || H->serial != t->serial || !H->nnotes)
        return MOTE_OK;
    qsort(H->notes, H->nnotes, sizeof *H->notes, cmp_note);
    int rc = MOTE_OK;
    for (size_t i = 0, j; !rc && i < H->nnotes; i = j) {
        for (j = i + 1; j < H->nnotes && H->notes[j].eid == H->notes[i].eid &&
                        H->notes[j].pid == H->notes[i].pid;
             j++)
            ;
        rc = flush_index(t, H, H->notes + i, j - i);
    }
    H->nnotes = 0;
    if (rc && !t->failed)
        t->failed = rc; /* an overlay may be half changed: only abort is possible */
    return rc;
}

void mote__hnsw_forget(mote_txn *t, uint32_t eid, uint16_t pid)
{
    hstate *H = OBJ(t->s)->hnsw;
    if (!H || H->serial != t->serial)
        return;
    size_t k = 0;
    for (size_t i = 0; i < H->nnotes; i++)
        if (H->notes[i].eid != eid || H->notes[i].pid != pid)
            H->notes[k++] = H->notes[i];
    H->nnotes = k;
    for (hwrite **pw = &H->writes; *pw;) {
        hwrite *w = *pw;
        if (w->x->eid == eid && w->x->pid == pid) {
            *pw = w->next;
            write_end(w, 0);
        } else {
            pw = &w->next;
        }
    }
}

struct hwrite *mote__hnsw_take(mote_txn *t)
{
    hstate *H = OBJ(t->s)->hnsw;
    if (!H || H->serial != t->serial)
        return NULL;
    hwrite *w = H->writes;
    H->writes = NULL;
    H->nnotes = 0;
    H->serial = 0;
    return w;
}

void mote__hnsw_end(struct hwrite *taken, int committed)
{
    for (hwrite *w = taken, *nx; w; w = nx) {
        nx = w->next;
        write_end(w, committed);
    }
}

/* ---- mote check ---------------------------------------------------------------------- */

typedef struct cnode {
    uint64_t id;
    int lvl;
} cnode;

static int cmp_cnode(const void *a, const void *b)
{
    return mote__cmp_u64(&((const cnode *)a)->id, &((const cnode *)b)->id);
}

int mote__hnsw_check(mote_txn *t, const mote_entity *e, unsigned prop, uint64_t nvec,
                     mote_problems *pr)
{
    const mprop *p = &e->props[prop];
    hmeta M;
    int found, rc = meta_read(t, p->vindex_tree, &M, &found);
    if (rc) {
        mote__problem(pr, "%s.%s: vector index: %s", e->name, p->name, mote_errmsg(t->s));
        return MOTE_OK;
    }
    if (!found)
        M.count = 0;
    else if (M.P.metric != p->hmetric || M.P.m != p->hm || M.P.efc != p->hefc ||
             M.P.dim != p->dim)
        mote__problem(pr, "%s.%s: vector index parameters differ from the schema's", e->name,
                      p->name);
    cnode *nodes = NULL;
    size_t n = 0, cap = 0;
    uint64_t (*ids)[257] = mote__malloc(sizeof(uint64_t[HMAXL][257]));
    mote_cursor *c = NULL, *oc = NULL;
    rc = ids ? mote_cursor_open(t, p->vindex_tree, &c) : MOTE_NOMEM;
    if (!rc)
        rc = mote_cursor_open(t, e->eid, &oc);
    int maxlvl = -1;
    for (int pass = 1; pass <= 2 && !rc; pass++) {
        for (rc = mote_cursor_seek(c, "n", 1, MOTE_SEEK_GE); rc == MOTE_OK;
             rc = mote_cursor_next(c)) {
            mote_val k, v;
            if ((rc = mote_cursor_get(c, &k, &v)))
                break;
            const uint8_t *kp = k.data;
            uint64_t id = k.size == 9 ? mote__be64(kp + 1) : 0;
            int lvl;
            uint32_t cnt[HMAXL];
            if (k.size != 9 || kp[0] != 'n' || !id) {
                if (pass == 1)
                    mote__problem(pr, "%s.%s: vector index: a key of %zu bytes", e->name,
                                  p->name, k.size);
                continue;
            }
            if (!node_decode(v.data, v.size, M.P.m ? M.P.m : p->hm, &lvl, cnt, ids)) {
                if (pass == 1)
                    mote__problem(pr, "%s.%s: vector index: node %llu is damaged", e->name,
                                  p->name, (unsigned long long)id);
                continue;
            }
            if (pass == 1) {
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 256;
                    cnode *nn = mote__realloc(nodes, nc * sizeof *nn);
                    if (!nn) {
                        rc = MOTE_NOMEM;
                        break;
                    }
                    nodes = nn;
                    cap = nc;
                }
                nodes[n++] = (cnode){id, lvl};
                if (lvl > maxlvl)
                    maxlvl = lvl;
                const uint8_t *vec;
                if ((rc = object_vector(e, prop, oc, id, &vec)))
                    break;
                if (!vec)
                    mote__problem(pr, "%s.%s: vector index: node %llu has no object or no "
                                  "vector", e->name, p->name, (unsigned long long)id);
                continue;
            }
            for (int l = 0; l <= lvl; l++)
                for (uint32_t i = 0; i < cnt[l]; i++) {
                    cnode key = {ids[l][i], 0};
                    const cnode *to = bsearch(&key, nodes, n, sizeof *nodes, cmp_cnode);
                    if (!to || to->lvl < l || ids[l][i] == id)
                        mote__problem(pr, "%s.%s: vector index: node %llu links to %llu at "
                                      "level %d, %s", e->name, p->name,
                                      (unsigned long long)id, (unsigned long long)ids[l][i],
                                      l, !to ? "which is not in the index"
                                         : to->lvl < l ? "which is not on that level"
                                                       : "itself");
                }
        }
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
    }
    if (!rc) {
        if (n != M.count)
            mote__problem(pr, "%s.%s: vector index has %zu nodes, its state says %llu",
                          e->name, p->name, n, (unsigned long long)M.count);
        if (n != nvec)
            mote__problem(pr, "%s.%s: vector index has %zu nodes for %llu vectors", e->name,
                          p->name, n, (unsigned long long)nvec);
        cnode key = {M.entry, 0};
        const cnode *en = n ? bsearch(&key, nodes, n, sizeof *nodes, cmp_cnode) : NULL;
        if (n && (!en || en->lvl != M.top || M.top != maxlvl))
            mote__problem(pr, "%s.%s: vector index: its entry %llu is not a node of the top "
                          "level %d", e->name, p->name, (unsigned long long)M.entry, maxlvl);
    }
    mote_cursor_close(c);
    mote_cursor_close(oc);
    mote__free(nodes);
    mote__free(ids);
    return rc == MOTE_NOMEM ? mote__err(MOTE_NOMEM, "out of memory checking a vector index")
                            : rc;
}

/* Bytes of an image in memory. */
static uint64_t graph_bytes(const hgraph *g)
{
    uint64_t b = sizeof *g +
                 (uint64_t)g->cap * (g->stride * 4 + g->qdim + 8 + 8 + 1 +
                                     (g->m0 + 1) * 4 + 8) +
                 (g->qc ? (uint64_t)g->P.dim * 8 : 0) +
                 (uint64_t)g->freecap * 4 + (uint64_t)g->map.cap * 12;
    for (uint32_t s = 0; s < g->n; s++)
        if (g->up[s])
            b += (uint64_t)g->lvl[s] * (g->P.m + 1) * 4;
    return b;
}

int mote_vindex_stat(mote_txn *t, mote_entity *e, unsigned prop, mote_vstat *out)
{
    if (!t || !e || !out)
        return mote__err(MOTE_INVALID, "mote_vindex_stat: NULL argument");
    int rc = mote__obj_check(t, e, 0);
    if (rc)
        return rc;
    if (prop >= e->nprops || !e->props[prop].vindex_tree)
        return mote__err(MOTE_NOTFOUND, "%s: property %u has no vector index", e->name, prop);
    const mprop *p = &e->props[prop];
    memset(out, 0, sizeof *out);
    out->distance = p->hmetric;
    out->m = p->hm;
    out->ef_construction = p->hefc;
    out->dim = p->dim;
    if (t->write && (rc = mote__hnsw_flush(t)))
        return rc;
    uint64_t (*ids)[257] = mote__malloc(sizeof(uint64_t[HMAXL][257]));
    mote_cursor *c = NULL;
    if (!ids)
        return mote__err(MOTE_NOMEM, "out of memory");
    rc = mote_cursor_open(t, p->vindex_tree, &c);
    for (rc = rc ? rc : mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        int lvl;
        uint32_t cnt[HMAXL];
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        out->bytes += k.size + v.size;
        if (k.size != 9)
            continue;
        if (!node_decode(v.data, v.size, p->hm, &lvl, cnt, ids)) {
            rc = CORRUPT("%s.%s: vector index: a damaged node", e->name, p->name);
            break;
        }
        out->vectors++;
        if ((unsigned)lvl + 1 > out->levels)
            out->levels = (unsigned)lvl + 1;
        for (int l = 0; l <= lvl; l++)
            out->links += cnt[l];
    }
    mote_cursor_close(c);
    mote__free(ids);
    if (rc != MOTE_NOTFOUND)
        return rc;
    hstate *H = OBJ(e->s)->hnsw;
    hindex *x = NULL;
    if (H) {
        pthread_mutex_lock(&H->mu);
        for (x = H->list; x && (x->eid != e->eid || x->pid != p->id); x = x->next)
            ;
        pthread_mutex_unlock(&H->mu);
    }
    if (x) {
        pthread_rwlock_rdlock(&x->lock);
        out->memory = x->g ? graph_bytes(x->g) : 0;
        pthread_rwlock_unlock(&x->lock);
    }
    return MOTE_OK;
}

/* ---- searching ------------------------------------------------------------------------ */

int mote__hnsw_size(mote_txn *t, const mote_entity *e, unsigned prop, uint64_t *n)
{
    hmeta M;
    int found, rc;
    *n = 0;
    if (!e->props[prop].vindex_tree)
        return MOTE_OK;
    if (t->write && (rc = mote__hnsw_flush(t)))
        return rc;
    hstate *H = state_get(t->s);
    hindex *x = H ? index_get(H, e->eid, e->props[prop].id) : NULL;
    rc = x ? meta_get(H, x, t, e->props[prop].vindex_tree, &M, &found) : MOTE_NOMEM;
    if (!rc && found)
        *n = M.count;
    return rc;
}

/*
 * The exact distances of res[0..n) (nearest first by 8-bit distance) in
 * that order until the next one's 8-bit distance, less twice the largest
 * error an exact one showed so far, is past the want-th nearest exact
 * distance (at least want are taken); those sorted nearest first, their
 * number returned (QUANTIZED ROWS). Rows are fetched whole, RAHEAD ahead of
 * the one compared (most searches stop after a few more than want: asking
 * for every row's first line at once fetched lines never used).
 */
#define RAHEAD 2 /* float rows fetched ahead of the one reranked */

static size_t rerank(hsearch *S, const float *q, hcand *res, size_t n, size_t want)
{
    const hview *v = &S->v;
    size_t bytes = (size_t)v->g->stride * sizeof(float);
    for (size_t i = 0; i < n && i < RAHEAD; i++)
        fetch_bytes(v_vec(v, res[i].s), bytes);
    hcand *best = S->top; /* a max-heap of the want nearest exact ones */
    size_t nb = 0, i = 0;
    float err = 0;
    for (; i < n; i++) {
        float byte = res[i].d;
        if (nb && nb == want && byte - 2 * err > best[0].d)
            break;
        if (i + RAHEAD < n)
            fetch_bytes(v_vec(v, res[i + RAHEAD].s), bytes);
        res[i].d = dist(S, v_vec(v, res[i].s), q);
        float e = fabsf(res[i].d - byte);
        err = e > err ? e : err;
        if (nb < want)
            heap_push(best, &nb, res[i], 1);
        else if (above(best[0], res[i], 1))
            heap_replace(best, nb, res[i], 1);
    }
    qsort(res, i, sizeof *res, cmp_cand);
    return i;
}

/* Under the index's read lock: search view v (entry, top) for r->want
 * nearest to r->vec, through r->accept if any; r->ids (and r->dist). */
static int search_view(const hview *v, uint32_t entry, int top, hnear *r)
{
    hsearch S;
    const hgraph *g = v->g;
    size_t ef = r->ef > r->want ? r->ef : (size_t)r->want;
    float *q = mote__malloc((size_t)g->stride * 4);
    /* the image alone: compare 8-bit rows, then float rows (rerank) */
    int quant = !v->o && g->qc;
    uint8_t *qq = quant ? mote__malloc(g->qdim) : NULL;
    float *qx = quant ? mote__malloc((size_t)g->P.dim * sizeof *qx) : NULL; /* q less the centre */
    hcand *res = NULL;
    uint64_t *out = NULL;
    double *dists = NULL;
    size_t got = 0;
    search_init(&S, v);
    S.accept = r->accept;
    S.actx = r->actx;
    int rc = q && ((qq && qx) || !quant) ? MOTE_OK
                                         : mote__err(MOTE_NOMEM, "out of memory (vector search)");
    if (!rc && entry != HNONE) {
        make_row(r->metric, (const uint8_t *)r->vec, g->P.dim, g->stride, q);
        if (quant) {
            double sums[3]; /* the query less the centre too, q' (qdist) */
            centred(g, q, qx, sums);
            S.qnorm = (float)sums[0];
            S.qcd = (float)sums[2];
            S.qscale = quantize(qx, g->P.dim, g->qdim, qq, 0);
            S.qq = (const int8_t *)qq;
            int32_t sum = 0;
            for (uint32_t i = 0; i < g->P.dim; i++)
                sum += S.qq[i];
            S.qbias = 128 * sum;
        }
        float dep = quant ? qdist(&S, entry) : dist(&S, v_vec(v, entry), q);
        for (int l = top; l > 0; l--)
            greedy(&S, q, &entry, &dep, l);
        if (!(rc = search_level(&S, q, entry, dep, ef, 0)) &&
            !(res = mote__malloc((S.nt + 1) * sizeof *res)))
            rc = mote__err(MOTE_NOMEM, "out of memory (vector search)");
        if (!rc)
            got = take_results(&S, res);
        if (quant && got)
            got = rerank(&S, q, res, got, r->want);
    }
    if (got > r->want)
        got = (size_t)r->want;
    int rows = r->rowdist != NULL;
    if (!rc && (!(out = mote__malloc((got + 1) * 8)) ||
                (rows && !(dists = mote__malloc((got + 1) * sizeof *dists)))))
        rc = mote__err(MOTE_NOMEM, "out of memory (vector search)");
    for (size_t i = 0; !rc && i < got; i++) {
        out[i] = v_id(v, res[i].s);
        if (rows)
            dists[i] = r->rowdist(r->dctx, (const uint8_t *)(v_vec(v, res[i].s) + g->off));
    }
    search_free(&S);
    mote__free(q);
    mote__free(qq);
    mote__free(qx);
    mote__free(res);
    if (rc) {
        mote__free(out);
        mote__free(dists);
        return rc;
    }
    r->ids = out;
    r->dist = dists;
    r->n = got;
    return MOTE_OK;
}

int mote__hnsw_nearest(mote_txn *t, const mote_entity *e, unsigned prop, hnear *r)
{
    const mprop *p = &e->props[prop];
    r->ids = NULL;
    r->dist = NULL;
    r->n = 0;
    r->served = 0;
    if (!p->vindex_tree || p->hmetric != r->metric)
        return MOTE_OK;
    hstate *H = state_get(t->s);
    if (!H)
        return MOTE_NOMEM;
    int found, rc;
    hwrite *w = NULL;
    if (t->write) { /* this transaction's own changes first */
        if ((rc = mote__hnsw_flush(t)))
            return rc;
        if (H->serial == t->serial)
            w = write_find(H, e->eid, p->id);
    }
    hmeta M;
    hindex *x = w ? w->x : index_get(H, e->eid, p->id);
    if (!x)
        return MOTE_NOMEM;
    if ((rc = meta_get(H, x, t, p->vindex_tree, &M, &found)) || !found ||
        (!r->force && M.count < MOTE_HNSW_EXACT_BELOW))
        return rc;
    if (!r->ef)
        r->ef = MOTE_HNSW_EF;
    if (w) { /* the image is pinned under the overlay */
        pthread_rwlock_rdlock(&x->lock);
        hview v = {x->g, w->o};
        rc = search_view(&v, w->o->entry, w->o->top, r);
        pthread_rwlock_unlock(&x->lock);
        r->served = !rc;
        return rc;
    }
    pthread_rwlock_rdlock(&x->lock);
    while (!(x->g && x->g->stamp == M.stamp)) {
        /* another version: fold in the pending change that makes this one,
         * or build the image again if this one is newer and nobody's
         * overlay rests on it; else (an older snapshot) search exactly */
        pthread_rwlock_unlock(&x->lock);
        pthread_rwlock_wrlock(&x->lock);
        int follow = !(x->g && x->g->stamp == M.stamp) &&
                     ((x->pending && x->pend_stamp == M.stamp) ||
                      (!x->pin && (!x->g || M.gen > x->g->gen)));
        if (follow)
            rc = image_follow(x, t, e, prop, p->vindex_tree, &M, 1);
        int now = !rc && x->g && x->g->stamp == M.stamp;
        pthread_rwlock_unlock(&x->lock);
        if (rc || !now)
            return rc;
        pthread_rwlock_rdlock(&x->lock);
    }
    hview v = {x->g, NULL};
    rc = search_view(&v, x->g->entry, x->g->top, r);
    pthread_rwlock_unlock(&x->lock);
    r->served = !rc;
    return rc;
}
