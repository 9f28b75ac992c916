/*
 * gapscope's NVTX injection library: loaded by a program's own NVTX (v3, header-only)
 * through NVTX_INJECTION64_PATH, it turns the program's NVTX ranges into gapscope span
 * lines (docs/nvtx.md) on the pipe named by GAPSCOPE_SPAN_FD. Needs no CUDA to build.
 *
 * - push/pop ranges (nvtxRangePush*, nvtxDomainRangePushEx / Pop): a B line at the push
 *   and an E line at the pop, on the pushing thread; a range still pushed at exit is
 *   closed by gapscope at the end of the rep (counted as an unmatched begin).
 * - start/end ranges (nvtxRangeStart*, nvtxRangeEnd, and the domain forms), which may
 *   end on another thread: one X line at the end, on the starting thread; a range
 *   still open when the program exits is written then, marked nvtx_open_at_exit=1.
 * - marks: a zero-length X line.
 *
 * Times are CLOCK_MONOTONIC (gapscope's span clock), thread ids gettid(). With
 * GAPSCOPE_NVTX_CPU=exact, B and E lines carry the process's CPU time
 * (process_cpu_at_ns); by default they do not (the clock is a system call, two per
 * range) and gapscope interpolates each range's CPU time from its own readings of the
 * program's CPU clock. A domain range has attribute nvtx_domain, a payload attribute
 * payload, a category attribute category.
 *
 * Lines are kept per thread and written in batches (one write(2) of at most 4096 bytes,
 * whole lines only, so threads' lines never mix): when the next line would not fit, when
 * the batch's first line is 50 ms old at the next line, when the thread exits, and at
 * process exit (atexit). Their times are taken when the range opens and closes, so a
 * batch's delay moves no span. Lines still kept when the process dies by a signal,
 * `_exit`s or `exec`s are lost. In a forked child, the parent's open ranges and kept
 * lines are forgotten (the child's own are reported with its thread ids), and the
 * child writes each line at once, since a child commonly leaves by `_exit`.
 *
 * The ABI used is NVTX v3's injection interface: the exported InitializeInjectionNvtx2
 * receives a function that hands out export tables; table 1 (callbacks) gives each
 * module's table of function-pointer slots, which this library fills.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

/* ---- The parts of NVTX's ABI this library relies on (values from the public ABI). */

typedef void (*gs_fn)(void);
typedef gs_fn **gs_table;
typedef const void *(*gs_get_export_table)(uint32_t id);

typedef struct {
    size_t struct_size;
    int (*get_module_function_table)(int module, gs_table *out, unsigned int *out_size);
} gs_callbacks_table;

enum { GS_ETID_CALLBACKS = 1 };
enum { GS_MODULE_CORE = 1, GS_MODULE_CORE2 = 5 };
enum {
    GS_CORE_MARK_EX = 1,
    GS_CORE_MARK_A = 2,
    GS_CORE_RANGE_START_EX = 4,
    GS_CORE_RANGE_START_A = 5,
    GS_CORE_RANGE_START_W = 6,
    GS_CORE_RANGE_END = 7,
    GS_CORE_RANGE_PUSH_EX = 8,
    GS_CORE_RANGE_PUSH_A = 9,
    GS_CORE_RANGE_PUSH_W = 10,
    GS_CORE_RANGE_POP = 11,
};
enum {
    GS_CORE2_MARK_EX = 1,
    GS_CORE2_RANGE_START_EX = 2,
    GS_CORE2_RANGE_END = 3,
    GS_CORE2_RANGE_PUSH_EX = 4,
    GS_CORE2_RANGE_POP = 5,
    GS_CORE2_REGISTER_STRING_A = 10,
    GS_CORE2_CREATE_A = 12,
};
enum { GS_MSG_ASCII = 1, GS_MSG_UNICODE = 2, GS_MSG_REGISTERED = 3 };
enum { GS_PAYLOAD_U64 = 1, GS_PAYLOAD_I64, GS_PAYLOAD_F64, GS_PAYLOAD_U32, GS_PAYLOAD_I32, GS_PAYLOAD_F32 };

