//! Scopes: what a token may do (CONTRACT §17) — `send`, `receive`, `recall`, `facts`,
//! `directives`, `read` — as a small set that parses, prints and checks.
//!
//! Deliberately knows no route, operation or tool: which call needs which scope is the
//! gateway's one table (`gateway::scopes`); this is only the vocabulary and its set algebra.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One permission a token may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Send,
    Receive,
    Recall,
    Facts,
    Directives,
    Read,
}

impl Scope {
    /// Every scope, in the contract's order (also the order a set prints in).
    pub const ALL: [Scope; 6] =
        [Scope::Send, Scope::Receive, Scope::Recall, Scope::Facts, Scope::Directives, Scope::Read];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Send => "send",
            Scope::Receive => "receive",
            Scope::Recall => "recall",
            Scope::Facts => "facts",
            Scope::Directives => "directives",
            Scope::Read => "read",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of scopes. Serialized as a list of names, so events stay readable and a scope added
/// later is an addition, not a renumbering.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ScopeSet(u8);

impl ScopeSet {
    /// Every scope: the registration token's, and an issued token's when none are named.
    pub fn all() -> Self {
        Scope::ALL.into_iter().collect()
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn is_all(self) -> bool {
        self == Self::all()
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// Parses scope names; the first unknown one is the error.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        names.into_iter().map(|n| Scope::parse(n).ok_or_else(|| n.to_string())).collect()
    }

    /// A JWT `scope` claim: names separated by spaces. Names the bus does not know are
    /// ignored there (an identity provider's token carries scopes of other services too).
    pub fn from_claim(claim: &str) -> Self {
        claim.split_ascii_whitespace().filter_map(Scope::parse).collect()
    }

    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Scope::as_str).collect()
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        ScopeSet(iter.into_iter().fold(0, |acc, s| acc | s.bit()))
    }
}

impl fmt::Debug for ScopeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for ScopeSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for ScopeSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A name this binary does not know (written by a newer one) grants nothing here.
        let names = Vec::<String>::deserialize(d)?;
        Ok(names.iter().filter_map(|n| Scope::parse(n)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_names_when_parsed_then_the_set_holds_them_in_contract_order() {
        let set = ScopeSet::parse(["read", "send"]).unwrap();
        assert_eq!(set.names(), vec!["send", "read"]);
        assert!(set.contains(Scope::Send) && !set.contains(Scope::Receive));
        assert_eq!(ScopeSet::parse(["send", "admin"]), Err("admin".to_string()));
        assert!(ScopeSet::all().is_all());
        assert_eq!(ScopeSet::all().names().len(), 6);
    }

    #[test]
    fn given_a_claim_with_foreign_scopes_when_read_then_only_ours_count() {
        let set = ScopeSet::from_claim("openid  send profile receive");
        assert_eq!(set.names(), vec!["send", "receive"]);
        assert!(ScopeSet::from_claim("openid").is_empty());
    }

    #[test]
    fn given_a_set_when_encoded_then_it_round_trips_as_names() {
        let set = ScopeSet::parse(["recall", "facts"]).unwrap();
        let bytes = rmp_serde::to_vec_named(&set).unwrap();
        assert_eq!(rmp_serde::from_slice::<ScopeSet>(&bytes).unwrap(), set);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["recall","facts"]"#);
    }
}
