fn main() {
    if let Err(e) = gapscope::cli::run() {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}
