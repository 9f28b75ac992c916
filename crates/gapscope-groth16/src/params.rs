//! Groth16 parameters: generated (by [`super::paramgen`], or bellperson's generator when
//! asked for) and cached on disk.
//!
//! A cache entry is two files: `<key>.params` in bellperson's `Parameters::write` format
//! (so other provers, e.g. supraseal, can read it as is) and `<key>.json` with what it
//! was made for, the SHA-256 of the params file and the generator that made it. The key
//! holds the circuit, its size and the digest of its constraint-system shape, so a change
//! to the circuit's code that changes constraints misses the cache. A params file whose
//! checksum, size or dimensions do not match is reported and regenerated, never used.
//!
//! Several processes may share one params folder (three first runs started together):
//! an entry is read under a shared lock and made under an exclusive one (flock on
//! `<key>.lock`, released when the process ends, however it ends), so one process
//! generates while the others wait and then load its file. The file is written to an
//! exclusive temp file beside it and renamed, and its checksum is read back after the
//! rename, so a sidecar never names bytes that are not there.

use std::fs;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bellperson::groth16::Parameters;
use blstrs::Bls12;

use super::circuits::CircuitInstance;
use super::cs::ShapeHasher;
use super::paramgen::{GenReport, ParamGen};

pub type Groth16Params = Parameters<Bls12>;

#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("cannot create the params directory {path}: {source} (set --params-dir to a writable place)")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write params file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("synthesis of circuit {circuit} failed while generating params: {source}")]
    Synthesis {
        circuit: String,
        source: bellperson::SynthesisError,
    },
    #[error("generating params for {circuit} ({generator}) failed: {message}")]
    Generate {
        circuit: String,
        generator: &'static str,
        message: String,
    },
}

/// What a params file was made for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParamsKey {
    pub circuit: String,
    pub log2_constraints: u32,
    pub shape_digest: String,
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_constraints: usize,
}

impl ParamsKey {
    pub fn for_circuit(
        circuit: &CircuitInstance,
        name: &str,
        log2: u32,
    ) -> Result<Self, ParamsError> {
        let (digest, shape) =
            ShapeHasher::digest(circuit.blank()).map_err(|source| ParamsError::Synthesis {
                circuit: name.to_string(),
                source,
            })?;
        Ok(ParamsKey {
            circuit: name.to_string(),
            log2_constraints: log2,
            shape_digest: digest,
            num_inputs: shape.num_inputs,
            num_aux: shape.num_aux,
            num_constraints: shape.num_constraints,
        })
    }

    pub fn file_stem(&self) -> String {
        format!(
            "{}-2^{}-{}",
            self.circuit,
            self.log2_constraints,
            &self.shape_digest[..16]
        )
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Sidecar {
    format: u32,
    key: ParamsKey,
    params_sha256: String,
    params_bytes: u64,
    generated_utc: String,
    generation_ms: u64,
    /// What made the file (absent from sidecars older than the field).
    #[serde(default)]
    generator: Option<String>,
    /// Stage timings of the generation (paramgen only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<GenReport>,
}

/// How the params of a run were obtained (recorded in meta.json).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ParamsOrigin {
    pub key: ParamsKey,
    pub path: PathBuf,
    /// `loaded`, `generated`, `regenerated: <why the cache was rejected>` (both in this
    /// process), or `generated in a child process` (then loaded here).
    pub source: String,
    pub elapsed_ms: u64,
    /// What made the params file, e.g. `paramgen, fixed base cpu (16 threads)` or
    /// `bellperson 0.27 generate_random_parameters`; None for a file whose sidecar
    /// predates the field (and in meta.json of runs made before it).
    #[serde(default)]
    pub generator: Option<String>,
    /// Stage timings, where this process (or its `__params` child) generated the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenReport>,
    /// sha256 of the params file: a resume loads exactly these params or refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl ParamsOrigin {
    /// The origin as meta.json keeps it: the path relative to the params dir (the file's
    /// name, for a file outside it), so that a run folder names no directory of the
    /// machine it ran on.
    pub fn for_meta(&self, params_dir: &Path) -> ParamsOrigin {
        let path = self
            .path
            .strip_prefix(params_dir)
            .ok()
            .or_else(|| self.path.file_name().map(Path::new))
            .unwrap_or(&self.path)
            .to_path_buf();
        ParamsOrigin {
            path,
            ..self.clone()
        }
    }
}

fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    use sha2::Digest;
    let mut f = BufReader::new(fs::File::open(path)?);
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        n += k as u64;
        h.update(&buf[..k]);
    }
    Ok((h.finalize().iter().map(|b| format!("{b:02x}")).collect(), n))
}

