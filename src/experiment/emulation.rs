//! `counters = "emulated"`: each rep of such a variant runs in a `__worker` child under
//! valgrind's callgrind, whose span dumps ([`crate::counters::emulated`]) give every span
//! exact instructions and branches. This file finds valgrind, decides each variant's
//! counter source before the run starts (falling back to perf events, loudly, where
//! valgrind is missing), builds the emulator's command line, and turns a worker's dumps
//! into span counts.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::spec::ResolvedVariant;
use crate::counters::{emulated, CounterMode};
use crate::store::SpanRow;

/// Environment variable naming the valgrind to run (default: `valgrind` on PATH).
pub const VALGRIND_ENV: &str = "GAPSCOPE_VALGRIND";

/// A valgrind that runs, and its version ("3.19").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emulator {
    pub program: PathBuf,
    pub version: String,
}

impl Emulator {
    /// Runs `valgrind --version`; the error says what is missing and how to install it.
    pub fn find() -> Result<Emulator, String> {
        let program = std::env::var_os(VALGRIND_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("valgrind"));
        let out = Command::new(&program)
            .arg("--version")
            .output()
            .map_err(|e| {
                format!(
                    "valgrind not found ({}: {e}); {}",
                    program.display(),
                    emulated::INSTALL_HINT
                )
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = parse_version(&text).ok_or_else(|| {
            format!(
                "{} --version printed {:?}, not valgrind's version; {}",
                program.display(),
                text.trim(),
                emulated::INSTALL_HINT
            )
        })?;
        if !emulated::built() {
            return Err(format!(
                "this gapscope was built without valgrind's headers (valgrind/callgrind.h), so \
                 its spans cannot mark themselves for the emulator; {}, then rebuild (`touch \
                 build.rs` if valgrind is installed already)",
                emulated::INSTALL_HINT
            ));
        }
        Ok(Emulator { program, version })
    }

    /// The counter source as meta.json records it.
    pub fn label(&self) -> String {
        format!("emulated (callgrind {})", self.version)
    }

    /// `valgrind --tool=callgrind … EXE`: the worker's command, its dumps in `dump_dir`.
    /// Instrumentation starts off (setup and verification run uninstrumented) and the
    /// rep switches it on; every thread dumps separately; `--branch-sim=yes` adds the
    /// branch counts (Bc, Bi).
    pub fn command(&self, exe: &Path, dump_dir: &Path) -> Command {
        let mut c = Command::new(&self.program);
        c.arg("--tool=callgrind")
            .arg("--quiet")
            .arg("--separate-threads=yes")
            .arg("--branch-sim=yes")
            .arg("--instr-atstart=no")
            .arg(format!(
                "--callgrind-out-file={}",
                dump_dir.join("callgrind.out.%p").display()
            ))
            .arg(exe);
        c
    }
}

/// "valgrind-3.19.0" → "3.19".
fn parse_version(text: &str) -> Option<String> {
    let v = text.trim().strip_prefix("valgrind-")?;
    let mut parts = v.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    if major.parse::<u32>().is_err() || minor.parse::<u32>().is_err() {
        return None;
    }
    Some(format!("{major}.{minor}"))
}

/// What a variant's reps record, decided once per run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Off,
    /// perf events; `requested_emulated` holds why emulation fell back to them.
    Hardware {
        fallback: Option<String>,
    },
    Emulated(Emulator),
}

impl Source {
    /// meta.json's `counters` of a variant: "hardware", "emulated (callgrind 3.19)", "off",
    /// or the fallback with its reason.
    pub fn label(&self) -> String {
        match self {
            Source::Off => "off".into(),
            Source::Hardware { fallback: None } => "hardware".into(),
            Source::Hardware {
                fallback: Some(why),
            } => format!("hardware (emulated was asked for: {why})"),
            Source::Emulated(e) => e.label(),
        }
    }

    /// Whether spans read perf-event counters (in-process reps and unemulated workers).
    pub fn perf_events(&self) -> bool {
        matches!(self, Source::Hardware { .. })
    }

