/*
 * share.c — many processes on one store.
 *
 * Any number of processes may have a store open. Each reads snapshots
 * without blocking or being blocked; one write transaction at a time runs
 * across all of them. What they share lives in a segment of shared memory,
 * /dev/shm/motedb-<dev>-<ino> (the store file's device and inode),
 * mapped by every process that has the store open:
 *
 *   header  the latest commit readers take (durable: txnid and the page of
 *           its state, a root slot or a commit record, pager.h COMMIT
 *           CHAIN), the newest written (writers build on it; pager.h GROUP
 *           COMMIT) and the newest synced, the next txnid, the pid of the
 *           process in a write transaction, `writing` (set for a write
 *           transaction's duration: found set, its process died in one),
 *           `need_sync` (the next commit syncs the base first), where
 *           commits stand on disk (synced, being synced, `failed`: a sync
 *           failed, no more writes), the writer mutex and the sync mutex,
 *           the root copies' sequence locks
 *   slots   one per process: its pid, start time and oldest snapshot, a
 *           cache line each (a reader writes its slot twice per read
 *           transaction; with 24-byte slots two readers' slots shared a
 *           line, and two processes did a median of 1.69x the gets of one
 *           instead of 1.99x, ARCHITECTURE.md): 59 in the header's page,
 *           128 more after `pages` (touched only when more than 59
 *           processes open the store)
 *   ring    the pages recent commits freed, with the commit (pages 2-4)
 *   root    copies of the states of the last commits written (64 KB from
 *           page 5: 4 of 4 KB pages, 1 of 64 KB ones; written by every
 *           commit)
 *   more    the slots that do not fit in the header's page
 *   pages   copies of the pages commits wrote, one place per page number
 *           modulo their count (4.1 MB: 1,024 of 4 KB pages, 64 of 64 KB;
 *           likewise; memory only where written), mapped apart, by a
 *           process only once another one has opened the store (a larger
 *           mapping made every open → read → close of a tiny store ~1.5 µs
 *           slower)
 *
 * The read path makes no system call (one costs ~0.4 µs here, a get from
 * Python ~0.7 µs in all): a reader compares the header's latest txnid with
 * its own and, when another process committed, copies the state from the
 * segment (a sequence lock guards each copy; without a copy of that commit,
 * one pread of its record, or of both slots for a checkpoint). It
 * publishes its snapshot in its slot and then reads the latest txnid
 * again; if that moved, it takes the newer one. So a
 * writer that reads the slots after the publish sees the snapshot, and one
 * that read them before reuses only pages freed by commits up to its own
 * base, which the snapshot (that base or a newer one) does not reference.
 *
 * Locks, none of which outlives its process:
 *   flock on the store file: shared while a process has the store open;
 *     exclusive while it is the only one (the first opener initializes the
 *     segment, the last closer removes it, writes the clean-close marker,
 *     may shrink the file), and for the whole time in exclusive mode.
 *   byte 2^62 - 1 (OPEN_LOCK) of the store file: read-locked by every
 *     process that has the store open in shared mode (see below).
 *   the writer mutex, in the segment (process-shared and robust): held for
 *     a write transaction; another process waits up to its busy timeout,
 *     then MOTE_BUSY naming the holder. If the holder dies, the next one
 *     gets it (EOWNERDEAD) and syncs the base before its commit.
 *   the sync mutex, in the segment (likewise): held while a commit that a
 *     sync made durable becomes the latest (pager.h GROUP COMMIT; the sync
 *     itself runs without it: processes sync at once, each for what was
 *     written before its sync began). Taken after the writer mutex, never
 *     the other way.
 *   byte 2^62 + i of the store file: read-locked (an OFD lock) by slot i's
 *     owner. A slot whose byte no process locks is dead for sure, in any pid
 *     namespace; one whose byte is locked (any process that can read the
 *     file can lock it) is dead too if its owner is in this pid namespace
 *     and its pid is gone or was reused (its start time). A dead one's slot
 *     is reclaimed when its snapshot would hold pages back. A process that
 *     finds the segment missing while slot bytes are locked is not alone
 *     with a /dev/shm of its own (another container): it refuses to open.
 * No descriptor is kept for the segment (one per store, the store file's),
 * and no process that may not write the store can open it: its permission
 * bits are the writers'. A flock changed from exclusive to shared is
 * released for an instant (flock(2)); a process that gets the exclusive lock
 * in that instant finds the opener's slot live and does not initialize the
 * segment again, and one that closes then finds the open byte locked, so it
 * is not alone (it leaves the segment, the marker and the file's size).
 *
 * Pages freed by commit C are reused only when C is durable, the latest
 * commit (what a reader that begins takes: pager.c release_pending) is C or
 * newer, and every snapshot of every process is >= C. Each commit appends the pages it
 * freed, with its txnid, to the segment's ring (its last three pages, 1,024
 * entries; a page is memory only once used); a writer drops the entries
 * every snapshot (and the newest durable commit) is past and keeps the
 * others out of use. A commit
 * that frees more than the ring holds drops its oldest entries and raises
 * `dropped`: until every snapshot is past that, a writer uses no free page
 * at all (the file grows), as it cannot tell which ones are safe.
 *
 * A process alone with the store makes no segment (SOLO, at the end): a
 * page of its own, which another process that opens the store reads to
 * take the store over, is enough.
 *
 * Exclusive mode (one process, as if the store were not shared: the flock
 * held exclusively from open to close, no segment): when the I/O shim has
 * no locks or mappings (the tests' in-memory files), when the segment
 * cannot be made (no /dev/shm), with MOTE_EXCLUSIVE, and once this process
 * maps as many segments as its budget allows (a quarter of vm.max_map_count;
 * MOTE_SHARED_MAX overrides it), so that one process can hold 100,000 small
 * stores open: bounded by its file descriptors, not by its mappings.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "pager.h"

#define SEG_MAGIC 0x314D485345544F4Dull /* "MOTESHM1" little-endian */
#define SEG_VERSION 8u
#define SEG_PAGE 4096u
#define RING_PAGES 3u
#define SEG_BYTES ((1u + RING_PAGES) * SEG_PAGE) /* header and slots; the ring */
#define ROOT_MAX 65536u                          /* the largest page size */
#define ROOT_COPIES 4u /* copies of recent states, of P bytes each in ROOT_MAX */
#define PAGE_AREA (1024u * (4096u + 64u)) /* copies of written pages, with a header each, after SEG_MAP */
#define SEG_HEADER 320u
#define SLOT_BYTES 64u /* a cache line */
#define HEAD_SLOTS ((SEG_PAGE - SEG_HEADER) / SLOT_BYTES) /* 59 */
#define MORE_SLOTS 128u
#define SEG_SLOTS (HEAD_SLOTS + MORE_SLOTS)
#define SEG_MAP (SEG_BYTES + ROOT_MAX + MORE_SLOTS * SLOT_BYTES) /* what every process maps */
#define SEG_FILE (SEG_MAP + PAGE_AREA)
#define RING (RING_PAGES * SEG_PAGE / 12u)
#define DEFAULT_BUSY_MS 5000

/* A root copy's sequence lock (odd while written) and the commit it holds. */
typedef struct rootcopy {
    _Atomic uint64_t seq, txn;
} rootcopy;

/* A copy of a page a commit wrote, and its header: sequence lock, page
 * number, low 32 bits of its birth (the page follows). */
typedef struct pagecopy {
    _Atomic uint64_t seq;
    _Atomic uint32_t pgno, birth;
    uint8_t pad[48];
} pagecopy;

typedef struct segslot {
    _Atomic uint64_t owner; /* pid | low 32 bits of its start time << 32; 0: free */
    _Atomic uint64_t snap;  /* oldest snapshot it reads; UINT64_MAX: none */
    _Atomic uint64_t pidns; /* the owner's pid namespace (its inode) */
    uint8_t pad[SLOT_BYTES - 24];
} segslot;

/* Byte SLOT_LOCK + i of the store file is read-locked by slot i's owner
 * while it lives (an OFD lock: it goes with the process, in any namespace). */
#define SLOT_LOCK (1ull << 62)
/* Byte OPEN_LOCK is read-locked by every process that has the store open in
 * shared mode, from before its flock goes from exclusive to shared (which
 * releases it for an instant, flock(2)) until it closes: a closer is alone
 * when it gets the flock exclusively and no other process locks this byte
 * (else, in that instant, it would remove the segment of a process that
 * just opened, write its marker and shrink the file under it). */
#define OPEN_LOCK (SLOT_LOCK - 1)
/* Byte SOLO_LOCK + (id << 18 | entry) is read-locked by a process alone
 * with the store without a segment (SOLO, at the end): its solo page's id,
 * its entry there. */
#define SOLO_LOCK (SLOT_LOCK + (1ull << 58))
#define SOLO_SPAN (1ull << 56)

struct segment {
    _Atomic uint64_t magic; /* written last by the first opener */
    uint32_t version, page_size;
    uint64_t dev, ino;
    _Atomic uint64_t latest;      /* txnid of the latest commit readers take (durable) */
    _Atomic uint64_t next_txnid;  /* the next write transaction's id */
    uint64_t dropped;             /* ring entries dropped: up to this commit (writer) */
    _Atomic uint64_t written;     /* the newest commit written (writers' base) */
    _Atomic uint64_t written_seq; /* sequence lock of written and written_page */
    durability dur;               /* synced, syncing, failed (pager.h GROUP COMMIT) */
    _Atomic uint32_t latest_page; /* the page holding `latest`'s state (a slot, a record) */
    _Atomic uint32_t written_page; /* the page holding `written`'s state */
    _Atomic uint32_t writer;      /* pid in a write transaction, 0 */
    _Atomic uint32_t writing;     /* a write transaction is open (or its process died) */
    _Atomic uint32_t need_sync;   /* the next commit syncs its base first */
    uint32_t ring_head, ring_n;   /* the ring's oldest entry and count (writer) */
    _Atomic uint32_t slots_hi;    /* no slot at or above this one was ever used */
    _Atomic uint32_t fresh;       /* no commit is durable yet (pager.h FRESH) */
    uint32_t copy_next;           /* the root copy the next commit takes (writer) */
    uint32_t pad0[2];
    rootcopy copy[ROOT_COPIES];   /* what root + i * page_size holds */
    pthread_mutex_t writer_mu;    /* held for a write transaction (robust, shared) */
    pthread_mutex_t sync_mu;      /* held while a synced commit becomes the latest */
    _Atomic uint64_t solo_off;    /* slot 0 stands for a solo process that locks this
                                     byte (SOLO below); 0: slot 0 is an ordinary slot */
    _Atomic uint32_t solo_writing; /* it was in a write transaction begun alone when
                                     taken over: writers wait until it joined */
    uint32_t pad1;
    uint8_t reserved[SEG_HEADER - 232 - 2 * sizeof(pthread_mutex_t)];
    segslot slot[HEAD_SLOTS];
    uint64_t ring_tag[RING];      /* page ring_pgno[i] was freed by commit ring_tag[i] */
    uint32_t ring_pgno[RING];
    uint8_t root[ROOT_MAX];       /* states of recent commits, once a second process
                                     came (copies(page_size) of them) */
    segslot more[MORE_SLOTS];     /* slots HEAD_SLOTS and up */
};

_Static_assert(offsetof(struct segment, copy) == 152, "the header's layout");
_Static_assert(offsetof(struct segment, slot) == SEG_HEADER, "the header's size");
_Static_assert(sizeof(segslot) == SLOT_BYTES && SEG_HEADER % SLOT_BYTES == 0 &&
                   (SEG_BYTES + ROOT_MAX) % SLOT_BYTES == 0 && SEG_MAP % SEG_PAGE == 0,
               "a slot per cache line");
_Static_assert(offsetof(struct segment, ring_tag) == SEG_PAGE, "the ring's place");
_Static_assert(offsetof(struct segment, root) == SEG_BYTES, "the root copies' place");
_Static_assert(sizeof(struct segment) == SEG_MAP, "the segment's size");
_Static_assert(sizeof(pagecopy) == 64, "a page copy's header");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics in shared memory");

/* Slot i: in the header's page, or after the copies (const in, as strchr). */
static inline segslot *seg_slot(const struct segment *seg, unsigned i)
{
    return (segslot *)(i < HEAD_SLOTS ? &seg->slot[i] : &seg->more[i - HEAD_SLOTS]);
}

static _Atomic int nmapped; /* segments this process maps */

/* ---- small helpers ------------------------------------------------------------ */

static void seg_path(const mote_store *s, char *buf, size_t n)
{
    snprintf(buf, n, "/dev/shm/motedb-%llx-%llx", (unsigned long long)s->dev,
             (unsigned long long)s->ino);
}

/* How many segments this process may map: MOTE_SHARED_MAX, else a quarter
 * of vm.max_map_count (65,530 by default). */
