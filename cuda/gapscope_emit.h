/* gapscope span emitter: one header, C and C++, no library to link.
 *
 * A program that gapscope runs as an external subject ([workload] command = [...])
 * reports its spans with it in gapscope's line protocol (docs/external-programs.md, "The span
 * line protocol"):
 *
 *     @gapscope1 B <tid> <t_ns> <name> [key=value ...]        begin
 *     @gapscope1 E <tid> <t_ns> <name> [key=value ...]        end
 *     @gapscope1 X <tid> <start_ns> <duration_ns> <name> [...] complete span
 *     @gapscope1 A <tid> key=value [...]                      attributes of the open span
 *
 * Times are CLOCK_MONOTONIC nanoseconds; <tid> is gettid(). Lines go to the descriptor
 * named by GAPSCOPE_SPAN_FD (a pipe gapscope opens for the program) or, where that is
 * not set, to stderr. Every line is one write(2) of at most 4096 bytes (PIPE_BUF on
 * Linux, so lines of different threads never mix) under a mutex. Outside gapscope the
 * lines land on stderr and cost a clock read and a write each.
 *
 * Begin and end lines carry process_cpu_at_ns=<CLOCK_PROCESS_CPUTIME_ID now>, so that
 * gapscope gives the span the process's exact CPU time over it (without them it
 * interpolates its own readings of the process's CPU clock). Define
 * GAPSCOPE_EMIT_NO_CPU before including this header to leave the readings out.
 *
 * C:    gapscope_emit_begin("load"); ... gapscope_emit_end("load");
 * C++:  { gapscope::emit::Scope s("load"); s.attr("bytes", n); ... }
 *
 * Names and keys: spaces, '=' and control characters become '_'; names are cut at 128
 * bytes, keys at 64. Attribute values must not contain spaces (they become '_').
 */
#ifndef GAPSCOPE_EMIT_H
#define GAPSCOPE_EMIT_H

/* syscall(2) and clock_gettime(2) are declared in strict ISO C modes (-std=c99) only
 * with these feature macros: they take effect when this header comes before any system
 * header (GNU C and C++ modes need nothing). */
#if !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1
#endif

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GAPSCOPE_EMIT_FD_ENV "GAPSCOPE_SPAN_FD"
#define GAPSCOPE_EMIT_MAX_LINE 4096

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC now, in nanoseconds. */
static inline uint64_t gapscope_emit_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gapscope_emit_tid(void) { return (uint64_t)syscall(SYS_gettid); }

