/*
 * io.c — the real POSIX implementation of the I/O shim (see io.h).
 * Retries EINTR; loops over partial transfers so callers see all-or-error.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int px_open(void *ctx, const char *path, int flags, int mode)
{
    (void)ctx;
    int fd;
    do {
        fd = open(path, flags | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

static int px_close(void *ctx, int fd)
{
    (void)ctx;
    return close(fd) < 0 ? -errno : 0;
}

static ssize_t px_pread(void *ctx, int fd, void *buf, size_t n, uint64_t off)
{
    (void)ctx;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

static ssize_t px_pwrite(void *ctx, int fd, const void *buf, size_t n,
                         uint64_t off)
{
    (void)ctx;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pwrite(fd, (const char *)buf + done, n - done,
                           (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

static ssize_t px_pwritev(void *ctx, int fd, const struct iovec *iov, int cnt,
                          uint64_t off)
{
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    ssize_t r;
    do {
        r = pwritev(fd, iov, cnt > IOV_MAX ? IOV_MAX : cnt, (off_t)off);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    if ((size_t)r == total)
        return r;
    /* partial: finish element by element */
    size_t skip = (size_t)r, done = (size_t)r;
    for (int i = 0; i < cnt; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        ssize_t w = px_pwrite(ctx, fd, (const char *)iov[i].iov_base + skip,
                              iov[i].iov_len - skip, off + done);
        if (w < 0)
            return w;
        done += (size_t)w;
        skip = 0;
    }
    return (ssize_t)done;
}

static int px_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    int r;
    do {
        r = fdatasync(fd);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

static int px_fsync_dir(void *ctx, const char *file_path)
{
    (void)ctx;
    size_t n = strlen(file_path);
    char *dir = malloc(n + 2);
    if (!dir)
        return -ENOMEM;
    memcpy(dir, file_path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

static int px_flock(void *ctx, int fd, int op)
{
    (void)ctx;
    int r;
    do {
        r = flock(fd, op);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

/* Size, identity, owner and mode, never the times. Asking for a file's
 * times costs its next sync: on Linux 6.13+ (multigrain timestamps, ext4,
 * xfs, btrfs, tmpfs) a query marks them seen, so the next write stamps a
 * fine-grained mtime, which dirties the inode, and the next fdatasync then
 * writes the inode block too: an fstat before each commit made a one-page
 * write + fdatasync ~40 % slower on this project's disk (ARCHITECTURE.md,
 * "Commit"). statx() with a mask without the times leaves them unseen;
 * fstat() where statx is missing. */
static int px_fstat(void *ctx, int fd, mote_fileinfo *fi)
{
    (void)ctx;
#ifdef STATX_SIZE
    const unsigned need = STATX_TYPE | STATX_MODE | STATX_UID | STATX_INO | STATX_SIZE;
    struct statx sx;
    int r = statx(fd, "", AT_EMPTY_PATH, need, &sx);
    if (r == 0 && (sx.stx_mask & need) == need) {
        fi->size = (uint64_t)sx.stx_size;
        fi->dev = (uint64_t)makedev(sx.stx_dev_major, sx.stx_dev_minor);
        fi->ino = (uint64_t)sx.stx_ino;
        fi->uid = (unsigned)sx.stx_uid;
        fi->mode = (unsigned)(sx.stx_mode & 07777);
        return 0;
    }
    if (r < 0 && errno != ENOSYS)
        return -errno;
#endif
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    fi->size = (uint64_t)st.st_size;
    fi->dev = (uint64_t)st.st_dev;
    fi->ino = (uint64_t)st.st_ino;
    fi->uid = (unsigned)st.st_uid;
    fi->mode = (unsigned)(st.st_mode & 07777);
    return 0;
}

static int px_ftruncate(void *ctx, int fd, uint64_t size)
{
    (void)ctx;
    int r;
    do {
        r = ftruncate(fd, (off_t)size);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

static int px_lock(void *ctx, int fd, int op, uint64_t off, uint64_t len)
{
    (void)ctx;
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = op == MOTE_LK_READ ? F_RDLCK : op == MOTE_LK_UNLOCK ? F_UNLCK : F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)off;
    fl.l_len = (off_t)len;
    int r;
    do {
        r = fcntl(fd, op == MOTE_LK_TEST ? F_OFD_GETLK : F_OFD_SETLK, &fl);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno == EACCES ? -EAGAIN : -errno;
    return op == MOTE_LK_TEST && fl.l_type != F_UNLCK ? -EAGAIN : 0;
}

static int px_map(void *ctx, int fd, size_t n, void **out)
{
    (void)ctx;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    *out = p;
    return 0;
}

static int px_unmap(void *ctx, void *p, size_t n)
{
    (void)ctx;
    return munmap(p, n) < 0 ? -errno : 0;
}

static int px_unlink(void *ctx, const char *path)
{
    (void)ctx;
    return unlink(path) < 0 ? -errno : 0;
}

static int px_chmod(void *ctx, int fd, unsigned mode)
{
    (void)ctx;
    return fchmod(fd, (mode_t)mode) < 0 ? -errno : 0;
}

static int px_writeback(void *ctx, int fd, uint64_t off, uint64_t len)
{
    (void)ctx;
    return sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE) ? -errno : 0;
}

const mote_io mote_io_posix = {
    NULL,        px_open,  px_close, px_pread,  px_pwrite,    px_pwritev,
    px_fdatasync, px_fsync_dir, px_flock, px_fstat, px_ftruncate,
    px_lock,     px_map,   px_unmap, px_unlink, px_chmod,     px_writeback,
};
