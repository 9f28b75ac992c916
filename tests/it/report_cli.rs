//! Charts, `gapscope report` and `gapscope export --chrome` on a fixture run folder.

use crate::fixture;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use assert_cmd::Command;
use gapscope::analysis::synthetic::{SyntheticRun, SyntheticVariant};
use gapscope::plot::{self, ImageFormat};
use gapscope::store::RunData;
use gapscope::store::RunView;
use serde_json::Value;

fn gapscope() -> Command {
    Command::cargo_bin("gapscope").unwrap()
}

/// A fixture run with GPU telemetry files (NVML samples, CUPTI activity).
fn gpu_run(dir: &Path) -> std::path::PathBuf {
    fixture::write(
        dir,
        &fixture::Options {
            gpu: true,
            ..Default::default()
        },
    )
}

fn input(dir: &Path) -> RunView {
    RunView::load(dir).unwrap()
}

#[test]
fn every_chart_is_drawn_as_svg_and_png_naming_the_top_level_spans() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(tmp.path(), &fixture::Options::default());
    let out = tmp.path().join("charts");
    let results = plot::render_all(
        &input(&run),
        &out,
        &[ImageFormat::Svg, ImageFormat::Png],
        &Default::default(),
    );
    assert_eq!(results.len(), 4);
    for (name, outcome) in results {
        let r = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.files.len(), 2, "{name}");
        let png = image::open(out.join(format!("{name}.png")))
            .unwrap_or_else(|e| panic!("{name}.png: {e}"));
        assert!(
            png.width() >= 800 && png.height() >= 150,
            "{name}: {}x{}",
            png.width(),
            png.height()
        );
        // Something was drawn: many distinct colours, not a blank canvas.
        let rgb = png.to_rgb8();
        let distinct: std::collections::HashSet<[u8; 3]> = rgb.pixels().map(|p| p.0).collect();
        assert!(distinct.len() > 20, "{name}.png looks blank");
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).unwrap();
        let required: Vec<&str> = if name == "gaps" {
            vec!["gpu_prove", "kernels"]
        } else {
            fixture::TOP_LEVEL.to_vec()
        };
        for span in required {
            assert!(svg.contains(span), "{name}.svg does not mention {span}");
        }
    }
}

#[test]
fn without_gpu_files_the_timeline_says_so_and_with_them_draws_lanes_and_utilisation() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fixture::write(&tmp.path().join("a"), &fixture::Options::default());
    let out = tmp.path().join("plain");
    let r = plot::render(
        &plot::timeline::Timeline,
        &input(&plain),
        &out,
        &[ImageFormat::Svg],
    )
    .unwrap();
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(svg.contains("no GPU activity recorded"));
    assert!(
        r.notes
            .0
            .iter()
            .any(|n| n.contains("no GPU activity recorded")),
        "{:?}",
        r.notes
    );

    let gpu = gpu_run(&tmp.path().join("b"));
    let out = tmp.path().join("gpu");
    let r = plot::render(
        &plot::timeline::Timeline,
        &input(&gpu),
        &out,
        &[ImageFormat::Svg, ImageFormat::Png],
    )
    .unwrap();
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(!svg.contains("no GPU activity recorded"));
    assert!(
        svg.contains("GPU 0 stream 7") && svg.contains("GPU 0 stream 8"),
        "GPU lanes missing"
    );
    assert!(svg.contains("GPU 0 util %"), "utilisation strip missing");
    assert!(r.notes.0.is_empty(), "{:?}", r.notes);
}

#[test]
fn a_run_with_no_verified_rep_still_draws_every_chart_saying_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(
        tmp.path(),
        &fixture::Options {
            all_failed: true,
            ..Default::default()
        },
    );
    let out = tmp.path().join("charts");
    for (name, outcome) in plot::render_all(
        &input(&run),
        &out,
        &[ImageFormat::Svg, ImageFormat::Png],
        &Default::default(),
    ) {
        let r = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!r.notes.0.is_empty(), "{name} should say what is missing");
        image::open(out.join(format!("{name}.png"))).unwrap();
    }
}

