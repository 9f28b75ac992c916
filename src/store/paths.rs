//! Paths in a run folder, written so that the folder can be shared: a path under the
//! run folder is relative to it, one under the repository gapscope ran in relative to
//! the repository, one under the home folder starts with `~`, one under the temporary
//! folder with `$TMPDIR`; another one that shares a folder with the repository is
//! relative to the repository (`../other-checkout`), and a system path (`/usr/bin/...`)
//! stays as it is. `[run] absolute_paths = true` keeps every path as the machine had it.
//!
//! The writer of meta.json ([`super::write_meta`]) rewrites every string of the meta
//! that is such a path, and every absolute path inside a message (a build's failure, a
//! rep's error) that starts under one of those folders. Readers resolve a recorded path
//! with [`resolve`]: a folder from before this rule, with absolute paths, reads as it
//! did.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Meta;

/// meta.json's `paths`: present when its paths are written relative (the default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathsMeta {
    /// The repository gapscope ran in, relative to the run folder (`../../..` for a run
    /// under `results/<experiment>/`), or under `~`: the base of the paths recorded
    /// relative to the repository. Absent when the run folder is neither in the
    /// repository nor under the home folder (such paths then resolve against the
    /// current folder). Absolute while a run holds it in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
}

/// The prefix a path under the home folder is written with.
pub const HOME: &str = "~";
/// The prefix a path under the temporary folder is written with.
pub const TMPDIR: &str = "$TMPDIR";

/// The repository of the current folder (the nearest folder above it holding `.git`,
/// a folder or a worktree's file), else the current folder.
pub fn current_repo() -> PathBuf {
    let cwd = absolute(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
    cwd.ancestors()
        .find(|d| d.join(".git").exists())
        .map_or_else(|| cwd.clone(), Path::to_path_buf)
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.components().count() > 1)
}

fn temp() -> Option<PathBuf> {
    let t = std::env::temp_dir();
    (t.is_absolute() && t.components().count() > 1).then_some(t)
}

/// Folders a path is written relative to, for one run folder.
#[derive(Debug, Clone)]
pub struct PathBases {
    run: PathBuf,
    repo: PathBuf,
    home: Option<PathBuf>,
    temp: Option<PathBuf>,
}

/// `path` relative to `base`, when it lies under it ("" for the folder itself).
fn under(path: &Path, base: &Path) -> Option<PathBuf> {
    path.strip_prefix(base).ok().map(Path::to_path_buf)
}

/// `path` relative to `base` through their common folder (`../x`), when they share one
/// besides `/`.
fn relative_via_common(path: &Path, base: &Path) -> Option<PathBuf> {
    let p: Vec<Component> = path.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common < 2
        || b[common..]
            .iter()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    out.extend(&p[common..]);
    Some(out)
}

fn text_of(p: PathBuf) -> String {
    let s = p.display().to_string();
    if s.is_empty() {
        ".".into()
    } else {
        s
    }
}

impl PathsMeta {
    /// The paths of a new run started here: relative, to the current repository.
    pub fn here() -> Self {
        PathsMeta {
            repo: Some(current_repo().display().to_string()),
        }
    }
}

impl PathBases {
    /// The bases of run folder `run`, with `repo` the repository the run started in.
    pub fn new(run: &Path, repo: &Path) -> Self {
        PathBases {
            run: absolute(run),
            repo: absolute(repo),
            home: home(),
            temp: temp(),
        }
    }

    /// The bases of run folder `run` as its meta.json records them: its repository,
    /// resolved against the folder, else the current one's.
    pub fn of_meta(run: &Path, paths: &PathsMeta) -> Self {
        let repo = match &paths.repo {
            Some(r) => resolve(r, run),
            None => current_repo(),
        };
        Self::new(run, &repo)
    }

    /// meta.json's `paths` for these bases: the repository relative to the run folder,
    /// else under `~`.
    pub fn meta(&self) -> PathsMeta {
        let repo = if self.run.starts_with(&self.repo) {
            relative_via_common(&self.repo, &self.run).map(text_of)
        } else {
            self.under_home(&self.repo)
        };
        PathsMeta { repo }
    }

    fn under_home(&self, p: &Path) -> Option<String> {
        let h = self.home.as_ref()?;
        under(p, h).map(|r| match text_of(r).as_str() {
            "." => HOME.to_string(),
            r => format!("{HOME}/{r}"),
        })
    }