static int map_budget(const mote_io *io)
{
    static _Atomic int budget;
    int b = atomic_load(&budget);
    if (b)
        return b;
    const char *env = getenv("MOTE_SHARED_MAX");
    long v = env ? strtol(env, NULL, 10) : 0;
    if (!env) {
        v = 65530;
        char buf[32] = {0};
        int fd = io->open(io->ctx, "/proc/sys/vm/max_map_count", O_RDONLY, 0);
        if (fd >= 0) {
            if (io->pread(io->ctx, fd, buf, sizeof buf - 1, 0) > 0)
                v = strtol(buf, NULL, 10);
            io->close(io->ctx, fd);
        }
        v /= 4;
    }
    b = v < 0 ? 0 : v > 1 << 30 ? 1 << 30 : (int)v;
    atomic_store(&budget, b ? b : -1);
    return b ? b : -1;
}

/* May this process map one more segment? Below 64 without reading /proc
 * (a quarter of vm.max_map_count, which no working system sets below a few
 * thousand: four system calls off every process's first open). */
static int may_map(const mote_io *io)
{
    int n = atomic_load(&nmapped);
    return (n < 64 && !getenv("MOTE_SHARED_MAX")) || n < map_budget(io);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One step of a wait that began at `start` (µs): sleeps 100 µs, doubling up
 * to 10 ms; 1 once `ms` milliseconds have passed (ms < 0: at once). */
static int wait_over(uint64_t start, int ms, unsigned *step)
{
    uint64_t spent = now_us() - start;
    if (ms < 0 || spent >= (uint64_t)ms * 1000u)
        return 1;
    unsigned us = 100u << (*step < 7 ? *step : 7);
    if (us > 10000)
        us = 10000;
    (*step)++;
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

static uint32_t my_pid(const mote_store *s)
{
    return (uint32_t)atomic_load(&seg_slot(s->seg, (unsigned)s->slot)->owner);
}

/* The start time of process `pid` (field 22 of /proc/PID/stat, in clock
 * ticks since boot; pid 0: this process, /proc/self, right in any pid
 * namespace), 0 if it cannot be read. */
static uint64_t proc_start(const mote_io *io, long pid)
{
    char path[40], buf[512];
    if (pid)
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    int fd = io->open(io->ctx, path, O_RDONLY, 0);
    if (fd < 0)
        return 0;
    ssize_t n = io->pread(io->ctx, fd, buf, sizeof buf - 1, 0);
    io->close(io->ctx, fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* The inode of this process's pid namespace (0 if unknown). */
static uint64_t self_pidns(void)
{
    char buf[64];
    ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1); /* "pid:[4026531836]" */
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = strchr(buf, '[');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* This process's slot owner word (its pid and the low 32 bits of its start
 * time) and pid namespace, read once per process. */
static uint64_t self_owner(const mote_io *io, uint64_t *pidns)
{
    static _Atomic uint64_t owner, ns;
    uint64_t o = atomic_load(&owner), me = (uint64_t)getpid();
    if ((o & 0xFFFFFFFFu) != me) { /* first use, or a forked child */
        atomic_store(&ns, self_pidns());
        o = me | (proc_start(io, 0) & 0xFFFFFFFFu) << 32;
        atomic_store(&owner, o);
    }
    *pidns = atomic_load(&ns);
    return o;
}

/* Is the process of owner word o (its pid and start time), in this pid
 * namespace, alive? (an unreadable /proc: alive) */
static int owner_alive(const mote_io *io, uint64_t o)
{
    long pid = (long)(o & 0xFFFFFFFFu);
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 0;
    uint64_t start = proc_start(io, pid);
    return start == 0 || (start & 0xFFFFFFFFu) == o >> 32;
}

/* Is the process that owns slot i alive? Dead for sure when no process
 * holds the slot's byte of the store file; when one does (it may be any
 * process that can read the file), and the owner is in this process's pid
 * namespace, its pid must also be alive with the same start time. */
static int slot_alive(const mote_store *s, const struct segment *seg, unsigned i)
{
    const segslot *sl = seg_slot(seg, i);
    uint64_t o = atomic_load(&sl->owner), ns;
    uint64_t solo = i == 0 ? atomic_load(&((struct segment *)seg)->solo_off) : 0;
    if (o == 0 || s->io->lock(s->io->ctx, s->fd, MOTE_LK_TEST, solo ? solo : SLOT_LOCK + i, 1) == 0)
        return 0;
    self_owner(s->io, &ns);
    if (!ns || atomic_load(&sl->pidns) != ns)
        return 1;
    return owner_alive(s->io, o);
}

/* A slot's owner found alive is taken as alive for ALIVE_US more: a writer
 * asks at every write transaction about each process whose snapshot holds
 * pages back, and the check costs five system calls (the byte lock, kill,
 * and /proc/PID/stat's open, read, close), 10-20 µs inside the writer lock.
 * A process that died meanwhile holds pages back that much longer. */
#define ALIVE_US 100000u

struct seen_alive {
    uint64_t owner, at; /* slot i's owner word, the time (µs) it was found alive */
};

static int slot_alive_cached(mote_store *s, const struct segment *seg, unsigned i, uint64_t o)
{
    uint64_t now = now_us();
    if (s->seen && s->seen[i].owner == o && now - s->seen[i].at < ALIVE_US)
        return 1;
    if (!slot_alive(s, seg, i))
        return 0;
    if (!s->seen)
        s->seen = mote__calloc(SEG_SLOTS, sizeof *s->seen);
    if (s->seen) { /* (no memory: asked again next time) */
        s->seen[i].owner = o;
        s->seen[i].at = now;
    }
    return 1;
}

/* Free a dead process's slot (one freer wins; the next owner resets the
 * snapshot, which nobody counts while the owner is dead). */
static void slot_reclaim(segslot *sl, uint64_t dead)
{
    atomic_compare_exchange_strong(&sl->owner, &dead, 0);
}

/* ---- open ------------------------------------------------------------------- */

static int solo_may(const mote_store *s);
static int solo_open(mote_store *s);
static int find_solo(const mote_store *s, uint64_t *off);
static int solo_attach(mote_store *s, uint64_t off);
static void take_unlock(mote_store *s);
static void solo_release(mote_store *s);
static int solo_ready(mote_store *s);
static void ring_push(struct segment *seg, uint64_t tag, uint32_t pgno);
static int solo_died_writing(mote_store *s, struct segment *seg);

/* The segment cannot be used: alone, the caller opens exclusively; a process
 * that may only read the store reads without it (an outsider). */
#define NO_SEGMENT (-1000)
#define SOLO_GONE (-1001) /* the solo process closed the store meanwhile */
#define MAKE_IT (-1002)   /* make the segment: its maker died, or nobody is in it */

/* The segment's permission bits: read and write for each class of users that
 * may write the store file, none for the others, so that a process that may
 * only read the store cannot open the segment (no slot or lock of it). */
static unsigned seg_mode(unsigned store_mode)
{
    return ((store_mode & 0200) ? 0600u : 0u) | ((store_mode & 0020) ? 0060u : 0u) |
           ((store_mode & 0002) ? 0006u : 0u);
}

/* May this process write the store file? (it was opened for writing, or it is
 * read-only by choice: then its owner, root, or allowed by the bits) */
static int may_write(const mote_store *s)
{
    if (s->ro_errno)
        return 0;
    if (!(s->flags & MOTE_RDONLY))
        return 1;
    uid_t e = geteuid();
    return e == 0 || e == s->uid || faccessat(AT_FDCWD, s->path, W_OK, AT_EACCESS) == 0;
}

/* Does another process hold a slot? (seg NULL: any slot byte locked) */
static int any_live(const mote_store *s, const struct segment *seg)
{
    if (!seg)
        return s->io->lock(s->io->ctx, s->fd, MOTE_LK_TEST, SLOT_LOCK, SEG_SLOTS) == -EAGAIN;
    for (unsigned i = 0; i < SEG_SLOTS; i++)
        if ((int)i != s->slot && slot_alive(s, seg, i))
            return 1;
    return 0;
}

/* Claim a slot of the mapped segment (a free one, else one whose process
 * died). Never slot 0 while it stands for a solo process (solo_off): whether
 * its owner lives is asked of that process's byte, so a process that took
 * it once the solo process died was found dead by the next writer, which
 * reused the pages of its snapshot (share_slot_of_a_dead_solo_process). */
static int claim_slot(mote_store *s, struct segment *seg)
{
    uint64_t ns, me = self_owner(s->io, &ns);
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = atomic_load(&seg->solo_off) ? 1 : 0; i < SEG_SLOTS; i++) {
            segslot *sl = seg_slot(seg, i);
            uint64_t o = atomic_load(&sl->owner);
            if (pass == 1 && o && !slot_alive(s, seg, i))
                slot_reclaim(sl, o);
            if (atomic_load(&sl->owner) != 0)
                continue;
            /* the byte first: a slot with an owner and a free byte is dead */
            int r = s->io->lock(s->io->ctx, s->fd, MOTE_LK_READ, SLOT_LOCK + i, 1);
            if (r)
                return mote__ioerr(r, "lock", s->path);
            uint64_t free_ = 0;
            if (!atomic_compare_exchange_strong(&sl->owner, &free_, me)) {
                s->io->lock(s->io->ctx, s->fd, MOTE_LK_UNLOCK, SLOT_LOCK + i, 1);
                continue;
            }
            {
                atomic_store(&sl->snap, UINT64_MAX);
                atomic_store(&sl->pidns, ns);
                uint32_t hi = atomic_load(&seg->slots_hi);
                while (hi < i + 1 && !atomic_compare_exchange_weak(&seg->slots_hi, &hi, i + 1))
                    ;
                s->slot = (int)i;
                return MOTE_OK;
            }
        }
    return mote__err(MOTE_BUSY, "store %s is open in %u processes, the most it can be",
                     s->path, SEG_SLOTS);
}

/* The first opener's work on a new or stale segment: zeroes, the writer mutex.
 * Only the first page: the ring's entries and the root copy are read only
 * where the header says they were written (ring_n, root_seq), so their pages
 * stay untouched (no memory) until a commit needs them. */
static int seg_init(struct segment *seg)
{
    memset(seg, 0, SEG_PAGE);
    pthread_mutexattr_t a;
    int r = pthread_mutexattr_init(&a);
    if (!r && !(r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED)) &&
        !(r = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST)) &&
        !(r = pthread_mutex_init(&seg->writer_mu, &a)))
        r = pthread_mutex_init(&seg->sync_mu, &a);
    pthread_mutexattr_destroy(&a);
    return r;
}

/* A process that joins a segment claims its slot under a read lock on byte
 * 0 of the segment's file `fd`, once the segment is ready and in use (a
 * live process holds a slot: its maker claims one before it is ready). Its
 * maker (a first opener, a taker: SOLO) holds a write lock on that byte from
 * before it sizes the file until it is ready, so no slot is claimed in a
 * segment while a maker decides to make it or makes it (its zeroes wiped a
 * slot claimed meanwhile; two makers of one segment gave two stores in one
 * file: share_many_create_one_store). Found unready or unused, its maker
 * died, or a taker that found its solo process gone left it for the first
 * opener, or every process in it closed it without removing it (two
 * closers at once, each finding the other there, or killed): this process
 * makes it (MAKE_IT) under the write lock; joined as it was, such a segment
 * gave an old latest commit and txnid once a solo process had committed
 * since (share_opener_remakes_a_segment_left_behind). MOTE_OK: ready, in
 * use and the store's, the read lock held: the caller unlocks it once its
 * slot is claimed (closing fd does not: the mapping keeps the file's
 * description, and its locks, and a taker waited for good). */
static int in_use(const mote_store *s, const struct segment *seg)
{
    return atomic_load(&seg->magic) == SEG_MAGIC && any_live(s, seg);
}

static int join_ready(mote_store *s, struct segment *seg, const char *path, int fd)
{
    const mote_io *io = s->io;
    uint64_t start = now_us();
    unsigned step = 0;
    for (;;) {
        int r = io->lock(io->ctx, fd, MOTE_LK_READ, 0, 1);
        if (!r && in_use(s, seg))
            break; /* (the read lock stays until the slot is claimed) */
        if (!r) { /* to make it: the write lock, not an upgrade (two joiners that each
                   * held the read lock and waited to upgrade it waited for good) */
            io->lock(io->ctx, fd, MOTE_LK_UNLOCK, 0, 1);
            r = io->lock(io->ctx, fd, MOTE_LK_WRITE, 0, 1);
            if (!r && !in_use(s, seg))
                return MAKE_IT; /* (its lock held: unlocked once ready, take_unlock) */
            if (!r) {
                io->lock(io->ctx, fd, MOTE_LK_UNLOCK, 0, 1); /* made meanwhile: again */
                continue;
            }
        }
        if (r != -EAGAIN)
            return mote__ioerr(r, "lock", path);
        else if (wait_over(start, s->busy_ms, &step))
            return mote__err(MOTE_LOCKED, "store %s: its shared memory %s was not made ready "
                             "within %d ms", s->path, path, s->busy_ms);
    }
    if (seg->version != SEG_VERSION || seg->dev != s->dev || seg->ino != s->ino) {
        io->lock(io->ctx, fd, MOTE_LK_UNLOCK, 0, 1);
        return mote__err(MOTE_LOCKED, "store %s: its shared memory %s is of another store "
                         "or version", s->path, path);
    }
    return MOTE_OK;
}

