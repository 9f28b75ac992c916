//! The end of a run reads its folder a rep at a time (`RunData::load_spans_by_rep`):
//! its table and its comparison must be what the whole folder gives. Checked on the
//! committed run folders (tests/fixtures/ and evidence/), and on folders a rep-at-a-time
//! reading must refuse as a whole load does.

use std::path::Path;

use gapscope::analysis::{self, DiffOptions, Format};
use gapscope::store::RunData;

use super::legacy_folders::run_folders;

/// Every section of the diff of the run's first two variants, or the error.
fn diff_text(data: &RunData) -> String {
    let opts = DiffOptions {
        bootstrap_resamples: 200,
        ..DiffOptions::default()
    };
    let Ok((b, c)) = analysis::pick_variants(data, None, None, None) else {
        return "one variant".into();
    };
    match analysis::diff_runs(data, &b, data, &c, &opts) {
        Ok(d) => analysis::render(&d, Format::Json),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn a_folder_read_a_rep_at_a_time_gives_the_table_and_diff_of_the_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut folders = Vec::new();
    run_folders(Path::new("tests/fixtures"), &mut folders);
    run_folders(Path::new("evidence"), &mut folders);
    assert!(folders.len() > 100, "found {} run folders", folders.len());
    let mut compared = 0;
    for f in folders {
        let dir = root.join(&f);
        let Ok(whole) = RunData::load(&dir) else {
            // Folders kept to show a refusal are refused a rep at a time too.
            assert!(
                RunData::load_spans_by_rep(&dir)
                    .and_then(|d| d.for_each_rep(|_| {}))
                    .is_err(),
                "{}",
                f.display()
            );
            continue;
        };
        let by_rep = RunData::load_spans_by_rep(&dir).unwrap();
        assert!(by_rep.spans.is_empty() && by_rep.spans_on_disk);
        assert_eq!(
            gapscope::summary::phase_table(&whole),
            gapscope::summary::phase_table_and(&by_rep, |_| {}).unwrap(),
            "{}",
            f.display()
        );
        // The diff (its bootstrap is most of this test's time) of the fixtures, which
        // hold every kind of folder, and of every tenth other folder.
        if f.starts_with("tests/fixtures") || compared % 10 == 0 {
            assert_eq!(diff_text(&whole), diff_text(&by_rep), "{}", f.display());
        }
        compared += 1;
    }
    assert!(compared > 100, "compared {compared}");
}

/// A run folder of two variants × 2 reps of a few spans each, written by a run.
fn small_run(tmp: &Path) -> std::path::PathBuf {
    let exp = tmp.join("e.toml");
    std::fs::write(
        &exp,
        "name = \"r\"\n[workload]\ncommand = [\"sh\", \"-c\", \"true\"]\n[run]\nreps = 2\nwarmups = 0\n\
         [[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gapscope"))
        .args(["run", "--quiet"])
        .arg(&exp)
        .current_dir(tmp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    tmp.join(text.lines().last().unwrap().trim())
}

#[test]
fn reps_whose_rows_are_apart_or_cut_are_refused_a_rep_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = small_run(tmp.path());
    let spans = dir.join("spans.csv");
    let text = std::fs::read_to_string(&spans).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    // Each rep of a command is one root row here: rep 0, 1, 2, 3.
    assert_eq!(lines.len(), 5, "{text}");
    let mut reps = 0;
    RunData::load_spans_by_rep(&dir)
        .unwrap()
        .for_each_rep(|s| {
            assert_eq!(s.len(), 1);
            reps += 1;
        })
        .unwrap();
    assert_eq!(reps, 4);
    let error_by_rep = || {
        RunData::load_spans_by_rep(&dir)
            .unwrap()
            .for_each_rep(|_| {})
            .unwrap_err()
            .to_string()
    };
    // Rep 0's row again after rep 1's: a rep's rows apart.
    let mut apart = lines.clone();
    apart.push(lines[1]);
    std::fs::write(&spans, apart.join("\n") + "\n").unwrap();
    let e = error_by_rep();
    assert!(e.contains("rows are not together"), "{e}");
    // Rep 2's row gone: runs.csv records it, spans.csv lacks it.
    lines.remove(3);
    std::fs::write(&spans, lines.join("\n") + "\n").unwrap();
    let e = error_by_rep();
    assert!(e.contains("recorded in runs.csv but"), "{e}");
    assert_eq!(e, RunData::load(&dir).unwrap_err().to_string());
}