/* The CPU-time attribute of begin and end lines: every thread of the process so far. */
static inline const char *gapscope_emit_cpu_(char *out, size_t n) {
#ifdef GAPSCOPE_EMIT_NO_CPU
    (void)out;
    (void)n;
    return NULL;
#else
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return NULL;
    snprintf(out, n, "process_cpu_at_ns=%llu",
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    return out;
#endif
}

static int gapscope_emit_fd_ = -1;
static pthread_once_t gapscope_emit_once_ = PTHREAD_ONCE_INIT;
static pthread_mutex_t gapscope_emit_mu_ = PTHREAD_MUTEX_INITIALIZER;

static inline void gapscope_emit_init_(void) {
    const char *v = getenv(GAPSCOPE_EMIT_FD_ENV);
    char *end = NULL;
    long fd = v ? strtol(v, &end, 10) : -1;
    gapscope_emit_fd_ = (v && *v && end && *end == '\0' && fd > 2) ? (int)fd : 2;
}

/* Writes one line (`len` bytes, newline included) with one write(2). */
static inline void gapscope_emit_write_(const char *line, size_t len) {
    pthread_once(&gapscope_emit_once_, gapscope_emit_init_);
    pthread_mutex_lock(&gapscope_emit_mu_);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(gapscope_emit_fd_, line + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* a closed pipe: measuring never breaks the program */
        done += (size_t)n;
    }
    pthread_mutex_unlock(&gapscope_emit_mu_);
}

/* Copies `s` into `out` as a protocol word: at most `max` bytes, spaces, '=' and
 * control characters as '_'; "_" when empty. Returns the length. */
static inline size_t gapscope_emit_word_(char *out, const char *s, size_t max) {
    size_t n = 0;
    for (; s && s[n] && n < max; n++) {
        unsigned char c = (unsigned char)s[n];
        out[n] = (c <= ' ' || c == '=' || c == 0x7f) ? '_' : (char)c;
    }
    if (n == 0) out[n++] = '_';
    out[n] = '\0';
    return n;
}

/* Formats and writes one line: "@gapscope1 " + head + (name) + (tail). Lines over the
 * limit are not written. */
static inline void gapscope_emit_line_(const char *head, const char *name, const char *tail) {
    char line[GAPSCOPE_EMIT_MAX_LINE + 2];
    char word[129];
    int n;
    if (name) {
        gapscope_emit_word_(word, name, 128);
        n = snprintf(line, sizeof line, "@gapscope1 %s %s%s%s\n", head, word, tail ? " " : "",
                     tail ? tail : "");
    } else {
        n = snprintf(line, sizeof line, "@gapscope1 %s%s%s\n", head, tail ? " " : "",
                     tail ? tail : "");
    }
    if (n > 0 && n <= GAPSCOPE_EMIT_MAX_LINE + 1) gapscope_emit_write_(line, (size_t)n);
}

/* Opens a span named `name` on the calling thread. */
static inline void gapscope_emit_begin(const char *name) {
    char head[64], cpu[48];
    snprintf(head, sizeof head, "B %llu %llu", (unsigned long long)gapscope_emit_tid(),
             (unsigned long long)gapscope_emit_now_ns());
    gapscope_emit_line_(head, name, gapscope_emit_cpu_(cpu, sizeof cpu));
}

/* Closes the innermost open span named `name` on the calling thread. */
static inline void gapscope_emit_end(const char *name) {
    char head[64], cpu[48];
    /* The CPU reading first: the span's CPU time ends before its end time is read. */
    const char *tail = gapscope_emit_cpu_(cpu, sizeof cpu);
    snprintf(head, sizeof head, "E %llu %llu", (unsigned long long)gapscope_emit_tid(),
             (unsigned long long)gapscope_emit_now_ns());
    gapscope_emit_line_(head, name, tail);
}

/* A finished span: its start (gapscope_emit_now_ns()) and duration, in ns. */
static inline void gapscope_emit_complete(const char *name, uint64_t start_ns,
                                          uint64_t duration_ns) {
    char head[96];
    snprintf(head, sizeof head, "X %llu %llu %llu", (unsigned long long)gapscope_emit_tid(),
             (unsigned long long)start_ns, (unsigned long long)duration_ns);
    gapscope_emit_line_(head, name, NULL);
}

/* key=value on the calling thread's innermost open span. `value` is already formatted. */
static inline void gapscope_emit_attr_text_(const char *key, const char *value) {
    char head[64], k[65], v[1024], kv[1100];
    snprintf(head, sizeof head, "A %llu", (unsigned long long)gapscope_emit_tid());
    gapscope_emit_word_(k, key, 64);
    gapscope_emit_word_(v, value, sizeof v - 1);
    snprintf(kv, sizeof kv, "%s=%s", k, v);
    gapscope_emit_line_(head, NULL, kv);
}

static inline void gapscope_emit_attr_u64(const char *key, uint64_t value) {
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)value);
    gapscope_emit_attr_text_(key, v);
}

static inline void gapscope_emit_attr_i64(const char *key, int64_t value) {
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)value);
    gapscope_emit_attr_text_(key, v);
}

static inline void gapscope_emit_attr_f64(const char *key, double value) {
    char v[64];
    snprintf(v, sizeof v, "%.17g", value);
    gapscope_emit_attr_text_(key, v);
}

static inline void gapscope_emit_attr_str(const char *key, const char *value) {
    gapscope_emit_attr_text_(key, value);
}

#ifdef __cplusplus
} /* extern "C" */

namespace gapscope {
namespace emit {
/* RAII span: begins on construction, ends on destruction (exceptions included). */
class Scope {
public:
    explicit Scope(const char *name) : name_(name) { gapscope_emit_begin(name_); }
    ~Scope() { gapscope_emit_end(name_); }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;
    /* key=value on the thread's innermost open span (this one, unless a span opened
     * inside it is still open). One overload per fundamental type, so that any integer
     * (int64_t, size_t, unsigned, …), floating-point value or string picks one. */
    void attr(const char *k, int v) const { gapscope_emit_attr_i64(k, v); }
    void attr(const char *k, long v) const { gapscope_emit_attr_i64(k, v); }
    void attr(const char *k, long long v) const { gapscope_emit_attr_i64(k, v); }
    void attr(const char *k, unsigned v) const { gapscope_emit_attr_u64(k, v); }
    void attr(const char *k, unsigned long v) const { gapscope_emit_attr_u64(k, v); }
    void attr(const char *k, unsigned long long v) const { gapscope_emit_attr_u64(k, v); }
    void attr(const char *k, double v) const { gapscope_emit_attr_f64(k, v); }
    void attr(const char *k, const char *v) const { gapscope_emit_attr_str(k, v); }

private:
    const char *name_; /* must outlive the scope (a literal, typically) */
};
} /* namespace emit */
} /* namespace gapscope */
#endif

#endif /* GAPSCOPE_EMIT_H */
