//! `gapscope completions`: a completion script for the shell, generated from the same
//! clap definition the binary parses with.

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell the script is for: bash, zsh or fish (also elvish, powershell).
    #[arg(value_enum)]
    shell: Shell,
}

impl CompletionsArgs {
    pub(super) fn write(&self, out: &mut dyn std::io::Write) {
        clap_complete::generate(self.shell, &mut super::Cli::command(), "gapscope", out);
    }
}

pub fn run(a: CompletionsArgs) -> Result<()> {
    a.write(&mut std::io::stdout().lock());
    Ok(())
}
