//! What one client can make the bus hold: ack work is bounded per session (reading stops until
//! acks are recorded), and a session closed as a slow consumer lets go of its socket and its
//! queued frames at once, whether or not the client ever reads again — and when it does read,
//! it finds the 1013 close frame right behind the pushes the socket had taken, while its next
//! session gets every signal.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::collections::HashSet;

use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::support::{eventually, Bus, WAIT};

/// Ack ids one session may have waiting (docs/protocol.md): a batch being recorded plus one
/// frame; a frame read when just under that adds one more frame's worth.
const MOST_PENDING: usize = 3 * 1000;

#[tokio::test]
async fn an_ack_flood_waits_in_the_socket_not_in_the_bus() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut ws = bus.connect(&alice).await;
    let peak = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (gw, peak) = (bus.gw.clone(), peak.clone());
        tokio::spawn(async move {
            loop {
                peak.fetch_max(gw.acks_pending(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
    };
    // One frame carries at most 1,000 ids.
    let too_many: Vec<String> = (0..1001).map(|_| Uuid::new_v4().to_string()).collect();
    let r = ws.request(json!({"op": "ack", "signal_ids": too_many})).await;
    assert_eq!(r["error"]["code"], "invalid_request", "{r}");
    assert_eq!(r["error"]["message"], "signal_ids must hold 1 to 1000 ids");
    for _ in 0..50 {
        let ids: Vec<String> = (0..1000).map(|_| Uuid::new_v4().to_string()).collect();
        ws.send_text(json!({"op": "ack", "signal_ids": ids}).to_string()).await;
    }
    // Answered once the bus has read every ack frame before it.
    let r = ws.request(json!({"op": "recall", "signal_id": Uuid::new_v4()})).await;
    assert_eq!(r["result"]["outcome"], "not_found", "{r}");
    let drained = eventually(Duration::from_secs(60), || async { bus.gw.acks_pending() == 0 }).await;
    sampler.abort();
    assert!(drained, "every ack recorded");
    let peak = peak.load(Ordering::Relaxed);
    assert!(peak <= MOST_PENDING, "{peak} ack ids were waiting at once");
    assert!(peak > 0, "the sampler saw the flood");
}

/// The kernel's state of the server's side of a loopback connection (`/proc/net/tcp`), e.g.
/// `01` established, `04` fin-wait-1; `None` once the socket is gone.
fn server_side_state(server_port: u16, client_port: u16) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |addr: &str| addr.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (port(f[1]) == Some(server_port) && port(f[2]) == Some(client_port)).then(|| f[3].to_string())
    })
}

/// A WebSocket session of `token` through a 4 KiB receive buffer, its welcome read: the socket,
/// the server's address and the client's port (to find the connection in `/proc/net/tcp`).
async fn slow_reader(
    bus: &Bus,
    token: &str,
) -> (tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, std::net::SocketAddr, u16) {
    let server: std::net::SocketAddr = bus.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(server).await.unwrap();
    let client_port = tcp.local_addr().unwrap().port();
    let (mut ws, _) = tokio_tungstenite::client_async(format!("{}?token={token}", bus.ws_url), tcp).await.unwrap();
    futures::StreamExt::next(&mut ws).await.unwrap().unwrap();
    (ws, server, client_port)
}

/// A bus whose sessions queue at most 8 frames and whose sends are not rate limited, with alice
/// and bob registered.
async fn small_queue_bus() -> (Bus, String, String) {
    let bus = Bus::with(|c| {
        c.outbound_buffer = 8;
        c.send_rate = None;
    })
    .await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    (bus, alice, bob)
}

#[tokio::test]
async fn a_slow_consumer_closed_with_1013_loses_its_socket_at_once() {
    let (bus, alice, bob) = small_queue_bus().await;
    // Bob connects with a tiny receive buffer, reads his welcome, and then never reads again.
    let (ws, server, client_port) = slow_reader(&bus, &bob).await;
    assert_eq!(server_side_state(server.port(), client_port).as_deref(), Some("01"));

    let payload = json!({ "pad": "z".repeat(60 * 1024) });
    let mut sends = 0;
    while bus.gw.local_sessions() > 0 && sends < 2000 {
        let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": payload})).await;
        assert_eq!(s, 200, "{v}");
        sends += 1;
    }
    assert_eq!(bus.gw.local_sessions(), 0, "closed as a slow consumer after {sends} sends");
    // The server lets go of its side without waiting for bob to read (he never will).
    let released = eventually(Duration::from_secs(10), || async {
        server_side_state(server.port(), client_port).is_none_or(|s| s != "01")
    })
    .await;
    assert!(released, "the server still holds bob's socket: {:?}", server_side_state(server.port(), client_port));
    drop(ws);
}

#[tokio::test]
async fn a_slow_consumer_reads_its_pushes_then_1013_and_its_next_session_gets_every_signal() {
    let (bus, alice, bob) = small_queue_bus().await;
    // Bob reads nothing through a 4 KiB receive buffer while 4 KiB signals are pushed to him.
    let (mut ws, server, client_port) = slow_reader(&bus, &bob).await;

    let mut sent = HashSet::new();
    while bus.gw.local_sessions() > 0 && sent.len() < 2500 {
        sent.insert(send_4k(&bus, &alice).await);
    }
    assert_eq!(bus.gw.local_sessions(), 0, "closed as a slow consumer after {} sends", sent.len());
    // More arrive while bob has no session, and the server lets go of his socket unread.
    for _ in 0..50 {
        sent.insert(send_4k(&bus, &alice).await);
    }
    let released = eventually(Duration::from_secs(10), || async {
        server_side_state(server.port(), client_port).is_none_or(|s| s != "01")
    })
    .await;
    assert!(released, "the server still holds bob's socket");

    // Now bob reads: pushes, then the close frame that says he was too slow.
    let mut pushes = 0;
    let close = loop {
        match tokio::time::timeout(WAIT, ws.next()).await.expect("the socket ends") {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                assert_eq!(v["op"], "signal", "{v}");
                pushes += 1;
            }
            Some(Ok(Message::Close(frame))) => break frame.map(|f| u16::from(f.code)),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("after {pushes} pushes the socket ended without a close frame: {e}"),
            None => panic!("after {pushes} pushes the socket ended without a close frame"),
        }
    };
    assert_eq!(close, Some(1013), "after {pushes} pushes");
    assert!(pushes < sent.len(), "{pushes} pushes of {} signals", sent.len());

    // Nothing is lost: bob's next session gets every signal.
    let mut next = bus.connect(&bob).await;
    let mut got = HashSet::new();
    while got.len() < sent.len() {
        let Some(signal) = next.next_signal(WAIT).await else { break };
        got.insert(signal["signal_id"].as_str().or(signal["id"].as_str()).unwrap().to_string());
    }
    assert_eq!(got, sent, "{} of {} signals reached the next session", got.len(), sent.len());
}

/// Sends bob a signal with 4 KiB of payload from `alice`; returns its id.
async fn send_4k(bus: &Bus, alice: &str) -> String {
    let payload = json!({ "pad": "z".repeat(4 * 1024) });
    let (s, v) = bus.send(alice, json!({"to": "bob", "type": "StatusUpdate", "payload": payload})).await;
    assert_eq!(s, 200, "{v}");
    v["signal_id"].as_str().unwrap().to_string()
}