    /// How `path` is written when it names something of the run folder (a build log
    /// there): relative to the run folder; else as [`Self::portable`] writes it.
    /// A relative `path` is taken against the current folder, as the writer that made
    /// it did (a run under `--results-dir results`).
    pub fn portable_in_run(&self, path: &str) -> String {
        match under(&absolute(Path::new(path)), &self.run) {
            Some(r) => text_of(r),
            None => self.portable(path),
        }
    }

    /// How an absolute `path` is written: under the repository relative to it, under
    /// the home folder with `~`, under the temporary folder with `$TMPDIR`, sharing a
    /// folder with the repository through `..`; a system path, and anything that is not
    /// an absolute path, as it is.
    pub fn portable(&self, path: &str) -> String {
        let p = Path::new(path);
        if !p.is_absolute() {
            return path.to_string();
        }
        // A repository at `/` (gapscope ran from there, outside any git repository)
        // would hold every path: it is no base.
        if let Some(r) = under(p, &self.repo).filter(|_| self.repo.parent().is_some()) {
            return text_of(r);
        }
        if let Some(h) = self.under_home(p) {
            return h;
        }
        if let Some(r) = self.temp.as_ref().and_then(|t| under(p, t)) {
            return match text_of(r).as_str() {
                "." => TMPDIR.to_string(),
                r => format!("{TMPDIR}/{r}"),
            };
        }
        match relative_via_common(p, &self.repo) {
            Some(r) if !is_system(p) => text_of(r),
            _ => path.to_string(),
        }
    }

    /// An argument of a command line: a path as [`Self::portable`] writes it, also
    /// after `--flag=`.
    pub fn portable_arg(&self, arg: &str) -> String {
        if let Some((flag, value)) = arg.split_once('=') {
            if value.starts_with('/') && !flag.contains('/') {
                return format!("{flag}={}", self.portable(value));
            }
        }
        self.portable(arg)
    }

    /// A message with the absolute paths it holds under the repository, the home folder
    /// or the temporary folder written as [`Self::portable`] writes them.
    pub fn text(&self, s: &str) -> String {
        let mut roots: Vec<(String, String)> = vec![(
            self.repo.display().to_string(),
            String::new(), // repository-relative: the prefix goes
        )];
        if let Some(h) = &self.home {
            roots.push((h.display().to_string(), HOME.into()));
        }
        if let Some(t) = &self.temp {
            roots.push((t.display().to_string(), TMPDIR.into()));
        }
        // The longest first: a repository under the home folder is written relative.
        roots.sort_by_key(|(r, _)| std::cmp::Reverse(r.len()));
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        'scan: while i < s.len() {
            let starts_path = s[i..].starts_with('/')
                && s[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_alphanumeric() || "._-/~$".contains(c)));
            if starts_path {
                for (root, to) in &roots {
                    let Some(rest) = s[i..].strip_prefix(root.as_str()) else {
                        continue;
                    };
                    let next = rest.chars().next();
                    if next == Some('/') {
                        // Under the repository the path becomes relative: its `/` goes.
                        out.push_str(to);
                        i += root.len() + usize::from(to.is_empty());
                        continue 'scan;
                    }
                    if next.is_none_or(|c| !(c.is_alphanumeric() || "._-".contains(c))) {
                        out.push_str(if to.is_empty() { "." } else { to });
                        i += root.len();
                        continue 'scan;
                    }
                }
            }
            let c = s[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
        out
    }
}

/// Folders of the system, not of a user or a machine's work: a path under one is the
/// same on every machine that has it.
fn is_system(p: &Path) -> bool {
    const SYSTEM: [&str; 12] = [
        "usr", "bin", "sbin", "lib", "lib64", "etc", "opt", "nix", "proc", "sys", "dev", "snap",
    ];
    matches!(p.components().nth(1), Some(Component::Normal(c)) if SYSTEM.iter().any(|s| c == *s))
}

