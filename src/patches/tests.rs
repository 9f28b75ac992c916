use std::path::Path;

use super::*;

fn src(path: Option<&str>, git: Option<&str>, rev: Option<&str>) -> PatchSource {
    PatchSource {
        path: path.map(PathBuf::from),
        git: git.map(str::to_string),
        rev: rev.map(str::to_string),
    }
}

#[test]
fn a_patch_table_is_checked_as_the_experiment_is_read() {
    let one = |k: &str, s: PatchSource| PatchSet::from([(k.to_string(), s)]);
    assert!(check(
        "v",
        &one("supraseal-c2", src(Some("../f"), None, Some("HEAD~1")))
    )
    .is_ok());
    assert!(check(
        "v",
        &one("blstrs", src(None, Some("https://x/y.git"), None))
    )
    .is_ok());
    let e = check("v", &PatchSet::new()).unwrap_err();
    assert!(e.contains("names no crate"), "{e}");
    let e = check("v", &one("a b", src(Some("x"), None, None))).unwrap_err();
    assert!(e.contains("is not a crate name"), "{e}");
    let e = check("v", &one("a", src(None, None, None))).unwrap_err();
    assert!(e.contains("has no source"), "{e}");
    let e = check("v", &one("a", src(Some("x"), None, Some("-x")))).unwrap_err();
    assert!(e.contains("is not a revision"), "{e}");
    let e = check("v", &one("a", src(Some("/abs"), Some("u"), None))).unwrap_err();
    assert!(e.contains("inside the repository"), "{e}");
}

#[test]
fn a_patch_describes_itself_as_written() {
    assert_eq!(src(Some("../f"), None, Some("v1")).describe(), "../f@v1");
    assert_eq!(
        src(Some("../f"), None, None).describe(),
        "../f (working tree)"
    );
    assert_eq!(
        src(Some("c2"), Some("u"), Some("main")).describe(),
        "u:c2@main"
    );
}

fn manifest(dir: &Path, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("Cargo.toml"), body).unwrap();
}

#[test]
fn a_patch_folder_must_hold_that_crate() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("a");
    manifest(&d, "[package]\nname = \"itoa\"\nversion = \"1.0.99\"\n");
    assert_eq!(source::crate_version("itoa", &d).unwrap(), "1.0.99");
    let e = source::crate_version("ryu", &d).unwrap_err().to_string();
    assert!(
        e.contains("names the crate \"itoa\"") && e.contains("not a crate"),
        "{e}"
    );
    let e = source::crate_version("itoa", tmp.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read") && e.contains("Cargo.toml"), "{e}");
    let w = tmp.path().join("w");
    manifest(
        &w,
        "[workspace]\nmembers = [\"m\"]\n[workspace.package]\nversion = \"2.1.0\"\n",
    );
    let e = source::crate_version("w", &w).unwrap_err().to_string();
    assert!(e.contains("no [package]"), "{e}");
    manifest(
        &w.join("m"),
        "[package]\nname = \"m\"\nversion.workspace = true\n",
    );
    assert_eq!(source::crate_version("m", &w.join("m")).unwrap(), "2.1.0");
}

#[test]
fn a_crate_outside_the_lock_file_is_named_with_its_neighbours() {
    let tmp = tempfile::tempdir().unwrap();
    let lock = tmp.path().join("Cargo.lock");
    std::fs::write(
        &lock,
        "version = 3\n[[package]]\nname = \"supraseal-c2\"\nversion = \"0.1.2\"\n\
         [[package]]\nname = \"sppark\"\nversion = \"0.1.16\"\n",
    )
    .unwrap();
    assert!(graph::check_in_lock("sppark", &lock).is_ok());
    let e = graph::check_in_lock("supraseal", &lock)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no crate of that name is in gapscope's dependency graph"),
        "{e}"
    );
    assert!(e.contains("similar names there: supraseal-c2"), "{e}");
}
