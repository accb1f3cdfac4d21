//! Callers waiting for something the stream tail will see (a directive ending, for
//! `GET /v1/directives/{id}?wait=S`): a `Notify` per key that exists only while someone waits,
//! woken by the tail when the key's event arrives.
//!
//! Deliberately no task and no thread per waiter: a waiter is a future parked on a `Notify`, so
//! ten thousand of them cost memory only. What counts as "ended" is the caller's to check again
//! after waking (the tail only says "something happened to this key").

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// Waiters by key.
#[derive(Debug)]
pub struct Waits<K> {
    entries: Mutex<HashMap<K, (usize, Arc<Notify>)>>,
}

impl<K> Default for Waits<K> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()) }
    }
}

impl<K: Hash + Eq + Clone> Waits<K> {
    /// Wakes every waiter of `key`, if any.
    pub fn wake(&self, key: &K) {
        if let Some((_, notify)) = self.entries.lock().expect("waits lock").get(key) {
            notify.notify_waiters();
        }
    }

    /// Waits until `key` is woken, at most `timeout`. Registered before `check` runs, so a wake
    /// between the check and the wait is not missed: returns at once when `check` is already
    /// true, else after a wake or the timeout (the caller checks again either way).
    pub async fn wait_for(&self, key: &K, timeout: Duration, check: impl AsyncFnOnce() -> bool) {
        let notify = {
            let mut entries = self.entries.lock().expect("waits lock");
            let entry = entries.entry(key.clone()).or_insert_with(|| (0, Arc::new(Notify::new())));
            entry.0 += 1;
            entry.1.clone()
        };
        let _guard = Registered { waits: self, key };
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if check().await {
            return;
        }
        let _ = tokio::time::timeout(timeout, notified).await;
    }

    /// Keys with someone waiting.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().expect("waits lock").len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drops the key's entry once its last waiter is gone.
struct Registered<'a, K: Hash + Eq> {
    waits: &'a Waits<K>,
    key: &'a K,
}

impl<K: Hash + Eq> Drop for Registered<'_, K> {
    fn drop(&mut self) {
        let mut entries = self.waits.entries.lock().expect("waits lock");
        if let Some(entry) = entries.get_mut(self.key) {
            entry.0 -= 1;
            if entry.0 == 0 {
                entries.remove(self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_ends_the_wait_and_the_entry_goes_with_its_last_waiter() {
        let waits = Arc::new(Waits::<u32>::default());
        let w = waits.clone();
        let waiter = tokio::spawn(async move {
            let started = std::time::Instant::now();
            w.wait_for(&7, Duration::from_secs(30), async || false).await;
            started.elapsed()
        });
        while waits.is_empty() {
            tokio::task::yield_now().await;
        }
        waits.wake(&8);
        waits.wake(&7);
        assert!(waiter.await.unwrap() < Duration::from_secs(10));
        assert!(waits.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_true_check_returns_at_once_and_a_silent_key_times_out() {
        let waits = Waits::<u32>::default();
        waits.wait_for(&1, Duration::from_secs(3600), async || true).await;
        let before = tokio::time::Instant::now();
        waits.wait_for(&1, Duration::from_secs(5), async || false).await;
        assert_eq!(before.elapsed(), Duration::from_secs(5));
        assert!(waits.is_empty());
    }
}