/* nvtxEventAttributes_t, version 2 or 3 (the same layout). */
typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        uint32_t u32;
        int32_t i32;
        float f32;
    } payload;
    int32_t message_type;
    union {
        const char *ascii;
        const wchar_t *unicode;
        const void *registered;
    } message;
} gs_event_attributes;

/* ---- Our state. */

#define GS_MAX_LINE 4096
#define GS_MAX_NAME 128
#define GS_DEPTH 128
#define GS_OPEN_RANGES 4096

/* A domain or a registered string: its text, made by this library. */
typedef struct {
    char text[GS_MAX_NAME + 1];
} gs_name;

typedef struct {
    char name[GS_MAX_NAME + 1];
    char domain[GS_MAX_NAME + 1];
} gs_pushed;

/* An open start/end range. id 0: a free slot. */
typedef struct {
    uint64_t id;
    uint64_t tid;
    uint64_t start_ns;
    char name[GS_MAX_NAME + 1];
    char attrs[256];
} gs_range;

/* One thread's kept lines; every buffer is on gs_bufs so that exit can write them. */
typedef struct gs_buf {
    pthread_mutex_t lock; /* the owner's appends against exit's flush */
    struct gs_buf *next;
    uint64_t first_ns; /* when the oldest kept line was made */
    size_t len;
    char data[GS_MAX_LINE];
} gs_buf;

/* A batch this old is written with its thread's next line. */
#define GS_BATCH_AGE_NS 50000000ull

static int gs_fd = -1;
static int gs_exact_cpu;
/* Lines written one by one, unbatched: in a forked child, which commonly leaves by
 * _exit and would lose a batch. */
static int gs_unbatched;
static pthread_mutex_t gs_bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static gs_buf *gs_bufs;
static pthread_key_t gs_buf_key;
static __thread gs_buf *gs_my_buf;
static __thread uint64_t gs_my_tid;
static _Atomic uint64_t gs_next_range = 1;
static pthread_mutex_t gs_ranges_lock = PTHREAD_MUTEX_INITIALIZER;
static gs_range gs_ranges[GS_OPEN_RANGES];
static __thread gs_pushed gs_stack[GS_DEPTH];
static __thread int gs_depth;

static uint64_t gs_clock(clockid_t c) {
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's id, asked of the kernel once per thread. */
static uint64_t gs_tid(void) {
    if (!gs_my_tid) gs_my_tid = (uint64_t)syscall(SYS_gettid);
    return gs_my_tid;
}

/* Writes a buffer's lines (its lock held). One write of whole lines: lines of different
 * threads never mix. Errors are ignored (measuring must never break the program). */
static void gs_flush_locked(gs_buf *b) {
    if (b->len) {
        ssize_t w = write(gs_fd, b->data, b->len);
        (void)w;
        b->len = 0;
    }
}

/* A thread's end (its key's destructor): its lines out, its buffer gone. */
static void gs_thread_done(void *p) {
    gs_buf *b = p;
    pthread_mutex_lock(&gs_bufs_lock);
    for (gs_buf **q = &gs_bufs; *q; q = &(*q)->next)
        if (*q == b) {
            *q = b->next;
            break;
        }
    pthread_mutex_unlock(&gs_bufs_lock);
    pthread_mutex_lock(&b->lock);
    gs_flush_locked(b);
    pthread_mutex_unlock(&b->lock);
    pthread_mutex_destroy(&b->lock);
    free(b);
    gs_my_buf = NULL;
}

/* The calling thread's buffer, made on its first line; NULL without memory. */
static gs_buf *gs_buffer(void) {
    if (gs_my_buf) return gs_my_buf;
    gs_buf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->lock, NULL);
    pthread_mutex_lock(&gs_bufs_lock);
    b->next = gs_bufs;
    gs_bufs = b;
    pthread_mutex_unlock(&gs_bufs_lock);
    pthread_setspecific(gs_buf_key, b);
    gs_my_buf = b;
    return b;
}

