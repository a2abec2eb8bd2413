//! The open-files limit: every minion holds a connection to each master port.

/// Raise the soft `RLIMIT_NOFILE` to `want`, capped by the hard limit (never lowered).
/// Returns (soft, hard) afterwards.
#[allow(unsafe_code)]
pub fn raise_open_files(want: u64) -> std::io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read or write the rlimit struct passed by pointer,
    // a valid, initialised local that outlives both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let target = want.min(lim.rlim_max);
        if lim.rlim_cur < target {
            let raised = libc::rlimit {
                rlim_cur: target,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lim = raised;
        }
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

#[cfg(test)]
mod tests {
    #[test]
    fn soft_limit_rises_to_the_hard_limit_at_most() {
        let (soft, hard) = super::raise_open_files(u64::MAX).unwrap();
        assert_eq!(soft, hard);
        assert!(soft > 0);
        // Asking for less never lowers it.
        assert_eq!(super::raise_open_files(1).unwrap(), (soft, hard));
    }
}
