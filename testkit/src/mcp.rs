//! The official MCP Python SDK (PyPI `mcp`) in a venv under `target/mcp-venv`, and a runner for
//! the scenario scripts in `tests/mcp/`: MCP tests drive the bus with a client no one here
//! wrote.
//!
//! Deliberately fails loudly: without the SDK the MCP tests cannot run, so a missing Python or
//! a failed install panics with what to do, never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The SDK release the scenarios are written against.
const REQUIREMENT: &str = "mcp>=2.3,<3";

/// The workspace root (this crate lives one level down).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("testkit sits in the workspace").to_path_buf()
}

/// The scenario script every MCP test runs.
pub fn scenarios() -> PathBuf {
    workspace_root().join("tests/mcp/scenarios.py")
}

/// The Python of the venv holding the SDK: `SIGNALBUS_MCP_PYTHON` when set, else
/// `target/mcp-venv/bin/python`, created and installed on first use.
pub fn python() -> PathBuf {
    if let Ok(p) = std::env::var("SIGNALBUS_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    // One install per test process; concurrent processes install into their own temp venv and
    // the first rename wins.
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let venv = workspace_root().join("target/mcp-venv");
    let python = venv.join("bin/python");
    if has_sdk(&python) {
        return python;
    }
    let staging = workspace_root().join(format!("target/mcp-venv.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    run(
        Command::new("python3").arg("-m").arg("venv").arg(&staging),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    );
    run(
        Command::new(staging.join("bin/pip")).args(["install", "--quiet", REQUIREMENT]),
        &format!("pip install '{REQUIREMENT}'"),
    );
    if std::fs::rename(&staging, &venv).is_err() {
        // Another process got there first; its venv is as good as ours.
        let _ = std::fs::remove_dir_all(&staging);
    }
    assert!(has_sdk(&python), "the MCP Python SDK is not importable from {}", python.display());
    python
}

fn has_sdk(python: &Path) -> bool {
    python.exists()
        && Command::new(python)
            .args(["-c", "import mcp, httpx2"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed (the MCP tests need the official MCP Python SDK):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `scenario` of `tests/mcp/scenarios.py` with `args` (JSON text, read by the script)
/// and panics with its output unless it passes within `limit`. Blocking: call it from
/// `spawn_blocking` when the bus under test runs on the same runtime.
pub fn run_scenario(scenario: &str, args: &str, limit: Duration) {
    let python = python();
    let child = Command::new(&python)
        .arg(scenarios())
        .arg(scenario)
        .arg(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.expect("scenario output"),
        Err(_) => {
            crate::signal(pid, "KILL");
            let out = rx.recv().expect("scenario output").expect("scenario output");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            panic!("mcp scenario {scenario} took longer than {limit:?}:\n{text}");
        }
    };
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mcp scenario {scenario} failed ({:?}):\n{text}", out.status);
}
