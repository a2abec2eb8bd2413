//! The open-file limit: each simulated minion holds two TCP connections.

/// Raise the soft `RLIMIT_NOFILE` to the hard limit. Returns (soft, hard) after the change.
#[allow(unsafe_code)]
pub fn raise_nofile() -> std::io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read or write the rlimit struct passed by
    // pointer, which is a valid, initialised local that outlives both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
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
    fn soft_limit_ends_at_the_hard_limit() {
        let (soft, hard) = super::raise_nofile().unwrap();
        assert_eq!(soft, hard);
        assert!(soft > 0);
    }
}