/* The mapped segment (file fi), with this process's slot, is the store's. */
/* A segment file whose owner or permission bits are not what the store's
 * allow: refused (MOTE_LOCKED). */
static int foreign_segment(const mote_store *s, const char *path, const mote_fileinfo *fi)
{
    return mote__err(MOTE_LOCKED, "store %s: its shared memory %s belongs to user %u with mode "
                     "%o (the store: user %u, mode %o); remove it if no process has the store "
                     "open", s->path, path, fi->uid, fi->mode, s->uid, s->mode);
}

static void seg_use(mote_store *s, struct segment *seg, const mote_fileinfo *fi)
{
    s->seg_dev = fi->dev;
    s->seg_ino = fi->ino;
    s->dur = &seg->dur;
    s->sh_latest = &seg->latest;
    s->sh_snap = &seg_slot(seg, (unsigned)s->slot)->snap;
    s->seg = seg;
    atomic_fetch_add(&nmapped, 1);
}

/* Open (or create) and map the segment, claim a slot. Sets s->init when this
 * process initializes it (the caller then reads the file, as the first
 * opener does). NO_SEGMENT: see above. */
static int seg_attach(mote_store *s)
{
    const mote_io *io = s->io;
    char path[80];
    seg_path(s, path, sizeof path);
    unsigned want = seg_mode(s->mode);
    /* Alone, it is usually not there; joining, it usually is. Not alone, it is
     * made only if no process holds a slot (only outsiders have the store open):
     * one that does, unseen, uses another /dev/shm (another container?). An
     * outsider never makes it. */
    int creator = 0, r, fd = -ENOENT;
    uint64_t off;
    if (!s->alone && !s->outsider && find_solo(s, &off) && (r = solo_attach(s, off)) != SOLO_GONE)
        return r;
    for (int tries = 0; tries < 3 && (tries == 0 || (!s->outsider && (fd == -ENOENT || fd == -EEXIST)));
         tries++) {
        if ((s->alone ? tries % 2 == 0 : tries % 2 == 1) && !s->outsider) {
            /* A process holds a slot: it made or joined the segment before it
             * locked its byte, perhaps just after the open above (a first
             * opener that raced this one), and the segment cannot go while
             * this process has the store open (a closer removes it alone). */
            if (!s->alone && any_live(s, NULL)) {
                fd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW, 0);
                if (fd == -ENOENT)
                    return mote__err(MOTE_LOCKED, "store %s is open in another process whose "
                                     "shared memory (%s) is not visible here (another "
                                     "container?)", s->path, path);
                break;
            }
            fd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW | O_CREAT | O_EXCL, (int)want);
            creator = fd >= 0;
        } else {
            fd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW, 0);
        }
    }
    if (fd < 0) {
        if (s->alone || s->outsider)
            return NO_SEGMENT;
        return mote__err(MOTE_LOCKED, "store %s is open in another process, but its shared "
                         "memory %s cannot be opened here (%s)", s->path, path, strerror(-fd));
    }
    void *map = NULL;
    mote_fileinfo fi;
    int rc = MOTE_OK;
    /* trusted: made by this user or the store's owner, never wider than it should be;
     * alone, this user's own stale segment is made right below */
    int mine = !(r = io->fstat(io->ctx, fd, &fi)) && fi.uid == (unsigned)geteuid();
    if (r || (!mine && fi.uid != s->uid) || (!(s->alone && mine) && (fi.mode & ~want))) {
        if (!r && (s->alone || s->outsider)) {
            io->close(io->ctx, fd);
            return NO_SEGMENT;
        }
        rc = r ? mote__ioerr(r, "stat", path) : foreign_segment(s, path, &fi);
        goto fail;
    }
    /* its maker's lock from before the file has its size (join_ready); a
     * taker that holds it already (it found its solo process gone and leaves
     * the file as made: SOLO) makes this one a joiner */
    if (creator && (r = io->lock(io->ctx, fd, MOTE_LK_WRITE, 0, 1))) {
        if (r != -EAGAIN)
            goto io_fail;
        creator = 0;
    }
    if (creator)
        s->take_fd1 = fd + 1; /* byte 0 unlocked once it is ready (mote__share_ready) */
    if ((creator || (s->alone && fi.size < SEG_MAP)) &&
        (r = io->ftruncate(io->ctx, fd, SEG_MAP)))
        goto io_fail;
    /* its maker is on it (it made the file, then locks its byte 0 and
     * sizes it): waited for, up to the busy timeout */
    uint64_t start = now_us();
    unsigned step = 0;
    while (!creator && !s->alone && fi.size < SEG_MAP && !wait_over(start, s->busy_ms, &step))
        if ((r = io->fstat(io->ctx, fd, &fi)))
            goto io_fail;
    if (!creator && !s->alone && fi.size < SEG_MAP) {
        rc = mote__err(MOTE_LOCKED, "store %s: its shared memory %s is being made; try again",
                       s->path, path);
        goto fail;
    }
    if ((r = io->map(io->ctx, fd, SEG_MAP, &map)))
        goto io_fail;
    struct segment *seg = map;
    /* Alone, an existing segment is stale (a crash) unless a process holds a
     * slot: it is between flock's exclusive and shared (see the top). */
    s->init = creator || (s->alone && !any_live(s, seg));
    if (!s->init && (rc = join_ready(s, seg, path, fd)) == MAKE_IT) {
        rc = MOTE_OK;
        s->init = 1; /* its maker died */
        s->waited = 1; /* (the dead may have written the file since its size was read) */
        s->take_fd1 = fd + 1;
    }
    if (rc)
        goto fail;
    int joined = !s->init; /* the read lock of byte 0 held (join_ready) */
    if (s->init) {
        if ((r = seg_init(seg)) != 0) {
            rc = mote__err(MOTE_IO, "store %s: cannot make the writer mutex of %s: %s",
                           s->path, path, strerror(r));
            goto fail;
        }
        if (fi.mode != want && (r = io->chmod(io->ctx, fd, want)))
            goto io_fail;
    }
    rc = claim_slot(s, seg);
    if (joined) /* (the mapping keeps the file's description, and its locks, after the close) */
        io->lock(io->ctx, fd, MOTE_LK_UNLOCK, 0, 1);
    if (rc)
        goto fail;
    if (!s->take_fd1)
        io->close(io->ctx, fd); /* the mapping stays */
    seg_use(s, seg, &fi);
    return MOTE_OK;
io_fail:
    rc = mote__ioerr(r, "the shared memory", s->path);
fail:
    s->slot = -1;
    s->take_fd1 = 0; /* (its lock goes with the descriptor) */
    if (map)
        io->unmap(io->ctx, map, SEG_MAP);
    io->close(io->ctx, fd);
    return rc;
}

/* Does a live process hold a slot of the store's segment? (one that is
 * opening or closing it holds the flock exclusively for an instant) */
static int segment_in_use(mote_store *s)
{
    return any_live(s, NULL) ||
           s->io->lock(s->io->ctx, s->fd, MOTE_LK_TEST, OPEN_LOCK, 1) == -EAGAIN;
}

int mote_busy_timeout(mote_store *s, int ms)
{
    if (!s)
        return mote__err(MOTE_INVALID, "mote_busy_timeout: store is NULL");
    s->busy_ms = ms;
    return MOTE_OK;
}

int mote__share_open(mote_store *s)
{
    const mote_io *io = s->io;
    s->busy_ms = DEFAULT_BUSY_MS;
    s->slot = -1;
    int want = io->lock && io->map && io->unmap && io->unlink && io->chmod &&
               !(s->flags & MOTE_EXCLUSIVE) && may_map(io);
    /* A process that may only read the store never takes the flock exclusively
     * (it cannot hold writers up) and never makes the segment. */
    s->outsider = want && !may_write(s);
    uint64_t start = now_us();
    unsigned step = 0;
    for (;;) {
        int r = s->outsider ? -EWOULDBLOCK : io->flock(io->ctx, s->fd, LOCK_EX | LOCK_NB);
        if (!r) {
            s->alone = 1;
            break;
        }
        if (r == -EWOULDBLOCK && want)
            r = io->flock(io->ctx, s->fd, LOCK_SH | LOCK_NB);
        if (!r) {
            s->alone = 0;
            break;
        }
        if (r != -EWOULDBLOCK)
            return mote__ioerr(r, "lock", s->path);
        /* Held exclusively: by a process in its open or close (an instant:
         * its slot is live, or it just removed the segment), or by one that
         * has the store open exclusively. In exclusive mode (want == 0) the
         * shared holders of a store open in shared mode refuse us too. */
        int ms = want && segment_in_use(s) ? s->busy_ms : 50;
        s->waited = 1;
        if (!want || wait_over(start, ms, &step))
            return mote__err(MOTE_LOCKED, "store %s is open %sin another process", s->path,
                             want ? "exclusively " : "");
    }
    if (!want)
        return MOTE_OK;
    int r;
    /* the flock exclusively while another process holds the open byte: that
     * one is in the instant of its open (between the flock's exclusive and
     * shared), perhaps alone without a segment: not alone */
    if (s->alone && io->lock(io->ctx, s->fd, MOTE_LK_TEST, OPEN_LOCK, 1) == -EAGAIN) {
        if ((r = io->flock(io->ctx, s->fd, LOCK_SH)))
            return mote__ioerr(r, "lock", s->path);
        s->alone = 0;
    }
    if ((r = io->lock(io->ctx, s->fd, MOTE_LK_READ, OPEN_LOCK, 1)))
        return mote__ioerr(r, "lock", s->path);
    s->open_lock = 1;
    if (s->alone && solo_may(s) && (r = solo_open(s)))
        return r < 0 ? r : MOTE_OK;
    int rc = seg_attach(s);
    if (rc == NO_SEGMENT) {
        s->init = 1; /* it reads the file itself: alone, exclusively; an outsider, as is */
        return MOTE_OK;
    }
    return rc;
}

int mote__share_join(mote_store *s, uint64_t size)
{
    struct segment *seg = s->seg;
    uint32_t P = seg->page_size;
    s->P = P;
    s->page_shift = (uint32_t)__builtin_ctz(P);
    s->file_bytes = size;
    pthread_mutex_lock(&s->mu);
    int rc = mote__share_refresh(s);
    pthread_mutex_unlock(&s->mu);
    s->next_txnid = atomic_load(&seg->next_txnid);
    s->fresh = (int)atomic_load(&seg->fresh);
    return rc;
}

static void root_copy_put(struct segment *seg, const uint8_t *slot, uint32_t P, uint64_t txnid);

int mote__share_ready(mote_store *s)
{
    struct segment *seg = s->seg;
    if (seg && s->init) { /* describe the commit just read from the file */
        seg->version = SEG_VERSION;
        seg->page_size = s->P;
        seg->dev = s->dev;
        seg->ino = s->ino;
        atomic_store(&seg->latest_page, st_where(s->cur->data));
        atomic_store(&seg->latest, s->txnid);
        atomic_store(&seg->written_page, st_where(s->cur->data));
        atomic_store(&seg->written, s->txnid);
        atomic_store(&seg->next_txnid, s->next_txnid);
        if (s->to_e && s->txnid <= s->to_synced) { /* the solo process synced it */
            atomic_store(&s->dur->synced, s->txnid);
            s->need_sync = 0;
        }
        /* an unclean open (even a read-only one) leaves a base that may not be durable */
        atomic_store(&seg->need_sync, (uint32_t)(!s->fresh && (s->need_sync ||
                                                               store_synced(s) < s->txnid)));
        atomic_store(&seg->fresh, (uint32_t)s->fresh);
        /* taken over from a solo process whose snapshot is older: the pages
         * commits since freed are not known, so none is used until then */
        if (s->to_e && s->to_oldest < s->txnid)
            seg->dropped = s->txnid;
        /* a copy of the commit read, for the processes that join, when the
         * file's slots may not hold it: a taker's (a new store's first
         * commit, in flight alone, rewrites the slot that held it: the
         * empty store's), and the empty store's (which a first commit cut
         * short leaves in neither slot: mote__recover) */
        if (s->to_e || s->txnid == 1)
            root_copy_put(seg, s->cur->data, s->P, s->txnid);
        atomic_store(&seg->magic, SEG_MAGIC);
        /* a taker's first write reads the file's size again (as after
         * another process's commit): a write of the solo process in flight
         * may have grown it after the size this one read, and the growth's
         * zeros written from a size too small overwrote that commit's pages */
        s->bm_txnid = s->to_e ? 0 : s->txnid;
    }
    take_unlock(s); /* (a taker: the segment is ready) */
    int r;
    if (atomic_load(&s->solo) && (r = solo_ready(s)))
        return r;
    if ((!seg && !atomic_load(&s->solo)) || !s->alone)
        return MOTE_OK;
    r = s->io->flock(s->io->ctx, s->fd, LOCK_SH); /* our slot is locked: see the top */
    if (r)
        return mote__ioerr(r, "lock", s->path);
    s->alone = 0;
    return MOTE_OK;
}