/// Targets of markdown links and images: `](target)`.
fn links(md: &str) -> Vec<String> {
    md.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn report_links_only_files_that_exist_and_carries_phases_environment_and_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(tmp.path(), &fixture::Options::default());
    let out = tmp.path().join("reports/fixture");
    gapscope()
        .args([
            "report",
            run.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("report.md"));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let targets = links(&md);
    for chart in ["phases", "gaps", "timeline", "distributions"] {
        assert!(
            targets.contains(&format!("{chart}.png")),
            "{chart}.png not linked"
        );
        assert!(
            targets.contains(&format!("{chart}.svg")),
            "{chart}.svg not linked"
        );
    }
    assert!(targets.contains(&"trace.json".to_string()));
    for t in &targets {
        assert!(
            out.join(t).is_file(),
            "report.md links {t}, which does not exist"
        );
    }
    // Phase table with both variants and the unattributed part of the wrapper.
    assert!(md.contains("| gpu_prove · unattributed |"), "{md}");
    assert!(md.contains("baseline (median, min–max)") && md.contains("Δ candidate − baseline"));
    // The fixture's baseline wrapper has a 3 ms ghost: flagged.
    assert!(md.contains("⚠ unattributed"), "gap flag missing");
    // Environment and the exact command, quoted for a shell.
    assert!(md.contains("Fixture CPU 9000 (2 cores)"));
    assert!(md.contains("no GPU in this fixture"));
    assert!(md.contains("git checkout 0123456789abcdef0123456789abcdef01234567"));
    assert!(md
        .contains("target/release/gapscope run experiments/fixture.toml --results-dir '/tmp/r s'"));
    assert!(md.contains("no PMU in this fixture"));
    assert!(!md.contains("could not be drawn"));
}

#[test]
fn report_of_a_gpu_run_says_how_long_cupti_saw_the_gpu_busy() {
    let tmp = tempfile::tempdir().unwrap();
    let md = report_of(&gpu_run(tmp.path()));
    assert!(
        md.contains("baseline: CUPTI saw a kernel running for"),
        "{md}"
    );
    // The fixture's process keeps three cores busy throughout.
    assert!(
        md.contains(
            "baseline: `gpu_prove` kept 3.0 cores busy (process CPU time / wall, median), the GPU busy"
        ),
        "{md}"
    );
    assert!(!md.contains("no GPU activity recorded"), "{md}");
}

#[test]
fn a_chart_that_cannot_be_written_is_a_line_in_the_report_not_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(tmp.path(), &fixture::Options::default());
    let out = tmp.path().join("report");
    // A directory where the phases PNG should go makes that one chart fail.
    std::fs::create_dir_all(out.join("phases.png")).unwrap();
    gapscope()
        .args([
            "report",
            run.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "chart `phases` could not be drawn",
        ));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("chart `phases` could not be drawn"), "{md}");
    assert!(!links(&md).contains(&"phases.svg".to_string()));
    for t in links(&md) {
        assert!(
            out.join(&t).is_file(),
            "report.md links {t}, which does not exist"
        );
    }
    assert!(md.contains("![Timeline of a representative rep](timeline.png)"));
}

#[test]
fn report_of_a_folder_that_is_not_a_run_fails_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    gapscope()
        .args(["report", tmp.path().to_str().unwrap()])
        .assert()
        .failure()
        .stderr(predicates::str::contains("not a gapscope run folder"));
}

/// Parses a Chrome trace and returns (X events, metadata events, counter events).
fn parse_trace(path: &Path) -> (Value, Vec<Value>, Vec<Value>, Vec<Value>) {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap().clone();
    let by = |ph: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == ph)
            .cloned()
            .collect::<Vec<_>>()
    };
    (v.clone(), by("X"), by("M"), by("C"))
}

