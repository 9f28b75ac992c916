use std::path::Path;
use std::process::Command;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {:?}", out);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository with three commits of `build.sh` (the third fails to build).
fn repo(dir: &Path) -> Vec<String> {
    git(dir, &["init", "-q", "-b", "main"]);
    let mut commits = Vec::new();
    for (i, body) in [
        "echo one > out.txt",
        "echo two > out.txt",
        "echo broken; exit 3",
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(dir.join("build.sh"), format!("{body}\n")).unwrap();
        git(dir, &["add", "build.sh"]);
        git(dir, &["commit", "-q", "-m", &format!("c{i}")]);
        commits.push(git(dir, &["rev-parse", "HEAD"]));
    }
    git(dir, &["tag", "v1", &commits[0]]);
    commits
}

fn sh_build() -> BuildSpec {
    BuildSpec {
        command: vec!["sh".into(), "build.sh".into()],
        artefacts: vec![],
    }
}

/// A temp folder holding the test repository `r` (its commits) and a revision cache.
fn fixture() -> (tempfile::TempDir, std::path::PathBuf, Vec<String>, RevCache) {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r");
    std::fs::create_dir(&r).unwrap();
    let commits = repo(&r);
    let cache = RevCache {
        root: tmp.path().join("cache"),
    };
    (tmp, r, commits, cache)
}

#[test]
fn a_revision_is_checked_out_once_per_commit_and_built_once_per_command() {
    let (_tmp, r, commits, cache) = fixture();
    let mut co = checkout(&cache, &r, "v1").unwrap();
    assert_eq!(co.commit, commits[0]);
    assert!(!co.dirty);
    build(&cache, &mut co, &sh_build()).unwrap();
    let b = co.build.clone().unwrap();
    assert!(b.record.ok && !b.reused, "{b:?}");
    assert_eq!(
        std::fs::read_to_string(co.worktree.join("out.txt")).unwrap(),
        "one\n"
    );
    // The worktree belongs to a clone in the cache: the repository lists none.
    assert_eq!(git(&r, &["worktree", "list"]).lines().count(), 1);
    assert!(co.worktree.starts_with(cache.root.canonicalize().unwrap()));
    // Removed, and made again by the next checkout.
    assert!(remove_worktree(&cache, &r, &co.commit).unwrap());
    assert!(!co.worktree.exists());
    assert!(!remove_worktree(&cache, &r, &co.commit).unwrap());
    let co = checkout(&cache, &r, "v1").unwrap();
    assert!(co.worktree.join("build.sh").is_file());
    // Again: same worktree, the build's outcome reused.
    let mut again = checkout(&cache, &r, &commits[0]).unwrap();
    assert_eq!(again.worktree, co.worktree);
    build(&cache, &mut again, &sh_build()).unwrap();
    assert!(again.build.unwrap().reused);
    // A branch resolves to its commit; another commit gets its own worktree.
    let head = checkout(&cache, &r, "main~1").unwrap();
    assert_eq!(head.commit, commits[1]);
    assert_ne!(head.worktree, co.worktree);
}

#[test]
fn a_failed_build_keeps_its_log_and_its_outcome_is_cached() {
    let (_tmp, r, commits, cache) = fixture();
    let mut co = checkout(&cache, &r, "main").unwrap();
    assert_eq!(co.commit, commits[2]);
    build(&cache, &mut co, &sh_build()).unwrap();
    let b = co.build.clone().unwrap();
    assert!(!b.record.ok);
    assert!(b.record.status.contains('3'), "{}", b.record.status);
    assert_eq!(b.log_tail(), "broken");
    let mut again = checkout(&cache, &r, "main").unwrap();
    build(&cache, &mut again, &sh_build()).unwrap();
    let b = again.build.unwrap();
    assert!(b.reused && !b.record.ok);
}

