//! The master-side tools `salt`, `salt-key` and `salt-run`: what they share.

pub mod local;
pub mod output;

/// Let a closed standard output (`salt '*' test.ping | head -1`) end the tool quietly, as it
/// ends a C program, instead of a panic on the next write: Rust ignores `SIGPIPE` by default.
#[allow(unsafe_code)]
pub fn quiet_on_closed_pipe() {
    // SAFETY: restoring a signal's default disposition at the start of `main`, before any
    // thread exists; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
