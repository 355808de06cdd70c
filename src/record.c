/*
 * record.c — values, records and index keys of the object layer. The record
 * and index key formats are described in object.h.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "object.h"

uint32_t mote__type_size(int t)
{
    switch (t) {
    case MOTE_T_BOOL:
    case MOTE_T_INT8: return 1;
    case MOTE_T_INT16: return 2;
    case MOTE_T_INT32:
    case MOTE_T_FLOAT32:
    case MOTE_T_DATE: return 4;
    case MOTE_T_INT64:
    case MOTE_T_FLOAT64:
    case MOTE_T_TIMESTAMP:
    case MOTE_T_TOONE: return 8;
    case MOTE_T_TOMANY: return 0;
    default: return 4; /* variable: u32 end offset */
    }
}

const char *mote__type_name(int t)
{
    static const char *names[] = {"?", "bool", "int8", "int16", "int32", "int64",
                                  "float32", "float64", "string", "bytes", "timestamp",
                                  "date", "decimal", "json", "vector", "to-one",
                                  "to-many"};
    return t >= 1 && t <= MOTE_T_TOMANY ? names[t] : "unknown";
}

int mote__value_check(const mprop *p, const mote_value *v, const char *entity)
{
    if (p->type == MOTE_T_TOMANY)
        return MOTE_OK; /* not stored in the record */
    if (v->null) {
        if (!(p->flags & MOTE_P_NULLABLE))
            return mote__err(MOTE_TYPE, "%s.%s: NULL in a property that is not "
                             "nullable", entity, p->name);
        return MOTE_OK;
    }
    int64_t i = v->v.i;
    switch (p->type) {
    case MOTE_T_INT8:
        if (i < INT8_MIN || i > INT8_MAX)
            goto range;
        break;
    case MOTE_T_INT16:
        if (i < INT16_MIN || i > INT16_MAX)
            goto range;
        break;
    case MOTE_T_INT32:
    case MOTE_T_DATE:
        if (i < INT32_MIN || i > INT32_MAX)
            goto range;
        break;
    case MOTE_T_TOONE:
        if (i < 0)
            return mote__err(MOTE_RANGE, "%s.%s: %lld is not an object id", entity,
                             p->name, (long long)i);
        break;
    case MOTE_T_FLOAT32:
        if (isfinite(v->v.f) && fabs(v->v.f) > FLT_MAX)
            return mote__err(MOTE_RANGE, "%s.%s: %g is out of range for float32",
                             entity, p->name, v->v.f);
        break;
    case MOTE_T_STRING:
    case MOTE_T_BYTES:
    case MOTE_T_DECIMAL:
    case MOTE_T_JSON:
        if (!v->v.s.p && v->v.s.n)
            return mote__err(MOTE_INVALID, "%s.%s: NULL pointer with %zu bytes",
                             entity, p->name, v->v.s.n);
        if (v->v.s.n > MOTE_MAX_VALUE)
            return mote__err(MOTE_TOOBIG, "%s.%s: a value of %zu bytes is over the limit "
                             "of %u bytes (1 GiB) per value", entity, p->name, v->v.s.n,
                             MOTE_MAX_VALUE);
        break;
    case MOTE_T_VECTOR:
        if (v->v.s.n != (size_t)p->dim * 4 || (!v->v.s.p && v->v.s.n))
            return mote__err(MOTE_TYPE, "%s.%s: vector of %zu bytes, expected %u "
                             "floats", entity, p->name, v->v.s.n, p->dim);
        for (uint32_t k = 0; (p->flags & MOTE_P_HNSW) && k < p->dim; k++) {
            float f;
            memcpy(&f, (const uint8_t *)v->v.s.p + 4 * (size_t)k, 4);
            if (!isfinite(f))
                return mote__err(MOTE_RANGE, "%s.%s: component %u of the vector is %s: an "
                                 "indexed vector must be finite", entity, p->name, k,
                                 isnan(f) ? "NaN" : "infinite");
        }
        break;
    default:
        break;
    }
    return MOTE_OK;
range:
    return mote__err(MOTE_RANGE, "%s.%s: %lld is out of range for %s", entity, p->name,
                     (long long)i, mote__type_name(p->type));
}

