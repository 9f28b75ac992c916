//! The run folder's sampled stacks: per rep, `stacks/rep<N>.folded` (or `.folded.gz`
//! past [`GZIP_ABOVE`] bytes) and `stacks/rep<N>.json`.
//!
//! A `.folded` line is one (span, thread kind, stack) with its sample count, in the
//! folded-stack format flame graph tools read:
//!
//! ```text
//! <span_id>:<span name>;<own|foreign>;<outermost frame>;…;<innermost frame> <count>
//! ```
//!
//! `own`: the sample ran on the span's thread; `foreign`: on a thread with no span open
//! (counted to the prove thread's innermost span). Frame names hold no ';'. The json
//! file is the rep's [`RepProfile`] without its rows: rate, counts, threads, or why
//! sampling was unavailable.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{FoldedRow, RepProfile};
use crate::store::{STACKS_DIR, STACKS_FOLDED, STACKS_JSON};

/// Folded files larger than this are written gzipped.
pub const GZIP_ABOVE: usize = 256 * 1024;

/// The folder of sampled stacks inside a run folder.
pub fn dir(run_dir: &Path) -> PathBuf {
    run_dir.join(STACKS_DIR)
}

/// One row as a folded line (no newline).
pub fn line(r: &FoldedRow) -> String {
    format!(
        "{}:{};{};{} {}",
        r.span_id,
        r.span,
        if r.foreign { "foreign" } else { "own" },
        r.frames.join(";"),
        r.count
    )
}

/// Parses one folded line.
pub fn parse_line(l: &str) -> Result<FoldedRow> {
    let (stack, count) = l
        .rsplit_once(' ')
        .with_context(|| format!("no sample count after the stack in {l:?}"))?;
    let count: u64 = count
        .parse()
        .with_context(|| format!("sample count {count:?} is not a number"))?;
    let mut parts = stack.split(';');
    let head = parts.next().unwrap_or_default();
    let (id, span) = head
        .split_once(':')
        .with_context(|| format!("{head:?} is not <span_id>:<span name>"))?;
    let foreign = match parts.next() {
        Some("own") => false,
        Some("foreign") => true,
        other => bail!("thread kind {other:?} is neither own nor foreign"),
    };
    Ok(FoldedRow {
        span_id: id
            .parse()
            .with_context(|| format!("span id {id:?} is not a number"))?,
        span: span.to_string(),
        foreign,
        frames: parts.map(str::to_string).collect(),
        count,
    })
}

/// Largest rep summary read (`stacks/rep<N>.json`, a few KiB as written).
pub const MAX_JSON_BYTES: u64 = 16 << 20;
/// Largest folded file read, decompressed (a rep's distinct stacks: a few MiB as
/// written), so that one line without end cannot fill the memory.
pub const MAX_FOLDED_BYTES: u64 = 256 << 20;

/// Most samples one rep's files may count: each count of its json file, and its folded
/// rows' counts summed. 2^40 samples are over three years of one thread's CPU time at
/// the highest rate ([`super::MAX_HZ`]), so no sampler writes more; an edited or damaged
/// file that does is refused, and sums over reps stay far inside 64 bits.
pub const MAX_REP_SAMPLES: u64 = 1 << 40;

/// Writes a rep's files; returns the folded file's path. The folded file holds at most
/// [`MAX_FOLDED_BYTES`], what its readers take: past that, the stacks with the most
/// samples are kept and the json file counts those left out.
pub fn write_rep(run_dir: &Path, p: &RepProfile) -> Result<PathBuf> {
    write_rep_within(run_dir, p, MAX_FOLDED_BYTES as usize)
}

/// [`write_rep`] with the folded file held to `cap` bytes.
pub(super) fn write_rep_within(run_dir: &Path, p: &RepProfile, cap: usize) -> Result<PathBuf> {
    let d = dir(run_dir);
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    let lines: Vec<String> = p.rows.iter().map(line).collect();
    let mut keep = vec![true; lines.len()];
    let mut left_out = p.left_out;
    if lines.iter().map(|l| l.len() + 1).sum::<usize>() > cap {
        // Most samples first (then the written order), each while it fits.
        let mut order: Vec<usize> = (0..lines.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(p.rows[i].count), i));
        let mut used = 0usize;
        for i in order {
            let n = lines[i].len() + 1;
            if used + n <= cap {
                used += n;
            } else {
                keep[i] = false;
                left_out.stacks += 1;
                left_out.samples = left_out.samples.saturating_add(p.rows[i].count);
            }
        }
    }
    // The rep's own fields as the struct writes them; `left_out` only grows from the
    // rep's, so it is set where there is one and left out (as the struct leaves it) where not.
    let mut header = serde_json::to_value(p)?;
    if !left_out.is_none() {
        header["left_out"] = serde_json::to_value(left_out)?;
    }
    let json = run_dir.join(STACKS_JSON.of_rep(p.rep));
    crate::fsx::write_file(&json, serde_json::to_string_pretty(&header)?.as_bytes())?;
    let mut text = String::new();
    for (l, _) in lines.iter().zip(&keep).filter(|(_, &k)| k) {
        text.push_str(l);
        text.push('\n');
    }
    let plain = run_dir.join(STACKS_FOLDED.of_rep(p.rep));
    let gz = run_dir.join(STACKS_FOLDED.gz_of_rep(p.rep));
    // A rep run again (after a resume) leaves no file of its earlier attempt behind.
    let _ = std::fs::remove_file(&plain);
    let _ = std::fs::remove_file(&gz);
    if text.len() > GZIP_ABOVE {
        let path = gz;
        crate::fsx::write_file_with(&path, |w| {
            let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            gz.write_all(text.as_bytes())?;
            gz.finish().map(drop)
        })?;
        Ok(path)
    } else {
        crate::fsx::write_file(&plain, text.as_bytes())?;
        Ok(plain)
    }
}