/// Checks a params file's dimensions against the circuit shape.
pub fn check_dimensions(p: &Groth16Params, key: &ParamsKey) -> Result<(), String> {
    let n = key.num_constraints.next_power_of_two();
    let checks = [
        ("vk.ic (inputs)", p.vk.ic.len(), key.num_inputs),
        ("l (aux)", p.l.len(), key.num_aux),
        ("h (domain - 1)", p.h.len(), n - 1),
    ];
    for (what, got, want) in checks {
        if got != want {
            return Err(format!("{what}: file has {got}, circuit needs {want}"));
        }
    }
    Ok(())
}

fn try_load(
    stem: &Path,
    key: &ParamsKey,
) -> Result<(Groth16Params, Option<String>, String), String> {
    let side_path = stem.with_extension("json");
    let params_path = stem.with_extension("params");
    let side: Sidecar = serde_json::from_slice(
        &fs::read(&side_path).map_err(|e| format!("{}: {e}", side_path.display()))?,
    )
    .map_err(|e| format!("{}: not a params sidecar ({e})", side_path.display()))?;
    if &side.key != key {
        return Err(format!(
            "{} was made for another circuit shape",
            side_path.display()
        ));
    }
    let (sum, len) =
        sha256_file(&params_path).map_err(|e| format!("{}: {e}", params_path.display()))?;
    if len != side.params_bytes || sum != side.params_sha256 {
        return Err(format!(
            "{} is corrupt: {len} bytes with sha256 {}…, expected {} bytes with {}…",
            params_path.display(),
            &sum[..12],
            side.params_bytes,
            &side.params_sha256[..12.min(side.params_sha256.len())]
        ));
    }
    let f = fs::File::open(&params_path).map_err(|e| e.to_string())?;
    // Integrity is established by the checksum; skip the (slow) subgroup checks.
    let p = Parameters::<Bls12>::read(BufReader::new(f), false)
        .map_err(|e| format!("{}: unreadable params ({e})", params_path.display()))?;
    check_dimensions(&p, key)?;
    Ok((p, side.generator, sum))
}

/// Path stem (no extension) of the cache entry for `key` under `dir`.
pub fn cache_stem(dir: &Path, key: &ParamsKey) -> PathBuf {
    dir.join(key.file_stem())
}

/// Whether the cache holds a params file and its sidecar for `key` (not yet checked:
/// [`load_or_generate`] verifies them when it loads).
pub fn cached(dir: &Path, key: &ParamsKey) -> bool {
    let stem = cache_stem(dir, key);
    stem.with_extension("params").is_file() && stem.with_extension("json").is_file()
}

