use gapscope::cli;

fn main() {
    if let Err(e) = cli::run() {
        std::process::exit(cli::report_error(&e));
    }
}
