/*
 * A program instrumented with NVTX v3 only (the header-only API, no gapscope code):
 * gapscope's NVTX tests run it with `nvtx = true`. Its work is real (a busy loop over
 * a measured CPU time), its ranges are the kinds NVTX has:
 *   outer (push)  > inner (push), a domain range with a payload (push, domain "gs_demo")
 *   handoff (start here, end on another thread)
 * Arguments: "open" leaves a push range and a start range open at exit; "fork" makes a
 * child process that opens and closes a range of its own.
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Busy for `ms` of this thread's CPU time and at least as long on the clock, so that a
 * range holds that much CPU however loaded the machine is. */
static volatile uint64_t sink;
static void spin_ms(unsigned ms) {
    uint64_t span = (uint64_t)ms * 1000000ull;
    uint64_t wall_end = now_ns() + span, cpu_end = thread_cpu_ns() + span;
    while (now_ns() < wall_end || thread_cpu_ns() < cpu_end) sink++;
}

static void *ender(void *arg) {
    spin_ms(5);
    nvtxRangeEnd(*(nvtxRangeId_t *)arg);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    nvtxRangePushA("outer");
    spin_ms(10);
    nvtxRangePushA("inner");
    spin_ms(20);
    nvtxRangePop();
    nvtxDomainHandle_t d = nvtxDomainCreateA("gs_demo");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "domain range";
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = 4096;
    nvtxDomainRangePushEx(d, &a);
    spin_ms(5);
    nvtxDomainRangePop(d);
    nvtxRangeId_t r = nvtxRangeStartA("handoff");
    pthread_t t;
    pthread_create(&t, NULL, ender, &r);
    pthread_join(t, NULL);
    if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            nvtxRangePushA("child_range");
            spin_ms(5);
            nvtxRangePop();
            nvtxRangePop(); /* the parent's outer: not the child's to close */
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    nvtxRangePop(); /* outer */
    if (strcmp(mode, "open") == 0) {
        nvtxRangePushA("left_pushed");
        nvtxRangeStartA("left_started");
        spin_ms(5);
    }
    return 0;
}