/// `p` made absolute against the current folder, its `..` taken lexically (links are
/// not resolved: the path is compared with others as written).
fn absolute(p: &Path) -> PathBuf {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The path a run folder records, on this machine: `~/…` under the home folder,
/// `$TMPDIR/…` under the temporary folder, a relative one against `base` (the run
/// folder for a file of the run, the repository for the others), an absolute one as
/// it is (folders written with absolute paths, and system paths).
pub fn resolve(recorded: &str, base: &Path) -> PathBuf {
    let expand = |prefix: &str, root: Option<PathBuf>| {
        let rest = recorded.strip_prefix(prefix)?;
        let rest = match rest {
            "" => "",
            r => r.strip_prefix('/')?,
        };
        root.map(|r| r.join(rest))
    };
    if let Some(p) = expand(HOME, home()) {
        return p;
    }
    if let Some(p) = expand(TMPDIR, temp()) {
        return p;
    }
    let p = Path::new(recorded);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        // `../../..` of a repository taken lexically, so that the result compares with
        // the folders it lies in.
        absolute(&base.join(p))
    }
}

/// `meta` as meta.json holds it: with `meta.paths`, every path relative to the run
/// folder `dir` (a file of the run) or the repository, `~` for the home folder, also
/// inside messages and in the `extra` objects.
pub(super) fn meta_json(
    dir: &Path,
    meta: &Meta,
    extra: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let mut v = serde_json::to_value(meta).expect("meta serialises");
    if let serde_json::Value::Object(m) = &mut v {
        for (k, x) in extra {
            m.insert(k.to_string(), x.clone());
        }
    }
    let Some(p) = &meta.paths else {
        return v;
    };
    let bases = PathBases::of_meta(dir, p);
    // Files of the run itself are relative to its folder.
    if let Some(vars) = v
        .pointer_mut("/external/variants")
        .and_then(|x| x.as_object_mut())
    {
        for var in vars.values_mut() {
            if let Some(serde_json::Value::String(log)) = var.pointer_mut("/build/log") {
                *log = bases.portable_in_run(log);
            }
        }
    }
    portable_strings(&mut v, &bases);
    if let serde_json::Value::Object(m) = &mut v {
        m.insert(
            "paths".into(),
            serde_json::to_value(bases.meta()).expect("paths serialise"),
        );
    }
    v
}

/// Every string of `v`: a path as [`PathBases::portable_arg`] writes it, a
/// message with its paths as [`PathBases::text`] does.
fn portable_strings(v: &mut serde_json::Value, bases: &PathBases) {
    match v {
        serde_json::Value::String(s) => {
            *s = if s.starts_with('/') && !s.contains(char::is_whitespace) {
                bases.portable_arg(s)
            } else {
                bases.text(s)
            };
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| portable_strings(x, bases)),
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| portable_strings(x, bases)),
        _ => {}
    }
}

