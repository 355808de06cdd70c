/*
 * runner.c — runs the tests of list.h, each in a forked child with its own
 * temporary directory and a timeout. Usage: mote-tests [substring...]
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define X(name) void test_##name(void);
#include "list.h"
#undef X

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
#define X(name) {#name, test_##name},
#include "list.h"
#undef X
};

static char tmpdir[512];

const char *test_path(const char *name)
{
    static char buf[8][600];
    static int i;
    char *b = buf[i++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

int test_scale(void)
{
    const char *s = getenv("MOTE_TEST_SCALE");
    int k = s ? atoi(s) : 1;
    return k > 0 ? k : 1;
}

uint64_t test_rand(uint64_t *st)
{
    uint64_t x = *st ? *st : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *st = x;
    return x * 0x2545F4914F6CDD1Dull;
}

mote_store *test_open(const char *path, const mote_options *o)
{
    mote_store *s = NULL;
    int rc = mote_open(path, o, &s);
    if (rc) {
        fprintf(stderr, "open %s: %s\n", path, mote_last_open_error());
        abort();
    }
    return s;
}

uint64_t test_count(mote_store *s, const char *name)
{
    mote_txn *t;
    uint32_t tr;
    uint64_t n;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, name, 0, &tr));
    OK(mote_kv_count(t, tr, NULL, 0, NULL, 0, &n));
    mote_abort(t);
    return n;
}

static void rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (!lstat(p, &st) && S_ISDIR(st.st_mode))
            rmtree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    const char *base = getenv("MOTE_TEST_TMP");
    int timeout = getenv("MOTE_TEST_TIMEOUT") ? atoi(getenv("MOTE_TEST_TIMEOUT")) : 300;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strstr(tests[i].name, argv[a]) != NULL;
        if (!want)
            continue;
        snprintf(tmpdir, sizeof tmpdir, "%s/mote-test-%d-%s", base ? base : "/var/tmp",
                 (int)getpid(), tests[i].name);
        rmtree(tmpdir);
        mkdir(tmpdir, 0755);
        double t0 = now();
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0); /* its own process group, with every child it forks */
            alarm((unsigned)timeout);
            tests[i].fn();
            exit(0); /* not _exit: LeakSanitizer runs at exit */
        }
        setpgid(pid, pid); /* (either side may run first) */
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        /* children a failed test left behind (a writer looping forever) go
         * with it, before they slow the tests and benchmarks that follow */
        kill(-pid, SIGKILL);
        double dt = now() - t0;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            printf("ok    %-32s %7.2fs\n", tests[i].name, dt);
            passed++;
        } else {
            printf("FAIL  %-32s %7.2fs (%s %d)\n", tests[i].name, dt,
                   WIFSIGNALED(st) ? "signal" : "exit",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            failed++;
        }
        rmtree(tmpdir);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