#[test]
fn artefacts_are_copied_out_of_the_shared_target_dir_and_dirt_is_seen() {
    let (_tmp, r, _, cache) = fixture();
    let spec = BuildSpec {
        command: [
            "sh",
            "-c",
            "mkdir -p \"$CARGO_TARGET_DIR/release\" && git rev-parse HEAD > \"$CARGO_TARGET_DIR/release/prog\" && echo x >> build.sh",
        ]
        .map(String::from)
        .to_vec(),
        artefacts: vec!["release/prog".into()],
    };
    let mut co = checkout(&cache, &r, "v1").unwrap();
    build(&cache, &mut co, &spec).unwrap();
    let b = co.build.clone().unwrap();
    assert!(b.record.ok, "{}", b.log_tail());
    assert_eq!(
        std::fs::read_to_string(&b.artefacts[0]).unwrap().trim(),
        co.commit
    );
    // The build changed a tracked file: the worktree is dirty.
    assert!(co.dirty);
}

#[test]
fn unknown_revisions_and_histories_off_the_first_parent_chain_are_refused() {
    let (tmp, r, commits, cache) = fixture();
    let e = checkout(&cache, &r, "nope").unwrap_err().to_string();
    assert!(e.contains("\"nope\" is not a commit"), "{e}");
    let e = checkout(&cache, &r, "--all").unwrap_err().to_string();
    assert!(e.contains("may not start with '-'"), "{e}");
    let e = checkout(&cache, tmp.path(), "main")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not in a git repository"), "{e}");
    let path = first_parent_path(&r, &commits[0], &commits[2]).unwrap();
    assert_eq!(path, commits);
    // A side branch merged in: its commit is not on main's first-parent chain.
    git(&r, &["checkout", "-q", "-b", "side", &commits[0]]);
    std::fs::write(r.join("side.txt"), "s").unwrap();
    git(&r, &["add", "side.txt"]);
    git(&r, &["commit", "-q", "-m", "side"]);
    let side = git(&r, &["rev-parse", "HEAD"]);
    git(&r, &["checkout", "-q", "main"]);
    git(&r, &["merge", "-q", "--no-ff", "-m", "merge", "side"]);
    let merge = git(&r, &["rev-parse", "HEAD"]);
    let e = first_parent_path(&r, &side, &merge)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not on the first-parent history"), "{e}");
    // The fix: the merge that brought it in, or the commit before it.
    assert!(
        e.contains(&format!("--good {} (the merge", short(&merge))),
        "{e}"
    );
    let path = first_parent_path(&r, &commits[0], &merge).unwrap();
    assert_eq!(path.len(), 4, "{path:?}");
    assert!(is_ancestor(&r, &commits[0], &merge).unwrap());
    assert!(!is_ancestor(&r, &merge, &commits[0]).unwrap());
}

