use gapscope::cli;

fn main() {
    if let Err(e) = cli::run() {
        if let Some(r) = e.downcast_ref::<cli::Regressed>() {
            eprintln!("{r}");
            std::process::exit(cli::EXIT_REGRESSED);
        }
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}
