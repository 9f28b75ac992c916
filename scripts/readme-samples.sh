#!/bin/sh
# The README's sample output, printed by the current gapscope from a committed run
# folder: the machine and date of the run (from its meta.json), then the phase table and
# the headline that `gapscope run` printed (`gapscope summary` and `gapscope diff` print
# them again).
#
#   scripts/readme-samples.sh            print what README.md should hold between its
#                                        readme-samples markers
#   scripts/readme-samples.sh --write    put it there
#
# GAPSCOPE names the binary (default target/release/gapscope). tests/it/readme_samples.rs
# fails when README.md differs from what this prints.
set -eu
cd "$(dirname "$0")/.."
GAPSCOPE=${GAPSCOPE:-target/release/gapscope}
RUN=evidence/quickstart/20261203T161316Z-e9b50a
BEGIN='<!-- readme-samples begin: scripts/readme-samples.sh --write rewrites this -->'
END='<!-- readme-samples end -->'

# A field of the run's meta.json (gapscope writes one key per line).
field() {
    sed -n -e "s/^ *\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" \
        -e "s/^ *\"$1\": \([0-9.]*\),\{0,1\}\$/\1/p" "$RUN/meta.json" | head -n 1
}

samples() {
    created=$(field created_utc)
    load=$(sed -n '/"load_avg": \[/{n;s/^ *\([0-9.]*\),*$/\1/p;q}' "$RUN/meta.json")
    revision=$(field revision | cut -c1-7)
    echo "Machine: $(field cpu_model), $(field cpu_cores) cores, $(field os) (host \`$(field hostname)\`);"
    echo "run on $(echo "$created" | cut -c1-10) at $(echo "$created" | cut -c12-16) UTC by gapscope $revision,"
    echo "load average $load at its start. Printed from [$RUN]($RUN) by"
    echo "\`scripts/readme-samples.sh\` with this gapscope:"
    echo
    echo '```'
    "$GAPSCOPE" summary "$RUN" | sed -n '1,/^reps ok\/failed/p'
    echo
    "$GAPSCOPE" diff "$RUN" | sed '/^run: /,$d'
    echo '```'
}

case "${1:-}" in
--write)
    grep -qxF "$BEGIN" README.md && grep -qxF "$END" README.md || {
        echo "README.md lacks the readme-samples markers" >&2
        exit 1
    }
    # Through the environment: awk's -v would read backslashes as escapes.
    NEW=$(samples) BEGIN="$BEGIN" END="$END" awk '
        $0 == ENVIRON["BEGIN"] { print; print ENVIRON["NEW"]; skip = 1; next }
        $0 == ENVIRON["END"] { skip = 0 }
        !skip { print }
    ' README.md >README.md.new
    cat README.md.new >README.md
    rm README.md.new
    ;;
"")
    samples
    ;;
*)
    echo "usage: scripts/readme-samples.sh [--write]" >&2
    exit 2
    ;;
esac
