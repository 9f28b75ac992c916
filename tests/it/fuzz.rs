//! What every fuzz target shares: the runner ([`fuzz`]), the time limit on one case, and
//! the random edits of a file's bytes. A fuzz target is a test of a `readers_fuzz*` file
//! that hands [`fuzz`] a proptest strategy and a check; each is listed by its test name
//! in tests/it/fuzz_targets.txt, which `.ci/run` reads to run every target for 60 s.
//!
//! Without `GAPSCOPE_FUZZ_SECONDS` a target runs a fixed number of random cases (its
//! own, or `PROPTEST_CASES`), a few seconds in a debug build, so `cargo test` stays
//! quick. With `GAPSCOPE_FUZZ_SECONDS=N` it runs random cases until N seconds have
//! passed and prints how many it ran:
//!
//! ```text
//! GAPSCOPE_FUZZ_SECONDS=60 cargo test --test it -- --exact readers_fuzz_more::folded_stacks_give_values_or_clean_errors --nocapture
//! ```
//!
//! Either way a failing case (a panic, or no answer within [`CASE_LIMIT`]) is shrunk as
//! proptest shrinks, and the test fails naming the smallest failing input it found.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

/// The environment variable that gives every fuzz target a time budget, in seconds.
pub const SECONDS_VAR: &str = "GAPSCOPE_FUZZ_SECONDS";

/// Longest one case may take (a debug build reads the fixture in well under a second).
pub const CASE_LIMIT: Duration = Duration::from_secs(30);

/// Longest a failing case is shrunk for: past it, the smallest input found so far is
/// reported.
const SHRINK_LIMIT: Duration = Duration::from_secs(120);

/// How long each target runs: a time budget, or a number of cases.
#[derive(Debug, Clone, Copy)]
enum Budget {
    Time(Duration),
    Cases(u64),
}

fn budget(quick_cases: u32) -> Budget {
    if let Some(s) = std::env::var(SECONDS_VAR).ok().filter(|s| !s.is_empty()) {
        let secs: f64 = s
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .unwrap_or_else(|| panic!("{SECONDS_VAR}={s:?} is not a number of seconds"));
        return Budget::Time(Duration::from_secs_f64(secs));
    }
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(quick_cases);
    Budget::Cases(u64::from(cases))
}

/// Runs `check` on random values of `strategy`: `quick_cases` of them (or
/// `PROPTEST_CASES`), or as many as fit in `GAPSCOPE_FUZZ_SECONDS`. Each case runs on a
/// thread of its own under [`CASE_LIMIT`]: a panic or a hang fails it. A failing case is
/// shrunk, and the test panics with the smallest failing input. Prints the number of
/// cases run, under the test's name.
pub fn fuzz<S>(quick_cases: u32, strategy: S, check: impl Fn(S::Value) + Send + Sync + 'static)
where
    S: Strategy,
    S::Value: Send + 'static,
{
    let name = std::thread::current()
        .name()
        .unwrap_or("fuzz target")
        .to_string();
    let budget = budget(quick_cases);
    let check = Arc::new(check);
    let mut runner = TestRunner::new(Config {
        max_shrink_time: SHRINK_LIMIT.as_millis() as u32,
        failure_persistence: None,
        ..Config::default()
    });
    let start = Instant::now();
    let mut cases = 0u64;
    loop {
        let done = match budget {
            Budget::Time(t) => start.elapsed() >= t,
            Budget::Cases(n) => cases >= n,
        };
        if done {
            break;
        }
        let tree = strategy
            .new_tree(&mut runner)
            .unwrap_or_else(|e| panic!("{name}: no input could be made: {e}"));
        let result = runner.run_one(tree, |value| {
            let check = check.clone();
            within_limit(move || check(value)).map_err(TestCaseError::fail)
        });
        match result {
            Ok(_) => cases += 1,
            Err(TestError::Fail(why, input)) => panic!(
                "{name}: case {} failed: {why}\nsmallest failing input found: {input:#?}",
                cases + 1
            ),
            Err(TestError::Abort(why)) => panic!("{name}: stopped after {cases} cases: {why}"),
        }
    }
    println!(
        "fuzz {name}: {cases} cases in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// `f` on its own thread: its panic's message, or a hang's when it has not returned
/// within [`CASE_LIMIT`] (the thread is left behind).
pub fn within_limit(f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r.map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into())
        }));
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(panic)) => Err(format!("panicked: {panic}")),
        Err(_) => Err(format!(
            "did not return within {CASE_LIMIT:?}: a hang (or a loop without end)"
        )),
    }
}

/// Bytes that a failing case's report shows as a byte string (`b"…"`), not numbers.
#[derive(Clone, PartialEq, Eq)]
pub struct Raw(pub Vec<u8>);

impl Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

/// Up to `max` random bytes.
pub fn raw(max: usize) -> impl Strategy<Value = Raw> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Raw)
}

