//! `patch` variants: the current gapscope built against another source of a crate of its
//! dependency graph. The "current gapscope" here is a throwaway repository of a tiny
//! crate named gapscope (`GAPSCOPE_SOURCE`) that speaks the worker protocol and depends
//! on `itoa`; the patched `itoa` is a fixture repository whose revisions differ in the
//! work they do and the tag they report. Everything builds offline in seconds.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData};

use crate::common;
use common::{gapscope, git};

/// The worker: answers `__protocol`, and for `__worker` times `itoa::fixture_work()`
/// (the patched crate) as the rep's `prove` span, tagged with what it returned.
const FAKE_MAIN: &str = r#"
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let arg = |k: &str| {
        a.iter().position(|x| x == k).and_then(|i| a.get(i + 1)).cloned().unwrap_or_default()
    };
    match a.get(1).map(String::as_str) {
        Some("__protocol") => println!("gapscope-worker-protocol 1"),
        Some("__worker") => {
            let t = std::time::Instant::now();
            let tag = itoa::fixture_work();
            let ns = t.elapsed().as_nanos() as u64;
            let (rep, it, v) = (arg("--rep"), arg("--iteration"), arg("--variant"));
            let warm = a.iter().any(|x| x == "--warmup");
            let pid = std::process::id();
            println!(
                "gapscope-rep-v1 {{\"run\":{{\"rep\":{rep},\"variant\":\"{v}\",\"iteration\":{it},\
                 \"warmup\":{warm},\"status\":\"ok\",\"verified\":true,\"proofs\":1,\"start_ns\":1,\
                 \"wall_ns\":{ns},\"started_utc\":\"\",\"pid\":{pid},\"rss_end_bytes\":null,\
                 \"error\":\"\"}},\"spans\":[{{\"rep\":{rep},\"variant\":\"{v}\",\"span_id\":1,\
                 \"parent_id\":null,\"name\":\"prove\",\"thread_id\":1,\"thread_name\":\"main\",\
                 \"start_ns\":1,\"end_ns\":{end},\"duration_ns\":{ns},\"self_ns\":{ns},\
                 \"instructions\":null,\"branches\":null,\"cycles\":null,\"task_clock_ns\":null,\
                 \"page_faults\":null,\"context_switches\":null,\
                 \"attrs\":\"{{\\\"fixture\\\":\\\"{tag}\\\"}}\"}}]}}",
                end = ns + 1
            );
        }
        _ => std::process::exit(2),
    }
}
"#;

/// A fixture `itoa` whose `fixture_work` adds `n` numbers and returns `tag`.
fn fixture_lib(tag: &str, n: u64) -> String {
    format!(
        "pub fn fixture_work() -> &'static str {{\n    let mut x = 0u64;\n    \
         for i in 0..{n}u64 {{\n        x = x.wrapping_add(std::hint::black_box(i));\n    }}\n    \
         std::hint::black_box(x);\n    \"{tag}\"\n}}\n"
    )
}

fn manifest(name: &str, version: &str, deps: &str) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"{version}\"\nedition = \"2021\"\n\
         [dependencies]\n{deps}[workspace]\n"
    )
}

