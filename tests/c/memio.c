/* memio.c — the in-memory I/O shim (see memio.h). */
#include "memio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/file.h>


/* memio's own PRNG, so the shim also links into the fuzzers */
static uint64_t mrand(uint64_t *st)
{
    uint64_t x = *st ? *st : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *st = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static int op(memio *m)
{
    m->ops++;
    if (m->crash_at && m->ops >= m->crash_at)
        m->crashed = 1;
    if (m->crashed)
        return -EIO;
    if (m->fail_at && m->ops == m->fail_at)
        return -m->fail_errno;
    return 0;
}

static memio_file *find(memio *m, const char *path)
{
    for (int i = 0; i < m->nfiles; i++)
        if (!strcmp(m->files[i].path, path))
            return &m->files[i];
    return NULL;
}

static memio_file *by_fd(memio *m, int fd)
{
    if (fd < 0 || fd >= 64 || !m->fd_file[fd])
        return NULL;
    return &m->files[m->fd_file[fd] - 1];
}

static void ensure(uint8_t **b, size_t *cap, size_t need)
{
    if (need <= *cap && *b)
        return;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    *b = realloc(*b, n);
    memset(*b + *cap, 0, n - *cap);
    *cap = n;
}

static int m_open(void *ctx, const char *path, int flags, int mode)
{
    memio *m = ctx;
    (void)mode;
    int r = op(m);
    m->opens++;
    if (r)
        return r;
    memio_file *f = find(m, path);
    if (f && (flags & O_CREAT) && (flags & O_EXCL))
        return -EEXIST;
    if (!f) {
        if (!(flags & O_CREAT))
            return -ENOENT;
        f = &m->files[m->nfiles++];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "%s", path);
    }
    for (int fd = 3; fd < 64; fd++)
        if (!m->fd_file[fd]) {
            m->fd_file[fd] = (int)(f - m->files) + 1;
            return fd;
        }
    return -EMFILE;
}

static int m_close(void *ctx, int fd)
{
    memio *m = ctx;
    m->closes++;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    f->lock_mode = 0;
    m->fd_file[fd] = 0;
    return 0; /* close always releases, crashed or not */
}

static ssize_t m_pread(void *ctx, int fd, void *buf, size_t n, uint64_t off)
{
    memio *m = ctx;
    int r = op(m);
    m->reads++;
    if (r)
        return r;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    if (off >= f->cur_len)
        return 0;
    size_t k = f->cur_len - off < n ? f->cur_len - off : n;
    memcpy(buf, f->cur + off, k);
    return (ssize_t)k;
}

static ssize_t do_write(memio *m, memio_file *f, const void *buf, size_t n, uint64_t off)
{
    ensure(&f->cur, &f->cap, off + n);
    memcpy(f->cur + off, buf, n);
    if (off + n > f->cur_len)
        f->cur_len = off + n;
    if (f->nlog == f->cap_log) {
        f->cap_log = f->cap_log ? f->cap_log * 2 : 64;
        f->log = realloc(f->log, f->cap_log * sizeof *f->log);
    }
    memio_write *w = &f->log[f->nlog++];
    w->off = off;
    w->len = n;
    w->data = malloc(n ? n : 1);
    memcpy(w->data, buf, n);
    (void)m;
    return (ssize_t)n;
}

static ssize_t m_pwrite(void *ctx, int fd, const void *buf, size_t n, uint64_t off)
{
    memio *m = ctx;
    int r = op(m);
    m->writes++;
    memio_file *f = by_fd(m, fd);
    if (r && m->fail_short && !m->crashed && f) /* short write: half lands */
        return do_write(m, f, buf, n / 2, off);
    if (r)
        return r;
    if (!f)
        return -EBADF;
    return do_write(m, f, buf, n, off);
}

static ssize_t m_pwritev(void *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off)
{
    memio *m = ctx;
    int r = op(m);
    m->writes++;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    size_t limit = total;
    if (r) {
        if (!m->fail_short || m->crashed)
            return r;
        limit = total / 2;
    }
    size_t done = 0;
    for (int i = 0; i < cnt && done < limit; i++) {
        size_t k = iov[i].iov_len < limit - done ? iov[i].iov_len : limit - done;
        do_write(m, f, iov[i].iov_base, k, off + done);
        done += k;
    }
    return (ssize_t)done;
}

static int m_fdatasync(void *ctx, int fd)
{
    memio *m = ctx;
    int r = op(m);
    m->syncs++;
    if (r)
        return r;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    ensure(&f->dur, &f->dur_cap, f->cur_len);
    memcpy(f->dur, f->cur, f->cur_len);
    f->dur_len = f->cur_len;
    for (size_t i = 0; i < f->nlog; i++)
        free(f->log[i].data);
    f->nlog = 0;
    return 0;
}

static int m_fsync_dir(void *ctx, const char *path)
{
    memio *m = ctx;
    (void)path;
    int r = op(m);
    m->dirsyncs++;
    return r;
}

/* The name goes; descriptors open on the file keep it (its slot stays). */
static int m_unlink(void *ctx, const char *path)
{
    memio *m = ctx;
    int r = op(m);
    memio_file *f = r ? NULL : find(m, path);
    if (r || !f)
        return r ? r : -ENOENT;
    f->path[0] = 0;
    return 0;
}