static void put_fixed(uint8_t *dst, int type, const mote_value *v)
{
    switch (type) {
    case MOTE_T_BOOL: *dst = v->v.i != 0; break;
    case MOTE_T_INT8: *dst = (uint8_t)(int8_t)v->v.i; break;
    case MOTE_T_INT16: wr16(dst, (uint16_t)(int16_t)v->v.i); break;
    case MOTE_T_INT32:
    case MOTE_T_DATE: wr32(dst, (uint32_t)(int32_t)v->v.i); break;
    case MOTE_T_INT64:
    case MOTE_T_TIMESTAMP:
    case MOTE_T_TOONE: wr64(dst, (uint64_t)v->v.i); break;
    case MOTE_T_FLOAT32: {
        float f = (float)v->v.f;
        memcpy(dst, &f, 4);
        break;
    }
    case MOTE_T_FLOAT64: memcpy(dst, &v->v.f, 8); break;
    }
}

int mote__record_size(const mote_entity *e, const mote_value *vals, size_t *len)
{
    const mlayout *L = &e->layouts[e->nlayouts - 1];
    size_t total = mote__varint_size(e->nlayouts - 1) + (L->n + 7) / 8 + L->fixed;
    for (unsigned i = 0; i < e->nall; i++)
        if (type_is_var(e->props[i].type) && !vals[i].null)
            total += vals[i].v.s.n;
    if (total > MOTE_MAX_VALUE)
        return mote__err(MOTE_TOOBIG, "%s: an object of %zu bytes is over the limit of %u "
                         "bytes (1 GiB) per object", e->name, total, MOTE_MAX_VALUE);
    *len = total;
    return MOTE_OK;
}

void mote__record_write(const mote_entity *e, const mote_value *vals, uint8_t *r)
{
    const mlayout *L = &e->layouts[e->nlayouts - 1];
    unsigned hl = mote__varint_put(r, e->nlayouts - 1);
    size_t nb = (L->n + 7) / 8;
    uint8_t *nulls = r + hl, *fixed = nulls + nb, *var = fixed + L->fixed;
    memset(nulls, 0, nb + L->fixed);
    uint32_t vend = 0;
    for (unsigned i = 0; i < e->nall; i++) {
        int32_t j = L->slot_of[i]; /* slots are in property order */
        if (j < 0)
            continue; /* to-many: no slot */
        const mote_value *v = &vals[i];
        uint8_t *slot = fixed + L->off[j];
        int null = v->null || (L->type[j] == MOTE_T_TOONE && v->v.i == 0);
        if (null)
            nulls[j >> 3] |= (uint8_t)(1u << (j & 7));
        if (type_is_var(L->type[j])) {
            if (!v->null && v->v.s.n) {
                memcpy(var + vend, v->v.s.p, v->v.s.n);
                vend += (uint32_t)v->v.s.n;
            }
            wr32(slot, vend);
        } else if (!null) {
            put_fixed(slot, L->type[j], v);
        }
    }
}

int mote__record_encode(const mote_entity *e, const mote_value *vals, uint8_t **buf,
                        size_t *cap, size_t *len)
{
    int rc = mote__record_size(e, vals, len);
    if (!rc)
        rc = mote__grow(buf, cap, *len);
    if (!rc)
        mote__record_write(e, vals, *buf);
    return rc;
}

/* Layout of a record, with the offsets of its parts. */
static inline int rec_parts(const mote_entity *e, const uint8_t *rec, size_t len,
                            const mlayout **L, size_t *nulls)
{
    uint64_t ln;
    unsigned a = mote__varint_fast(rec, rec + len, &ln);
    if (!a || ln >= e->nlayouts)
        return CORRUPT("%s: record with unknown layout", e->name);
    *L = &e->layouts[ln];
    *nulls = a;
    if (a + ((*L)->n + 7) / 8 + (*L)->fixed > len)
        return CORRUPT("%s: record shorter than its layout", e->name);
    return MOTE_OK;
}

static int check_parts(const mote_entity *e, const uint8_t *rec, size_t len,
                       const mlayout *L, size_t nulls);

