#!/bin/sh
# Makes the worked example of `gapscope bisect` (docs/revisions-and-bisect.md): DIR/repo, a git
# repository of a small C program that reports its spans in gapscope's line protocol
# (cuda/gapscope_emit.h, committed beside it), and DIR/demo.toml, an experiment that
# builds and runs it. The history has seven first-parent commits; the fifth makes the
# `work` span do 8% more iterations of a deterministic busy loop, and the fourth does
# not compile. A second argument sets the fifth commit's work in percent of the fourth's
# (default 108; 20000 makes it 200 times slower).
#
#   scripts/bisect-demo.sh /tmp/demo [PERCENT]
#   gapscope bisect --repo /tmp/demo/repo --good main~6 --bad main \
#       --experiment /tmp/demo/demo.toml --metric work.process_cpu
set -eu
[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 DIR [PERCENT] (DIR: a folder that does not exist yet)" >&2; exit 2; }
percent=${2:-108}
[ ! -e "$1" ] || { echo "$1 exists: give a new folder" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1/repo"
dir=$(cd "$1" && pwd)
cd "$dir/repo"
git init -q -b main
git config user.name demo
git config user.email demo@example.org
cp "$here/cuda/gapscope_emit.h" .
printf 'prog\n' > .gitignore

# prog.c with LOOPS iterations of the work span's loop; $2 adds a line (or breaks it).
program() {
    cat > prog.c <<C
#include "gapscope_emit.h"
#include <stdio.h>
#include <time.h>

/* CPU time of the process, ns: reported as the work span's process_cpu_ns. */
static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static volatile uint64_t sink;

int main(void) {
    gapscope_emit_begin("setup");
    uint64_t x = 1;
    for (uint64_t i = 0; i < 200000; i++) x = x * 6364136223846793005ull + i;
    gapscope_emit_end("setup");
    uint64_t c0 = cpu_ns();
    gapscope_emit_begin("work");
    for (uint64_t i = 0; i < $1; i++) x = x * 6364136223846793005ull + i;
    $2
    sink = x;
    gapscope_emit_attr_u64("process_cpu_ns", cpu_ns() - c0);
    gapscope_emit_end("work");
    printf("checksum %llu\n", (unsigned long long)x);
    return 0;
}
C
}
commit() { git add -A && git commit -q -m "$1"; }

program 4000000 ""
commit "work: 4M iterations"
printf '# demo\n' > README
commit "README"
program 4000000 "x ^= x >> 7;"
commit "work: mix the checksum"
program 4000000 "x ^= x >> 7 /* half an edit */"
commit "work: start a refactor (does not compile)"
program 4000000 "x ^= x >> 7;"
commit "work: finish the refactor"
program $((40000 * percent)) "x ^= x >> 7;"
commit "work: $((percent - 100))% more iterations"
printf '# demo\n\nA small program for gapscope bisect.\n' > README
commit "README: what this is"

cat > "$dir/demo.toml" <<T
name = "demo"
[workload]
command = ["./prog"]
build = ["cc", "-O1", "-o", "prog", "prog.c"]
[run]
reps = 8
warmups = 1
order = "counterbalanced"
[[variant]]
name = "demo"
T
echo "$dir/repo and $dir/demo.toml"
