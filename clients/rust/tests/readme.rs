//! The README's example runs (issue 29). lib.rs includes the README as the crate's docs, so
//! `cargo test --doc` compiles each ```rust block; here the "Ten lines" example — kept verbatim in
//! `support/readme_example.rs.in`, which must equal the README's block — runs against a real
//! `signalbus serve`: it sends alice a StatusUpdate and answers her Question.

mod support;

// the example's own `use`s (Client, SendRequest, Signal, json) come with it
include!("support/readme_example.rs.in");

use std::time::Duration;

use support::Bus;

#[test]
fn the_readme_block_is_the_example_run_here() {
    let readme = include_str!("../README.md");
    let block =
        readme.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).expect("a ```rust block in the README");
    assert_eq!(
        block,
        include_str!("support/readme_example.rs.in"),
        "tests/support/readme_example.rs.in must be the README's example"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_example_runs() {
    let bus = Bus::start_new().await;
    let (bot_token, alice_token) = (bus.token("bot").await, bus.token("alice").await);
    let alice = bus.connected(&alice_token).await;
    let dir = tempfile::tempdir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap(); // its spool_dir is relative (alone in this binary's runs)
    let url = bus.url.clone();
    let bot = tokio::spawn(async move { run(&url, &bot_token).await });
    let sig = alice.receive(Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        (sig.from.as_str(), sig.signal_type.as_str(), &sig.payload),
        ("bot", "StatusUpdate", &json!({"build": "green"}))
    );
    alice.ack([sig.id.as_str()]).await.unwrap();
    let answer = alice.ask("bot", "Question", json!({"q": "?"}), Duration::from_secs(10)).await.unwrap();
    assert_eq!((answer.signal_type.as_str(), &answer.payload), ("Answer", &json!({"a": 42})));
    assert!(!bot.is_finished(), "the example serves until cancelled");
    bot.abort();
    assert!(bot.await.unwrap_err().is_cancelled());
    alice.close().await;
}
