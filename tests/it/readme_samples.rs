//! The README's sample output is what this gapscope prints for the committed run folder
//! it names, with that run's machine and date: scripts/readme-samples.sh prints it, and
//! `scripts/readme-samples.sh --write` puts it into README.md after a change of wording.

use std::path::PathBuf;
use std::process::Command;

const BEGIN: &str =
    "<!-- readme-samples begin: scripts/readme-samples.sh --write rewrites this -->";
const END: &str = "<!-- readme-samples end -->";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_readmes_samples_are_what_gapscope_prints_for_the_committed_run() {
    let out = Command::new("sh")
        .arg(root().join("scripts/readme-samples.sh"))
        .env("GAPSCOPE", env!("CARGO_BIN_EXE_gapscope"))
        .output()
        .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "scripts/readme-samples.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The script's own check: a sample with its machine, date and both parts.
    for part in [
        "Machine: ",
        " UTC by gapscope ",
        "phase (median ms)",
        "End to end: ",
    ] {
        assert!(printed.contains(part), "no {part:?} in:\n{printed}");
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find(BEGIN).expect("README.md has the begin marker") + BEGIN.len() + 1;
    let end = readme.find(END).expect("README.md has the end marker");
    let held = &readme[start..end];
    assert!(
        held == printed,
        "README.md's samples differ from what gapscope prints now; run \
         `GAPSCOPE=target/debug/gapscope scripts/readme-samples.sh --write`.\n\
         --- README.md\n{held}\n--- printed\n{printed}"
    );
}