/* ---- snapshots -------------------------------------------------------------- */

/* Of the root slots in buf (`have` bytes of the file's start), the valid
 * checkpoint or version 2 marker (a copy of a state) with the highest txnid
 * in [lo, hi] (*tx), or -1. */
static int best_slot(const mote_store *s, const uint8_t *buf, size_t have, uint64_t lo,
                     uint64_t hi, uint64_t *tx)
{
    int best = -1;
    *tx = 0;
    for (int i = 0; i < 2 && have >= (size_t)(i + 1) * s->P; i++) {
        const uint8_t *d = buf + (size_t)i * s->P;
        uint64_t t = rd64(d + 24);
        int v = mote__slot_valid(d, s->P, (uint32_t)i);
        if ((v == 1 || (v == 2 && rd32(d + 8) != 1)) && t >= lo && t <= hi &&
            (best < 0 || t > *tx)) {
            best = i;
            *tx = t;
        }
    }
    return best;
}

/* s->cur becomes the root slot `sn` of commit txnid. */
static void adopt(mote_store *s, snap *sn, uint64_t txnid)
{
    if (s->cur)
        mote__snap_unref(s->cur);
    s->cur = sn;
    s->txnid = txnid;
    if (rd32(sn->data + 20) == SLOT_KIND_MARKER)
        wr32(sn->data + 20, SLOT_KIND_COMMIT); /* (in memory, as open reads it) */
    s->base_slot = st_ckpt(sn->data);
    s->marker_ok = 0;
    s->fresh = (int)atomic_load(&s->seg->fresh);
}

/* The root copies a page size leaves room for (4, 2 at 32 KB, 1 at 64 KB). */
static unsigned copies(uint32_t P)
{
    return ROOT_MAX / P < ROOT_COPIES ? ROOT_MAX / P : ROOT_COPIES;
}

/* The segment's copy of the state of commit `txnid`, if one holds it: a
 * copy in memory instead of a pread of the file and two slot hashes (a
 * reader of a store that other processes write takes a new snapshot at
 * almost every transaction; a writer builds on another process's commit).
 * A sequence lock guards each copy: the writer makes its seq odd, copies,
 * sets its txn and makes seq even; a copy taken while seq moved is
 * dropped. Every commit made in a segment puts its state here (a process
 * alone with a store has no segment: SOLO). */
static snap *root_copy(const mote_store *s, uint64_t txnid)
{
    struct segment *seg = s->seg;
    for (unsigned i = 0; i < copies(s->P); i++) {
        rootcopy *c = &seg->copy[i];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        if (!seq || (seq & 1) || atomic_load_explicit(&c->txn, memory_order_relaxed) != txnid)
            continue;
        snap *sn = mote__snap_new(s->P);
        if (!sn)
            return NULL;
        memcpy(sn->data, seg->root + (size_t)i * s->P, s->P);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&c->seq, memory_order_relaxed) == seq &&
            rd64(sn->data + 24) == txnid &&
            (rd32(sn->data + 20) == SLOT_KIND_COMMIT || rd32(sn->data + 20) == SLOT_KIND_RECORD))
            return sn;
        mote__snap_unref(sn);
    }
    return NULL;
}

/* A commit's state into a root copy (the writer, before it publishes the
 * commit): the next one round, but not the copy of the latest commit
 * (readers take it from there until a newer one is durable). */
static void root_copy_put(struct segment *seg, const uint8_t *slot, uint32_t P, uint64_t txnid)
{
    unsigned n = copies(P), i = seg->copy_next++ % n;
    if (n > 1 && atomic_load(&seg->copy[i].txn) == atomic_load(&seg->latest))
        i = seg->copy_next++ % n;
    rootcopy *c = &seg->copy[i];
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_relaxed) | 1;
    atomic_store_explicit(&c->seq, seq, memory_order_relaxed); /* odd: a writer dying */
    atomic_thread_fence(memory_order_release);                 /* here leaves it odd */
    memcpy(seg->root + (size_t)i * P, slot, P);
    atomic_store_explicit(&c->txn, txnid, memory_order_relaxed);
    atomic_store_explicit(&c->seq, seq + 1, memory_order_release);
}

/* The root slot comes from the segment's copy when it holds the latest
 * commit, else from the file: both slots are read at once, as while a
 * writer rewrites one (torn: its hash fails) the other holds the commit
 * before, so a reader always finds a published commit even when another
 * process commits faster than it reads (a writer without syncs). A slot
 * whose txnid is above the latest published one is a commit not yet
 * published (not yet synced): ignored. */
int mote__share_refresh(mote_store *s)
{
    struct segment *seg = s->seg;
    uint8_t *buf = NULL;
    int rc = MOTE_OK;
    uint64_t start = 0;
    unsigned step = 0;
    for (int tries = 0;; tries++) {
        /* (a copy of every commit is kept, so a miss is a reader overtaken
         * between reading `latest` and its copy: again at once; only a state
         * that stays out of reach, its commit's process descheduled between
         * its sync and publishing it, is waited for, up to the busy timeout) */
        if (tries >= 64) {
            if (!start)
                start = now_us();
            else if (wait_over(start, s->busy_ms, &step))
                break;
        }
        uint64_t latest = atomic_load(&seg->latest);
        if (latest == s->txnid && s->cur) {
            mote__free(buf);
            return MOTE_OK;
        }
        snap *sn = root_copy(s, latest);
        if (sn) {
            adopt(s, sn, latest);
            mote__free(buf);
            return MOTE_OK;
        }
        if (!buf && !(buf = mote__malloc(2u * s->P))) {
            rc = mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
            break;
        }
        /* a commit record: its page (not rewritten while the chain holds
         * it; if it moved on meanwhile, again); a checkpoint: both slots */
        uint32_t page = atomic_load(&seg->latest_page);
        int rec = page >= 2;
        ssize_t r = s->io->pread(s->io->ctx, s->fd, buf, rec ? s->P : 2u * s->P,
                                 rec ? (uint64_t)page << s->page_shift : 0);
        if (r < 0) {
            rc = mote__ioerr((int)r, "read", s->path);
            break;
        }
        uint64_t bt = 0, now = atomic_load(&seg->latest); /* published by the time of the read */
        int best;
        if (rec) {
            bt = rd64(buf + 24);
            best = r == (ssize_t)s->P && bt >= latest && bt <= now &&
                           mote__slot_valid(buf, s->P, page) == (int)SLOT_KIND_RECORD
                       ? 0 : -1;
        } else {
            best = best_slot(s, buf, (size_t)r, latest, now, &bt); /* (a new file: one page) */
        }
        if (best < 0)
            continue; /* rewritten meanwhile: again */
        sn = mote__snap_new(s->P);
        if (!sn) {
            rc = mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
            break;
        }
        memcpy(sn->data, buf + (size_t)best * s->P, s->P);
        adopt(s, sn, bt);
        mote__free(buf);
        return MOTE_OK;
    }
    mote__free(buf);
    return rc ? rc : mote__err(MOTE_BUSY, "store %s: its latest commit could not be read "
                               "within %d ms (commits come too fast)", s->path, s->busy_ms);
}

/* The newest state on disk, as an open would recover it (pager.h COMMIT
 * CHAIN), into out (P bytes). A store just made is one page long. */
static int newest_state(mote_store *s, uint8_t *out)
{
    uint8_t *buf = mote__malloc(2u * s->P);
    if (!buf)
        return mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
    ssize_t r = s->io->pread(s->io->ctx, s->fd, buf, 2u * s->P, 0);
    /* shorter than a page: a new store's first commit is not written yet
     * (creation writes nothing: open.c create_file), or is under way */
    int rc = r < 0 ? mote__ioerr((int)r, "read", s->path)
             : r < (ssize_t)s->P ? CORRUPT("%s: no root slot yet (%zd bytes)", s->path, r)
                                 : MOTE_OK;
    int slot, clean;
    uint64_t hi = 0;
    if (!rc)
        rc = mote__recover(s, buf, (size_t)r, UINT64_MAX, out, &slot, &clean, &hi);
    mote__free(buf);
    return rc;
}

int mote__share_outsider_refresh(mote_store *s)
{
    snap *sn = mote__snap_new(s->P);
    if (!sn)
        return mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
    int rc = newest_state(s, sn->data);
    if (rc == MOTE_CORRUPT && s->cur) /* being written: the one it has, for now */
        rc = MOTE_OK;
    else if (!rc && rd64(sn->data + 24) > s->txnid) {
        mote__snap_unref(s->cur);
        s->cur = sn;
        s->txnid = rd64(sn->data + 24);
        s->base_slot = st_ckpt(sn->data);
        sn = NULL;
    }
    if (sn)
        mote__snap_unref(sn);
    return rc;
}

int mote__share_outsider_check(mote_store *s, uint64_t txnid, int rc)
{
    if (rc != MOTE_CORRUPT)
        return rc;
    uint8_t *buf = mote__malloc(s->P);
    uint64_t latest = buf && !newest_state(s, buf) ? rd64(buf + 24) : 0;
    mote__free(buf);
    if (latest <= txnid)
        return rc;
    return mote__err(MOTE_BUSY, "store %s changed while this process read it: it may only "
                     "read the store file, so a writer may reuse the pages of its snapshot; "
                     "read again", s->path);
}

/* The oldest snapshot this process's readers hold (under s->mu). */
static uint64_t local_oldest(const mote_store *s)
{
    uint64_t oldest = UINT64_MAX;
    for (reader *r = s->readers; r; r = r->next)
        if (r->txnid < oldest)
            oldest = r->txnid;
    return oldest;
}

int mote__share_snapshot(mote_store *s)
{
    struct segment *seg = s->seg;
    segslot *me = seg_slot(seg, (unsigned)s->slot);
    for (int tries = 0; tries < 1000; tries++) {
        if (atomic_load_explicit(&seg->latest, memory_order_acquire) != s->txnid) {
            int rc = mote__share_refresh(s);
            if (rc)
                return rc;
        }
        uint64_t snap = s->txnid;
        if (s->readers) { /* others of this process may read older ones */
            uint64_t local = local_oldest(s);
            if (local < snap)
                snap = local;
        }
        atomic_store(&me->snap, snap); /* then the latest again: see the top */
        if (atomic_load(&seg->latest) == s->txnid)
            return MOTE_OK;
    }
    return mote__err(MOTE_BUSY, "store %s: commits come too fast to take a snapshot", s->path);
}

void mote__share_unpublish(mote_store *s)
{
    atomic_store_explicit(&seg_slot(s->seg, (unsigned)s->slot)->snap,
                          s->readers ? local_oldest(s) : UINT64_MAX, memory_order_release);
}

uint64_t mote__share_oldest(mote_store *s, uint64_t needed)
{
    struct segment *seg = s->seg;
    uint64_t oldest = UINT64_MAX;
    uint32_t hi = atomic_load(&seg->slots_hi);
    for (unsigned i = 0; i < hi && i < SEG_SLOTS; i++) {
        uint64_t o = atomic_load(&seg_slot(seg, i)->owner);
        if ((int)i == s->slot || !o)
            continue;
        uint64_t sn = atomic_load(&seg_slot(seg, i)->snap);
        if (sn >= needed || sn >= oldest)
            continue;
        if (!slot_alive_cached(s, seg, i, o)) { /* its process died: reclaim the slot */
            slot_reclaim(seg_slot(seg, i), o);
            continue;
        }
        oldest = sn;
    }
    return oldest;
}

/* ---- write transactions --------------------------------------------------------- */

/* Under the writer lock, after the refresh: s->wcur = the newest commit
 * written when it is newer than the latest (not durable yet: pager.h GROUP
 * COMMIT), from a root copy or its page (which nobody rewrites while it is
 * the newest), else NULL. */
