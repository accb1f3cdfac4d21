//! The listener's TLS, black-box: `signalbus serve --tls-cert --tls-key` with a self-signed
//! certificate made here answers HTTPS, accepts a `wss://` session (welcome frame and all) from
//! a client that trusts that certificate, and no longer speaks plain HTTP on the port.
//!
//! Deliberately does not test certificate rotation (there is none: a restart reloads) or the
//! reverse-proxy setup docs/deploy.md also describes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use tokio_tungstenite::Connector;

mod roles;

use roles::{spawn, ADMIN};

/// A self-signed certificate for 127.0.0.1 and localhost, written as PEM files into `dir`.
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, rcgen::Certificate) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key, made.cert)
}

#[tokio::test]
async fn serve_speaks_https_and_wss_with_the_given_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path, cert) = self_signed(dir.path());
    let data = dir.path().join("data");
    let extra = ["--tls-cert", cert_path.to_str().unwrap(), "--tls-key", key_path.to_str().unwrap()];
    let mut p = spawn("serve", &extra, &data);
    let https = p.base.replace("http://", "https://");

    let trusted = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("serve exited early: {status}");
        }
        match trusted.get(format!("{https}/readyz")).send().await {
            Ok(r) if r.status().is_success() => break,
            _ => assert!(Instant::now() < deadline, "{https}/readyz never answered 200"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // An authenticated API call over HTTPS: registering an agent.
    let r = trusted
        .post(format!("{https}/v1/agents"))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({"tenant": "default", "identity": "tls-alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let token = r.json::<serde_json::Value>().await.unwrap()["token"].as_str().unwrap().to_string();

    // A client that does not trust the certificate is refused by its own TLS check.
    let untrusting = reqwest::Client::new();
    assert!(untrusting.get(format!("{https}/readyz")).send().await.is_err(), "an unknown CA was accepted");
    // Plain HTTP on the TLS port gets no HTTP answer.
    let plain = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let answered = plain.get(format!("{}/readyz", p.base)).send().await;
    assert!(answered.is_err() || !answered.unwrap().status().is_success(), "plain HTTP served on the TLS port");

    // wss:// with the certificate trusted: the handshake and the session's welcome frame.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(cert.der().to_vec())).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let url = format!("{}/v1/ws?token={token}&kind=daemon", https.replace("https://", "wss://"));
    let (mut ws, response) = tokio_tungstenite::connect_async_tls_with_config(
        url.as_str(),
        None,
        false,
        Some(Connector::Rustls(Arc::new(client))),
    )
    .await
    .expect("wss handshake");
    assert_eq!(response.status().as_u16(), 101);
    let welcome = roles::next_json(&mut ws).await.expect("a welcome frame over wss");
    assert_eq!(welcome["op"], "welcome", "{welcome}");
}
