//! `gapscope now`: the span clock (CLOCK_MONOTONIC) in nanoseconds, for shell scripts
//! that write span lines with their own timestamps (`date +%s%N` is CLOCK_REALTIME,
//! which gapscope cannot place in a rep).

use std::io::Write;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct NowArgs {}

pub fn run(_: NowArgs) -> Result<()> {
    // The clock is read first: what follows (formatting, the write) is not in the stamp.
    let ns = crate::trace::now_ns();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ns}")?;
    Ok(())
}