#[test]
fn chrome_trace_round_trips_every_span_in_microseconds_with_nesting_and_thread_names() {
    let tmp = tempfile::tempdir().unwrap();
    let run = gpu_run(tmp.path());
    let file = tmp.path().join("trace.json");
    gapscope()
        .args([
            "export",
            run.to_str().unwrap(),
            "--chrome",
            "--out",
            file.to_str().unwrap(),
        ])
        .assert()
        .success();
    let (whole, xs, metas, counters) = parse_trace(&file);
    let data = RunData::load(&run).unwrap();
    let origins: BTreeMap<String, u64> = whole["otherData"]["rep_origin_ns"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().parse().unwrap()))
        .collect();

    // Every span present once, on its thread, in its rep's process.
    let spans: Vec<&Value> = xs.iter().filter(|e| e["cat"] == "span").collect();
    assert_eq!(spans.len(), data.spans.len());
    let by_key: HashMap<(u64, u64), &Value> = spans
        .iter()
        .map(|e| {
            (
                (
                    e["pid"].as_u64().unwrap(),
                    e["args"]["span_id"].as_u64().unwrap(),
                ),
                *e,
            )
        })
        .collect();
    for s in &data.spans {
        let pid = gapscope::export::chrome::rep_pid(s.rep);
        let e = by_key
            .get(&(pid, s.span_id))
            .unwrap_or_else(|| panic!("span {} of rep {} missing", s.name, s.rep));
        assert_eq!(e["name"], s.name.as_str());
        assert_eq!(e["tid"].as_u64(), Some(s.thread_id));
        // ts and dur are microseconds (floats) from the rep's origin.
        let origin = origins[&s.rep.to_string()];
        let ts_ns = e["ts"].as_f64().unwrap() * 1000.0;
        let dur_ns = e["dur"].as_f64().unwrap() * 1000.0;
        assert!(
            (ts_ns - (s.start_ns - origin) as f64).abs() < 0.5,
            "{}: ts {ts_ns} ns",
            s.name
        );
        assert!(
            (dur_ns - s.duration_ns as f64).abs() < 0.5,
            "{}: dur {dur_ns} ns",
            s.name
        );
        assert_eq!(e["args"]["self_ns"].as_u64(), Some(s.self_ns));
    }
    // The fixture's spans are micro- to milliseconds long: in µs, never in ns or ms.
    let gp = spans.iter().find(|e| e["name"] == "gpu_prove").unwrap();
    let dur = gp["dur"].as_f64().unwrap();
    assert!(
        dur > 1_000.0 && dur < 100_000.0,
        "gpu_prove dur {dur} is not in µs"
    );

    // Nesting: a child on its parent's thread lies inside the parent's interval.
    let mut nested = 0;
    for e in &spans {
        let Some(parent) = e["args"]["parent_id"].as_u64() else {
            continue;
        };
        let p = by_key[&(e["pid"].as_u64().unwrap(), parent)];
        if p["tid"] != e["tid"] {
            continue;
        }
        let (ps, pe) = (
            p["ts"].as_f64().unwrap(),
            p["ts"].as_f64().unwrap() + p["dur"].as_f64().unwrap(),
        );
        let (cs, ce) = (
            e["ts"].as_f64().unwrap(),
            e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap(),
        );
        assert!(
            cs >= ps - 1e-6 && ce <= pe + 1e-6,
            "{} not inside {}",
            e["name"],
            p["name"]
        );
        nested += 1;
    }
    assert!(nested > 10, "too few nested spans checked: {nested}");

    // Every tid used has a thread_name, every pid a process_name.
    let names: HashMap<(u64, u64), String> = metas
        .iter()
        .filter(|m| m["name"] == "thread_name")
        .map(|m| {
            (
                (m["pid"].as_u64().unwrap(), m["tid"].as_u64().unwrap()),
                m["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for e in &xs {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert!(names.contains_key(&key), "no thread_name for {key:?}");
    }
    assert!(names.values().any(|n| n == "gapscope-drop"));
    let processes = metas.iter().filter(|m| m["name"] == "process_name").count();
    assert_eq!(processes, data.runs.len());

    // GPU lanes are their own tracks; NVML series are counters.
    let gpu: Vec<&Value> = xs
        .iter()
        .filter(|e| e["cat"].as_str().unwrap().starts_with("gpu."))
        .collect();
    assert!(!gpu.is_empty());
    for e in &gpu {
        let tid = e["tid"].as_u64().unwrap();
        assert!(tid >= gapscope::export::chrome::GPU_LANE_TID_BASE);
        assert!(names[&(e["pid"].as_u64().unwrap(), tid)].starts_with("GPU 0 stream"));
    }
    assert!(counters
        .iter()
        .any(|c| c["name"] == "GPU 0 sm_util_pct" && c["args"]["value"].as_f64() == Some(95.0)));
    assert!(counters.iter().all(|c| c["ts"].as_f64().unwrap() >= 0.0));
}

#[test]
fn chrome_export_of_one_rep_holds_only_that_rep_and_an_unknown_rep_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(tmp.path(), &fixture::Options::default());
    let out = gapscope()
        .current_dir(tmp.path())
        .args(["export", run.to_str().unwrap(), "--chrome", "--rep", "3"])
        .assert()
        .success()
        .stdout(predicates::str::contains("trace-rep3.json"));
    let printed = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let file = tmp.path().join(printed.trim());
    assert!(
        file.starts_with(tmp.path().join("exports")),
        "{}",
        file.display()
    );
    assert!(
        !run.join("trace-rep3.json").exists(),
        "nothing written into the run folder"
    );
    let (_, xs, _, counters) = parse_trace(&file);
    assert!(!xs.is_empty());
    assert!(xs
        .iter()
        .all(|e| e["pid"].as_u64() == Some(gapscope::export::chrome::rep_pid(3))));
    assert!(counters.is_empty(), "no telemetry in this fixture");
    gapscope()
        .args(["export", run.to_str().unwrap(), "--chrome", "--rep", "99"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("no rep 99"));
}

#[test]
fn unattributed_time_counts_children_on_every_thread_and_self_time_only_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(tmp.path(), &fixture::Options::default());
    let input = input(&run);
    use gapscope::store::SpanTime::{SelfTime, Unattributed};
    // synthesis waits 1000 µs on its thread while workers cover all but 20 µs of it.
    assert_eq!(
        input.median_of("baseline", "synthesis", SelfTime),
        Some(1_000_000.0)
    );
    assert_eq!(
        input.median_of("baseline", "synthesis", Unattributed),
        Some(20_000.0)
    );
    // gpu_prove: 5 µs before its first child, the 3 ms ghost, 10 µs after `drop`.
    assert_eq!(
        input.median_of("baseline", "gpu_prove", Unattributed),
        Some(3_015_000.0)
    );
    // With drop on the background thread, its last 10 µs inside gpu_prove are covered.
    assert_eq!(
        input.median_of("candidate", "gpu_prove", SelfTime),
        Some(215_000.0)
    );
    assert_eq!(
        input.median_of("candidate", "gpu_prove", Unattributed),
        Some(205_000.0)
    );
}

/// Writes `report.md` of `run` into a temp folder and returns it.
fn report_of(run: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    gapscope()
        .args([
            "report".as_ref(),
            run.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
        .assert()
        .success();
    std::fs::read_to_string(out.join("report.md")).unwrap()
}

#[test]
fn report_phases_are_the_diff_with_a_verdict_column() {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu");
    let md = report_of(&real);
    // The answer before any table: the diff's headline, then the chart of the change.
    let first_table = md.find("\n| ").unwrap();
    let headline = md
        .find("- **End to end:** prove (total) medians 1.123 s → 1.157 s; geometric mean of per-pair ratios +70.78 ms")
        .unwrap();
    let chart = md
        .find("![Where the time went: the change](change.png)")
        .unwrap();
    assert!(headline < chart && chart < first_table, "{md}");
    // The drop's 25 µs leave the critical path: too small to matter (equivalent, inside
    // the time floor), but the move itself, on the path in every baseline rep and in no
    // candidate rep, is named.
    assert!(
        md.contains(
            "- **Critical path:** drop left it (on it in 5 of 5 baseline reps, 0 of 5 \
             candidate reps; -33.16 µs of self time, under the verdict rule)"
        ) && md.contains("; no self time on it changed significantly"),
        "{md}"
    );
    let phases = &md[md.find("## Phases").unwrap()..md.find("### All spans").unwrap()];
    assert!(
        phases.contains("| Phase | Measure | Baseline | Candidate | Delta | Verdict |"),
        "{phases}"
    );
    let total = phases
        .lines()
        .find(|l| l.starts_with("| end to end (prove) |"))
        .unwrap();
    assert!(
        total.ends_with("| inconclusive (p=0.326; about 35 more pairs to resolve ±1%) |"),
        "{total}"
    );
    // Gap attribution and where the time went come from the same diff.
    assert!(phases.contains("#### Gaps: wrapper time not covered by children"));
    assert!(phases.contains(
        "#### Where the time went: prove +70.78 ms (+5.5%, inconclusive), by self time on the critical path"
    ));
    // Async drop leaves the critical path; inside the time floor it is shown too small
    // to matter. The total change is unresolved, so no share of it is shown.
    assert!(
        phases.contains(
            "| drop | self on critical path | 24.77 µs | 0 ns | -33.16 µs | -0.00% [-0.01%, -0.00%] | equivalent (q&lt;0.001; inside ±1.123 ms) |"
        ),
        "{phases}"
    );
    assert!(phases.contains("No shares of the end-to-end change: it is inconclusive"));
    assert!(md.contains("## Leak watch\n\nNo monotonic growth of host RSS or GPU memory"));

    // Too few reps: the table is there, every verdict says what is missing.
    let tmp = tempfile::tempdir().unwrap();
    let md = report_of(&fixture::write(tmp.path(), &fixture::Options::default()));
    let row = md
        .lines()
        .find(|l| l.starts_with("| end to end (prove) |"))
        .unwrap();
    assert!(row.contains("no claim below 4"), "{row}");
    assert!(md.contains("so rerun with reps >= 4"));
}

#[test]
fn a_report_without_a_comparison_says_why_and_one_of_three_variants_diffs_both_others() {
    let tmp = tempfile::tempdir().unwrap();
    let mut one = SyntheticRun::new();
    one.variants.truncate(1);
    let dir = tmp.path().join("one");
    one.write(&dir).unwrap();
    let md = report_of(&dir);
    assert!(
        md.contains("No comparison: ") && md.contains("only one variant (baseline)"),
        "{md}"
    );
    assert!(!md.contains("| Verdict |"));
    assert!(md.contains("### All spans"));

    let mut three = SyntheticRun::new();
    three
        .variants
        .push(SyntheticVariant::new("slow_msm").scaled("msm_h", 1.2));
    let dir = tmp.path().join("three");
    three.write(&dir).unwrap();
    let md = report_of(&dir);
    let titles: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("### synthetic: "))
        .collect();
    assert_eq!(
        titles,
        [
            "### synthetic: baseline vs candidate — porep 2^12 × 2 on cpu",
            "### synthetic: baseline vs slow_msm — porep 2^12 × 2 on cpu"
        ]
    );
    // The kernels row of each comparison's phase table.
    let kernels: Vec<&str> = md
        .split("#### Phases (median per rep)")
        .skip(1)
        .map(|t| {
            t.lines()
                .take_while(|l| !l.starts_with("####"))
                .find(|l| l.starts_with("| NTT and MSMs (kernels) |"))
                .unwrap()
        })
        .collect();
    assert_eq!(kernels.len(), 2, "{md}");
    assert!(kernels[0].contains("equivalent"), "{}", kernels[0]);
    assert!(kernels[1].contains("regressed"), "{}", kernels[1]);
}

#[test]
fn report_leak_watch_names_the_variant_whose_rss_grows() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate").rss_growth_bytes_per_rep = 100 << 20;
    let dir = tmp.path().join("run");
    run.write(&dir).unwrap();
    let md = report_of(&dir);
    let section = &md[md.find("## Leak watch").unwrap()..md.find("## Charts").unwrap()];
    let flags: Vec<&str> = section.lines().filter(|l| l.starts_with("- ⚠ ")).collect();
    assert_eq!(flags.len(), 1, "{section}");
    assert!(
        flags[0].contains("variant \"candidate\": rss_end_bytes grew in 9/9 steps"),
        "{}",
        flags[0]
    );
    assert!(!section.contains("No monotonic growth"));
    // The comparison says it too.
    assert!(md.contains("- ⚠ leak watch (candidate): variant \"candidate\""));
}

/// A run on a host without the NVIDIA driver, as meta.json recorded it before the plain
/// sentence (the loader's error in the reason, NVML's and CUPTI's status): report.md says
/// "no NVIDIA GPU/driver on this host" once and never the loader's text; the timeline
/// chart says the sentence.
#[test]
fn a_host_without_the_driver_is_said_once_in_plain_words() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(tmp.path(), &fixture::Options::default());
    let raw = "NVML init failed: a libloading error occurred: libnvidia-ml.so.1: cannot open \
               shared object file: No such file or directory";
    let meta_path = run.join("meta.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["gpu"]["reason"] = Value::String(format!("unavailable: {raw}"));
    meta["gpu"]["nvml"] = Value::String(format!("unavailable: {raw}"));
    meta["gpu"]["cupti"] = Value::String(format!("unavailable: no GPU found through NVML ({raw})"));
    std::fs::write(&meta_path, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
    let out = tmp.path().join("report");
    gapscope()
        .arg("report")
        .arg(&run)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(!md.contains("libnvidia-ml"), "{md}");
    assert_eq!(
        md.matches("no NVIDIA GPU/driver on this host").count(),
        1,
        "{md}"
    );
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(
        svg.contains("no NVIDIA GPU/driver on this host"),
        "timeline.svg says why it has no GPU lanes"
    );
    assert!(!svg.contains("libnvidia-ml"));
}
