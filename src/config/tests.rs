//! Tests of the config file: loading, validation, the `[auth]` section, and a `[server]` key for
//! every server flag. Deliberately nothing of what the values do: `serve.rs` owns that.

use super::*;

#[test]
fn overrides_load_from_toml() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "[types.Deploy]\ndelivery_class = \"sync\"\nttl_seconds = 600\ncategory = \"BLOCKER\"\n")
        .unwrap();
    let c = load(Some(&p)).unwrap();
    assert_eq!(c.types.get("Deploy").ttl_seconds, 600);
    assert_eq!(c.send_rate, Some(gateway::SendRate::default()));
    std::fs::write(&p, "[types.Bad]\ndelivery_class = \"sometimes\"\nttl_seconds = 1\ncategory = \"INFO\"\n").unwrap();
    assert!(load(Some(&p)).is_err());
    std::fs::write(&p, "[limits]\nsends_per_second = 0\n").unwrap();
    assert_eq!(load(Some(&p)).unwrap().send_rate, None);
    std::fs::write(&p, "[limits]\nsends_per_second = 10\n").unwrap();
    assert_eq!(load(Some(&p)).unwrap().send_rate, Some(gateway::SendRate { per_second: 10, burst: 20 }));
    assert!(load(None).unwrap().send_rate.is_some(), "limited by default");
    std::fs::write(&p, "[limits]\nfacts_per_second = 0\nmax_connections = 300\nidle_timeout = \"5s\"\n").unwrap();
    let c = load(Some(&p)).unwrap();
    assert_eq!(c.fact_rate, None);
    assert_eq!(c.connections.max_connections, 300);
    assert_eq!(c.connections.idle_timeout, std::time::Duration::from_secs(5));
    assert_eq!(c.connections.header_read_timeout, gateway::ConnLimits::default().header_read_timeout);
    std::fs::write(&p, "[limits]\nheader_read_timeout = \"soon\"\n").unwrap();
    assert!(load(Some(&p)).is_err());
    assert_eq!(load(None).unwrap().fact_rate, Some(gateway::FactRate::default()));
}

/// Every server flag but `--config` has a `[server]` key, and the default file names them all.
#[test]
fn every_server_flag_has_a_key() {
    use clap::CommandFactory;
    let cli = crate::cli::Cli::command();
    let serve = cli.find_subcommand("serve").unwrap();
    let flags: Vec<String> =
        serve.get_arguments().map(|a| a.get_id().to_string()).filter(|id| id != "config" && id != "help").collect();
    assert_eq!(flags, SERVER_KEYS, "ServerArgs and SERVER_KEYS differ");
    let dir = tempfile::tempdir().unwrap();
    for key in SERVER_KEYS {
        assert!(
            DEFAULT_FILE.lines().any(|l| l.trim_start_matches("# ").starts_with(&format!("{key} = "))),
            "config.default.toml lacks {key}"
        );
        // Each key is accepted by the file's reader (a misspelt field would be unknown).
        let p = dir.path().join("k.toml");
        std::fs::write(&p, format!("[server]\n{key} = {}\n", sample(key))).unwrap();
        check(&p).unwrap_or_else(|e| {
            if !matches!(*key, "tls_cert" | "tls_key" | "nats_url" | "database_url") {
                panic!("{key}: {e:#}")
            }
        });
    }
    let p = dir.path().join("d.toml");
    std::fs::write(&p, DEFAULT_FILE).unwrap();
    check(&p).unwrap();
    std::fs::write(&p, "[server]\nlisten_on = \"x\"\n").unwrap();
    assert!(format!("{:#}", check(&p).unwrap_err()).contains("listen_on"));
}

/// The RSA public key of RFC 7517, appendix A.1: a JWKS the verifier can load.
const JWKS: &str = r#"{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"2011-04-29","e":"AQAB",
    "n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}]}"#;

#[test]
fn given_no_auth_keys_when_loaded_then_no_jwt_is_accepted() {
    assert!(load(None).unwrap().jwt_verifier().unwrap().is_none());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(
        &p, "[auth]
",
    )
    .unwrap();
    let c = load(Some(&p)).unwrap();
    assert!(c.jwt.is_none() && c.jwt_verifier().unwrap().is_none());
}

