//! The documented surfaces against a running `signalbus serve` (embedded, temp data dir, free
//! port): every command of docs/cli.md's console blocks, in order, with its exit code; the
//! CLI's token lookup and failure messages; `/openapi.json` valid by openapi-spec-validator;
//! and schemathesis runs over it with every check (the server does what it declares).
//!
//! Deliberately runs the docs' text itself (through `sh`), so an example that stops working
//! fails here rather than in a reader's terminal. schemathesis and openapi-spec-validator are
//! required, not optional: without them on PATH the tests fail (`pip install schemathesis
//! openapi-spec-validator`; scripts/test installs both).

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use support::{serve, serve_with, ADMIN, BIN};

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
    // The bounce names the class and the way out; `listen` printed a signal; the STATUS column.
    assert!(stderr.contains("hint: Question is a sync type") && stderr.contains("--delivery-class async"), "{stderr}");
    assert!(stdout.contains("alice2 -> bob  Question"), "{stdout}");
    assert!(stdout.contains(r#""type":"StatusUpdate""#), "listen --json prints one object per line: {stdout}");
    assert!(stdout.contains("STATUS") && stdout.contains("recalled"), "{stdout}");
    assert!(stdout.contains("signals_expired"), "{stdout}");
    // `admin expire`: the dry run's list and count, the counts, the row's reason, the refusal.
    assert!(stdout.contains("2 would expire") && stdout.contains("expired  2"), "{stdout}");
    assert!(stdout.contains("forced") && stderr.contains("would expire everything"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("(http 200)"), "{stderr}");
    // Tokens: a scoped token's refusal names the scope; the issue and list print scopes as one
    // cell; a revoked and an expired token are refused, each saying why.
    assert!(stdout.contains("scopes      send,read") && stdout.contains("send,receive,recall"), "{stdout}");
    assert!(stderr.contains(r#"lacks the "receive" scope"#) && stderr.contains("token expired"), "{stderr}");
    assert!(stdout.contains("tenant    acme") && stdout.contains("revoked   true"), "{stdout}");
    // `config check` said the default file is fine, and named the unknown key.
    assert!(stdout.contains("signalbus.toml: ok") && stderr.contains("listen_port"), "{stdout}\n{stderr}");
}

/// Runs the CLI in `cwd` with `env` (and no token from the caller's environment).
fn cli(cwd: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut command = Command::new(BIN);
    command.args(args).current_dir(cwd).env_remove("SIGNALBUS_TOKEN").env_remove("SIGNALBUS_DATA_DIR");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn the_cli_finds_the_admin_token_serve_kept_and_says_where_it_looked() {
    let server = serve_with(None);
    let elsewhere = tempfile::tempdir().unwrap();
    let data_dir = server.dir.path().to_str().unwrap();
    let url = ("SIGNALBUS_URL", server.url.as_str());
    // From another directory, with the data dir named: the generated token is found.
    let (code, out, err) = cli(elsewhere.path(), &[url, ("SIGNALBUS_DATA_DIR", data_dir)], &["agent", "add", "alice"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("sb_"), "{out}");
    // From the data dir's parent, as ./signalbus-data: the default.
    let parent = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(server.dir.path(), parent.path().join("signalbus-data")).unwrap();
    let (code, out, err) = cli(parent.path(), &[url], &["agent", "list"]);
    assert_eq!(code, 0, "{out}{err}");
    // Nowhere to be found: unauthorized, and the hint names the file it looked for.
    let (code, _, err) = cli(elsewhere.path(), &[url], &["agent", "list"]);
    assert_eq!(code, 1, "{err}");
    let looked = elsewhere.path().join("signalbus-data").join("admin_token");
    assert!(err.contains("hint: no token") && err.contains(looked.to_str().unwrap()), "{err}");
    // A server that is not there: connection refused, and whether one runs here.
    let (code, _, err) = cli(elsewhere.path(), &[], &["inbox", "--url", "http://127.0.0.1:9", "--token", "x"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("connection refused") && err.contains("`signalbus serve`"), "{err}");
    let (code, _, err) = cli(elsewhere.path(), &[], &["inbox", "--url", "127.0.0.1:9", "--token", "x"]);
    assert_eq!(code, 2, "{err}");
    // https:// is spoken (rustls): against the plain listener the handshake is what fails.
    let https = server.url.replace("http://", "https://");
    let (code, _, err) = cli(elsewhere.path(), &[], &["inbox", "--url", &https, "--token", "x"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("does not answer TLS"), "{err}");
}

#[test]
fn the_openapi_document_is_valid_for_openapi_spec_validator() {
    let found = Command::new("openapi-spec-validator").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "openapi-spec-validator is required on PATH for this test: pip install openapi-spec-validator"
    );
    let server = serve();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("openapi.json");
    let fetched =
        Command::new("curl").args(["-sf", "-o"]).arg(&file).arg(format!("{}/openapi.json", server.url)).status();
    assert!(fetched.unwrap().success(), "GET /openapi.json");
    let out = Command::new("openapi-spec-validator").arg(&file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "openapi-spec-validator:\n{said}");
}

#[test]
fn schemathesis_finds_the_server_conforming_to_its_document() {
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
    // As an agent (the API's everyday caller) and as the admin (registration, rotation, rebuild).
    for (who, token, examples) in [("agent", token, "20"), ("admin", ADMIN, "10")] {
        // Its working files (.schemathesis/) go to a temp dir, not the checkout.
        let work = tempfile::tempdir().unwrap();
        let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis_hooks.py");
        let mut run = Command::new("schemathesis")
            .current_dir(work.path())
            // Long-polls wait 1 s at most instead of up to 60 (see the file).
            .env("SCHEMATHESIS_HOOKS", &hooks)
            .args(["run", &format!("{}/openapi.json", server.url)])
            .args(["-H", &format!("Authorization: Bearer {token}")])
            // Every check: no 5xx, documented statuses, headers and bodies, schema-valid requests
            // accepted and invalid ones refused, 405 with `Allow` for undeclared methods, auth.
            .args(["--checks", "all"])
            // An HTTP client cannot follow a 101: a valid upgrade would leave it a WebSocket to
            // read as HTTP. The gateway's tests and the WS fuzzing cover `/v1/ws`.
            .args(["--exclude-path", "/v1/ws"])
            // One worker: with more, hypothesis parses lambdas on several threads at once and
            // CPython 3.11's `ast.parse` sometimes fails under that ("AST constructor recursion
            // depth mismatch"), a runtime error of the fuzzer, not of the bus.
            .args(["--max-examples", examples, "--phases", "examples,coverage,fuzzing", "--workers", "1"])
            .args(["--seed", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out =
            BufReader::new(run.stdout.take().unwrap()).lines().map_while(Result::ok).collect::<Vec<_>>().join("\n");
        let status = run.wait().unwrap();
        assert!(status.success(), "schemathesis ({who}) failed:\n{out}");
    }
}
