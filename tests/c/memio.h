/*
 * memio.h — an in-memory file system behind the I/O shim, for counting,
 * fault-injection and crash-simulation tests.
 *
 * Each file has a durable image (what survives a crash) and the writes made
 * since the last sync, in order. memio_crash_image() builds what a disk
 * could hold after a crash at this moment: the durable image plus, for
 * every 512-byte sector of every unsynced write, either the old content,
 * the new content (in any combination, which covers reordering and lost
 * writes; with MEMIO_WHOLE, some images keep or lose each write whole) or,
 * with MEMIO_HOSTILE, garbage.
 *
 * Every shim call counts as one "op". With crash_at = k, op k and every op
 * after it fail with EIO and do nothing (the machine died before op k).
 * With fail_at = k, op k alone fails with fail_errno (or, for writes with
 * fail_short, writes half and reports a short count).
 */
#ifndef MOTE_MEMIO_H
#define MOTE_MEMIO_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

typedef struct memio_write {
    uint64_t off;
    size_t len;
    uint8_t *data;
} memio_write;

typedef struct memio_file {
    char path[256];
    uint8_t *cur, *dur;
    size_t cur_len, dur_len, cap, dur_cap;
    memio_write *log;
    size_t nlog, cap_log;
    int lock_mode; /* 0 none, 1 shared, 2 exclusive */
} memio_file;

typedef struct memio {
    memio_file files[8];
    int nfiles;
    int fd_file[64]; /* fd -> file index + 1 */
    /* counters */
    long ops, opens, closes, reads, writes, syncs, dirsyncs, locks, stats, truncs;
    long crash_at, fail_at;
    int crashed, fail_errno, fail_short;
    mote_io io;
} memio;

void memio_init(memio *m);
void memio_free(memio *m);
/* Set a file's durable and current content. */
void memio_set(memio *m, const char *path, const uint8_t *img, size_t len);
/* Current content of a file (NULL if missing). */
const uint8_t *memio_get(memio *m, const char *path, size_t *len);
/* A post-crash image of `path` (malloc'd); `how`: MEMIO_* below. */
#define MEMIO_HOSTILE 1u /* unsynced sectors may hold garbage */
#define MEMIO_WHOLE 2u   /* some images keep or lose each unsynced write whole */
uint8_t *memio_crash_image(memio *m, const char *path, uint64_t seed, unsigned how,
                           size_t *len);
void memio_reset_counts(memio *m);

#endif
