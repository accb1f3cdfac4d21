//! The documented surfaces against a running `signalbus serve` (embedded, temp data dir, free
//! port): every command of docs/cli.md's console blocks, in order, with its exit code, and a
//! schemathesis run over `/openapi.json` (no 5xx, no undocumented status).
//!
//! Deliberately runs the docs' text itself (through `sh`), so an example that stops working
//! fails here rather than in a reader's terminal. schemathesis is required, not optional:
//! without it on PATH the test fails (`pip install schemathesis`).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use support::{serve, ADMIN, BIN};

/// The `$ ` commands of docs/cli.md's console blocks, each with its expected exit code.
fn documented_commands() -> Vec<(String, i32)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let mut out: Vec<(String, i32)> = Vec::new();
    let mut in_console = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            in_console = line.trim() == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.to_string(), 0));
        } else if let Some(code) = line.strip_prefix("# exit ") {
            out.last_mut().expect("an exit code follows a command").1 = code.trim().parse().unwrap();
        }
    }
    out
}

#[test]
fn cli_examples_in_docs_run_with_their_exit_codes() {
    let server = serve();
    let commands: Vec<(String, i32)> =
        documented_commands().into_iter().filter(|(c, _)| !c.starts_with("signalbus serve")).collect();
    assert!(commands.len() >= 20, "docs/cli.md lost its examples");
    // One shell for the whole page, so `export`s carry over; each command reports its status.
    let mut script = String::from("set +e\n");
    for (i, (cmd, _)) in commands.iter().enumerate() {
        script.push_str(&format!("{cmd}\necho \"__exit {i} $?\"\n"));
    }
    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let work = tempfile::tempdir().unwrap();
    let output = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())
        .env("PATH", path)
        .env("SIGNALBUS_URL", &server.url)
        .env("ADMIN_TOKEN", ADMIN)
        .env_remove("SIGNALBUS_TOKEN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let codes: Vec<i32> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("__exit "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(codes.len(), commands.len(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for ((cmd, want), got) in commands.iter().zip(&codes) {
        assert_eq!(got, want, "`{cmd}` exited {got}, docs say {want}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    }
    // The outputs the page shows in part.
    assert!(stdout.contains("queued_offline"), "{stdout}");
    assert!(stdout.contains("outcome  recalled"), "{stdout}");
    assert!(stderr.contains("not_found"), "{stderr}");
    assert!(stdout.contains("\"delivered_via\"") || stdout.contains("StatusUpdate"), "{stdout}");
}

#[test]
fn schemathesis_finds_no_server_error_and_no_undocumented_status() {
    let found = Command::new("schemathesis").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "schemathesis is required on PATH for this test: pip install schemathesis"
    );
    let server = serve();
    let register = Command::new("curl")
        .args(["-sf", "-X", "POST", "-H", &format!("Authorization: Bearer {ADMIN}"), "-d", r#"{"identity":"fuzzer"}"#])
        .arg(format!("{}/v1/agents", server.url))
        .output()
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&register.stdout).expect("registration answered JSON");
    let token = body["token"].as_str().unwrap();
    // Its working files (.schemathesis/) go to a temp dir, not the checkout.
    let work = tempfile::tempdir().unwrap();
    let mut run = Command::new("schemathesis")
        .current_dir(work.path())
        .args(["run", &format!("{}/openapi.json", server.url)])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "not_a_server_error,status_code_conformance"])
        .args(["--max-examples", "20", "--phases", "examples,coverage,fuzzing", "--workers", "2"])
        .args(["--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(run.stdout.take().unwrap()).lines().map_while(Result::ok).collect::<Vec<_>>().join("\n");
    let status = run.wait().unwrap();
    assert!(status.success(), "schemathesis failed:\n{out}");
}