    pub fn emulator(&self) -> Option<&Emulator> {
        match self {
            Source::Emulated(e) => Some(e),
            _ => None,
        }
    }
}

/// Each variant's source. An emulated variant without a usable valgrind falls back to
/// perf events; `warn` is told why (the run says so on stderr and in meta.json).
pub fn sources(variants: &[ResolvedVariant], mut warn: impl FnMut(String)) -> Vec<Source> {
    let mut found: Option<Result<Emulator, String>> = None;
    variants
        .iter()
        .map(|v| match v.counters {
            CounterMode::Off => Source::Off,
            CounterMode::Hardware => Source::Hardware { fallback: None },
            CounterMode::Emulated => match found.get_or_insert_with(Emulator::find) {
                Ok(e) => Source::Emulated(e.clone()),
                Err(why) => {
                    warn(format!(
                        "variant {:?}: counters = \"emulated\" falls back to perf-event \
                         (software) counters: {why}",
                        v.name
                    ));
                    Source::Hardware {
                        fallback: Some(why.clone()),
                    }
                }
            },
        })
        .collect()
}

/// Whether a variant's reps run synthesis alone: a GPU backend under the emulator, where
/// CUDA does not run. Synthesis is the same code on every backend, so its counts are
/// those the full prover's synthesis would have; `gpu_prove` is not run and not counted.
pub fn synthesis_only(backend: crate::prover::BackendKind, emulated: bool) -> bool {
    emulated && backend != crate::prover::BackendKind::Cpu
}

/// What the run says once, at its start, about a variant that runs synthesis alone.
pub fn synthesis_only_notice(variant: &str, backend: &str) -> String {
    format!(
        "variant {variant:?}: counters = \"emulated\" with backend = \"{backend}\" counts \
         synthesis alone: its gpu_prove calls CUDA, which does not run under valgrind, so it is \
         not run (no proofs; each assignment's constraints are checked instead). Compare its \
         synthesis spans; for the whole prover under the emulator use backend = \"cpu\""
    )
}

/// Largest callgrind dump read (a rep's dumps hold per-function costs: megabytes).
const MAX_DUMP_BYTES: u64 = 512 << 20;

/// Every dump callgrind wrote for process `pid` under `dir` (files
/// `callgrind.out.<pid>.<part>-<thread>`, as the worker's `--callgrind-out-file` names
/// them), read as every run-folder file is ([`crate::fsx`]).
pub fn read_dumps(dir: &Path, pid: u32) -> Result<Vec<emulated::Dump>, String> {
    let prefix = format!("callgrind.out.{pid}.");
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list callgrind's output in {}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        // Inside the run folder: never through a link, only a regular file, capped.
        let bytes = crate::fsx::read_no_follow(&e.path(), MAX_DUMP_BYTES)
            .map_err(|err| format!("cannot read callgrind's output: {err}"))?;
        let text = String::from_utf8_lossy(&bytes);
        out.push(emulated::parse_dump(&text).map_err(|err| format!("{name}: {err}"))?);
    }
    out.sort_by_key(|d| d.part);
    Ok(out)
}

/// Fills `instructions` and `branches` of the rows from the dumps the emulator wrote for
/// this process into `dump_dir`. Every other counter stays empty: under the emulator,
/// time-based and kernel counters measure the emulator, not the program.
pub fn fill_counts(rows: &mut [SpanRow], dump_dir: &Path) -> Result<(), String> {
    let dumps = read_dumps(dump_dir, std::process::id())?;
    let counts = emulated::span_counts(&dumps)?;
    let mut missing = Vec::new();
    for r in rows.iter_mut() {
        match counts.get(&r.span_id) {
            Some(c) => {
                r.instructions = Some(c.instructions).into();
                r.branches = Some(c.branches).into();
            }
            None => missing.push(r.name.clone()),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the emulator wrote no dumps for spans {missing:?} ({} dumps in {})",
            dumps.len(),
            dump_dir.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_line_and_labels() {
        assert_eq!(parse_version("valgrind-3.19.0\n").as_deref(), Some("3.19"));
        assert_eq!(parse_version("valgrind-3.24.0.GIT"), Some("3.24".into()));
        assert_eq!(parse_version("bash: valgrind"), None);
        let e = Emulator {
            program: "valgrind".into(),
            version: "3.19".into(),
        };
        assert_eq!(Source::Emulated(e).label(), "emulated (callgrind 3.19)");
        assert_eq!(Source::Hardware { fallback: None }.label(), "hardware");
    }

    #[test]
    fn a_missing_valgrind_falls_back_with_the_reason_and_an_install_hint() {
        let text = "name = \"t\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\n\
                    [run]\ncounters = \"emulated\"\n[[variant]]\nname = \"a\"\n\
                    [[variant]]\nname = \"b\"\ncounters = false\n";
        let exp = super::super::Experiment::parse(text, Path::new("x.toml")).unwrap();
        // The variable is read only here and by runs; tests of runs set it per process.
        std::env::set_var(VALGRIND_ENV, "/nonexistent/valgrind");
        let mut warned = Vec::new();
        let s = sources(&exp.resolved_variants(), |w| warned.push(w));
        std::env::remove_var(VALGRIND_ENV);
        assert_eq!(s[1], Source::Off);
        assert!(s[0].perf_events(), "{s:?}");
        assert_eq!(warned.len(), 1);
        assert!(
            warned[0].contains("apt-get install valgrind") && warned[0].contains("\"a\""),
            "{}",
            warned[0]
        );
        assert!(s[0].label().starts_with("hardware (emulated was asked for"));
    }
}
