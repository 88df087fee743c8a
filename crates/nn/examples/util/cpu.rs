//! CPU time of this process (sum over its threads, from `/proc/self/task/*/schedstat`), for
//! benchmarks on a shared machine where wall-clock time includes other processes' turns.

/// Nanoseconds of CPU time used so far by all threads of this process, or `None` where
/// `/proc` is unavailable.
pub fn process_cpu_ns() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}