/// SHA-256 of `p` as [`Parameters::write`] lays it out (the checksum its params file
/// would have), without writing it anywhere.
pub fn digest(p: &Groth16Params) -> String {
    use sha2::Digest;
    struct HashWriter(sha2::Sha256);
    impl Write for HashWriter {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.update(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = BufWriter::new(HashWriter(sha2::Sha256::new()));
    p.write(&mut w).expect("writing to a hash cannot fail");
    let h = w
        .into_inner()
        .ok()
        .expect("flushing into a hash cannot fail")
        .0;
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Takes the lock of the cache entry `stem` (`<stem>.lock`): shared to read it,
/// exclusive to make it. Blocks until it is granted.
fn lock_entry(stem: &Path, exclusive: bool) -> Result<fs::File, ParamsError> {
    let path = stem.with_extension("lock");
    let err = |source| ParamsError::Write {
        path: path.clone(),
        source,
    };
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a link planted under the lock's name.
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(err)?;
    if exclusive { f.lock() } else { f.lock_shared() }.map_err(err)?;
    Ok(f)
}

/// Writes through to `inner` and hashes what it wrote.
struct HashingWriter<'a> {
    inner: &'a mut dyn Write,
    hash: sha2::Sha256,
    bytes: u64,
}

impl Write for HashingWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.write(b)?;
        self.hash.update(&b[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Loads params for `circuit` from `dir`, or generates them with `generator` and caches
/// them. Safe across processes (see the module doc).
pub fn load_or_generate(
    dir: &Path,
    circuit: &CircuitInstance,
    key: &ParamsKey,
    generator: ParamGen,
) -> Result<(Groth16Params, ParamsOrigin), ParamsError> {
    // The cache's protocol in order: load under the shared lock; else take the exclusive
    // lock, look again, generate, write, read back and write the sidecar. The exclusive
    // lock is held across these steps, so they stay in one function.
    fs::create_dir_all(dir).map_err(|source| ParamsError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let stem = cache_stem(dir, key);
    let params_path = stem.with_extension("params");
    let t = Instant::now();
    let present = || stem.with_extension("json").exists() || params_path.exists();
    let loaded = |(p, made_by, sum): (Groth16Params, Option<String>, String)| {
        (
            p,
            ParamsOrigin {
                key: key.clone(),
                path: params_path.clone(),
                source: "loaded".into(),
                elapsed_ms: t.elapsed().as_millis() as u64,
                generator: made_by,
                generation: None,
                sha256: Some(sum),
            },
        )
    };
    // A whole entry is loaded under the shared lock, which no maker holds meanwhile.
    if present() {
        let _shared = lock_entry(&stem, false)?;
        if let Ok(got) = try_load(&stem, key) {
            return Ok(loaded(got));
        }
    }
    let _exclusive = lock_entry(&stem, true)?;
    // Another process may have made the entry while this one waited for the lock.
    let why = if present() {
        match try_load(&stem, key) {
            Ok(got) => return Ok(loaded(got)),
            Err(why) => {
                eprintln!("warning: params cache rejected, regenerating: {why}");
                Some(why)
            }
        }
    } else {
        None
    };
    let g = generator
        .generate(circuit.blank(), None)
        .map_err(|e| ParamsError::Generate {
            circuit: key.circuit.clone(),
            generator: generator.as_str(),
            message: format!("{e:#}"),
        })?;
    let p = g.params;
    let generation_ms = t.elapsed().as_millis() as u64;
    let werr = |source| ParamsError::Write {
        path: params_path.clone(),
        source,
    };
    let mut written = None;
    crate::fsx::write::write_file_with(&params_path, |w| {
        use sha2::Digest;
        let mut h = HashingWriter {
            inner: w,
            hash: sha2::Sha256::new(),
            bytes: 0,
        };
        p.write(&mut h)?;
        let sum: String = h
            .hash
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        written = Some((sum, h.bytes));
        Ok(())
    })
    .map_err(|e| werr(e.into_io()))?;
    let (want_sum, want_len) = written.expect("the params were written");
    // Read back after the rename: the sidecar names the bytes that are there.
    let (sum, len) = sha256_file(&params_path).map_err(werr)?;
    if sum != want_sum || len != want_len {
        return Err(werr(std::io::Error::other(format!(
            "the file changed after it was written ({len} bytes with sha256 {}…, {want_len} \
             bytes with {}… were written): is another program writing into the params folder?",
            &sum[..12],
            &want_sum[..12]
        ))));
    }
    let side = Sidecar {
        format: 1,
        key: key.clone(),
        params_sha256: sum.clone(),
        params_bytes: len,
        generated_utc: chrono::Utc::now().to_rfc3339(),
        generation_ms,
        generator: Some(g.generator.clone()),
        generation: g.report.clone(),
    };
    crate::fsx::write_file(
        &stem.with_extension("json"),
        &serde_json::to_vec_pretty(&side).expect("serialisable"),
    )
    .map_err(|e| werr(e.into_io()))?;
    Ok((
        p,
        ParamsOrigin {
            key: key.clone(),
            path: params_path,
            source: match why {
                Some(w) => format!("regenerated: {w}"),
                None => "generated".into(),
            },
            elapsed_ms: t.elapsed().as_millis() as u64,
            generator: Some(g.generator),
            generation: g.report,
            sha256: Some(sum),
        },
    ))
}
