/* valgrind's callgrind client requests, behind plain functions the Rust side calls
 * (src/counters/emulated.rs of this crate). The requests are the macros of valgrind's own headers
 * (valgrind/valgrind.h, valgrind/callgrind.h), found on the build machine; without them
 * every function here is a no-op and gapscope_cg_built() says 0, so emulated counters
 * are reported unavailable with an install hint instead of silently reading zero.
 * Outside valgrind each request is a handful of no-op instructions. */
#include <stdint.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define GAPSCOPE_HAVE_CALLGRIND 1
#endif
#endif

#ifdef GAPSCOPE_HAVE_CALLGRIND
int gapscope_cg_built(void) { return 1; }
unsigned gapscope_cg_running(void) { return RUNNING_ON_VALGRIND; }
/* Dumps the calling thread's costs since its last dump (with --separate-threads=yes)
 * into a file whose trigger line carries `label`, and zeroes them. */
void gapscope_cg_dump_at(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
void gapscope_cg_instrument(int on) {
    if (on) {
        CALLGRIND_START_INSTRUMENTATION;
    } else {
        CALLGRIND_STOP_INSTRUMENTATION;
    }
}
#else
int gapscope_cg_built(void) { return 0; }
unsigned gapscope_cg_running(void) { return 0; }
void gapscope_cg_dump_at(const char *label) { (void)label; }
void gapscope_cg_instrument(int on) { (void)on; }
#endif
