//! `signal`: a POSIX signal to a process — the faults a test injects into servers and bus
//! processes alike.
//!
//! Deliberately no bookkeeping: it runs `kill` and asserts it worked; callers know what they
//! paused and must resume.

/// Sends signal `name` (`TERM`, `INT`, `STOP`, `CONT`, `KILL`) to process `pid`: the faults a
/// test injects into servers and bus processes alike.
pub fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status();
    assert!(status.is_ok_and(|s| s.success()), "kill -{name} {pid} failed");
}
