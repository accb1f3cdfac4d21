//! A precise clock for paced sends: `sleep_until(due)` wakes within tens of µs of `due`, where
//! tokio's timer wheel (1 ms ticks) fires up to a millisecond late — a lateness every paced
//! send's latency would carry, since sends are stamped with their scheduled instant.
//!
//! One OS thread keeps the pending wake-ups in a heap and sleeps (on a condition variable, i.e.
//! an hrtimer) until the earliest. Deliberately no tokio timer, no spinning, and nothing but
//! waking: what a woken task then waits for (a worker, its window) still counts as latency.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Instant;

use tokio::sync::oneshot;

/// Wakes at `due`: at once if it has passed, else within the OS's timer slack of it.
pub async fn sleep_until(due: tokio::time::Instant) {
    let due = due.into_std();
    if due <= Instant::now() {
        return;
    }
    let (tx, rx) = oneshot::channel();
    pacer().add(due, tx);
    // A dropped sender cannot happen (the thread never exits); either way, the wait is over.
    let _ = rx.await;
}

struct Pending {
    due: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Pending>>,
    seq: u64,
}

struct Pacer {
    queue: Mutex<Queue>,
    changed: Condvar,
}

fn pacer() -> &'static Pacer {
    static PACER: OnceLock<&'static Pacer> = OnceLock::new();
    PACER.get_or_init(|| {
        let p: &'static Pacer = Box::leak(Box::new(Pacer { queue: Mutex::default(), changed: Condvar::new() }));
        std::thread::Builder::new().name("bench-pacer".into()).spawn(move || p.run()).expect("spawn the pacer thread");
        p
    })
}

impl Pacer {
    fn add(&self, due: Instant, wake: oneshot::Sender<()>) {
        let mut q = self.queue.lock().expect("pacer lock");
        // The thread needs waking only when this is now the earliest wake-up.
        let earliest = q.heap.peek().is_none_or(|Reverse(p)| due < p.due);
        q.seq += 1;
        let seq = q.seq;
        q.heap.push(Reverse(Pending { due, seq, wake }));
        drop(q);
        if earliest {
            self.changed.notify_one();
        }
    }

    fn run(&self) {
        let mut q = self.queue.lock().expect("pacer lock");
        loop {
            let now = Instant::now();
            while q.heap.peek().is_some_and(|Reverse(p)| p.due <= now) {
                let Reverse(p) = q.heap.pop().expect("peeked");
                let _ = p.wake.send(());
            }
            q = match q.heap.peek() {
                Some(Reverse(p)) => {
                    let wait = p.due - now;
                    self.changed.wait_timeout(q, wait).expect("pacer lock").0
                }
                None => self.changed.wait(q).expect("pacer lock"),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn wakes_in_order_and_not_before_due() {
        let base = tokio::time::Instant::now();
        let dues: Vec<_> = [7u64, 3, 5, 1].iter().map(|ms| base + Duration::from_millis(*ms)).collect();
        let woken = futures::future::join_all(dues.iter().map(|&due| async move {
            sleep_until(due).await;
            tokio::time::Instant::now()
        }))
        .await;
        for (due, at) in dues.iter().zip(&woken) {
            assert!(at >= due, "woke {:?} before its due", *due - *at);
        }
    }
}