static int written_base(mote_store *s)
{
    struct segment *seg = s->seg;
    uint64_t w = atomic_load(&seg->written);
    snap *sn = NULL;
    if (w > s->txnid && !(s->wcur && s->wtxnid == w) && !(sn = root_copy(s, w))) {
        uint32_t page = atomic_load(&seg->written_page);
        if (!(sn = mote__snap_new(s->P)))
            return mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
        ssize_t r = s->io->pread(s->io->ctx, s->fd, sn->data, s->P,
                                 (uint64_t)page << s->page_shift);
        int kind = r == (ssize_t)s->P ? mote__slot_valid(sn->data, s->P, page) : 0;
        if (r != (ssize_t)s->P || rd64(sn->data + 24) != w ||
            (kind != (int)SLOT_KIND_COMMIT && kind != (int)SLOT_KIND_RECORD)) {
            mote__snap_unref(sn);
            return r < 0 ? mote__ioerr((int)r, "read", s->path)
                         : CORRUPT("%s: the state of commit %llu (page %u), written by "
                                   "another process, is not there", s->path,
                                   (unsigned long long)w, page);
        }
    }
    pthread_mutex_lock(&s->mu);
    if (w <= s->txnid || sn) {
        if (s->wcur)
            mote__snap_unref(s->wcur);
        s->wcur = sn;
        s->wtxnid = sn ? w : 0;
    }
    pthread_mutex_unlock(&s->mu);
    return MOTE_OK;
}

int mote__share_write_begin(mote_store *s)
{
    struct segment *seg = s->seg;
    const mote_io *io = s->io;
    int r, ms = s->busy_ms < 0 ? 0 : s->busy_ms;
    if (ms == 0) {
        r = pthread_mutex_trylock(&seg->writer_mu);
    } else {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        while ((r = pthread_mutex_clocklock(&seg->writer_mu, CLOCK_MONOTONIC, &until)) == EINTR)
            ;
    }
    if (r == EOWNERDEAD) { /* its holder died in a write transaction */
        pthread_mutex_consistent(&seg->writer_mu);
        atomic_store(&seg->need_sync, 1);
        r = 0;
    }
    if (r) {
        uint32_t pid = atomic_load(&seg->writer);
        if (r != EBUSY && r != ETIMEDOUT)
            return mote__err(MOTE_IO, "store %s: its writer mutex: %s", s->path, strerror(r));
        if (pid)
            return mote__err(MOTE_BUSY, "store %s: process %u is in a write transaction "
                             "(waited %d ms)", s->path, pid, ms);
        return mote__err(MOTE_BUSY, "store %s: another process is in a write transaction "
                         "(waited %d ms)", s->path, ms);
    }
    uint64_t start = now_us();
    unsigned step = 0;
    while (atomic_load(&seg->solo_writing)) { /* taken over in a write begun alone: it joins */
        uint64_t off = atomic_load(&seg->solo_off);
        int rc = MOTE_OK;
        if (!off || io->lock(io->ctx, s->fd, MOTE_LK_TEST, off, 1) != -EAGAIN) {
            rc = solo_died_writing(s, seg); /* (its process died) */
        } else {
            pthread_mutex_unlock(&seg->writer_mu); /* (waiting, as it joins without it) */
            if (wait_over(start, ms, &step))
                return mote__err(MOTE_BUSY, "store %s: process %u is in a write transaction "
                                 "(waited %d ms)", s->path, atomic_load(&seg->writer), ms);
            while ((r = pthread_mutex_lock(&seg->writer_mu)) == EINTR)
                ;
            if (r == EOWNERDEAD) {
                pthread_mutex_consistent(&seg->writer_mu);
                atomic_store(&seg->need_sync, 1);
            }
        }
        if (rc) {
            pthread_mutex_unlock(&seg->writer_mu);
            return rc;
        }
    }
    atomic_store(&seg->writer, my_pid(s));
    if (atomic_exchange(&seg->writing, 1)) /* its holder died in one (a thread that ended) */
        atomic_store(&seg->need_sync, 1);
    if (atomic_load(&seg->dur.failed)) {
        mote__share_write_end(s);
        return mote__err(MOTE_POISONED, "store %s: a sync failed (in this or another "
                         "process); close it in every process and reopen it", s->path);
    }
    if (atomic_load(&seg->need_sync))
        s->need_sync = 1;
    s->fresh = (int)atomic_load(&seg->fresh);
    pthread_mutex_lock(&s->mu);
    int rc = mote__share_refresh(s);
    pthread_mutex_unlock(&s->mu);
    if (!rc)
        rc = written_base(s);
    if (rc) {
        mote__share_write_end(s);
        return rc;
    }
    uint64_t base = s->wcur ? s->wtxnid : s->txnid;
    if (s->bm_txnid != base) { /* another process committed since this one did */
        mote_fileinfo fi;
        if ((r = io->fstat(io->ctx, s->fd, &fi))) {
            mote__share_write_end(s);
            return mote__ioerr(r, "stat", s->path);
        }
        if (fi.size > s->file_bytes)
            s->file_bytes = fi.size;
        mote__free(s->bm); /* reloaded from the latest commit */
        s->bm = NULL;
        s->bm_cap = 0;
        s->own_since = 0; /* the run of this process's commits ended */
    }
    uint64_t next = atomic_load(&seg->next_txnid);
    if (next < s->next_txnid)
        next = s->next_txnid;
    if (next <= base)
        next = base + 1;
    s->next_txnid = next;
    atomic_store(&seg->next_txnid, next + 1); /* a dead writer's slot keeps its txnid */
    return MOTE_OK;
}

uint64_t mote__share_release(mote_store *s, uint64_t local, uint64_t needed)
{
    struct segment *seg = s->seg;
    uint64_t oldest = local;
    if (seg->dropped > needed)
        needed = seg->dropped;
    if (seg->ring_n && seg->ring_tag[(seg->ring_head + seg->ring_n - 1) % RING] > needed)
        needed = seg->ring_tag[(seg->ring_head + seg->ring_n - 1) % RING];
    uint64_t others = needed ? mote__share_oldest(s, needed + 1) : UINT64_MAX;
    if (others < oldest)
        oldest = others;
    while (seg->ring_n && seg->ring_tag[seg->ring_head] <= oldest) { /* every snapshot is past */
        if (seg->ring_pgno[seg->ring_head] < s->hint) /* free from now on */
            s->hint = seg->ring_pgno[seg->ring_head];
        seg->ring_head = (seg->ring_head + 1) % RING;
        seg->ring_n--;
    }
    if (seg->dropped && seg->dropped <= oldest) {
        seg->dropped = 0;
        s->hint = 2;
    }
    return oldest;
}

void mote__share_pending(mote_store *s, uint64_t oldest)
{
    struct segment *seg = s->seg;
    memset(s->pend, 0, s->pend_cap);
    uint32_t np = rd32((s->wcur ? s->wcur : s->cur)->data + 32), cap_bits = s->pend_cap * 8u;
    for (size_t i = 0; i < s->npend; i++) /* this process's own commits' */
        bit_set(s->pend, s->pendv[i].pgno);
    for (uint32_t i = 0; i < seg->ring_n; i++) { /* every process's recent commits' */
        uint32_t p = seg->ring_pgno[(seg->ring_head + i) % RING];
        if (p < cap_bits)
            bit_set(s->pend, p);
    }
    /* Entries the ring dropped that a snapshot may still read, from commits
     * this process did not make (its own are all in pendv): which free pages
     * are safe is not known, so none is used. */
    uint64_t own = s->own_since ? s->own_since : UINT64_MAX;
    if (seg->dropped > oldest && own > oldest + 1)
        for (uint32_t p = 2; p < np && p < cap_bits; p++)
            if (!bit_get(s->bm, p))
                bit_set(s->pend, p);
}

void mote__share_written(mote_store *s, uint64_t txnid, const uint8_t *st,
                         const uint32_t *freed, size_t nfreed)
{
    struct segment *seg = s->seg;
    /* (every commit: a process that joins later may find the latest commit
     * in neither slot, both rewritten by commits not yet durable) */
    root_copy_put(seg, st, s->P, txnid);
    for (size_t i = 0; i < nfreed; i++) /* before the commit is published */
        ring_push(seg, txnid, freed[i]);
    /* unsynced (MOTE_NOSYNC): the next commit of a process that syncs syncs
     * it first; on a new store nothing is durable, so nothing needs that */
    atomic_store(&seg->need_sync, (s->flags & MOTE_NOSYNC) && !s->fresh ? 1u : 0u);
    atomic_store(&seg->fresh, (uint32_t)s->fresh);
    uint64_t seq = atomic_load_explicit(&seg->written_seq, memory_order_relaxed);
    atomic_store(&seg->written_seq, seq + 1); /* odd */
    atomic_store(&seg->written_page, st_where(st));
    atomic_store(&seg->written, txnid);
    atomic_store(&seg->written_seq, seq + 2);
    if (!s->own_since) /* the first of a run of this process's commits */
        s->own_since = txnid;
}

uint64_t mote__share_written_txn(const mote_store *s, uint32_t *page)
{
    struct segment *seg = s->seg;
    for (;;) { /* (a writer may change the pair while another process reads it) */
        uint64_t seq = atomic_load(&seg->written_seq);
        uint32_t pg = atomic_load(&seg->written_page);
        uint64_t w = atomic_load(&seg->written);
        if (!(seq & 1) && atomic_load(&seg->written_seq) == seq) {
            *page = pg;
            return w;
        }
        sched_yield();
    }
}

void mote__share_visible(mote_store *s, uint64_t txnid, uint32_t page, int synced)
{
    struct segment *seg = s->seg;
    int r;
    while ((r = pthread_mutex_lock(&seg->sync_mu)) == EINTR)
        ;
    if (r == EOWNERDEAD) /* its holder died here: what it set is whole or not set */
        pthread_mutex_consistent(&seg->sync_mu);
    /* (any other failure: without the mutex, as the values only grow) */
    if (synced && txnid > atomic_load(&seg->dur.synced))
        atomic_store(&seg->dur.synced, txnid);
    if (txnid > atomic_load(&seg->latest)) {
        atomic_store(&seg->latest_page, page);
        atomic_store(&seg->latest, txnid);
    }
    if (!r || r == EOWNERDEAD)
        pthread_mutex_unlock(&seg->sync_mu);
}

/* ---- copies of written pages ---------------------------------------------------- */

/* A reader of another process's commit needs the pages that commit wrote
 * (its leaf, the branches above it): read from the file, each costs a pread
 * and its copy (~2.5 µs with four processes on two CPUs) where a copy from
 * here costs a memcpy. The writer puts every tree and overflow page of its
 * commit here (under the writer lock), each at the place of its page number
 * modulo their count, so a reader that misses its cache looks at one place:
 * a copy is used only if it is whole (its sequence lock) and passes the
 * checks of a page read from the file (the pointer's crc32c, page number,
 * birth). In bench-procs' mixed workload 0.4 of the reads missed a page
 * another process had rewritten; with 16 copies of branch pages only, the
 * leaves were all preads (ARCHITECTURE.md, "Concurrency"). Direct places
 * keep a writer's cost at one memcpy per page and a reader's at one
 * header; a store larger than the places loses the copies
 * of pages whose numbers meet (the newer one wins), not their correctness.
 * The area's memory is taken only where written: at most the store's size. */
static unsigned page_copies(uint32_t P) { return PAGE_AREA / (P + (uint32_t)sizeof(pagecopy)); }

/* The copies' area, mapped the first time a process needs it once another
 * one has opened the store (with the header again: the shim maps from a
 * file's start), the segment's file grown to hold it then; NULL if either
 * fails (it is a shortcut: readers pread). Not at open: a file size limit
 * (RLIMIT_FSIZE, 256 KB in a test) would make every open fail. */
static uint8_t *page_area(mote_store *s)
{
    uint8_t *a = atomic_load_explicit(&s->seg_area, memory_order_acquire);
    if (a || atomic_load_explicit(&s->area_failed, memory_order_relaxed) ||
        atomic_load_explicit(&s->seg->slots_hi, memory_order_relaxed) <= 1)
        return a;
    pthread_mutex_lock(&s->mu);
    if (!(a = atomic_load(&s->seg_area)) && !atomic_load(&s->area_failed)) {
        const mote_io *io = s->io;
        char path[80];
        seg_path(s, path, sizeof path);
        int fd = may_map(io)
                     ? io->open(io->ctx, path, O_RDWR | O_NOFOLLOW, 0) : -EMFILE;
        mote_fileinfo fi;
        void *map = NULL;
        /* the file grows to hold them now (never shrinks while in use) */
        if (fd >= 0 && !io->fstat(io->ctx, fd, &fi) && fi.dev == s->seg_dev &&
            fi.ino == s->seg_ino &&
            (fi.size >= SEG_FILE || !io->ftruncate(io->ctx, fd, SEG_FILE)) &&
            !io->map(io->ctx, fd, SEG_FILE, &map)) {
            a = (uint8_t *)map + SEG_MAP;
            atomic_fetch_add(&nmapped, 1);
            atomic_store_explicit(&s->seg_area, a, memory_order_release);
        } else {
            atomic_store(&s->area_failed, 1);
        }
        if (fd >= 0)
            io->close(io->ctx, fd);
    }
    pthread_mutex_unlock(&s->mu);
    return a;
}

