#!/bin/sh
# A planted wrapper regression on gapscope's own history: a clone of this repository at
# BASE, then five first-parent commits on top; the third makes the CPU prover's `prep`
# phase (inside its `gpu_prove` wrapper) spin for 30 ms more per call, the others change
# a comment. Prints the culprit's commit id.
#   evidence/bisect-own/plant.sh DIR BASE
set -eu
dir=$1
base=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
git clone -q "$here" "$dir"
cd "$dir"
git checkout -q -b planted "$base"
c() { git -c user.email=bisect@example.invalid -c user.name=bisect commit -qam "$1"; }
note() { echo "// $1" >> crates/gapscope-groth16/src/knobs.rs; c "$1"; }
note "planted history: one"
note "planted history: two"
python3 - <<'P'
p = "crates/gapscope-groth16/src/cpu.rs"
s = open(p).read()
a = "            let s = Span::enter(spans::PREP);\n"
assert s.count(a) == 1
s = s.replace(a, a + "            let spin = std::time::Instant::now();\n            while spin.elapsed() < std::time::Duration::from_millis(30) {\n                std::hint::spin_loop();\n            }\n")
open(p, "w").write(s)
P
c "planted: prep spins 30 ms more"
git rev-parse HEAD > culprit.txt
note "planted history: four"
note "planted history: five"
cat culprit.txt
rm culprit.txt
