//! The config file round trip, black-box: `signalbus config default` prints a file that
//! `config check` accepts and `serve --config` runs on (its `[server]` keys taking effect:
//! listen address, data dir, JSON logs); a flag wins over the file; an unknown key fails the
//! check naming the key. With `[auth] jwt_jwks_file`, SIGHUP re-reads the JWKS file (a broken
//! one keeps the keys and the process), and a broken file fails the check and the start.
//!
//! Deliberately does not re-test each `[limits]`/`[types]` value (`src/config.rs` unit tests do).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod roles;

use roles::{free_port, BIN};

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run signalbus")
}

/// Polls `url` until it answers 200, or panics after 30 s or when the process exits.
async fn ready(child: &mut std::process::Child, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("serve exited early: {status}");
        }
        if let Ok(r) = reqwest::get(url).await {
            if r.status().as_u16() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{url} never answered 200");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_default_file_checks_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["config", "default"]);
    assert!(out.status.success());
    let default = String::from_utf8(out.stdout).unwrap();
    assert!(default.contains("[server]") && default.contains("[limits]"), "{default}");
    let file = dir.path().join("signalbus.toml");
    std::fs::write(&file, &default).unwrap();
    let out = run(&["config", "check", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The file's own listen address, data dir and log format, no flag given.
    let port = free_port();
    let data = dir.path().join("data");
    let edited = default
        .replace("listen = \"127.0.0.1:7400\"", &format!("listen = \"127.0.0.1:{port}\""))
        .replace("data_dir = \"./signalbus-data\"", &format!("data_dir = {:?}", data.to_str().unwrap()))
        .replace("log_format = \"text\"", "log_format = \"json\"");
    assert_ne!(edited, default, "the default file's keys moved; update this test");
    std::fs::write(&file, &edited).unwrap();
    assert!(run(&["config", "check", file.to_str().unwrap()]).status.success());
    let mut child = Command::new(BIN)
        .args(["serve", "--config", file.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .env_remove("SIGNALBUS_LISTEN")
        .env_remove("SIGNALBUS_DATA_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    ready(&mut child, &format!("http://127.0.0.1:{port}/readyz")).await;
    assert!(data.join("admin-token").exists() || std::fs::read_dir(&data).unwrap().next().is_some());
    let _ = child.kill();
    let mut logs = String::new();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    let _ = child.wait();
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "serve logged nothing");
    for line in lines {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
    }

    // A flag wins over the file.
    let flag_port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", file.to_str().unwrap(), "--listen", &format!("127.0.0.1:{flag_port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ready(&mut child, &format!("http://127.0.0.1:{flag_port}/readyz")).await;
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn an_unknown_key_fails_the_check_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[server]\nlisten = \"127.0.0.1:7400\"\nlisten_port = 7400\n").unwrap();
    let out = run(&["config", "check", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("listen_port"), "{said}");
    std::fs::write(&file, "[limits]\nidle_timeout = \"whenever\"\n").unwrap();
    let out = run(&["config", "check", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("idle_timeout"));
}

/// The RSA public key of RFC 7517, appendix A.1, as one JWK named `kid`.
fn rfc_jwk(kid: &str) -> serde_json::Value {
    serde_json::json!({"kty": "RSA", "alg": "RS256", "kid": kid, "e": "AQAB",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"})
}

/// The JSON log line of `log` whose message is `message`, waiting up to 10 s for it.
async fn log_line(log: &std::path::Path, message: &str, nth: usize) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .collect();
        if let Some(line) = found.get(nth) {
            return line.clone();
        }
        assert!(Instant::now() < deadline, "no log line {message:?} (#{nth}) in:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn given_a_jwks_file_when_sighup_arrives_then_it_is_reloaded_and_a_broken_one_keeps_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, serde_json::json!({"keys": [rfc_jwk("a")]}).to_string()).unwrap();
    let port = free_port();
    let file = dir.path().join("signalbus.toml");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\ndata_dir = {:?}\nlog_format = \"json\"\n[auth]\njwt_jwks_file = {:?}\n",
        dir.path().join("data").to_str().unwrap(),
        jwks.to_str().unwrap()
    );
    std::fs::write(&file, config).unwrap();
    assert!(run(&["config", "check", file.to_str().unwrap()]).status.success());
    let log = dir.path().join("serve.log");
    let mut child = Command::new(BIN)
        .args(["serve", "--config", file.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .env_remove("SIGNALBUS_LISTEN")
        .env_remove("SIGNALBUS_DATA_DIR")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    ready(&mut child, &format!("http://127.0.0.1:{port}/readyz")).await;
    log_line(&log, "jwt bearer tokens accepted", 0).await;

    std::fs::write(&jwks, serde_json::json!({"keys": [rfc_jwk("a"), rfc_jwk("b")]}).to_string()).unwrap();
    testkit::signal(child.id(), "HUP");
    let line = log_line(&log, "jwks reloaded", 0).await;
    assert_eq!(line["fields"]["keys"], 2, "{line}");

    std::fs::write(&jwks, "{\"keys\": [").unwrap();
    testkit::signal(child.id(), "HUP");
    let line = log_line(&log, "jwks reload failed, keeping the keys already loaded", 0).await;
    assert!(line["fields"]["error"].as_str().unwrap().contains("not a valid JWK set"), "{line}");
    assert_eq!(line["level"], "WARN");
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP does not stop the process");
    assert_eq!(reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await.unwrap().status().as_u16(), 200);
    let _ = child.kill();
    let _ = child.wait();

    // The broken file now fails the check and the start, naming the file.
    let out = run(&["config", "check", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("jwks.json is not a valid JWK set"));
    let out = Command::new(BIN)
        .args(["serve", "--config", file.to_str().unwrap()])
        .env_remove("SIGNALBUS_LISTEN")
        .env_remove("SIGNALBUS_DATA_DIR")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a valid JWK set"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