fn write(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

fn commit(dir: &Path, msg: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", msg]);
    git(dir, &["rev-parse", "HEAD"])
}

/// The fake gapscope (with its lock file, resolved offline); its folder.
fn fake_gapscope(tmp: &Path) -> PathBuf {
    let dir = tmp.join("gapscope-src");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    write(
        &dir,
        "Cargo.toml",
        &manifest("gapscope", "0.0.1", "itoa = \"1\"\n"),
    );
    write(&dir, "src/main.rs", FAKE_MAIN);
    let out = std::process::Command::new("cargo")
        .args(["generate-lockfile", "--offline"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    commit(&dir, "fake gapscope");
    dir
}

/// The fixture repository of `itoa`: one commit per (version, tag, work), oldest first.
fn fixture(tmp: &Path, name: &str, commits: &[(&str, &str, String)]) -> (PathBuf, Vec<String>) {
    let dir = tmp.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    let ids = commits
        .iter()
        .map(|(version, msg, lib)| {
            write(&dir, "Cargo.toml", &manifest("itoa", version, ""));
            write(&dir, "src/lib.rs", lib);
            commit(&dir, msg)
        })
        .collect();
    (dir, ids)
}

fn experiment(tmp: &Path, variants: &[(&str, String)]) -> PathBuf {
    let mut text = String::from(
        "name = \"pv\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 1\n\
         [run]\nreps = 2\nwarmups = 0\n",
    );
    for (name, patch) in variants {
        text.push_str(&format!("[[variant]]\nname = \"{name}\"\n"));
        if !patch.is_empty() {
            text.push_str(&format!("patch = {{ {patch} }}\n"));
        }
    }
    let p = tmp.join("pv.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn itoa_at(repo: &Path, rev: Option<&str>) -> String {
    match rev {
        Some(r) => format!("itoa = {{ path = \"{}\", rev = \"{r}\" }}", repo.display()),
        None => format!("itoa = {{ path = \"{}\" }}", repo.display()),
    }
}

/// `gapscope` with the fake source, offline cargo and a cache of this test's own.
fn cmd(tmp: &Path, src: &Path) -> assert_cmd::Command {
    let mut c = gapscope(tmp);
    c.env("GAPSCOPE_SOURCE", src)
        .env("CARGO_NET_OFFLINE", "true")
        .env("GAPSCOPE_REV_CACHE", tmp.join("cache"));
    c
}

fn run(tmp: &Path, src: &Path, exp: &Path, path: Option<&str>) -> (RunData, String) {
    let mut c = cmd(tmp, src);
    c.arg("run")
        .arg(exp)
        .arg("--results-dir")
        .arg(tmp.join("results"));
    if let Some(p) = path {
        c.env("PATH", p);
    }
    // 0, or 5 when a variant had no successful rep (a bad patch's variant, by design).
    let out = c.assert();
    let o = out.get_output();
    assert!(
        matches!(o.status.code(), Some(0) | Some(5)),
        "{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = common::run_dir_of(&o.stdout);
    (
        RunData::load(&dir).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn tags(d: &RunData, v: &str) -> Vec<String> {
    d.spans
        .iter()
        .filter(|s| s.variant == v && s.name == "prove")
        .map(|s| {
            let a: serde_json::Value = serde_json::from_str(&s.attrs).unwrap();
            a["fixture"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

fn statuses(d: &RunData, v: &str) -> Vec<RepStatus> {
    d.runs
        .iter()
        .filter(|x| x.variant == v)
        .map(|x| x.status)
        .collect()
}

fn two_revisions(tmp: &Path) -> (PathBuf, Vec<String>) {
    fixture(
        tmp,
        "itoa-fork",
        &[
            ("1.0.99", "one", fixture_lib("one", 1_000)),
            ("1.0.99", "two", fixture_lib("two", 20_000_000)),
        ],
    )
}

#[test]
fn two_revisions_of_a_dependency_are_measured_beside_a_knob_variant_and_rerun_from_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope(t);
    let (repo, ids) = two_revisions(t);
    // The working tree differs from its commit.
    write(&repo, "src/lib.rs", &fixture_lib("dirty", 1_000));
    let exp = experiment(
        t,
        &[
            ("here", String::new()),
            ("one", itoa_at(&repo, Some("HEAD~1"))),
            ("two", itoa_at(&repo, Some("main"))),
            ("wt", itoa_at(&repo, None)),
        ],
    );
    let (d, _) = run(t, &src, &exp, None);
    for v in ["here", "one", "two", "wt"] {
        assert_eq!(
            statuses(&d, v),
            [RepStatus::Ok, RepStatus::Ok],
            "{v}: {:?}",
            d.runs
        );
    }
    assert_eq!(tags(&d, "one"), ["one", "one"]);
    assert_eq!(tags(&d, "two"), ["two", "two"]);
    assert_eq!(tags(&d, "wt"), ["dirty", "dirty"]);
    // The knob variant ran gapscope's own prover: its reps have the whole span tree.
    assert!(d
        .spans
        .iter()
        .any(|s| s.variant == "here" && s.name == "synthesis"));
    // Interleaved in one run: the variants' reps alternate.
    let order: Vec<&str> = d.runs.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(&order[..4], ["here", "one", "two", "wt"], "{order:?}");
    let m = |v: usize| d.meta.variants[v].patches[0].clone();
    assert_eq!(
        (m(1).commit.as_str(), m(1).rev.as_str()),
        (ids[0].as_str(), "HEAD~1")
    );
    assert_eq!(m(2).commit, ids[1]);
    assert_eq!(
        (m(1).krate.as_str(), m(1).version.as_str()),
        ("itoa", "1.0.99")
    );
    assert!(!m(1).dirty && !m(2).dirty);
    assert!(m(3).dirty && m(3).rev.is_empty() && m(3).commit == ids[1]);
    assert_eq!(m(1).gapscope_commit, git(&src, &["rev-parse", "HEAD"]));
    let log = d.meta.repo_path(&d.dir, &m(1).build_log);
    assert!(!m(1).build_reused && log.exists(), "{}", m(1).build_log);
    assert!(d.meta.variants[0].patches.is_empty());
    // The knob names the fork relative to the folder gapscope ran in (meta.json's
    // paths name no machine's folders).
    assert_eq!(
        d.meta.variants[1].knobs["patch"],
        format!("itoa={}@HEAD~1", repo.strip_prefix(t).unwrap().display())
    );
    // The revisions do different work: 20 000 times as many additions.
    let median = |v: &str| {
        let mut w: Vec<u64> = d
            .runs
            .iter()
            .filter(|x| x.variant == v)
            .map(|x| x.wall_ns)
            .collect();
        w.sort_unstable();
        w[0]
    };
    assert!(
        median("two") > median("one"),
        "{} vs {}",
        median("two"),
        median("one")
    );
    // The checkouts are untouched: the fork's working tree keeps its edit, the source
    // its lock file.
    assert!(std::fs::read_to_string(repo.join("src/lib.rs"))
        .unwrap()
        .contains("dirty"));
    assert_eq!(git(&src, &["status", "--porcelain"]), "");
    // A second run reuses both revisions' workers.
    let (d, _) = run(t, &src, &exp, None);
    assert!(d.meta.variants[1].patches[0].build_reused);
    assert!(d.meta.variants[2].patches[0].build_reused);
    assert_eq!(tags(&d, "two"), ["two", "two"]);
}

/// A PATH holding git and nothing else (no cargo).
fn path_without_cargo(tmp: &Path) -> String {
    let bin = tmp.join("bin-no-cargo");
    std::fs::create_dir_all(&bin).unwrap();
    let git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::os::unix::fs::symlink(git.trim(), bin.join("git")).unwrap();
    bin.display().to_string()
}

#[test]
fn build_workers_builds_the_workers_and_a_host_without_cargo_runs_them() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope(t);
    let (repo, _) = two_revisions(t);
    let exp = experiment(
        t,
        &[
            ("one", itoa_at(&repo, Some("HEAD~1"))),
            ("two", itoa_at(&repo, Some("main"))),
        ],
    );
    let out = cmd(t, &src)
        .arg("build-workers")
        .arg(&exp)
        .arg("--results-dir")
        .arg(t.join("results"))
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("one") && stdout.contains("built"),
        "{stdout}"
    );
    let no_cargo = path_without_cargo(t);
    let (d, _) = run(t, &src, &exp, Some(&no_cargo));
    assert_eq!(tags(&d, "one"), ["one", "one"]);
    assert_eq!(tags(&d, "two"), ["two", "two"]);
    assert!(d.meta.variants[0].patches[0].build_reused);
    // Neither the fork nor gapscope's source on this host: the prepared workers still run.
    let moved = t.join("elsewhere");
    std::fs::rename(&repo, &moved).unwrap();
    let (d, stderr) = run(t, &t.join("no-source"), &exp, Some(&no_cargo));
    assert_eq!(tags(&d, "two"), ["two", "two"]);
    assert!(
        stderr.contains("is not on this host: using the worker prepared"),
        "{stderr}"
    );
    std::fs::rename(&moved, &repo).unwrap();
    // A patch set nobody prepared: named, with the command that prepares it.
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "three"]);
    let (d, _) = run(t, &src, &exp, Some(&no_cargo));
    assert_eq!(statuses(&d, "two"), [RepStatus::Failed, RepStatus::Failed]);
    let why = d.meta.variants[1].patch_failed.clone().unwrap();
    assert!(
        why.contains("gapscope build-workers") && why.contains("cargo is not installed"),
        "{why}"
    );
    // (HEAD~1 moved with the branch too: it now names another commit.)
    assert_eq!(statuses(&d, "one"), [RepStatus::Failed, RepStatus::Failed]);
}

#[test]
fn each_bad_patch_fails_only_its_own_variant_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope(t);
    let (repo, ids) = fixture(
        t,
        "itoa-fork",
        &[
            ("1.0.99", "good", fixture_lib("good", 1_000)),
            ("2.0.0", "next major", fixture_lib("major", 1_000)),
            (
                "1.0.99",
                "broken",
                "pub fn fixture_work() -> &'static str { nope }\n".into(),
            ),
        ],
    );
    write(&repo, "docs/README", "not a crate\n");
    commit(&repo, "docs");
    let other = t.join("other");
    std::fs::create_dir_all(other.join("src")).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    write(
        &other,
        "Cargo.toml",
        &manifest("not-a-dependency", "1.0.0", ""),
    );
    write(&other, "src/lib.rs", "");
    commit(&other, "one");
    let exp = experiment(
        t,
        &[
            ("good", itoa_at(&repo, Some(&ids[0]))),
            (
                "not_in_graph",
                format!(
                    "not-a-dependency = {{ path = \"{}\", rev = \"main\" }}",
                    other.display()
                ),
            ),
            ("version", itoa_at(&repo, Some(&ids[1]))),
            (
                "not_a_crate",
                format!("itoa = {{ path = \"{}\" }}", repo.join("docs").display()),
            ),
            ("bad_rev", itoa_at(&repo, Some("no-such-branch"))),
            ("build", itoa_at(&repo, Some(&ids[2]))),
        ],
    );
    let (d, _) = run(t, &src, &exp, None);
    assert_eq!(statuses(&d, "good"), [RepStatus::Ok, RepStatus::Ok]);
    assert_eq!(tags(&d, "good"), ["good", "good"]);
    let cases = [
        (
            "not_in_graph",
            "no crate of that name is in gapscope's dependency graph",
        ),
        ("version", "does not satisfy the requirement"),
        ("not_a_crate", "is not a crate"),
        ("bad_rev", "is not a commit of"),
        ("build", "did not build"),
    ];
    for (i, (v, says)) in cases.iter().enumerate() {
        assert_eq!(
            statuses(&d, v),
            [RepStatus::Failed, RepStatus::Failed],
            "{v}"
        );
        let why = d.meta.variants[i + 1]
            .patch_failed
            .clone()
            .unwrap_or_default();
        assert!(why.contains(says), "{v}: {why}");
        for r in d.runs.iter().filter(|r| r.variant == *v) {
            assert!(r.error.contains(says), "{v}: {}", r.error);
        }
    }
    // The version: what it was and what was required.
    let why = d.meta.variants[2].patch_failed.clone().unwrap();
    assert!(
        why.contains("version 2.0.0") && why.contains("requires itoa ^1"),
        "{why}"
    );
    // The build failure: rustc's complaint from the log's tail.
    let why = d.meta.variants[5].patch_failed.clone().unwrap();
    assert!(why.contains("nope"), "{why}");
}

/// A program of the user's with the header and no gapscope: its spans do nothing.
const OUTSIDE_CPP: &str = r#"
#include "gapscope_trace.h"
#include <cstdio>
#include <thread>
int main() {
    gapscope_span_ctx parent = gapscope_context();
    uint64_t opened = 0;
    {
        gapscope::Span s("outer");
        s.attr("bytes", (uint64_t)1);
        std::thread t([parent, &opened] { gapscope::Span c("child", parent); opened += c.handle(); });
        t.join();
        opened += s.handle();
        s.end();
    }
    uint64_t h = gapscope_enter("c_style");
    gapscope_attr_str(h, "k", "v");
    std::printf("present=%d opened=%llu exit=%d\n", gapscope_present(),
                (unsigned long long)(opened + h), (int)gapscope_exit(h));
    return 0;
}
"#;

/// A stand-in recorder: strong definitions, as a gapscope worker links them.
const RECORDER_C: &str = r#"
#include <stdint.h>
typedef struct { uint64_t id; uint64_t trace; } gapscope_span_ctx;
static uint64_t next = 0;
uint64_t gapscope_span_enter(const char *n) { (void)n; return ++next; }
uint64_t gapscope_span_enter_under(const char *n, gapscope_span_ctx p) { (void)n; (void)p; return ++next; }
gapscope_span_ctx gapscope_span_context(void) { gapscope_span_ctx c = {0, 0}; return c; }
int32_t gapscope_span_exit(uint64_t h) { (void)h; return 7; }
void gapscope_span_attr_u64(uint64_t h, const char *k, uint64_t v) { (void)h; (void)k; (void)v; }
void gapscope_span_attr_str(uint64_t h, const char *k, const char *v) { (void)h; (void)k; (void)v; }
"#;

fn compile_and_run(tmp: &Path, name: &str, sources: &[&Path]) -> String {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let exe = tmp.join(name);
    let mut c = std::process::Command::new("c++");
    c.args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&exe);
    for s in sources {
        if s.extension().is_some_and(|e| e == "c") {
            let obj = s.with_extension("o");
            let out = std::process::Command::new("cc")
                .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-c"])
                .arg(s)
                .arg("-o")
                .arg(&obj)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            c.arg(obj);
        } else {
            c.arg(s);
        }
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = std::process::Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    String::from_utf8(run.stdout).unwrap().trim().to_string()
}

#[test]
fn the_trace_header_links_without_gapscope_and_binds_to_a_recorder_when_there_is_one() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let main = t.join("main.cpp");
    std::fs::write(&main, OUTSIDE_CPP).unwrap();
    // Outside: nothing defines the recorder; every call is a no-op returning 0.
    assert_eq!(
        compile_and_run(t, "outside", &[&main]),
        "present=0 opened=0 exit=0"
    );
    // Linked with strong definitions, the same code calls them: outer (1), child (2)
    // and c_style (3) opened, their ids summed; exit returns the recorder's answer.
    let rec = t.join("recorder.c");
    std::fs::write(&rec, RECORDER_C).unwrap();
    assert_eq!(
        compile_and_run(t, "inside", &[&main, &rec]),
        "present=1 opened=6 exit=7"
    );
    // Plain C includes it too.
    let c_main = t.join("main_c.c");
    std::fs::write(
        &c_main,
        "#include \"gapscope_trace.h\"\n#include <stdio.h>\nint main(void) {\n\
         uint64_t h = gapscope_enter(\"x\"); printf(\"%d\\n\", (int)(gapscope_exit(h) + gapscope_present()));\n\
         return 0; }\n",
    )
    .unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let exe = t.join("c_prog");
    let out = std::process::Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&include)
        .arg(&c_main)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = std::process::Command::new(&exe).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "0");
}

#[test]
fn a_git_url_patch_is_cloned_into_the_cache_and_checked_out_at_its_revision() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope(t);
    let (repo, ids) = two_revisions(t);
    let url = format!("file://{}", repo.display());
    let exp = experiment(
        t,
        &[
            (
                "old",
                format!("itoa = {{ git = \"{url}\", rev = \"HEAD~1\" }}"),
            ),
            (
                "new",
                format!("itoa = {{ git = \"{url}\", rev = \"main\" }}"),
            ),
        ],
    );
    let (d, stderr) = run(t, &src, &exp, None);
    for v in ["old", "new"] {
        assert_eq!(
            statuses(&d, v),
            [RepStatus::Ok, RepStatus::Ok],
            "{v}: {stderr}"
        );
    }
    assert_eq!(tags(&d, "old"), ["one", "one"]);
    assert_eq!(tags(&d, "new"), ["two", "two"]);
    let m = |v: usize| d.meta.variants[v].patches[0].clone();
    // The URL is the patch's repository; the clone lives in the cache, not beside it.
    assert_eq!(m(0).repo, url);
    assert_eq!(
        (m(0).commit.as_str(), m(1).commit.as_str()),
        (ids[0].as_str(), ids[1].as_str())
    );
    assert!(!m(0).dirty && !m(1).dirty);
    assert!(
        d.meta
            .repo_path(&d.dir, &m(0).path)
            .starts_with(t.join("cache")),
        "{}",
        m(0).path
    );
    // A new commit upstream: a re-run fetches it, and `main` now names it.
    write(&repo, "src/lib.rs", &fixture_lib("three", 1_000));
    let third = commit(&repo, "three");
    let (d, stderr) = run(t, &src, &exp, None);
    assert_eq!(tags(&d, "new"), ["three", "three"], "{stderr}");
    assert_eq!(d.meta.variants[1].patches[0].commit, third);
    assert_eq!(
        tags(&d, "old"),
        ["two", "two"],
        "HEAD~1 follows the fetched main"
    );
}

#[test]
fn bisect_walks_a_dependency_history_and_names_the_commit_that_slowed_it() {
    let _serial = common::timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope(t);
    // Five commits of the fork: the fourth does 20,000 times the work.
    let commits: Vec<(&str, &str, String)> = [
        ("c0", 1_000),
        ("c1", 1_000),
        ("c2", 1_000),
        ("c3", 20_000_000),
        ("c4", 20_000_000),
    ]
    .into_iter()
    .map(|(tag, n)| ("1.0.99", tag, fixture_lib(tag, n)))
    .collect();
    let (repo, ids) = fixture(t, "itoa-fork", &commits);
    let exp = experiment(t, &[("only", String::new())]);
    let out = cmd(t, &src)
        .args(["bisect", "--good", &ids[0], "--bad", &ids[4]])
        .arg("--patch")
        .arg(format!("itoa={}", repo.display()))
        .arg("--experiment")
        .arg(&exp)
        .args(["--metric", "prove.total", "--reps", "6"])
        .arg("--results-dir")
        .arg(t.join("results"))
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.starts_with(&format!("first bad commit: {}\n", ids[3])),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(&format!("prove.total against its parent {}", &ids[2][..12])),
        "{stdout}"
    );
    // gapscope's own checkout and the fork's are untouched.
    assert_eq!(git(&src, &["status", "--porcelain"]), "");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), ids[4]);
}