static void page_area_unmap(mote_store *s)
{
    uint8_t *a = atomic_exchange(&s->seg_area, NULL);
    if (a) {
        s->io->unmap(s->io->ctx, a - SEG_MAP, SEG_FILE);
        atomic_fetch_sub(&nmapped, 1);
    }
}

static pagecopy *page_copy(uint8_t *area, uint32_t P, uint32_t pgno)
{
    return (pagecopy *)(area + (size_t)(pgno % page_copies(P)) * (P + sizeof(pagecopy)));
}

void mote__share_pages(mote_store *s, mpage *const *pages, uint32_t npg)
{
    uint8_t *area = page_area(s); /* NULL while no other process has opened the store */
    if (!area)
        return;
    for (uint32_t k = 0; k < npg; k++) {
        const uint8_t *d = pages[k]->data;
        if (n_type(d) != NODE_BRANCH && n_type(d) != NODE_LEAF && n_type(d) != PAGE_OVERFLOW)
            continue;
        pagecopy *c = page_copy(area, s->P, pages[k]->pgno);
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_relaxed) | 1;
        atomic_store_explicit(&c->seq, seq, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        atomic_store_explicit(&c->pgno, pages[k]->pgno, memory_order_relaxed);
        atomic_store_explicit(&c->birth, (uint32_t)rd64(d + 8), memory_order_relaxed);
        memcpy(c + 1, d, s->P);
        atomic_store_explicit(&c->seq, seq + 1, memory_order_release);
    }
}

int mote__share_page(mote_store *s, uint32_t pgno, uint32_t birth32, uint8_t *buf)
{
    uint8_t *area = page_area(s);
    if (!area)
        return 0;
    pagecopy *c = page_copy(area, s->P, pgno);
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if (!seq || (seq & 1) || atomic_load_explicit(&c->pgno, memory_order_relaxed) != pgno ||
        atomic_load_explicit(&c->birth, memory_order_relaxed) != birth32)
        return 0;
    memcpy(buf, c + 1, s->P);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&c->seq, memory_order_relaxed) == seq;
}

void mote__share_keep_base(mote_store *s)
{
    root_copy_put(s->seg, s->cur->data, s->P, s->txnid);
}

void mote__share_write_end(mote_store *s)
{
    struct segment *seg = s->seg;
    if (s->poisoned) /* the commit may have reached the disk in part */
        atomic_store(&seg->need_sync, 1);
    atomic_store(&seg->writer, 0);
    atomic_store(&seg->writing, 0);
    pthread_mutex_unlock(&seg->writer_mu);
}

/* ---- close ------------------------------------------------------------------- */

int mote__store_alone(mote_store *s)
{
    const mote_io *io = s->io;
    if (!s->alone && !s->probed && io->flock(io->ctx, s->fd, LOCK_EX | LOCK_NB) == 0) {
        if (!s->open_lock || io->lock(io->ctx, s->fd, MOTE_LK_TEST, OPEN_LOCK, 1) == 0)
            s->alone = 1;
        else /* another process is in the instant of its open without the flock */
            io->flock(io->ctx, s->fd, LOCK_SH);
    }
    s->probed = 1; /* asked once, at close */
    return s->alone;
}

void mote__share_forked(mote_store *s)
{
    if (!s->seg)
        return;
    page_area_unmap(s);
    s->io->unmap(s->io->ctx, s->seg, SEG_MAP);
    s->seg = NULL;
    atomic_fetch_sub(&nmapped, 1);
}

void mote__share_close(mote_store *s)
{
    struct segment *seg = s->seg;
    take_unlock(s);
    solo_release(s); /* (its byte goes with the file's descriptor) */
    if (!seg)
        return;
    const mote_io *io = s->io;
    if (mote__store_alone(s)) {
        char path[80];
        seg_path(s, path, sizeof path);
        io->unlink(io->ctx, path);
    }
    slot_reclaim(seg_slot(seg, (unsigned)s->slot), my_pid(s));
    page_area_unmap(s);
    io->unmap(io->ctx, seg, SEG_MAP);
    s->seg = NULL;
    atomic_fetch_sub(&nmapped, 1);
}

/* ---- alone without a segment (SOLO) ---------------------------------------------
 * A segment costs a tiny store's open and close ~25 µs (a tmpfs file made,
 * truncated, mapped, unmapped, removed: 35 µs for open → read → close
 * against 11.5 µs without, C driver, 2026-12-04), which a process alone
 * with the store does not need. So a process that finds itself alone makes
 * none (when the store file's writers are its own user only: the file is
 * its own and not writable by group or others) and keeps instead, in its
 * solo page (shared memory, one per process: /dev/shm/motedb-solo-<id>,
 * mode 0600, 16 MB of which only the entries used take memory), an entry
 * per such store: the oldest snapshot it reads, how many of its write
 * transactions are in flight, its newest durable commit, and a bell. It
 * locks byte SOLO_LOCK + (id << 18 | entry) of the store file, which says
 * where to find them.
 *
 * Another process that opens the store takes it over: it makes the segment
 * (holding a write lock on the segment's first byte until it is ready: a
 * taker that died leaves it unlocked and unready, and the next one makes it
 * again), gives slot 0 to the solo process (alive while its byte is
 * locked), rings the bell, reads the entry, then reads the file as a first
 * opener does, as it is after the bell: its size again (the open's fstat
 * came before; a write in flight may grow it later, so the taker's first
 * write reads it again too), a torn first commit of a new store again once
 * that write ended (mote__share_taken_again). Slot 0 gets the solo process's oldest snapshot; if that is
 * older than the latest commit, no free page is used (`dropped`) until it
 * is past it (which pages commits since then freed is not known). If a
 * write transaction begun alone was in flight, `solo_writing` makes every
 * writer wait until the solo process joined (its readers go on: that write
 * reuses only pages freed by commits durable when it began, which the
 * snapshot read from the file does not use); if the solo process died,
 * the writer takes the newest state on disk instead.
 *
 * The solo process joins the segment at its next transaction, or when its
 * last write in flight is durable, or at close: slot 0 becomes its own,
 * with its readers' snapshot; its commits since the takeover, and the
 * pages they freed, go into the segment. The order that makes this safe: a
 * read transaction publishes its snapshot in the entry before it reads the
 * bell, and a write transaction is counted (under the store's mutex)
 * before it reads the bell, while the taker rings before it reads the
 * entry; so either the taker sees them, or they see the bell and join
 * first. A reader that sees the bell while another thread holds the writer
 * lock goes on alone only while a write begun before the bell is counted
 * (writers then wait for the join, which publishes that reader); else it
 * waits for the join. Until it joins, an idle solo process holds back only
 * the snapshots it reads (share_solo_idle_holds_nothing_back).
 *
 * A crash leaves a solo page: the next process to exit that made one
 * removes those of dead processes of its user (at exit, not at the first
 * open, which it made ~20 µs slower: five system calls for an empty
 * directory). Its maker holds a write lock on the page
 * file's byte 0 from right after creating it to its exit (the mapping keeps
 * the file's description, and the lock, after the descriptor is closed), so
 * a sweeper that gets that lock itself knows nobody alive holds it, and a
 * maker that finds it taken (a sweeper got there first, and removes the
 * file) tries another name. A page of a library before 2026-12-06 (no
 * `kept` mark) is judged by its owner word (pid and start time) in this pid
 * namespace, as then. Why the lock: the owner word cost every process's
 * first open two reads of /proc (its pid namespace, its start time), and
 * those with the directory's scan ~70 µs of a ~230 µs first open (a C
 * driver forking a process per open of a T1 store, 2026-12-06: 230 -> 140
 * µs with both changes, the build of 2026-12-01 85 µs): bench/orm's
 * cold rows open the store in a new process inside the timer, and Filter:
 * Small (T1, 50 queries) was 0.82x the build of 2026-12-01. A solo open of
 * a store not closed cleanly removes a segment a crash left.
 */
#define PP_ENTRIES (1u << 18)
#define PP_BYTES ((size_t)PP_ENTRIES * sizeof(solo_entry))
#define PP_MAGIC 0x314F4C4F53544F4Dull /* "MOTSOLO1" */

_Static_assert(sizeof(solo_entry) == 64, "an entry per cache line");

/* Entry 0 of a solo page: whose it is. */
typedef struct solo_head {
    _Atomic uint64_t magic;
    uint64_t owner, pidns; /* kept: its maker's pid (for messages), 0; else as a slot's */
    uint64_t kept;         /* PP_KEPT: its maker holds the lock on byte 0 while it lives */
    uint8_t pad[32];
} solo_head;
#define PP_KEPT 0x54504B4B434F4C31ull /* "1LOCKKPT" */

static pthread_mutex_t pp_mu = PTHREAD_MUTEX_INITIALIZER;
static solo_entry *pp;      /* this process's solo page; NULL: none (yet) */
static const mote_io *pp_io; /* the shim it was made with (compared, never called
                                 later: it may be gone) */
static int pp_failed;
static uint32_t pp_next = 1; /* entries from here on were never handed out */
static uint32_t *pp_free, pp_nfree, pp_cap;

/* Alone, may it go without a segment? Its own store file, writable by no
 * other user (who could not reach its solo page). */
static int solo_may(const mote_store *s)
{
    const mote_io *io = s->io;
    return io->ftruncate && io->lock && !(s->mode & 022) && s->uid == (unsigned)geteuid();
}

#define PP_ID_BITS 38
static uint64_t pp_id; /* its name: /dev/shm/motedb-solo-<id> */

static void pp_name(uint64_t id, char *buf, size_t n)
{
    snprintf(buf, n, "/dev/shm/motedb-solo-%010llx", (unsigned long long)id);
}

/* Solo pages of processes that died (of this user). A page whose maker died
 * before it wrote the head (no magic) goes too: a live maker locks its byte
 * 0 before anything else. */
static void pp_sweep(const mote_io *io)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    uint64_t ns = 0;
    int have_ns = 0;
    struct dirent *de;
    for (int n = 0; n < 4096 && (de = readdir(d)); n++) {
        if (strncmp(de->d_name, "motedb-solo-", 12))
            continue;
        char path[300];
        snprintf(path, sizeof path, "/dev/shm/%s", de->d_name);
        int fd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW, 0);
        if (fd < 0)
            continue;
        solo_head h;
        mote_fileinfo fi;
        int stale = 0;
        if (!io->fstat(io->ctx, fd, &fi) && fi.uid == (unsigned)geteuid() &&
            io->pread(io->ctx, fd, &h, sizeof h, 0) == (ssize_t)sizeof h) {
            if (h.kept == PP_KEPT || h.magic == 0) { /* dead if its lock is ours to take */
                stale = io->lock(io->ctx, fd, MOTE_LK_WRITE, 0, 1) == 0;
            } else if (h.magic == PP_MAGIC) { /* an earlier library's */
                if (!have_ns)
                    self_owner(io, &ns), have_ns = 1;
                stale = h.pidns == ns && !owner_alive(io, h.owner);
            }
        }
        if (stale)
            io->unlink(io->ctx, path);
        io->close(io->ctx, fd); /* (and our lock, if we took it) */
    }
    closedir(d);
}

/* At exit, this process's solo page goes, and those of processes that died
 * (a crash leaves its page: the next process to exit that made one removes
 * it). Not through pp_io: a shim may be gone by now. */
static void pp_remove(void)
{
    char path[64];
    if (pp && pp_id) {
        pp_name(pp_id, path, sizeof path);
        unlink(path);
        pp_sweep(&mote_io_posix);
    }
}

/* This process's solo page (under pp_mu): made once, 16 MB of which only
 * the entries used take memory, named by a random id that the solo lock's
 * byte carries (a process in another pid namespace that shares /dev/shm
 * finds it too). */