int mote__record_check(const mote_entity *e, const uint8_t *rec, size_t len)
{
    const mlayout *L = NULL;
    size_t nulls = 0;
    int rc = rec_parts(e, rec, len, &L, &nulls);
    return rc ? rc : check_parts(e, rec, len, L, nulls);
}

int mote__record_init(mote_record *r, const mote_entity *e, const uint8_t *rec, size_t len,
                      uint64_t id)
{
    const mlayout *L = NULL;
    size_t nulls = 0;
    int rc = rec_parts(e, rec, len, &L, &nulls);
    if (!rc)
        rc = check_parts(e, rec, len, L, nulls);
    r->e = e;
    r->data = rec;
    r->size = len;
    r->id = id;
    r->distance = 0;
    r->layout_ = rc ? NULL : L;
    r->nulls_ = nulls;
    return rc;
}

static int check_parts(const mote_entity *e, const uint8_t *rec, size_t len,
                       const mlayout *L, size_t nulls)
{
    /* the variable slots' end offsets, last to first: each within the
     * record and none below the one before it */
    const uint8_t *fixed = rec + nulls + (L->n + 7) / 8;
    size_t room = len - (size_t)(fixed + L->fixed - rec);
    for (int32_t j = L->last_var; j >= 0; j = L->prev_var[j]) {
        uint32_t end = rd32(fixed + L->off[j]);
        if (end > room)
            return CORRUPT("%s: record's variable data out of bounds", e->name);
        room = end;
    }
    return MOTE_OK;
}

int mote_record_get(const mote_record *r, unsigned prop, mote_value *out, int *absent)
{
    if (!r || !out || !r->e || prop >= r->e->nall)
        return mote__err(MOTE_INVALID, "mote_record_get: bad argument");
    const mote_entity *e = r->e;
    const mlayout *L = r->layout_;
    size_t nulls = r->nulls_;
    if (!L) {
        int rc = rec_parts(e, r->data, r->size, &L, &nulls);
        if (rc)
            return rc;
    }
    int32_t j = L->slot_of[prop];
    int type = e->props[prop].type;
    memset(out, 0, sizeof *out);
    if (absent)
        *absent = j < 0;
    if (j < 0) { /* the record predates the property */
        out->null = (e->props[prop].flags & MOTE_P_NULLABLE) != 0;
        return MOTE_OK;
    }
    const uint8_t *nb = r->data + nulls, *fixed = nb + (L->n + 7) / 8;
    if (nb[j >> 3] & (1u << (j & 7))) {
        /* in a property that is not nullable: written while it was not
         * declared (a kept property), or before it became non-nullable */
        out->null = 1;
        if (absent && !(e->props[prop].flags & MOTE_P_NULLABLE))
            *absent = 1;
        return MOTE_OK;
    }
    const uint8_t *slot = fixed + L->off[j];
    switch (type) {
    case MOTE_T_BOOL: out->v.i = *slot != 0; break;
    case MOTE_T_INT8: out->v.i = (int8_t)*slot; break;
    case MOTE_T_INT16: out->v.i = (int16_t)rd16(slot); break;
    case MOTE_T_INT32:
    case MOTE_T_DATE: out->v.i = (int32_t)rd32(slot); break;
    case MOTE_T_INT64:
    case MOTE_T_TIMESTAMP:
    case MOTE_T_TOONE: out->v.i = (int64_t)rd64(slot); break;
    case MOTE_T_FLOAT32: {
        float f;
        memcpy(&f, slot, 4);
        out->v.f = f;
        break;
    }
    case MOTE_T_FLOAT64: memcpy(&out->v.f, slot, 8); break;
    default: {
        const uint8_t *var = fixed + L->fixed;
        uint32_t end = rd32(slot);
        uint32_t start = L->prev_var[j] < 0 ? 0 : rd32(fixed + L->off[L->prev_var[j]]);
        if (start > end || (size_t)(var - r->data) + end > r->size)
            return CORRUPT("%s: record's variable data out of bounds", e->name);
        out->v.s.p = var + start;
        out->v.s.n = end - start;
    }
    }
    return MOTE_OK;
}

/* ---- index keys and comparisons ------------------------------------------- */