#[test]
fn a_build_writes_no_log_record_or_artefact_through_a_planted_link() {
    let (tmp, r, commits, cache) = fixture();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let spec = BuildSpec {
        command: vec!["sh".into(), "build.sh".into()],
        artefacts: vec!["out.txt".into()],
    };
    let dir = cache.commit_dir(&commits[0]);
    let mut co = checkout(&cache, &r, "v1").unwrap();
    // The build log.
    let log = dir.join(format!("build-{}.log", spec.key()));
    std::os::unix::fs::symlink(&victim, &log).unwrap();
    let e = build(&cache, &mut co, &spec).unwrap_err().to_string();
    assert!(e.contains("is a symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(std::fs::symlink_metadata(&log)
        .unwrap()
        .file_type()
        .is_symlink());
    // The build's record, and a copied artefact.
    std::fs::remove_file(&log).unwrap();
    let record = dir.join(format!("build-{}.json", spec.key()));
    std::os::unix::fs::symlink(&victim, &record).unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("bin").join("out.txt")).unwrap();
    // The artefact is built into the cache's target folder: make it there.
    std::fs::create_dir_all(cache.target_dir()).unwrap();
    std::fs::write(cache.target_dir().join("out.txt"), "built").unwrap();
    let e = build(&cache, &mut co, &spec).unwrap_err().to_string();
    assert!(e.contains("is a symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    std::fs::remove_file(dir.join("bin").join("out.txt")).unwrap();
    let e = build(&cache, &mut co, &spec).unwrap_err().to_string();
    assert!(
        e.contains("is a symbolic link") && e.contains("json"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    let copied = dir.join("bin").join("out.txt");
    assert_eq!(std::fs::read_to_string(&copied).unwrap(), "built");
}

#[test]
fn a_worktree_checked_out_before_another_commit_was_built_builds_its_own_code() {
    // Two commits of a crate whose binary prints which it is. A's worktree is made first,
    // B's built first: without marking A's files, cargo takes the shared target dir's
    // artefacts (B's) for fresh and A's build prints "B".
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r");
    std::fs::create_dir_all(r.join("src")).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    std::fs::write(
        r.join("Cargo.toml"),
        "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .unwrap();
    let mut commits = Vec::new();
    for tag in ["A", "B"] {
        std::fs::write(
            r.join("src/main.rs"),
            format!("fn main() {{ println!(\"{tag}\"); }}\n"),
        )
        .unwrap();
        git(&r, &["add", "-A"]);
        git(&r, &["commit", "-q", "-m", tag]);
        commits.push(git(&r, &["rev-parse", "HEAD"]));
    }
    let cache = RevCache {
        root: tmp.path().join("cache"),
    };
    let spec = BuildSpec {
        command: ["cargo", "build", "--release", "--offline", "--quiet"]
            .map(String::from)
            .to_vec(),
        artefacts: vec!["release/probe".into()],
    };
    let mut a = checkout(&cache, &r, &commits[0]).unwrap();
    // File times have a granularity: B's worktree must be visibly newer.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut b = checkout(&cache, &r, &commits[1]).unwrap();
    let said = |co: &Checkout| {
        let exe = &co.build.as_ref().unwrap().artefacts[0];
        let out = Command::new(exe).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    build(&cache, &mut b, &spec).unwrap();
    assert_eq!(said(&b), "B");
    build(&cache, &mut a, &spec).unwrap();
    assert!(a.build.as_ref().unwrap().record.ok);
    assert_eq!(said(&a), "A", "A's build is A's code");
    // Marking the files changes no content: the worktree is clean.
    assert!(!a.dirty);
}

/// A file's modification time.
fn mtime(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

#[test]
fn a_seeded_worktree_gets_the_earlier_outputs_and_only_the_changed_files_are_new() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r");
    std::fs::create_dir(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    std::fs::write(r.join(".gitignore"), "*.o\n").unwrap();
    std::fs::write(r.join("a.c"), "int a;\n").unwrap();
    std::fs::write(r.join("b.c"), "int b;\n").unwrap();
    git(&r, &["add", "."]);
    git(&r, &["commit", "-q", "-m", "one"]);
    let one = git(&r, &["rev-parse", "HEAD"]);
    std::fs::write(r.join("b.c"), "int b2;\n").unwrap();
    git(&r, &["commit", "-q", "-am", "two"]);
    let two = git(&r, &["rev-parse", "HEAD"]);
    let cache = RevCache {
        root: tmp.path().join("cache"),
    };
    let first = checkout(&cache, &r, &one).unwrap().worktree;
    // The first commit's "build": an ignored object, an untracked file in a folder.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for f in ["a.c", "b.c"] {
        let h = std::fs::OpenOptions::new()
            .write(true)
            .open(first.join(f))
            .unwrap();
        h.set_modified(old).unwrap();
    }
    std::fs::write(first.join("a.o"), "A").unwrap();
    std::fs::create_dir(first.join("out")).unwrap();
    std::fs::write(first.join("out/prog"), "P").unwrap();
    let built = mtime(&first.join("a.o"));
    let second = checkout(&cache, &r, &two).unwrap().worktree;
    let s = seed_worktree(&first, &second).unwrap();
    assert_eq!((s.copied, s.changed), (2, 1), "{s:?}");
    assert_eq!(
        std::fs::read_to_string(second.join("out/prog")).unwrap(),
        "P"
    );
    assert_eq!(mtime(&second.join("a.o")), built, "outputs keep their time");
    assert_eq!(
        mtime(&second.join("a.c")),
        old,
        "a file both commits share is as old"
    );
    assert!(
        mtime(&second.join("b.c")) > built,
        "a changed file is newer than the outputs"
    );
    assert_eq!(
        std::fs::read_to_string(second.join("b.c")).unwrap(),
        "int b2;\n"
    );
    assert!(!is_dirty(&second).unwrap());
    // Cleaning removes what seeding brought.
    clean_worktree(&second).unwrap();
    assert!(!second.join("a.o").exists() && !second.join("out").exists());
    assert!(second.join("a.c").exists());
}

#[test]
fn what_a_build_leaves_running_ends_with_it() {
    let (tmp, r, _, cache) = fixture();
    let mut co = checkout(&cache, &r, "v1").unwrap();
    let id = std::process::id();
    let (stray, daemon) = (format!("1021.{id}"), format!("1022.{id}"));
    let (s, d) = (tmp.path().join("stray"), tmp.path().join("daemon"));
    // One process left in the build's group, one in a session of its own; the build
    // exits once both wrote their pids.
    let script = format!(
        "sleep {stray} & echo $! > {s}; \
         setsid sh -c 'echo $$ > {d}.w; mv {d}.w {d}; exec sleep {daemon}' & \
         while [ ! -s {d} ]; do :; done",
        s = s.display(),
        d = d.display()
    );
    let spec = BuildSpec {
        command: vec!["sh".into(), "-c".into(), script],
        artefacts: vec![],
    };
    build(&cache, &mut co, &spec).unwrap();
    let ok = co.build.as_ref().is_some_and(|b| b.record.ok);
    let pid = |f: &Path| -> i32 {
        std::fs::read_to_string(f)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    };
    let runs = |pid: i32, secs: &str| {
        pid > 0
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c == format!("sleep\0{secs}\0").as_bytes())
    };
    // The kernel ends a killed process at once; a bounded wait for it to be gone.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let left = |list: &[(i32, &str)]| -> Vec<i32> {
        list.iter()
            .filter(|(p, secs)| runs(*p, secs))
            .map(|(p, _)| *p)
            .collect()
    };
    let all = [(pid(&s), stray.as_str()), (pid(&d), daemon.as_str())];
    while !left(&all).is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let running = left(&all);
    for p in &running {
        // SAFETY: kill(2) of a process this test's build started, found by its command line.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(ok, "{:?}", co.build);
    assert!(all.iter().all(|(p, _)| *p > 0), "{all:?}");
    assert!(
        running.is_empty(),
        "left running after the build: {running:?}"
    );
}

#[test]
fn the_provers_binary_is_built_with_the_gpu_features_of_the_build_that_asks() {
    let gpu = ["cuda".to_string(), "supraseal".to_string()];
    let c = PROVER_BINARY.build_spec(&gpu).command;
    assert_eq!(
        c[c.len() - 2..],
        ["--features".to_string(), "cuda,supraseal".to_string()]
    );
    assert!(!PROVER_BINARY
        .build_spec(&[])
        .command
        .contains(&"--features".to_string()));
    // The hash workload has no GPU features to ask for.
    assert!(!HASH_BINARY
        .build_spec(&gpu)
        .command
        .contains(&"--features".to_string()));
    assert_eq!(
        PROVER_BINARY.build_spec(&[]).artefacts,
        ["release/gapscope-groth16-worker"]
    );
}