static int pp_make(const mote_io *io)
{
    struct rlimit fl;
    if (getrlimit(RLIMIT_FSIZE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY &&
        fl.rlim_cur < PP_BYTES)
        return -1; /* (growing it past the limit would raise SIGXFSZ) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t id = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 20 ^
                   (uint64_t)ts.tv_sec) & ((1ull << PP_ID_BITS) - 1);
    char path[64];
    int fd = -EEXIST;
    for (int tries = 0; tries < 8 && fd == -EEXIST; tries++) {
        id = (id + 0x5851F42Dull * (uint64_t)tries) & ((1ull << PP_ID_BITS) - 1);
        pp_name(id ? id : 1, path, sizeof path);
        fd = io->open(io->ctx, path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd >= 0 && io->lock(io->ctx, fd, MOTE_LK_WRITE, 0, 1)) {
            io->close(io->ctx, fd); /* a sweeper has it (and removes the file) */
            fd = -EEXIST;
        }
    }
    if (fd < 0)
        return -1;
    void *map = NULL;
    int r = io->ftruncate(io->ctx, fd, PP_BYTES);
    if (!r)
        r = io->map(io->ctx, fd, PP_BYTES, &map);
    io->close(io->ctx, fd);
    if (r) {
        io->unlink(io->ctx, path);
        return -1;
    }
    solo_head *h = map;
    h->owner = (uint64_t)getpid();
    h->pidns = 0; /* (an earlier library's sweep leaves it: not its pid namespace) */
    h->kept = PP_KEPT;
    atomic_store(&h->magic, PP_MAGIC);
    pp = map;
    pp_io = io;
    pp_id = id ? id : 1;
    static int registered;
    if (!registered)
        registered = atexit(pp_remove) == 0;
    return 0;
}

/* An entry of the solo page for s, its index in *idx; NULL: none. */
static solo_entry *solo_alloc(mote_store *s, uint32_t *idx)
{
    solo_entry *e = NULL;
    pthread_mutex_lock(&pp_mu);
    if ((pp || (!pp_failed && !(pp_failed = pp_make(s->io) != 0))) && pp_io == s->io) {
        if (pp_nfree)
            *idx = pp_free[--pp_nfree];
        else if (pp_next < PP_ENTRIES)
            *idx = pp_next++;
        else
            *idx = 0;
        e = *idx ? &pp[*idx] : NULL;
    }
    pthread_mutex_unlock(&pp_mu);
    return e;
}

/* s's entry back (s is no longer solo). */
static void solo_release(mote_store *s)
{
    solo_entry *e = atomic_exchange(&s->solo, NULL);
    if (!e)
        return;
    atomic_store(&e->dev, 0);
    atomic_store(&e->ino, 0);
    pthread_mutex_lock(&pp_mu);
    if (pp_nfree == pp_cap) {
        uint32_t n = pp_cap ? pp_cap * 2 : 64, *f = mote__realloc(pp_free, n * sizeof *f);
        if (f) {
            pp_free = f;
            pp_cap = n;
        }
    }
    if (pp_nfree < pp_cap) /* (no memory: the entry is lost, not misused) */
        pp_free[pp_nfree++] = (uint32_t)(e - pp);
    pthread_mutex_unlock(&pp_mu);
}

void mote__share_fork_child(void)
{
    if (pp) /* the parent's: its handles here fail before they touch it */
        munmap(pp, PP_BYTES);
    pp = NULL;
    pp_id = 0;
    pp_failed = 0;
    pp_next = 1;
    pp_nfree = 0;
}

/* Alone and allowed to: go without a segment. 1 if so, 0 if not (no solo
 * page, no entry), < 0 an error. */
static int solo_open(mote_store *s)
{
    uint32_t idx;
    solo_entry *e = solo_alloc(s, &idx);
    if (!e)
        return 0;
    uint64_t off = SOLO_LOCK + (pp_id << 18 | idx);
    atomic_store(&e->oldest, UINT64_MAX);
    atomic_store(&e->writing, 0);
    atomic_store(&e->dev, s->dev);
    atomic_store(&e->ino, s->ino);
    s->bell_seen = atomic_load(&e->bell);
    atomic_store(&s->solo, e);
    s->solo_off = off; /* locked once the file is read (solo_ready) */
    s->init = 1;
    return 1;
}

/* The file read: a segment that a crash left (the store was not closed
 * cleanly) goes, then the solo byte is locked (from then on another process
 * may take the store over: the flock is still exclusive until the caller
 * makes it shared). */
static int solo_ready(mote_store *s)
{
    const mote_io *io = s->io;
    if (!s->marker_ok) { /* (a new store too: an old file's inode, reused) */
        char path[80];
        seg_path(s, path, sizeof path);
        io->unlink(io->ctx, path);
    }
    atomic_store(&atomic_load(&s->solo)->synced, store_synced(s));
    int r = io->lock(io->ctx, s->fd, MOTE_LK_READ, s->solo_off, 1);
    return r ? mote__ioerr(r, "lock", s->path) : MOTE_OK;
}

/* The byte a solo process locks, if one has the store open (the lowest
 * locked one: there is at most one, unless a process that may read the
 * file locks bytes to confuse; then the open fails, as below). */
static int find_solo(const mote_store *s, uint64_t *off)
{
    const mote_io *io = s->io;
    if (io->lock(io->ctx, s->fd, MOTE_LK_TEST, SOLO_LOCK, SOLO_SPAN) != -EAGAIN)
        return 0;
    uint64_t lo = SOLO_LOCK, n = SOLO_SPAN;
    while (n > 1) {
        uint64_t half = n / 2;
        if (io->lock(io->ctx, s->fd, MOTE_LK_TEST, lo, half) == -EAGAIN) {
            n = half;
        } else {
            lo += half;
            n -= half;
        }
    }
    *off = lo;
    return 1;
}

/* The start (its head) of the solo page a taker mapped, s->to_e an entry
 * of it (the one of the solo byte s->solo_off). */
static solo_head *taken_page(const mote_store *s)
{
    return (solo_head *)(s->to_e - ((s->solo_off - SOLO_LOCK) & (PP_ENTRIES - 1)));
}

static void take_unlock(mote_store *s)
{
    if (s->take_fd1) { /* the segment is ready (or the open failed) */
        s->io->lock(s->io->ctx, s->take_fd1 - 1, MOTE_LK_UNLOCK, 0, 1);
        s->io->close(s->io->ctx, s->take_fd1 - 1);
        s->take_fd1 = 0;
    }
    if (s->to_e) {
        s->io->unmap(s->io->ctx, taken_page(s), PP_BYTES);
        s->to_e = NULL;
    }
}

/* The solo process's entry (its page mapped: s->to_e), checked. */
static int solo_page_once(mote_store *s, uint64_t off);

/* The solo process's entry: a process closing the store frees its entry
 * before its descriptor (and the byte's lock) goes, so a mismatch while the
 * byte is locked is asked again for a while. */
static int solo_page(mote_store *s, uint64_t off)
{
    uint64_t start = now_us();
    unsigned step = 0;
    int rc;
    while ((rc = solo_page_once(s, off)) == MOTE_LOCKED && !wait_over(start, 200, &step))
        ;
    return rc;
}

static int solo_page_once(mote_store *s, uint64_t off)
{
    const mote_io *io = s->io;
    uint64_t v = off - SOLO_LOCK;
    uint32_t idx = (uint32_t)(v & (PP_ENTRIES - 1));
    char path[64];
    pp_name(v >> 18, path, sizeof path);
    int pfd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW, 0);
    mote_fileinfo fi;
    void *map = NULL;
    int ok = pfd >= 0 && !io->fstat(io->ctx, pfd, &fi) && fi.uid == s->uid &&
             !(fi.mode & 077) && fi.size >= PP_BYTES && !io->map(io->ctx, pfd, PP_BYTES, &map);
    if (pfd >= 0)
        io->close(io->ctx, pfd);
    solo_entry *e = ok ? (solo_entry *)map + idx : NULL;
    const solo_head *h = map;
    if (!ok || atomic_load(&h->magic) != PP_MAGIC || atomic_load(&e->dev) != s->dev ||
        atomic_load(&e->ino) != s->ino) {
        /* (its owner read before the page goes: it was read after, a crash) */
        unsigned long long owner = ok ? h->owner & 0xFFFFFFFFu : 0;
        if (map)
            io->unmap(io->ctx, map, PP_BYTES);
        if (io->lock(io->ctx, s->fd, MOTE_LK_TEST, off, 1) != -EAGAIN)
            return SOLO_GONE; /* it closed the store meanwhile */
        return mote__err(MOTE_LOCKED, "store %s is open in process %llu, whose shared memory "
                         "%s is not visible here (%s): another container or user?",
                         s->path, owner, path, pfd < 0 ? strerror(-pfd) : "it does not match");
    }
    s->to_e = e;
    s->solo_off = off;
    return MOTE_OK;
}

/* Not alone, and a solo process has the store open (its byte at `off`):
 * attach the segment an earlier takeover made, or make it, holding a write
 * lock on its first byte until it is ready (a taker that died leaves it
 * unlocked and not ready: the next one makes it again). The maker gives
 * slot 0 to the solo process, rings its bell, waits for its writes begun
 * alone, and reads its snapshot into slot 0. */
static int solo_attach(mote_store *s, uint64_t off)
{
    const mote_io *io = s->io;
    char path[80];
    seg_path(s, path, sizeof path);
    unsigned want = seg_mode(s->mode);
    int rc = solo_page(s, off), r = 0, fd = -1;
    void *map = NULL;
    mote_fileinfo fi;
    uint64_t start = now_us();
    unsigned step = 0;
    while (!rc) {
        fd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW | O_CREAT, (int)want);
        if (fd < 0) {
            rc = mote__ioerr(fd, "the shared memory", s->path);
            break;
        }
        if ((r = io->lock(io->ctx, fd, MOTE_LK_WRITE, 0, 1)) != -EAGAIN)
            break;
        io->close(io->ctx, fd); /* another process is making it */
        fd = -1;
        if (wait_over(start, s->busy_ms, &step))
            rc = mote__err(MOTE_BUSY, "store %s: another process is opening it (waited %d "
                           "ms)", s->path, s->busy_ms);
    }
    /* its size under the lock: read before it, it could be that of a file
     * another taker was about to make, which has grown since (a page area),
     * and making it that size again would cut a live mapping (SIGBUS) */
    if (!rc && !r && !(r = io->fstat(io->ctx, fd, &fi)) &&
        ((fi.uid != (unsigned)geteuid() && fi.uid != s->uid) || (fi.mode & ~want)))
        rc = foreign_segment(s, path, &fi);
    if (!rc && !r && fi.size < SEG_MAP) /* (never smaller: sizes only grow) */
        r = io->ftruncate(io->ctx, fd, SEG_MAP);
    if (!rc && !r)
        r = io->map(io->ctx, fd, SEG_MAP, &map);
    if (r && !rc)
        rc = mote__ioerr(r, "the shared memory", s->path);
    if (rc) {
        if (fd >= 0)
            io->close(io->ctx, fd);
        take_unlock(s);
        return rc;
    }
    struct segment *seg = map;
    s->take_fd1 = fd + 1;
    int ready = atomic_load(&seg->magic) == SEG_MAGIC && seg->version == SEG_VERSION &&
                seg->dev == s->dev && seg->ino == s->ino;
    /* Gone (its byte unlocked): it joined a segment made ready, or it
     * closed or died: this one opens as any other process does (seg_attach),
     * joining the segment if one is ready and in use or being made, making
     * it if its maker died or nobody is in it. (It made it here, for nobody, before;
     * but a first opener, come after the solo process closed, may be making
     * it already: two makers of one segment, two stores in one file,
     * share_taker_waits_for_the_first_opener) */
    int gone = io->lock(io->ctx, s->fd, MOTE_LK_TEST, off, 1) != -EAGAIN;
    if (gone) {
        io->unmap(io->ctx, map, SEG_MAP);
        take_unlock(s);
        return SOLO_GONE;
    }
    /* made by an earlier taker: for this solo process, or one it is joining */
    uint64_t so = atomic_load(&seg->solo_off);
    s->init = !ready || !(so == off || (so == 0 && any_live(s, seg)));
    if (s->init) { /* new, stale, or half made by a taker that died */
        if ((r = seg_init(seg)) != 0) {
            rc = mote__err(MOTE_IO, "store %s: cannot make the writer mutex of %s: %s",
                           s->path, path, strerror(r));
            goto fail;
        }
        segslot *z = seg_slot(seg, 0); /* slot 0 stands for the solo process */
        const solo_head *h = taken_page(s);
        atomic_store(&z->snap, 0); /* everything, until its snapshot is read */
        atomic_store(&z->pidns, h->pidns);
        atomic_store(&z->owner, h->owner);
        atomic_store(&seg->solo_off, off);
        atomic_store(&seg->slots_hi, 1);
    }
    if ((rc = claim_slot(s, seg)))
        goto fail;
    if (s->init) {
        solo_entry *e = s->to_e;
        atomic_fetch_add(&e->bell, 1); /* then its writes and its snapshot */
        if (atomic_load(&e->writing)) { /* writers wait until it joined (share_write_begin) */
            const solo_head *h = taken_page(s);
            atomic_store(&seg->writer, (uint32_t)(h->owner & 0xFFFFFFFFu));
            atomic_store(&seg->solo_writing, 1);
            s->to_synced = 0;
        } else { /* its commits are durable up to this one */
            s->to_synced = atomic_load(&e->synced);
        }
        s->to_oldest = atomic_load(&e->oldest);
        atomic_store(&seg_slot(seg, 0)->snap, s->to_oldest);
    } else {
        take_unlock(s);
    }
    seg_use(s, seg, &fi);
    return MOTE_OK;