static uint64_t float_bits(double f)
{
    if (isnan(f))
        return UINT64_MAX; /* NaN sorts last */
    if (f == 0)
        f = 0; /* -0.0 == 0.0 */
    uint64_t b;
    memcpy(&b, &f, 8);
    return (b >> 63) ? ~b : b | (1ull << 63);
}

size_t mote__index_enc(int type, const mote_value *v, uint8_t *out, int *cut)
{
    *cut = 0;
    if (v->null || (type == MOTE_T_TOONE && v->v.i == 0)) { /* to-one 0: none */
        out[0] = 0;
        return 1;
    }
    out[0] = 1;
    if (type_is_float(type)) {
        double f = type == MOTE_T_FLOAT32 ? (double)(float)v->v.f : v->v.f;
        mote__wr_be64(out + 1, float_bits(f));
        return 9;
    }
    if (!type_is_var(type)) {
        int64_t i = type == MOTE_T_BOOL ? v->v.i != 0 : v->v.i;
        mote__wr_be64(out + 1, (uint64_t)i ^ (1ull << 63));
        return 9;
    }
    /* the bytes, NUL escaped as 00 FF, then 00 00; a byte is written only
     * while o + 2 <= IDX_MAX_VALUE, else the key is cut there */
    const uint8_t *s = v->v.s.p, *end = s + v->v.s.n;
    size_t o = 1;
    while (s < end) {
        const uint8_t *z = memchr(s, 0, (size_t)(end - s));
        size_t run = (size_t)((z ? z : end) - s);
        size_t room = o + 1 < IDX_MAX_VALUE ? IDX_MAX_VALUE - 1 - o : 0;
        if (run > room) {
            memcpy(out + o, s, room);
            *cut = 1;
            return o + room;
        }
        memcpy(out + o, s, run);
        o += run;
        s += run;
        if (s < end) { /* a NUL */
            if (o + 2 > IDX_MAX_VALUE) {
                *cut = 1;
                return o;
            }
            out[o++] = 0;
            out[o++] = 0xFF;
            s++;
        }
    }
    out[o++] = 0;
    out[o++] = 0;
    return o;
}

size_t mote__json_num_key(double d, uint8_t *out)
{
    out[0] = 1;
    out[1] = JKEY_NUMBER;
    mote__wr_be64(out + 2, float_bits(d));
    return 10;
}

size_t mote__json_str_key(const void *s, size_t n, uint8_t *out, int *cut)
{
    mote_value v = {.v.s = {s, n}};
    size_t l = mote__index_enc(MOTE_T_STRING, &v, out + 1, cut); /* 0x01, the bytes */
    out[0] = 1;
    out[1] = JKEY_STRING;
    return l + 1;
}

size_t mote__json_index_enc(const struct jpath *jp, const mote_value *v, uint8_t *out)
{
    jval x = {J_ABSENT, NULL, 0};
    double d;
    int cut;
    if (!v->null)
        mote__json_at(v->v.s.p, v->v.s.n, jp, &x);
    if (x.kind == J_ABSENT || x.kind == J_NULL) {
        out[0] = 0;
        return 1;
    }
    if (mote__json_num(&x, &d))
        return mote__json_num_key(d, out);
    if (x.kind == J_STRING) { /* decoded; past IDX_MAX_VALUE bytes the key is cut anyway */
        uint8_t s[IDX_MAX_VALUE + 1];
        size_t n = mote__json_str(&x, s, sizeof s);
        return mote__json_str_key(s, n < sizeof s ? n : sizeof s, out, &cut);
    }
    out[0] = 1;
    out[1] = JKEY_OTHER;
    return 2;
}

int mote__value_cmp(int type, const mote_value *a, const mote_value *b)
{
    if (type_is_float(type)) {
        uint64_t x = float_bits(a->v.f), y = float_bits(b->v.f);
        return (x > y) - (x < y);
    }
    if (!type_is_var(type))
        return (a->v.i > b->v.i) - (a->v.i < b->v.i);
    size_t m = a->v.s.n < b->v.s.n ? a->v.s.n : b->v.s.n;
    int r = m ? memcmp(a->v.s.p, b->v.s.p, m) : 0;
    return r ? r : (a->v.s.n > b->v.s.n) - (a->v.s.n < b->v.s.n);
}
