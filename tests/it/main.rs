//! gapscope's integration tests, built as one test binary (one link instead of one per
//! file): each file below is a module, named as the file. They share one process, so a
//! test sets no process-wide state (environment, working folder): a child command gets
//! its own. Run one file's tests with `cargo test --test it -- FILE::`, one test with
//! `cargo test --test it -- --exact FILE::NAME`.

mod common;
#[path = "../fixtures/run.rs"]
mod fixture;

mod bisect_external;
mod bisect_gapscope;
mod build_profile;
mod by_rep;
mod capture_cupti;
mod capture_log_spans;
mod capture_nvtx;
mod capture_tracing;
mod charts;
mod cli_conventions;
mod cli_flags;
mod cmd_exec;
mod diff_cli;
mod docs_complete;
mod emulated;
mod external;
mod external_profile;
mod faults;
mod fuzz;
mod hash_workload;
mod headline;
mod history_cli;
mod history_detector;
mod history_track;
mod hostile;
mod hostile_outputs;
mod hostile_readers;
mod hostile_runs;
mod hostile_spawn;
mod import_cli;
mod lanes;
mod leak_watch;
mod legacy_folders;
mod log_line_times;
mod patch_variants;
mod per_variant;
mod portable_paths;
mod profile_cli;
mod readers_fuzz;
mod readers_fuzz_lines;
mod readers_fuzz_more;
mod readers_fuzz_traces;
mod readme_samples;
mod report_cli;
mod rev_variants;
mod run_cli;
mod soak;
mod sweep_cli;
mod sweep_slurm;
mod table_parts;
mod telemetry_cli;
mod trace_file;
mod until_decided;
mod workload_binary;