/// Whether the run folder has a stacks folder: a real folder inside it (a link named
/// `stacks` could lead the readers anywhere, and is refused).
fn has_stacks(run_dir: &Path) -> Result<bool> {
    let d = dir(run_dir);
    match std::fs::symlink_metadata(&d) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("reading {}", d.display())),
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => bail!(
            "{} is not a folder (a link, or a file): a run folder's sampled stacks are read \
             only from a folder inside it; remove it, or replace it with a copy",
            d.display()
        ),
    }
}

/// Reads a rep's files back (`None`: the rep was not profiled).
pub fn read_rep(run_dir: &Path, rep: u32) -> Result<Option<RepProfile>> {
    read_rep_with(run_dir, rep, true)
}

/// [`read_rep`], with the stacks (`rows`) or without (the json file only). Every file
/// is read through [`crate::fsx`]: never through a link, only a regular file, capped.
pub fn read_rep_with(run_dir: &Path, rep: u32, rows: bool) -> Result<Option<RepProfile>> {
    if !has_stacks(run_dir)? {
        return Ok(None);
    }
    let json = run_dir.join(STACKS_JSON.of_rep(rep));
    let bytes = match crate::fsx::read_no_follow(&json, MAX_JSON_BYTES) {
        Err(e) if e.is_not_found() => return Ok(None),
        other => other?,
    };
    let mut p: RepProfile =
        serde_json::from_slice(&bytes).with_context(|| format!("reading {}", json.display()))?;
    let c = &p.counts;
    if [c.samples, c.own, c.foreign, c.outside, p.lost]
        .iter()
        .any(|&n| n > MAX_REP_SAMPLES)
    {
        bail!(
            "{} counts more than {MAX_REP_SAMPLES} samples, more than a rep can hold: the \
             file was edited or damaged",
            json.display()
        );
    }
    if !rows {
        return Ok(Some(p));
    }
    let plain = run_dir.join(STACKS_FOLDED.of_rep(rep));
    let gz = run_dir.join(STACKS_FOLDED.gz_of_rep(rep));
    let (path, text) = if std::fs::symlink_metadata(&plain).is_ok() {
        let t = crate::fsx::read_no_follow(&plain, MAX_FOLDED_BYTES)?;
        (plain, t)
    } else if std::fs::symlink_metadata(&gz).is_ok() {
        let t = crate::fsx::read_gz_no_follow(&gz, MAX_FOLDED_BYTES)?;
        (gz, t)
    } else {
        return Ok(Some(p));
    };
    let text = std::str::from_utf8(&text)
        .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
    let mut samples = 0u64;
    for (i, l) in text.lines().enumerate() {
        if l.is_empty() {
            continue;
        }
        let row = parse_line(l).with_context(|| format!("stacks of rep {rep}, line {}", i + 1))?;
        samples = samples.saturating_add(row.count);
        if samples > MAX_REP_SAMPLES {
            bail!(
                "stacks of rep {rep}, line {}: more than {MAX_REP_SAMPLES} samples counted by \
                 there, more than a rep can hold: {} was edited or damaged",
                i + 1,
                path.display()
            );
        }
        p.rows.push(row);
    }
    Ok(Some(p))
}

/// Every profiled rep of a run folder, in rep order (`rows`: with their stacks).
pub fn read_run(run_dir: &Path, rows: bool) -> Result<Vec<RepProfile>> {
    if !has_stacks(run_dir)? {
        return Ok(Vec::new());
    }
    let d = dir(run_dir);
    let entries = std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?;
    let mut reps: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_str()?.to_string();
            n.strip_prefix("rep")?.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    reps.sort_unstable();
    let mut out = Vec::new();
    for r in reps {
        out.extend(read_rep_with(run_dir, r, rows)?);
    }
    Ok(out)
}
