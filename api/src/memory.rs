//! Giving freed memory back to the system. glibc keeps what a burst of large requests freed in
//! its per-thread arenas, and a flood of big or malformed bodies would leave salt-api hundreds of
//! megabytes larger for good. Every two seconds the resident size is read, and the free pages
//! are handed back (`malloc_trim`) when it has grown by more than [`SLACK`] since the last trim,
//! or, at most every [`SETTLE`], when it is still that much above the smallest size seen (what a
//! burst left behind once it is over). An idle server never trims.

use std::time::Duration;

/// Growth of the resident size that is worth a trim.
const SLACK: u64 = 16 * 1024 * 1024;

/// The least time between two trims for a size that stays above the smallest one.
const SETTLE: Duration = Duration::from_secs(10);

/// The resident size of this process, in bytes.
pub fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok()??;
    Some(pages * u64::try_from(page).ok()?)
}

/// Hand the free pages of every arena back to the system.
#[allow(unsafe_code)]
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Runs for the life of the server.
pub async fn release_freed() {
    let Some(start) = resident() else {
        return;
    };
    let (mut last_trim, mut floor) = (start, start);
    let mut trimmed_at = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let Some(now) = resident() else { return };
        floor = floor.min(now);
        let grew = now > last_trim + SLACK;
        let stays_up = now > floor + SLACK && trimmed_at.elapsed() >= SETTLE;
        if grew || stays_up {
            let _ = tokio::task::spawn_blocking(trim).await;
            last_trim = resident().unwrap_or(now);
            floor = floor.min(last_trim);
            trimmed_at = std::time::Instant::now();
        } else if now < last_trim {
            last_trim = now;
        }
    }
}