#[test]
fn per_variant_serves_this_builds_reps_and_gives_a_build_that_cannot_serve_a_worker_per_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope(t);
    let (repo, _) = two_revisions(t);
    let exp = experiment(
        t,
        &[
            ("here", String::new()),
            ("two", itoa_at(&repo, Some("main"))),
        ],
    );
    let text = std::fs::read_to_string(&exp)
        .unwrap()
        .replace("warmups = 0\n", "warmups = 0\nprocess = \"per_variant\"\n");
    std::fs::write(&exp, text).unwrap();
    let (d, stderr) = run(t, &src, &exp, None);
    assert_eq!(
        statuses(&d, "here"),
        [RepStatus::Ok, RepStatus::Ok],
        "{stderr}"
    );
    assert_eq!(tags(&d, "two"), ["two", "two"], "{stderr}");
    let pids = |v: &str| -> Vec<u32> {
        d.runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.pid)
            .collect()
    };
    let here = pids("here");
    assert_eq!(here[0], here[1], "this build's worker serves both reps");
    // The fake gapscope has no `__serves`: one worker per rep, said once.
    let two = pids("two");
    assert_ne!(two[0], two[1]);
    assert_eq!(stderr.matches("serves one rep only").count(), 1, "{stderr}");
}

/// The prover's own binary in the fake source (`crates/gapscope-groth16`, depending on
/// `itoa`): it shakes hands as a workload binary and answers each rep with a `prove`
/// span timing `itoa::fixture_work()`, tagged with what it returned.
const FAKE_PROVER_BIN: &str = r#"use std::io::BufRead;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.get(1).map(String::as_str) == Some("__protocol") {
        println!("gapscope-workload-worker 1 groth16");
        return;
    }
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let rep: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let t = std::time::Instant::now();
        let tag = itoa::fixture_work();
        let ns = t.elapsed().as_nanos() as u64 + 1;
        println!(
            "gapscope-rep-v1 {{\"rep\":{rep},\"root\":1,\"spans\":[{{\"id\":1,\"trace\":1,\"name\":\"prove\",\"thread_id\":1,\"thread_name\":\"main\",\"start_ns\":1000,\"end_ns\":{},\"attrs\":[[\"fixture\",\"{tag}\"]]}}],\"checked\":{{\"ok\":true,\"checked\":true,\"outputs\":1,\"error\":\"\"}},\"pid\":{}}}",
            1000 + ns,
            std::process::id()
        );
    }
}
"#;

