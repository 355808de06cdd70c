/*
 * io.h — the I/O shim. Every file operation of the engine goes through a
 * struct of function pointers so that tests can count calls, inject faults
 * and simulate crashes (sector tearing, lost unsynced writes). The real
 * implementation, mote_io_posix, is plain POSIX.
 *
 * Conventions: functions return 0 or a byte count on success and -errno on
 * failure (never set errno for the caller). `ctx` is the shim's own state.
 */
#ifndef MOTE_IO_H
#define MOTE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct mote_fileinfo {
    uint64_t size, dev, ino;
    unsigned uid, mode; /* owner, st_mode & 07777 */
} mote_fileinfo;

typedef struct mote_io {
    void *ctx;
    /* open(path, flags, mode): returns fd >= 0 or -errno */
    int (*open)(void *ctx, const char *path, int flags, int mode);
    int (*close)(void *ctx, int fd);
    /* full-length read/write at offset: returns bytes done or -errno; a
     * short count means EOF (read) or a short write the caller must treat
     * as an error */
    ssize_t (*pread)(void *ctx, int fd, void *buf, size_t n, uint64_t off);
    ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t n,
                      uint64_t off);
    ssize_t (*pwritev)(void *ctx, int fd, const struct iovec *iov, int cnt,
                       uint64_t off);
    int (*fdatasync)(void *ctx, int fd);
    int (*fsync_dir)(void *ctx, const char *file_path);
    int (*flock)(void *ctx, int fd, int op);
    /* size, identity, owner and permission bits of an open file */
    int (*fstat)(void *ctx, int fd, struct mote_fileinfo *fi);
    int (*ftruncate)(void *ctx, int fd, uint64_t size);

    /* Many processes on one store (share.c). A shim that leaves these NULL
     * (the tests' in-memory files) opens every store exclusively. */
    /* Locks on bytes [off, off + len) of fd, owned by the open file
     * description (so no other descriptor or thread of the process releases
     * them, and its death does), never waiting: MOTE_LK_READ (shared),
     * MOTE_LK_WRITE (exclusive: -EAGAIN if another description holds a
     * lock there), MOTE_LK_UNLOCK, or MOTE_LK_TEST (takes nothing: -EAGAIN
     * if another description holds any lock there, 0 if none). */
    int (*lock)(void *ctx, int fd, int op, uint64_t off, uint64_t len);
    /* Map the first n bytes of fd shared and writable (*out), and unmap. */
    int (*map)(void *ctx, int fd, size_t n, void **out);
    int (*unmap)(void *ctx, void *p, size_t n);
    int (*unlink)(void *ctx, const char *path);
    /* Set the permission bits of an open file. */
    int (*chmod)(void *ctx, int fd, unsigned mode);
    /* Start writing bytes [off, off + len) of fd back to the disk without
     * waiting for it, so that a later sync has less left to wait for: a
     * hint (NULL, or a failure, changes nothing). */
    int (*writeback)(void *ctx, int fd, uint64_t off, uint64_t len);
} mote_io;

enum { MOTE_LK_READ, MOTE_LK_UNLOCK, MOTE_LK_TEST, MOTE_LK_WRITE };


extern const mote_io mote_io_posix;

#endif