static int m_flock(void *ctx, int fd, int opn)
{
    memio *m = ctx;
    int r = op(m);
    m->locks++;
    if (r)
        return r;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    f->lock_mode = (opn & LOCK_EX) ? 2 : (opn & LOCK_SH) ? 1 : 0;
    return 0;
}

static int m_fstat(void *ctx, int fd, mote_fileinfo *fi)
{
    memio *m = ctx;
    int r = op(m);
    m->stats++;
    if (r)
        return r;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    fi->size = f->cur_len;
    fi->dev = 0xEEEE + (uint64_t)(uintptr_t)m; /* distinct per memio */
    fi->ino = (uint64_t)(f - m->files) + 1;
    fi->uid = 0;
    fi->mode = 0644;
    return 0;
}

static int m_ftruncate(void *ctx, int fd, uint64_t size)
{
    memio *m = ctx;
    int r = op(m);
    m->truncs++;
    if (r)
        return r;
    memio_file *f = by_fd(m, fd);
    if (!f)
        return -EBADF;
    ensure(&f->cur, &f->cap, size);
    if (size < f->cur_len)
        memset(f->cur + size, 0, f->cur_len - size);
    f->cur_len = size;
    return 0;
}

void memio_init(memio *m)
{
    memset(m, 0, sizeof *m);
    /* no lock/map/...: stores on these files open exclusively (share.c) */
    m->io = (mote_io){m, m_open, m_close, m_pread, m_pwrite, m_pwritev,
                      m_fdatasync, m_fsync_dir, m_flock, m_fstat, m_ftruncate,
                      NULL, NULL, NULL, m_unlink, NULL, NULL};
}

void memio_free(memio *m)
{
    for (int i = 0; i < m->nfiles; i++) {
        memio_file *f = &m->files[i];
        for (size_t k = 0; k < f->nlog; k++)
            free(f->log[k].data);
        free(f->log);
        free(f->cur);
        free(f->dur);
    }
    m->nfiles = 0;
}

void memio_set(memio *m, const char *path, const uint8_t *img, size_t len)
{
    memio_file *f = find(m, path);
    if (!f) {
        f = &m->files[m->nfiles++];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "%s", path);
    }
    for (size_t k = 0; k < f->nlog; k++)
        free(f->log[k].data);
    f->nlog = 0;
    ensure(&f->cur, &f->cap, len);
    ensure(&f->dur, &f->dur_cap, len);
    memset(f->cur, 0, f->cap);
    memcpy(f->cur, img, len);
    memcpy(f->dur, img, len);
    f->cur_len = f->dur_len = len;
}

const uint8_t *memio_get(memio *m, const char *path, size_t *len)
{
    memio_file *f = find(m, path);
    if (!f)
        return NULL;
    *len = f->cur_len;
    return f->cur;
}

uint8_t *memio_crash_image(memio *m, const char *path, uint64_t seed, unsigned how,
                           size_t *len)
{
    memio_file *f = find(m, path);
    size_t n = f->dur_len;
    for (size_t i = 0; i < f->nlog; i++)
        if (f->log[i].off + f->log[i].len > n)
            n = f->log[i].off + f->log[i].len;
    uint8_t *img = calloc(1, n ? n : 1);
    if (f->dur_len)
        memcpy(img, f->dur, f->dur_len);
    uint64_t rs = seed | 1;
    /* mode per image: 0 = every sector a coin flip; 1 = all writes land;
     * 2 = none; 3 = a prefix of the writes lands (in order); 4 = every
     * write a coin flip, whole (the disk reordered requests, lost some) */
    int mode = (int)(mrand(&rs) % (how & MEMIO_WHOLE ? 5 : 4)), hostile = how & MEMIO_HOSTILE;
    size_t prefix = f->nlog ? (size_t)(mrand(&rs) % (f->nlog + 1)) : 0;
    size_t len_used = f->dur_len;
    for (size_t i = 0; i < f->nlog; i++) {
        memio_write *w = &f->log[i];
        int whole = mode == 4 && (mrand(&rs) & 1);
        for (size_t s = 0; s < w->len; s += 512) {
            size_t k = w->len - s < 512 ? w->len - s : 512;
            int apply = mode == 1 || (mode == 3 && i < prefix) || whole ||
                        (mode == 0 && (mrand(&rs) & 1));
            if (apply) {
                memcpy(img + w->off + s, w->data + s, k);
            } else if (hostile && mode == 0 && (mrand(&rs) % 8) == 0) {
                for (size_t b = 0; b < k; b++)
                    img[w->off + s + b] = (uint8_t)mrand(&rs);
            } else {
                continue;
            }
            if (w->off + s + k > len_used)
                len_used = w->off + s + k;
        }
    }
    *len = len_used;
    return img;
}

void memio_reset_counts(memio *m)
{
    m->ops = m->opens = m->closes = m->reads = m->writes = m->syncs = 0;
    m->dirsyncs = m->locks = m->stats = m->truncs = 0;
}