/// The fake gapscope with the prover's own binary beside it (a workspace of the two).
fn fake_gapscope_with_prover_binary(tmp: &Path) -> PathBuf {
    let dir = tmp.join("gapscope-src2");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    write(
        &dir,
        "Cargo.toml",
        "[package]\nname = \"gapscope\"\nversion = \"0.0.1\"\nedition = \"2021\"\n\
         [dependencies]\nitoa = \"1\"\n[workspace]\nmembers = [\"crates/gapscope-groth16\"]\n",
    );
    write(&dir, "src/main.rs", FAKE_MAIN);
    write(
        &dir,
        "crates/gapscope-groth16/Cargo.toml",
        "[package]\nname = \"gapscope-groth16\"\nversion = \"0.0.1\"\nedition = \"2021\"\n\
         [dependencies]\nitoa = \"1\"\n",
    );
    write(&dir, "crates/gapscope-groth16/src/lib.rs", "");
    write(
        &dir,
        "crates/gapscope-groth16/src/bin/gapscope-groth16-worker.rs",
        FAKE_PROVER_BIN,
    );
    let out = std::process::Command::new("cargo")
        .args(["generate-lockfile", "--offline"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    commit(&dir, "fake gapscope with the prover's binary");
    dir
}

#[test]
fn a_patch_builds_the_provers_own_binary_only_and_this_gapscope_runs_its_reps() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let src = fake_gapscope_with_prover_binary(t);
    let (repo, _) = two_revisions(t);
    let exp = experiment(
        t,
        &[
            ("here", String::new()),
            ("one", itoa_at(&repo, Some("HEAD~1"))),
            ("two", itoa_at(&repo, Some("main"))),
        ],
    );
    let (d, _) = run(t, &src, &exp, None);
    for v in ["here", "one", "two"] {
        assert_eq!(statuses(&d, v), [RepStatus::Ok, RepStatus::Ok], "{v}");
    }
    assert_eq!(tags(&d, "one"), ["one", "one"]);
    assert_eq!(tags(&d, "two"), ["two", "two"]);
    // One serving process of the binary per variant, neither of them gapscope.
    for v in ["one", "two"] {
        let pids: std::collections::BTreeSet<u32> = d
            .runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.pid)
            .collect();
        assert_eq!(pids.len(), 1, "{v}: {pids:?}");
    }
    // The build made the prover's binary only.
    let m = d.meta.variants[1].patches[0].clone();
    let log = std::fs::read_to_string(d.meta.repo_path(&d.dir, &m.build_log)).unwrap();
    assert!(log.contains("gapscope-groth16"), "{log}");
    assert!(
        !log.contains("Compiling gapscope v"),
        "no whole gapscope: {log}"
    );
    // A variant that samples stacks needs gapscope's own worker: a whole one is built.
    let exp = experiment(t, &[("one", itoa_at(&repo, Some("HEAD~1")))]);
    let text = std::fs::read_to_string(&exp)
        .unwrap()
        .replace("name = \"one\"\n", "name = \"one\"\nprofile = true\n");
    std::fs::write(&exp, text).unwrap();
    let (d, _) = run(t, &src, &exp, None);
    let m = d.meta.variants[0].patches[0].clone();
    let log = std::fs::read_to_string(d.meta.repo_path(&d.dir, &m.build_log)).unwrap();
    assert!(log.contains("Compiling gapscope v"), "{log}");
}
