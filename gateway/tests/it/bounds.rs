//! What one client can make the bus hold: ack work is bounded per session (reading stops until
//! acks are recorded), and a session closed as a slow consumer lets go of its socket and its
//! queued frames at once, whether or not the client ever reads again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::support::{eventually, Bus};

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

#[tokio::test]
async fn a_slow_consumer_closed_with_1013_loses_its_socket_at_once() {
    let bus = Bus::with(|c| {
        c.outbound_buffer = 8;
        c.send_rate = None;
    })
    .await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    // Bob connects with a tiny receive buffer, reads his welcome, and then never reads again.
    let server: std::net::SocketAddr = bus.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(server).await.unwrap();
    let client_port = tcp.local_addr().unwrap().port();
    let (mut ws, _) = tokio_tungstenite::client_async(format!("{}?token={bob}", bus.ws_url), tcp).await.unwrap();
    futures::StreamExt::next(&mut ws).await.unwrap().unwrap();
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
