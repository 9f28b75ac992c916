//! The release profile's settings that GPU builds depend on.
//!
//! With debug info on for a package, the cc crate compiles that package's CUDA with nvcc's
//! `-G` (unoptimised device code). For sppark and supraseal-c2 that made upstream's MSM
//! `sort` kernel spin forever on the H200, so dependencies must build without debug info
//! in release, while gapscope itself keeps line tables for profilers and backtraces.

fn manifest() -> toml::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let text = std::fs::read_to_string(path).expect("read Cargo.toml");
    text.parse().expect("Cargo.toml parses")
}

/// `debug` as Cargo reads it: 0/false/"none" mean no debug info.
fn debug_off(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Integer(0) | toml::Value::Boolean(false)) || v.as_str() == Some("none")
}

#[test]
fn release_dependencies_build_without_debug_info() {
    let m = manifest();
    let deps = m
        .get("profile")
        .and_then(|p| p.get("release"))
        .and_then(|r| r.get("package"))
        .and_then(|p| p.get("*"))
        .expect(
            "Cargo.toml needs [profile.release.package.\"*\"] (debug = 0): see this test's doc",
        );
    let debug = deps
        .get("debug")
        .expect("[profile.release.package.\"*\"] sets debug");
    assert!(
        debug_off(debug),
        "dependencies must build without debug info in release (nvcc -G otherwise), got debug = {debug}"
    );
}

#[test]
fn debug_values_are_read_as_cargo_does() {
    for off in ["0", "false", "\"none\""] {
        let v: toml::Value = format!("d = {off}").parse::<toml::Value>().unwrap()["d"].clone();
        assert!(debug_off(&v), "{off}");
    }
    for on in ["1", "2", "true", "\"line-tables-only\"", "\"full\""] {
        let v: toml::Value = format!("d = {on}").parse::<toml::Value>().unwrap()["d"].clone();
        assert!(!debug_off(&v), "{on}");
    }
}

/// Debug builds keep test binaries small enough for a CI machine's disk: no debug info for
/// dependencies, and at most line tables for gapscope itself.
#[test]
fn debug_builds_keep_test_binaries_small() {
    let m = manifest();
    let dev = m
        .get("profile")
        .and_then(|p| p.get("dev"))
        .expect("Cargo.toml needs [profile.dev] (debug = \"line-tables-only\")");
    let own = dev.get("debug").expect("[profile.dev] sets debug");
    assert!(
        debug_off(own) || own.as_str() == Some("line-tables-only"),
        "gapscope's debug builds keep at most line tables, got debug = {own}"
    );
    let deps = dev
        .get("package")
        .and_then(|p| p.get("*"))
        .and_then(|p| p.get("debug"))
        .expect("Cargo.toml needs [profile.dev.package.\"*\"] debug = 0");
    assert!(
        debug_off(deps),
        "dependencies build without debug info, got debug = {deps}"
    );
}