#[test]
fn given_an_auth_section_when_loaded_then_its_jwt_settings_build_a_verifier() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, JWKS).unwrap();
    let p = dir.path().join("c.toml");
    let secret = "x".repeat(32);
    std::fs::write(&p, format!("[auth]\njwt_hs256_secret = \"{secret}\"\n")).unwrap();
    let settings = load(Some(&p)).unwrap().jwt.unwrap();
    assert_eq!(settings.hs256_secret.as_deref(), Some(secret.as_str()));
    assert_eq!(settings.leeway, Duration::from_secs(60), "the default leeway");
    assert_eq!((settings.jwks_file, settings.issuer, settings.audience), (None, None, None));
    assert!(load(Some(&p)).unwrap().jwt_verifier().unwrap().is_some());
    check(&p).unwrap();

    let text = format!(
        "[auth]\njwt_jwks_file = {:?}\njwt_leeway_seconds = 5\njwt_issuer = \"https://idp\"\njwt_audience = \"sb\"\n",
        jwks.to_str().unwrap()
    );
    std::fs::write(&p, text).unwrap();
    let c = load(Some(&p)).unwrap();
    let settings = c.jwt.as_ref().unwrap();
    assert_eq!(settings.jwks_file.as_deref(), Some(jwks.as_path()));
    assert_eq!(settings.leeway, Duration::from_secs(5));
    assert_eq!((settings.issuer.as_deref(), settings.audience.as_deref()), (Some("https://idp"), Some("sb")));
    let verifier = c.jwt_verifier().unwrap().unwrap();
    assert_eq!(verifier.reload().unwrap(), 1);
    check(&p).unwrap();
    assert!(!format!("{c:?}").contains("xxxxxxxx"), "the secret never shows in Debug");
}

#[test]
fn given_bad_auth_settings_when_checked_then_each_fails_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    let fails = |text: String| -> String {
        std::fs::write(&p, text).unwrap();
        format!("{:#}", check(&p).unwrap_err())
    };
    let e = fails("[auth]\njwt_hs256_secret = \"too short\"\n".into());
    assert!(e.contains("jwt_hs256_secret must be at least 32 bytes"), "{e}");
    let e = fails("[auth]\njwt_issuer = \"https://idp\"\n".into());
    assert!(e.contains("jwt needs jwt_hs256_secret or jwt_jwks_file"), "{e}");
    let missing = dir.path().join("absent.json");
    let e = fails(format!("[auth]\njwt_jwks_file = {:?}\n", missing.to_str().unwrap()));
    assert!(e.contains("cannot read the jwks file") && e.contains("absent.json"), "{e}");
    assert!(e.starts_with(&format!("invalid config {}: [auth]", p.display())), "{e}");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, "{\"keys\": [").unwrap();
    let e = fails(format!("[auth]\njwt_jwks_file = {:?}\n", jwks.to_str().unwrap()));
    assert!(e.contains("is not a valid JWK set"), "{e}");
    std::fs::write(&jwks, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).unwrap();
    let e = fails(format!("[auth]\njwt_jwks_file = {:?}\n", jwks.to_str().unwrap()));
    assert!(e.contains("no usable RS256 or ES256 signing key"), "{e}");
    let e = fails(format!("[auth]\njwt_hs256_secret = \"{}\"\njwt_leeway_seconds = 7200\n", "x".repeat(32)));
    assert!(e.contains("jwt_leeway_seconds must be at most 3600 seconds"), "{e}");
    let e = fails("[auth]\njwt_secret = \"x\"\n".into());
    assert!(e.contains("jwt_secret"), "an unknown key is named: {e}");
    // Loading alone does not read the JWKS file: only the roles that serve the gateway do.
    std::fs::write(&p, format!("[auth]\njwt_jwks_file = {:?}\n", missing.to_str().unwrap())).unwrap();
    let c = load(Some(&p)).unwrap();
    assert!(c.jwt.is_some() && c.jwt_verifier().is_err());
}

fn sample(key: &str) -> &'static str {
    match key {
        "replicas" => "1",
        "stale_after" | "sweep_interval" | "retention" | "archive_after" => "\"5s\"",
        "log_format" => "\"json\"",
        _ => "\"x\"",
    }
}