fail:
    io->unmap(io->ctx, map, SEG_MAP);
    take_unlock(s);
    return rc;
}

int mote__share_taken_again(mote_store *s, uint64_t *size)
{
    if (!s->to_e || !s->seg || !atomic_load(&s->seg->solo_writing))
        return 0;
    /* (it cannot begin another one: its next write joins, and waits for the
     * segment this one is making; if it died, the file holds what it wrote) */
    uint64_t start = now_us();
    unsigned step = 0;
    while (atomic_load(&s->to_e->writing) &&
           s->io->lock(s->io->ctx, s->fd, MOTE_LK_TEST, s->solo_off, 1) == -EAGAIN)
        if (wait_over(start, s->busy_ms, &step))
            return mote__err(MOTE_BUSY, "store %s: process %u is in its first write "
                             "transaction (waited %d ms)", s->path,
                             atomic_load(&s->seg->writer), s->busy_ms);
    int rc = mote__file_size(s, size);
    return rc ? rc : 1;
}

uint64_t mote__solo_oldest(const mote_store *s) { return local_oldest(s); }

static void wait_writing_zero(solo_entry *e)
{
    while (atomic_load(&e->writing)) { /* commits of this process becoming durable */
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Ring entries: page pgno freed by commit tag (the writer's). */
static void ring_push(struct segment *seg, uint64_t tag, uint32_t pgno)
{
    if (seg->ring_n == RING) { /* full: the oldest goes, and no free page is used for now */
        if (seg->ring_tag[seg->ring_head] > seg->dropped)
            seg->dropped = seg->ring_tag[seg->ring_head];
        seg->ring_head = (seg->ring_head + 1) % RING;
        seg->ring_n--;
    }
    uint32_t k = (seg->ring_head + seg->ring_n++) % RING;
    seg->ring_tag[k] = tag;
    seg->ring_pgno[k] = pgno;
}

/* A solo process that was in a write transaction when taken over, joining
 * (under the writer mutex): the segment learns its commits since the
 * taker read the file, and the pages they freed. */
static int pending_cmp(const void *a, const void *b)
{
    uint64_t x = ((const pending *)a)->tag, y = ((const pending *)b)->tag;
    return x < y ? -1 : x > y;
}

static void solo_catch_up(mote_store *s, struct segment *seg)
{
    /* in the order of their commits (the ring is kept so: its oldest first;
     * it is empty here, as no other process wrote since the takeover) */
    if (s->npend)
        qsort(s->pendv, s->npend, sizeof *s->pendv, pending_cmp);
    for (size_t i = 0; i < s->npend; i++)
        ring_push(seg, s->pendv[i].tag, s->pendv[i].pgno);
    uint32_t page = st_where(s->cur->data);
    snap *w = s->wcur ? s->wcur : s->cur; /* (written, not durable: a commit not waited for) */
    uint64_t wt = s->wcur ? s->wtxnid : s->txnid;
    /* copies of the states it publishes, as every commit has (made alone,
     * they had none; the next commits of other processes could rewrite both
     * slots before either is durable, and a process joining then found the
     * latest commit nowhere: share_many_create_one_store) */
    if (wt != s->txnid && wt > atomic_load(&seg->written))
        root_copy_put(seg, w->data, s->P, wt);
    if (s->txnid > atomic_load(&seg->latest))
        root_copy_put(seg, s->cur->data, s->P, s->txnid);
    if (wt > atomic_load(&seg->written)) {
        uint64_t seq = atomic_load_explicit(&seg->written_seq, memory_order_relaxed);
        atomic_store(&seg->written_seq, seq + 1);
        atomic_store(&seg->written_page, st_where(w->data));
        atomic_store(&seg->written, wt);
        atomic_store(&seg->written_seq, seq + 2);
    }
    if (s->wcur)
        atomic_store(&seg->need_sync, 1);
    /* (its first commit, made meanwhile, ended the store's FRESH state: a
     * taker that read the file before it took the store as new) */
    atomic_store(&seg->fresh, (uint32_t)s->fresh);
    if (s->next_txnid > atomic_load(&seg->next_txnid))
        atomic_store(&seg->next_txnid, s->next_txnid);
    if ((s->flags & MOTE_NOSYNC) || atomic_load(&s->own_dur.synced) < s->txnid)
        atomic_store(&seg->need_sync, 1);
    if (s->txnid > atomic_load(&seg->latest)) { /* (no reader takes it before: see the caller) */
        if (atomic_load(&s->own_dur.synced) > atomic_load(&seg->dur.synced))
            atomic_store(&seg->dur.synced, atomic_load(&s->own_dur.synced));
        atomic_store(&seg->latest_page, page);
        atomic_store(&seg->latest, s->txnid);
    }
}

/* The solo process at `solo_off` died in a write transaction begun alone
 * before it joined (the writer mutex held): its commits since the taker
 * read the file are found there as an open would, and no free page is used
 * until every snapshot is past them (which pages they freed is not known). */
static int solo_died_writing(mote_store *s, struct segment *seg)
{
    uint8_t *st = mote__malloc(s->P);
    if (!st)
        return mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
    int rc = newest_state(s, st);
    uint64_t tx = rc ? 0 : rd64(st + 24);
    if (!rc && tx > atomic_load(&seg->written)) {
        uint64_t seq = atomic_load_explicit(&seg->written_seq, memory_order_relaxed);
        atomic_store(&seg->written_seq, seq + 1);
        atomic_store(&seg->written_page, st_where(st));
        atomic_store(&seg->written, tx);
        atomic_store(&seg->written_seq, seq + 2);
        if (tx >= atomic_load(&seg->next_txnid))
            atomic_store(&seg->next_txnid, tx + 1);
        if (tx > seg->dropped)
            seg->dropped = tx;
        atomic_store(&seg->need_sync, 1); /* (syncing it makes it the latest) */
    }
    mote__free(st);
    if (!rc)
        atomic_store(&seg->solo_writing, 0);
    return rc;
}

/* Join the segment a taker made (s->wmu and s->mu held, nothing counted in
 * `writing`): 1 if joined; 0 if there is none to join (its taker died
 * before it was ready), and the bell counts as answered; < 0 an error, the
 * negated MOTE_* code (MOTE_BUSY: not ready yet; MOTE_LOCKED: the store
 * cannot be used alone any more). */
static int solo_join(mote_store *s)
{
    const mote_io *io = s->io;
    solo_entry *e = atomic_load(&s->solo);
    uint32_t bell = atomic_load(&e->bell);
    char path[80];
    seg_path(s, path, sizeof path);
    int fd = io->open(io->ctx, path, O_RDWR | O_NOFOLLOW, 0);
    mote_fileinfo fi;
    void *map = NULL;
    int ok = fd >= 0 && !io->fstat(io->ctx, fd, &fi) && fi.uid == s->uid &&
             !(fi.mode & ~seg_mode(s->mode)) && fi.size >= SEG_MAP &&
             !io->map(io->ctx, fd, SEG_MAP, &map);
    struct segment *seg = map;
    uint64_t start = now_us(), ns;
    unsigned step = 0;
    int slow = 0; /* its taker, alive, did not make it ready within the busy timeout */
    while (ok > 0 && atomic_load(&seg->magic) != SEG_MAGIC) { /* its taker reads the file */
        int gone = io->lock(io->ctx, fd, MOTE_LK_TEST, 0, 1) != -EAGAIN;
        if (gone || wait_over(start, s->busy_ms, &step)) {
            ok = atomic_load(&seg->magic) == SEG_MAGIC ? 1 : -1;
            slow = !gone && ok < 0;
        }
    }
    if (fd >= 0)
        io->close(io->ctx, fd);
    segslot *z = ok > 0 ? seg_slot(seg, 0) : NULL;
    int bad = ok > 0 && (seg->version != SEG_VERSION || seg->dev != s->dev ||
                         seg->ino != s->ino || atomic_load(&seg->solo_off) != s->solo_off ||
                         (atomic_load(&z->owner) & 0xFFFFFFFFu) != (uint64_t)getpid() ||
                         io->lock(io->ctx, s->fd, MOTE_LK_READ, SLOT_LOCK, 1));
    if (ok <= 0 || bad) {
        if (map)
            io->unmap(io->ctx, map, SEG_MAP);
        /* No segment made ready (its taker died first; another one rings
         * again): alone as before. Its taker slow: not alone (it will make
         * it), but not joined yet: this transaction fails, the next one
         * tries again. One that is there but cannot be used: no more
         * transactions alone, as its taker may write. */
        if (slow)
            return -mote__err(MOTE_BUSY, "store %s: another process is opening it (waited "
                              "%d ms)", s->path, s->busy_ms);
        if (fd == -ENOENT || ok < 0) {
            s->bell_seen = bell;
            return 0;
        }
        return -mote__err(MOTE_LOCKED, "store %s: another process opened it, and this one "
                          "cannot join the shared memory %s it made%s%s", s->path, path,
                          fd < 0 ? ": " : "", fd < 0 ? strerror(-fd) : "");
    }
    /* the taker wrote the owner word of the solo page (its pid; pid namespace
     * 0: alive while its byte is locked); now the whole of it */
    uint64_t me = self_owner(io, &ns);
    atomic_store(&z->pidns, ns);
    atomic_store(&z->owner, me);
    atomic_store(&z->snap, s->readers ? local_oldest(s) : UINT64_MAX);
    if (atomic_load(&seg->solo_writing)) { /* its commits since the takeover: published */
        solo_catch_up(s, seg); /* (the taker's writers wait for solo_writing) */
        atomic_store(&seg->solo_writing, 0);
    }
    atomic_store(&seg->solo_off, 0); /* slot 0's byte is locked: an ordinary slot */
    io->lock(io->ctx, s->fd, MOTE_LK_UNLOCK, s->solo_off, 1);
    if (atomic_load(&s->own_dur.failed))
        atomic_store(&seg->dur.failed, 1);
    s->slot = 0;
    seg_use(s, seg, &fi);
    s->bell_seen = bell;
    solo_release(s);
    return 1;
}

int mote__solo_join_read(mote_store *s, int ending)
{
    for (;;) {
        solo_entry *e = atomic_load(&s->solo);
        if (s->seg)
            return 1;
        if (!e || atomic_load(&e->bell) == s->bell_seen)
            return 0;
        /* a write begun before the bell is counted: the taker reads the
         * entry (this reader's snapshot) only once it is durable */
        if (atomic_load(&e->writing))
            return 0;
        if (pthread_mutex_trylock(&s->wmu) == 0) {
            int joined = solo_join(s);
            pthread_mutex_unlock(&s->wmu);
            return ending && joined < 0 ? 0 : joined;
        }
        if (ending) /* (its slot stays as the taker read it: older, so safe) */
            return 0;
        /* the writer lock's holder is about to count its write or to join */
        pthread_mutex_unlock(&s->mu);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&s->mu);
    }
}

void mote__solo_join_late(mote_store *s)
{
    solo_entry *e = atomic_load(&s->solo);
    if (!e || atomic_load(&e->writing) || pthread_mutex_trylock(&s->wmu))
        return; /* (the next transaction, or the one holding the lock, joins) */
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->solo) && atomic_load(&e->bell) != s->bell_seen &&
        !atomic_load(&e->writing))
        solo_join(s);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->wmu);
}

int mote__solo_write_begin(mote_store *s, mote_txn *t)
{
    solo_entry *e = atomic_load(&s->solo);
    pthread_mutex_lock(&s->mu); /* (a reader sees a count only of writes before the bell) */
    atomic_fetch_add(&e->writing, 1);
    if (atomic_load(&e->bell) != s->bell_seen) {
        atomic_fetch_sub(&e->writing, 1);
        pthread_mutex_unlock(&s->mu);
        wait_writing_zero(e); /* (their ends take s->mu) */
        pthread_mutex_lock(&s->mu);
        int joined = solo_join(s);
        if (joined < 0) {
            pthread_mutex_unlock(&s->mu);
            return -joined;
        }
        if (!joined)
            atomic_fetch_add(&e->writing, 1);
    }
    t->solo_w = s->seg == NULL;
    pthread_mutex_unlock(&s->mu);
    return MOTE_OK;
}

void mote__solo_close(mote_store *s)
{
    solo_entry *e = atomic_load(&s->solo);
    if (!e || atomic_load(&e->bell) == s->bell_seen)
        return;
    pthread_mutex_lock(&s->wmu);
    wait_writing_zero(e);
    pthread_mutex_lock(&s->mu);
    solo_join(s);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->wmu);
}
