//! Files as a hostile world hands them over: whole-file writes that never replace what
//! is not a regular file and never follow a link ([`write`]), reads of a folder's
//! files that never leave it and never read without end ([`read`]), and the names that
//! may become folder names ([`name`]). A leaf: it depends on nothing in the crate, so
//! the store, the experiment, the prover's params cache and every output use it.

pub mod name;
pub mod read;
pub mod write;

pub use name::check_name;
pub use read::{
    open_in_dir, read_capped, read_gz_no_follow, read_in_dir, read_no_follow, ReadError,
};
pub use write::{
    check_target, copy_file, create_fresh, is_stdout, kind_of, write_file, write_file_or_stdout,
    write_file_unsynced, write_file_with, WriteError,
};
