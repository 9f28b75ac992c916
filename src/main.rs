use gapscope::cli;

fn main() {
    cli::quiet_on_closed_pipe();
    if let Err(e) = cli::run() {
        std::process::exit(cli::report_error(&e));
    }
}