/* Keeps one line (made at `now_ns`) in the thread's batch, writing the batch first
 * where the line would not fit and after where the batch has grown old. */
static void gs_write(const char *line, size_t len, uint64_t now_ns) {
    if (gs_fd < 0 || len == 0 || len > GS_MAX_LINE) return;
    gs_buf *b = gs_unbatched ? NULL : gs_buffer();
    if (!b) {
        ssize_t w = write(gs_fd, line, len);
        (void)w;
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (b->len + len > sizeof b->data) gs_flush_locked(b);
    if (b->len == 0) b->first_ns = now_ns;
    memcpy(b->data + b->len, line, len);
    b->len += len;
    if (now_ns - b->first_ns >= GS_BATCH_AGE_NS) gs_flush_locked(b);
    pthread_mutex_unlock(&b->lock);
}

/* Every thread's kept lines, written now (at exit). */
static void gs_flush_all(void) {
    pthread_mutex_lock(&gs_bufs_lock);
    for (gs_buf *b = gs_bufs; b; b = b->next) {
        pthread_mutex_lock(&b->lock);
        gs_flush_locked(b);
        pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_unlock(&gs_bufs_lock);
}

/* " process_cpu_at_ns=N" where exact process CPU was asked for, else nothing. */
static void gs_cpu_field(char *out, size_t cap) {
    out[0] = 0;
    if (gs_exact_cpu)
        snprintf(out, cap, " process_cpu_at_ns=%llu", (unsigned long long)gs_clock(CLOCK_PROCESS_CPUTIME_ID));
}

/* Copies `s` as a protocol word: spaces, controls and '=' become '_'. */
static void gs_word(char *out, size_t cap, const char *s) {
    size_t n = 0;
    if (s) {
        for (; s[n] && n + 1 < cap; n++) {
            unsigned char c = (unsigned char)s[n];
            out[n] = (c <= ' ' || c == '=' || c == 0x7f) ? '_' : (char)c;
        }
    }
    if (n == 0) out[n++] = '_';
    out[n] = 0;
}

static void gs_wide_word(char *out, size_t cap, const wchar_t *s) {
    char narrow[GS_MAX_NAME + 1];
    size_t n = 0;
    if (s)
        for (; s[n] && n < GS_MAX_NAME; n++) narrow[n] = (s[n] > 0 && s[n] < 0x7f) ? (char)s[n] : '?';
    narrow[n] = 0;
    gs_word(out, cap, narrow);
}

/* The name and attributes of an event. */
static void gs_describe(const gs_event_attributes *a, const gs_name *domain, char *name, char *attrs,
                        size_t attrs_cap) {
    int k = 0;
    name[0] = 0;
    attrs[0] = 0;
    if (a && a->size >= offsetof(gs_event_attributes, message) + sizeof(a->message)) {
        if (a->message_type == GS_MSG_ASCII) gs_word(name, GS_MAX_NAME + 1, a->message.ascii);
        else if (a->message_type == GS_MSG_UNICODE) gs_wide_word(name, GS_MAX_NAME + 1, a->message.unicode);
        else if (a->message_type == GS_MSG_REGISTERED && a->message.registered)
            gs_word(name, GS_MAX_NAME + 1, ((const gs_name *)a->message.registered)->text);
        if (a->category) k += snprintf(attrs + k, attrs_cap - k, " category=%u", a->category);
        switch (a->payload_type) {
        case GS_PAYLOAD_U64: k += snprintf(attrs + k, attrs_cap - k, " payload=%llu", (unsigned long long)a->payload.u64); break;
        case GS_PAYLOAD_I64: k += snprintf(attrs + k, attrs_cap - k, " payload=%lld", (long long)a->payload.i64); break;
        case GS_PAYLOAD_F64: k += snprintf(attrs + k, attrs_cap - k, " payload=%.17g", a->payload.f64); break;
        case GS_PAYLOAD_U32: k += snprintf(attrs + k, attrs_cap - k, " payload=%u", a->payload.u32); break;
        case GS_PAYLOAD_I32: k += snprintf(attrs + k, attrs_cap - k, " payload=%d", a->payload.i32); break;
        case GS_PAYLOAD_F32: k += snprintf(attrs + k, attrs_cap - k, " payload=%.9g", (double)a->payload.f32); break;
        default: break;
        }
    }
    if (!name[0]) gs_word(name, GS_MAX_NAME + 1, "nvtx");
    if (domain && (size_t)k < attrs_cap) snprintf(attrs + k, attrs_cap - k, " nvtx_domain=%s", domain->text);
}

/* ---- push / pop */

static int gs_push(const char *name, const char *attrs, const gs_name *domain) {
    char line[GS_MAX_LINE], cpu[48];
    uint64_t tid = gs_tid();
    gs_cpu_field(cpu, sizeof cpu);
    uint64_t t = gs_clock(CLOCK_MONOTONIC);
    int n = snprintf(line, sizeof line, "@gapscope1 B %llu %llu %s%s%s\n", (unsigned long long)tid,
                     (unsigned long long)t, name, cpu, attrs);
    if (n > 0 && n < (int)sizeof line) gs_write(line, (size_t)n, t);
    if (gs_depth < GS_DEPTH) {
        snprintf(gs_stack[gs_depth].name, sizeof gs_stack[gs_depth].name, "%s", name);
        snprintf(gs_stack[gs_depth].domain, sizeof gs_stack[gs_depth].domain, "%s", domain ? domain->text : "");
    }
    return gs_depth++;
}

static int gs_pop(const gs_name *domain) {
    (void)domain;
    if (gs_depth <= 0) return -1;
    gs_depth--;
    if (gs_depth >= GS_DEPTH) return gs_depth; /* deeper than we keep: no name to close */
    char line[GS_MAX_LINE], cpu[48];
    uint64_t t = gs_clock(CLOCK_MONOTONIC);
    gs_cpu_field(cpu, sizeof cpu);
    int n = snprintf(line, sizeof line, "@gapscope1 E %llu %llu %s%s\n", (unsigned long long)gs_tid(),
                     (unsigned long long)t, gs_stack[gs_depth].name, cpu);
    if (n > 0 && n < (int)sizeof line) gs_write(line, (size_t)n, t);
    return gs_depth;
}

static int gs_push_ex(const gs_event_attributes *a) {
    char name[GS_MAX_NAME + 1], attrs[512];
    gs_describe(a, NULL, name, attrs, sizeof attrs);
    return gs_push(name, attrs, NULL);
}
static int gs_push_a(const char *msg) {
    char name[GS_MAX_NAME + 1];
    gs_word(name, sizeof name, msg);
    return gs_push(name, "", NULL);
}
static int gs_push_w(const wchar_t *msg) {
    char name[GS_MAX_NAME + 1];
    gs_wide_word(name, sizeof name, msg);
    return gs_push(name, "", NULL);
}
static int gs_pop_core(void) { return gs_pop(NULL); }
static int gs_domain_push(const gs_name *d, const gs_event_attributes *a) {
    char name[GS_MAX_NAME + 1], attrs[512];
    gs_describe(a, d, name, attrs, sizeof attrs);
    return gs_push(name, attrs, d);
}
static int gs_domain_pop(const gs_name *d) { return gs_pop(d); }

/* ---- start / end */

static void gs_range_line(const gs_range *r, uint64_t end_ns, const char *extra) {
    char line[GS_MAX_LINE];
    int n = snprintf(line, sizeof line, "@gapscope1 X %llu %llu %llu %s%s%s\n", (unsigned long long)r->tid,
                     (unsigned long long)r->start_ns, (unsigned long long)(end_ns - r->start_ns), r->name,
                     r->attrs, extra);
    if (n > 0 && n < (int)sizeof line) gs_write(line, (size_t)n, end_ns);
}

static uint64_t gs_start(const char *name, const char *attrs) {
    uint64_t id = atomic_fetch_add(&gs_next_range, 1);
    uint64_t t = gs_clock(CLOCK_MONOTONIC), tid = gs_tid();
    pthread_mutex_lock(&gs_ranges_lock);
    for (size_t i = 0; i < GS_OPEN_RANGES; i++) {
        gs_range *r = &gs_ranges[(id + i) % GS_OPEN_RANGES];
        if (r->id == 0) {
            r->id = id;
            r->tid = tid;
            r->start_ns = t;
            snprintf(r->name, sizeof r->name, "%s", name);
            snprintf(r->attrs, sizeof r->attrs, "%s", attrs);
            break;
        }
    }
    /* With every slot taken the range is not kept (its end finds nothing). */
    pthread_mutex_unlock(&gs_ranges_lock);
    return id;
}

static void gs_end(uint64_t id) {
    uint64_t t = gs_clock(CLOCK_MONOTONIC);
    gs_range r;
    int found = 0;
    pthread_mutex_lock(&gs_ranges_lock);
    for (size_t i = 0; i < GS_OPEN_RANGES; i++) {
        gs_range *s = &gs_ranges[(id + i) % GS_OPEN_RANGES];
        if (s->id == id) {
            r = *s;
            s->id = 0;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&gs_ranges_lock);
    if (found) gs_range_line(&r, t < r.start_ns ? r.start_ns : t, "");
}

static uint64_t gs_start_ex(const gs_event_attributes *a) {
    char name[GS_MAX_NAME + 1], attrs[512];
    gs_describe(a, NULL, name, attrs, sizeof attrs);
    return gs_start(name, attrs);
}
static uint64_t gs_start_a(const char *msg) {
    char name[GS_MAX_NAME + 1];
    gs_word(name, sizeof name, msg);
    return gs_start(name, "");
}
static uint64_t gs_start_w(const wchar_t *msg) {
    char name[GS_MAX_NAME + 1];
    gs_wide_word(name, sizeof name, msg);
    return gs_start(name, "");
}
static uint64_t gs_domain_start(const gs_name *d, const gs_event_attributes *a) {
    char name[GS_MAX_NAME + 1], attrs[512];
    gs_describe(a, d, name, attrs, sizeof attrs);
    return gs_start(name, attrs);
}
static void gs_domain_end(const gs_name *d, uint64_t id) {
    (void)d;
    gs_end(id);
}

/* ---- marks */

static void gs_mark(const char *name, const char *attrs) {
    gs_range r = {.id = 1, .tid = gs_tid(), .start_ns = gs_clock(CLOCK_MONOTONIC)};
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.attrs, sizeof r.attrs, "%s", attrs);
    gs_range_line(&r, r.start_ns, " nvtx_mark=1");
}
static void gs_mark_ex(const gs_event_attributes *a) {
    char name[GS_MAX_NAME + 1], attrs[512];
    gs_describe(a, NULL, name, attrs, sizeof attrs);
    gs_mark(name, attrs);
}
static void gs_mark_a(const char *msg) {
    char name[GS_MAX_NAME + 1];
    gs_word(name, sizeof name, msg);
    gs_mark(name, "");
}
static void gs_domain_mark(const gs_name *d, const gs_event_attributes *a) {
    char name[GS_MAX_NAME + 1], attrs[512];
    gs_describe(a, d, name, attrs, sizeof attrs);
    gs_mark(name, attrs);
}

/* ---- domains and registered strings: copies of their text, kept for the process. */

static const gs_name *gs_new_name(const char *text) {
    gs_name *n = calloc(1, sizeof *n);
    if (n) gs_word(n->text, sizeof n->text, text);
    return n;
}
static const gs_name *gs_domain_create(const char *name) { return gs_new_name(name); }
static const gs_name *gs_register_string(const gs_name *d, const char *s) {
    (void)d;
    return gs_new_name(s);
}

/* ---- exit and fork */

static void gs_at_exit(void) {
    uint64_t t = gs_clock(CLOCK_MONOTONIC);
    pthread_mutex_lock(&gs_ranges_lock);
    for (size_t i = 0; i < GS_OPEN_RANGES; i++) {
        if (gs_ranges[i].id != 0) {
            gs_range_line(&gs_ranges[i], t < gs_ranges[i].start_ns ? gs_ranges[i].start_ns : t,
                          " nvtx_open_at_exit=1");
            gs_ranges[i].id = 0;
        }
    }
    pthread_mutex_unlock(&gs_ranges_lock);
    gs_flush_all();
}

static void gs_in_forked_child(void) {
    /* The parent's ranges and kept lines are the parent's (it writes them): the child
     * reports only its own. The buffers of the parent's other threads are not the
     * child's to free; the list starts again. */
    gs_depth = 0;
    pthread_mutex_init(&gs_ranges_lock, NULL);
    memset(gs_ranges, 0, sizeof gs_ranges);
    pthread_mutex_init(&gs_bufs_lock, NULL);
    gs_bufs = NULL;
    gs_my_buf = NULL;
    gs_my_tid = 0;
    pthread_setspecific(gs_buf_key, NULL);
    gs_unbatched = 1;
}

static void gs_set(gs_table t, unsigned int size, unsigned int slot, gs_fn f) {
    if (slot < size && t[slot]) *t[slot] = f;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(gs_get_export_table get) {
    const char *fd = getenv("GAPSCOPE_SPAN_FD");
    if (!fd || atoi(fd) <= 2 || !get) return 0; /* not under gapscope: NVTX stays off */
    gs_fd = atoi(fd);
    const char *cpu = getenv("GAPSCOPE_NVTX_CPU");
    gs_exact_cpu = cpu && strcmp(cpu, "exact") == 0;
    if (pthread_key_create(&gs_buf_key, gs_thread_done) != 0) return 0;
    const gs_callbacks_table *cb = (const gs_callbacks_table *)get(GS_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof(gs_callbacks_table) || !cb->get_module_function_table) return 0;
    gs_table t = NULL;
    unsigned int n = 0;
    if (cb->get_module_function_table(GS_MODULE_CORE, &t, &n) && t) {
        gs_set(t, n, GS_CORE_MARK_EX, (gs_fn)gs_mark_ex);
        gs_set(t, n, GS_CORE_MARK_A, (gs_fn)gs_mark_a);
        gs_set(t, n, GS_CORE_RANGE_START_EX, (gs_fn)gs_start_ex);
        gs_set(t, n, GS_CORE_RANGE_START_A, (gs_fn)gs_start_a);
        gs_set(t, n, GS_CORE_RANGE_START_W, (gs_fn)gs_start_w);
        gs_set(t, n, GS_CORE_RANGE_END, (gs_fn)gs_end);
        gs_set(t, n, GS_CORE_RANGE_PUSH_EX, (gs_fn)gs_push_ex);
        gs_set(t, n, GS_CORE_RANGE_PUSH_A, (gs_fn)gs_push_a);
        gs_set(t, n, GS_CORE_RANGE_PUSH_W, (gs_fn)gs_push_w);
        gs_set(t, n, GS_CORE_RANGE_POP, (gs_fn)gs_pop_core);
    }
    t = NULL;
    n = 0;
    if (cb->get_module_function_table(GS_MODULE_CORE2, &t, &n) && t) {
        gs_set(t, n, GS_CORE2_MARK_EX, (gs_fn)gs_domain_mark);
        gs_set(t, n, GS_CORE2_RANGE_START_EX, (gs_fn)gs_domain_start);
        gs_set(t, n, GS_CORE2_RANGE_END, (gs_fn)gs_domain_end);
        gs_set(t, n, GS_CORE2_RANGE_PUSH_EX, (gs_fn)gs_domain_push);
        gs_set(t, n, GS_CORE2_RANGE_POP, (gs_fn)gs_domain_pop);
        gs_set(t, n, GS_CORE2_REGISTER_STRING_A, (gs_fn)gs_register_string);
        gs_set(t, n, GS_CORE2_CREATE_A, (gs_fn)gs_domain_create);
    }
    atexit(gs_at_exit);
    pthread_atfork(NULL, NULL, gs_in_forked_child);
    return 1;
}