/// `path` as an experiment file that gapscope writes names it (a bisect's step): relative
/// to the current folder, which the file's relative paths start from, when it lies
/// inside it; else as it is.
pub fn from_current(path: &Path) -> String {
    let cwd = absolute(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
    match under(&absolute(path), &cwd).filter(|_| cwd.parent().is_some()) {
        Some(r) => text_of(r),
        None => path.display().to_string(),
    }
}

/// `meta` as [`super::write_meta`] writes it into run folder `dir`: its paths as
/// `meta.paths` says.
pub fn as_written(dir: &Path, meta: &Meta) -> Meta {
    serde_json::from_value(meta_json(dir, meta, &[])).expect("meta reads back")
}

impl Meta {
    /// A path this meta.json records of a file in run folder `dir` (a build log), on
    /// this machine.
    pub fn run_file_path(&self, dir: &Path, recorded: &str) -> PathBuf {
        resolve(recorded, dir)
    }

    /// A path this meta.json records relative to the repository the run started in
    /// (a variant's folder, a revision's repository or build log), on this machine:
    /// against the repository it names relative to the run folder `dir`, else the
    /// current folder.
    pub fn repo_path(&self, dir: &Path, recorded: &str) -> PathBuf {
        let base = match self.paths.as_ref().and_then(|p| p.repo.as_deref()) {
            Some(r) => resolve(r, dir),
            None => PathBuf::from("."),
        };
        resolve(recorded, &base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases() -> PathBases {
        PathBases {
            run: "/home/ann/src/g/results/e/20260101T000000Z-abc".into(),
            repo: "/home/ann/src/g".into(),
            home: Some("/home/ann".into()),
            temp: Some("/tmp".into()),
        }
    }

    #[test]
    fn a_path_is_written_relative_to_the_run_folder_the_repository_home_or_temp() {
        let b = bases();
        let run = "/home/ann/src/g/results/e/20260101T000000Z-abc";
        assert_eq!(
            b.portable_in_run(&format!("{run}/build-a.log")),
            "build-a.log"
        );
        assert_eq!(
            b.portable(&format!("{run}/build-a.log")),
            format!("results/e/20260101T000000Z-abc/build-a.log")
        );
        assert_eq!(
            b.portable("/home/ann/src/g/params/p.params"),
            "params/p.params"
        );
        assert_eq!(b.portable("/home/ann/src/g"), ".");
        assert_eq!(b.portable("/home/ann/src/other/x"), "~/src/other/x");
        assert_eq!(b.portable("/home/ann"), "~");
        assert_eq!(
            b.portable("/tmp/gs-revs/abc/tree"),
            "$TMPDIR/gs-revs/abc/tree"
        );
        assert_eq!(b.portable("/usr/bin/python3"), "/usr/bin/python3");
        assert_eq!(b.portable("relative/x"), "relative/x");
        assert_eq!(b.portable("porep"), "porep");
        // Outside the home folder, a folder shared with the repository.
        let w = PathBases {
            run: "/work/main/results/e/r".into(),
            repo: "/work/main".into(),
            home: Some("/root".into()),
            temp: Some("/tmp".into()),
        };
        assert_eq!(w.portable("/work/wt-ext/cuda"), "../wt-ext/cuda");
        assert_eq!(w.portable("/root/.cargo/bin/cargo"), "~/.cargo/bin/cargo");
        assert_eq!(w.portable("/srv/data"), "/srv/data", "nothing shared but /");
        assert_eq!(
            w.portable_arg("--results-dir=/work/main/tmp/r"),
            "--results-dir=tmp/r"
        );
        assert_eq!(w.portable_arg("a=b"), "a=b");
        let at_root = PathBases {
            repo: "/".into(),
            ..w.clone()
        };
        assert_eq!(at_root.portable("/srv/data"), "/srv/data");
        assert_eq!(at_root.portable("/root/x"), "~/x");
    }

    #[test]
    fn paths_inside_a_message_are_rewritten_at_their_start_only() {
        let b = bases();
        assert_eq!(
            b.text(
                "the subject's folder /home/ann/src/g/sub does not exist (log: /tmp/x/build.log)"
            ),
            "the subject's folder sub does not exist (log: $TMPDIR/x/build.log)"
        );
        assert_eq!(
            b.text("in /home/ann/data (and /home/ann)"),
            "in ~/data (and ~)"
        );
        // Not a path's start, nor the same folder: kept.
        assert_eq!(
            b.text("x/home/ann/y /home/annex/y /tmpx"),
            "x/home/ann/y /home/annex/y /tmpx"
        );
        assert_eq!(b.text("café /tmp/é"), "café $TMPDIR/é");
    }

    #[test]
    fn a_recorded_path_resolves_against_its_base_home_or_temp() {
        let base = Path::new("/r/run");
        assert_eq!(
            resolve("build-a.log", base),
            PathBuf::from("/r/run/build-a.log")
        );
        assert_eq!(resolve("/abs/x", base), PathBuf::from("/abs/x"));
        if let Some(h) = home() {
            assert_eq!(resolve("~/x", base), h.join("x"));
            assert_eq!(resolve("~", base), h);
        }
        assert_eq!(resolve("~x", base), PathBuf::from("/r/run/~x"));
        assert_eq!(resolve("$TMPDIR/y", base), std::env::temp_dir().join("y"));
    }

    #[test]
    fn the_repository_is_recorded_relative_to_a_run_folder_inside_it() {
        let b = bases();
        assert_eq!(b.meta().repo.as_deref(), Some("../../.."));
        let outside = PathBases {
            run: "/tmp/r/e/x".into(),
            ..bases()
        };
        assert_eq!(outside.meta().repo.as_deref(), Some("~/src/g"));
        let nowhere = PathBases {
            run: "/tmp/r/e/x".into(),
            repo: "/work/main".into(),
            home: Some("/root".into()),
            temp: None,
        };
        assert_eq!(nowhere.meta().repo, None);
        // Read back, the bases are the same folders.
        let again = PathBases::of_meta(&b.run, &b.meta());
        assert_eq!(again.repo, PathBuf::from("/home/ann/src/g"));
    }
}