/// One edit of a file's bytes.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Keep this share (per mille) of the file.
    Truncate(u16),
    /// Overwrite bytes at a position (per mille of the length).
    Overwrite(u16, Raw),
    /// Insert bytes at a position.
    Insert(u16, Raw),
    /// Remove line `i` (modulo the line count).
    DeleteLine(usize),
    /// Repeat line `i`.
    DuplicateLine(usize),
    /// Replace field `j` of line `i` (CSV: between commas; JSON: a value) with a string.
    Field(usize, usize, String),
}

/// Values a field may be replaced with: empty, signs, overflow, floats, quotes, brackets
/// (span families), separators and line breaks.
pub fn odd_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("-1".to_string()),
        Just("18446744073709551615".to_string()),
        Just("18446744073709551616".to_string()),
        Just("9223372036854775808".to_string()),
        Just("4294967296".to_string()),
        Just("1e400".to_string()),
        Just("NaN".to_string()),
        Just("\"".to_string()),
        Just("x[".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("a[]".to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        Just("ok".to_string()),
        Just("failed".to_string()),
        Just("{".to_string()),
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("0".to_string()),
        "[0-9]{1,20}",
        any::<String>(),
    ]
}

pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0u16..=1000).prop_map(Edit::Truncate),
        (0u16..=1000, prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| Edit::Overwrite(p, Raw(b))),
        (0u16..=1000, prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| Edit::Insert(p, Raw(b))),
        any::<usize>().prop_map(Edit::DeleteLine),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>(), odd_value()).prop_map(|(i, j, v)| Edit::Field(i, j, v)),
        (any::<usize>(), any::<usize>(), odd_value()).prop_map(|(i, j, v)| Edit::Field(i, j, v)),
    ]
}

/// A file's bytes as a case makes them: edits of a valid file, or random bytes.
#[derive(Debug, Clone)]
pub enum Bytes {
    Edited(Vec<Edit>),
    Random(Raw),
}

/// Up to four edits of a valid file (half the cases) or up to `max` random bytes.
pub fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop_oneof![
        prop::collection::vec(edit(), 0..5).prop_map(Bytes::Edited),
        raw(max).prop_map(Bytes::Random),
    ]
}

impl Bytes {
    /// `valid` edited, or the random bytes.
    pub fn of(&self, valid: &[u8]) -> Vec<u8> {
        match self {
            Bytes::Edited(edits) => {
                let mut b = valid.to_vec();
                for e in edits {
                    apply(&mut b, e);
                }
                b
            }
            Bytes::Random(b) => b.0.clone(),
        }
    }
}

fn at(len: usize, per_mille: u16) -> usize {
    len * per_mille as usize / 1000
}

pub fn apply(bytes: &mut Vec<u8>, e: &Edit) {
    let lines = || -> Vec<Vec<u8>> { bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect() };
    match e {
        Edit::Truncate(p) => bytes.truncate(at(bytes.len(), *p)),
        Edit::Overwrite(p, b) => {
            let start = at(bytes.len(), *p);
            for (i, x) in b.0.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(start + i) {
                    *slot = *x;
                }
            }
        }
        Edit::Insert(p, b) => {
            let start = at(bytes.len(), *p);
            bytes.splice(start..start, b.0.iter().copied());
        }
        Edit::DeleteLine(i) => {
            let mut l = lines();
            let i = i % l.len();
            l.remove(i);
            *bytes = l.join(&b'\n');
        }
        Edit::DuplicateLine(i) => {
            let mut l = lines();
            let i = i % l.len();
            let dup = l[i].clone();
            l.insert(i, dup);
            *bytes = l.join(&b'\n');
        }
        Edit::Field(i, j, v) => {
            let mut l = lines();
            let i = i % l.len();
            let sep = if l[i].contains(&b',') { b',' } else { b':' };
            let mut fields: Vec<Vec<u8>> = l[i].split(|&b| b == sep).map(<[u8]>::to_vec).collect();
            let j = j % fields.len();
            fields[j] = v.as_bytes().to_vec();
            l[i] = fields.join(&sep);
            *bytes = l.join(&b'\n');
        }
    }
}

/// An SQLite file opened for a case to write: no syncs, and the caller's writes in one
/// transaction, so that a case's database is made in a moment.
pub fn sqlite_to_write(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA journal_mode = MEMORY;")
        .unwrap();
    conn
}

/// Gzip of `bytes` (a reader that takes `.gz` must cope with any content inside).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The fuzz targets, one test name a line (`#` starts a comment).
const TARGETS: &str = include_str!("fuzz_targets.txt");

/// Every test of the `readers_fuzz*` files is in the table `.ci/run` reads, and every
/// name in the table is such a test: a target added without its line, or renamed, fails
/// here rather than being left out of CI's timed runs.
#[test]
fn the_target_table_names_every_fuzz_target() {
    let listed: Vec<&str> = TARGETS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--list", "--format", "terse"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut tests: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| t.starts_with("readers_fuzz"))
        .collect();
    tests.sort_unstable();
    let mut table = listed.clone();
    table.sort_unstable();
    assert_eq!(
        table, tests,
        "tests/it/fuzz_targets.txt must list exactly the tests of the readers_fuzz* files"
    );
    let mut unique = table.clone();
    unique.dedup();
    assert_eq!(unique.len(), listed.len(), "a name is listed twice");
}
