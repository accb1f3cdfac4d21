//! docs/http.md's curl examples against a running `signalbus serve` (embedded, temp data dir, free
//! port): every ```sh block, concatenated in order into one `sh -e` script with `BUS` and `ADMIN`
//! exported, must exit 0 — and since each documented call checks its own answer (`jq -e`,
//! `grep … <status>$`), that means every documented answer and status is what the server says.
//!
//! Deliberately runs the doc's text itself, so an example that stops working fails here rather
//! than in a reader's terminal. It does not test the API beyond what the page shows (the gateway's
//! own tests do that) and needs `curl` and `jq` on PATH, as the page's readers do.

mod support;

use std::process::Command;

use support::{serve, ADMIN};

/// The ```sh blocks of docs/http.md, in order.
fn sh_blocks() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/http.md")).unwrap();
    let mut blocks = Vec::new();
    // `None` outside a fence; `Some(None)` inside another language's block; `Some(Some(_))` in sh.
    let mut fence: Option<Option<String>> = None;
    for line in doc.lines() {
        if line.starts_with("```") {
            fence = match fence.take() {
                Some(Some(block)) => {
                    blocks.push(block);
                    None
                }
                Some(None) => None,
                None => Some((line.trim() == "```sh").then(String::new)),
            };
        } else if let Some(Some(block)) = fence.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    assert!(fence.is_none(), "docs/http.md ends inside a code block");
    blocks
}

/// The blocks' commands with `\` continuations joined, comment-only lines dropped.
fn logical_lines(script: &str) -> Vec<String> {
    script
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_curl_example_checks_its_answer() {
    let script = sh_blocks().concat();
    for line in logical_lines(&script) {
        let calls = line.matches("curl ").count();
        let checks = line.matches("jq -e").count() + line.matches("| grep ").count();
        assert!(calls <= checks, "a documented call does not check its answer (jq -e / grep): {line}");
    }
}

#[test]
fn http_examples_in_docs_run_and_answer_as_documented() {
    let blocks = sh_blocks();
    assert!(blocks.len() >= 9, "docs/http.md lost its examples: {} sh blocks", blocks.len());
    assert!(blocks[0].contains("export BUS="), "the first block sets up BUS and ADMIN:\n{}", blocks[0]);
    let script = blocks.concat();
    let server = serve();
    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    // -x traces each command to stderr, so a failure names the example that broke.
    let output = Command::new("sh")
        .args(["-e", "-x", "-c", &script])
        .current_dir(work.path())
        .env("BUS", &server.url)
        .env("ADMIN", ADMIN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: String =
        stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    assert!(
        output.status.success(),
        "docs/http.md's examples failed ({})\nstdout:\n{stdout}\nlast of the trace:\n{tail}",
        output.status
    );
    println!("the examples took {:?}", started.elapsed());

    // The answers the page shows, as the server printed them.
    let statuses: Vec<&str> = stdout.lines().filter_map(|l| l.rsplit_once("} ").map(|(_, s)| s)).collect();
    for status in ["400", "401", "403", "404", "409"] {
        assert!(statuses.contains(&status), "no documented {status} answer was printed\n{stdout}");
    }
    for shown in [
        r#""outcome": "recalled""#,
        r#""closed": true"#,
        r#""acked": 1"#,
        r#""plugin": "bob/watcher""#,
        r#""lag_events": 0"#,
        r#"signalbus_signals_delivered_total{signal_type="Question",via="piggyback"} 1"#,
        r#"signalbus_signals_delivered_total{signal_type="Question",via="inbox"} 2"#,
        r#""signalbus""#,
    ] {
        assert!(stdout.contains(shown), "the examples did not print {shown}\n{stdout}");
    }
    assert!(stdout.contains(r#"{"outcome":"not_found"} 404"#), "{stdout}");
    assert!(
        stdout.contains(r#"already_registered","message":"alice is already registered in tenant default"}} 409"#),
        "{stdout}"
    );
}
