//! Handles of the per-signal series, registered once per label set and kept: `counter!` with
//! labels builds its key (a `Vec` of labels, a `String` for the type) and looks it up in the
//! recorder's registry on every call — once or twice per send and per delivery.
//!
//! Deliberately process-wide and filled on first use: the recorder must be installed before
//! the first signal is sent, as every binary here installs it at startup. A handle taken with
//! no recorder installed is a no-op and stays one.

use std::hash::Hash;
use std::sync::RwLock;

use foldhash::HashMap;

/// Handles by signal-type label (bounded: the configured types and `other`), then by the rest
/// of their labels (a few enum values).
pub(super) struct ByType<K, H> {
    map: RwLock<HashMap<String, HashMap<K, H>>>,
}

impl<K, H> Default for ByType<K, H> {
    fn default() -> Self {
        ByType { map: RwLock::new(HashMap::default()) }
    }
}

impl<K: Copy + Eq + Hash, H> ByType<K, H> {
    /// Runs `record` on the handle of (`label`, `key`), registering it with `register` first
    /// if this is the label set's first use.
    pub(super) fn with(&self, label: &str, key: K, register: impl FnOnce() -> H, record: impl FnOnce(&H)) {
        if let Some(handle) = self.map.read().unwrap_or_else(|e| e.into_inner()).get(label).and_then(|m| m.get(&key)) {
            return record(handle);
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let handle = map.entry(label.to_string()).or_default().entry(key).or_insert_with(register);
        record(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_label_set_when_used_again_then_its_handle_is_registered_once() {
        let cache: ByType<u8, u32> = ByType::default();
        let mut registered = 0;
        let mut seen = Vec::new();
        for (label, key) in [("a", 1), ("a", 1), ("a", 2), ("b", 1), ("a", 1)] {
            cache.with(
                label,
                key,
                || {
                    registered += 1;
                    registered
                },
                |h| seen.push(*h),
            );
        }
        assert_eq!(registered, 3);
        assert_eq!(seen, [1, 1, 2, 3, 1]);
    }
}
