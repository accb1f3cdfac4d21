//! The redaction guard (CONTRACT §4): secrets in a payload or a plugin fact's state are replaced
//! before anything is stored.
//!
//! Deliberately does not judge values, only key names: a value is a secret because of its key.
//! A key is read the way people spell the same name (`apiKey`, `API-Key`, ` api_key `), so the
//! guard does not depend on one naming convention.

use serde_json::Value;

/// Secret names, after normalisation (`normalize`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_token",
    "refresh_token",
    "authorization",
    "private_key",
    "client_secret",
];

/// Endings that make any normalised key a secret (`db_password`, `github_access_token`).
/// `_token` alone is not one of them on purpose: `next_page_token` or `max_token` are not secrets.
const SECRET_SUFFIXES: &[&str] =
    &["_password", "_secret", "_api_key", "_private_key", "_access_token", "_refresh_token", "_auth_token"];

pub const REDACTED: &str = "[REDACTED]";

/// Whether the value under `key` is a secret.
///
/// The key is trimmed, `-` is read as `_`, and it is compared lowercased twice: as written
/// (`PassWord` is `password`, as before camelCase was read) and with camelCase boundaries read
/// as `_` (`accessToken` is `access_token`, `APIKey` is `api_key`). Either reading matching a
/// name or an ending makes it a secret.
pub fn is_secret(key: &str) -> bool {
    if !may_be_secret(key) {
        return false;
    }
    let key = key.trim();
    let (plain, split) = (normalize(key, false), normalize(key, true));
    [plain, split].iter().any(|k| SECRET_KEYS.contains(&k.as_str()) || SECRET_SUFFIXES.iter().any(|s| k.ends_with(s)))
}

/// What every secret name and ending contains once `-` and `_` are dropped and it is lowercased.
const SECRET_STEMS: &[&str] = &["passw", "secret", "token", "key", "authorization"];

/// A cheap first look (one short string, no per-reading copies): `false` only for a key that
/// no reading of `is_secret` can match. Either reading, with its `_` dropped, is `key`
/// lowercased with `-` and `_` dropped — and every name and ending there contains a stem. Most
/// payload keys stop here.
fn may_be_secret(key: &str) -> bool {
    let folded: String = key.chars().filter(|c| !matches!(c, '-' | '_')).flat_map(char::to_lowercase).collect();
    SECRET_STEMS.iter().any(|stem| folded.contains(stem))
}

/// Lowercases `key` with `-` read as `_`; with `camel`, a `_` also goes in at each camelCase
/// boundary: lower or digit → upper (`apiKey`), and the last capital of an acronym that starts
/// a word (`APIKey` → `api_key`).
fn normalize(key: &str, camel: bool) -> String {
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::with_capacity(key.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if camel && c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower);
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
        }
        match c {
            '-' => out.push('_'),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// Replaces, at any depth, the value of every secret key by `"[REDACTED]"` and returns the
/// dotted paths replaced (keys as written, array elements by index), in document order.
pub fn redact(payload: &mut Value) -> Vec<String> {
    let mut paths = Vec::new();
    walk(payload, &mut String::new(), &mut paths);
    paths
}

fn walk(value: &mut Value, path: &mut String, out: &mut Vec<String>) {
    let mark = path.len();
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                if is_secret(key) {
                    *child = Value::String(REDACTED.to_string());
                    out.push(path.clone());
                } else {
                    walk(child, path, out);
                }
                path.truncate(mark);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&i.to_string());
                walk(child, path, out);
                path.truncate(mark);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One row per key form: the key as a sender might write it, and whether it is a secret.
    const KEYS: &[(&str, bool)] = &[
        // The contract's names, in any case.
        ("password", true),
        ("Password", true),
        ("PASSWORD", true),
        ("PassWord", true),
        ("passwd", true),
        ("secret", true),
        ("token", true),
        ("TOKEN", true),
        ("api_key", true),
        ("apikey", true),
        ("APIKEY", true),
        ("access_token", true),
        ("refresh_token", true),
        ("authorization", true),
        ("Authorization", true),
        ("private_key", true),
        ("client_secret", true),
        // Surrounding spaces, `-` and camelCase read as `_`.
        (" password ", true),
        ("\tsecret\n", true),
        ("apiKey", true),
        ("ApiKey", true),
        ("APIKey", true),
        ("API-Key", true),
        ("api-key", true),
        (" Client-Secret ", true),
        ("clientSecret", true),
        ("ClientSecret", true),
        ("accessToken", true),
        ("AccessToken", true),
        ("access-token", true),
        ("refreshToken", true),
        ("privateKey", true),
        ("PRIVATE-KEY", true),
        ("PrivateKEY", true),
        // Endings, after the same reading.
        ("db_password", true),
        ("dbPassword", true),
        ("DB_PASSWORD", true),
        ("db-password", true),
        ("MyPASSWORD", true),
        ("aws_secret", true),
        ("awsSecret", true),
        ("stripe_api_key", true),
        ("stripeApiKey", true),
        ("myAPIKey", true),
        ("ssh_private_key", true),
        ("sshPrivateKey", true),
        ("github-access-token", true),
        ("githubAccessToken", true),
        ("oauth_refresh_token", true),
        ("x_auth_token", true),
        ("xAuthToken", true),
        ("X-Auth-Token", true),
        ("_password", true),
        // Not secrets: other words, other endings, secrets only as a prefix or inside.
        ("tokenizer", false),
        ("tokens", false),
        ("password_hint", false),
        ("passwordPolicy", false),
        ("secretary", false),
        ("next_page_token", false),
        ("nextPageToken", false),
        ("max_token", false),
        ("auth_token_ttl", false),
        ("author", false),
        ("key", false),
        ("api", false),
        ("monkey", false),
        ("pass word", false),
        ("host", false),
        ("", false),
        ("   ", false),
    ];

    #[test]
    fn the_first_look_lets_every_secret_name_and_ending_through() {
        let endings = SECRET_SUFFIXES.iter().map(|s| format!("db{s}"));
        for key in SECRET_KEYS.iter().map(|k| k.to_string()).chain(endings) {
            for form in [key.clone(), key.to_uppercase(), key.replace('_', "-"), camel(&key), format!(" {key} ")] {
                assert!(may_be_secret(&form), "{form} must reach the full check");
                assert!(is_secret(&form), "{form} is a secret");
            }
        }
        assert!(!may_be_secret("name") && !may_be_secret("db") && !may_be_secret("next_page"));
    }

    /// `snake_case` as camelCase: `api_key` → `apiKey`.
    fn camel(key: &str) -> String {
        let mut up = false;
        key.chars()
            .filter_map(|c| match c {
                '_' => {
                    up = true;
                    None
                }
                c if up => {
                    up = false;
                    Some(c.to_ascii_uppercase())
                }
                c => Some(c),
            })
            .collect()
    }

    #[test]
    fn every_key_form_is_judged_as_the_contract_says() {
        let wrong: Vec<String> = KEYS
            .iter()
            .filter(|(key, secret)| is_secret(key) != *secret)
            .map(|(key, secret)| format!("{key:?}: expected secret={secret}"))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn every_secret_key_form_is_redacted_in_a_payload_with_its_path_as_written() {
        for (key, secret) in KEYS {
            let mut p = json!({"outer": {*key: "hunter2", "keep": 1}});
            let paths = redact(&mut p);
            if *secret {
                assert_eq!(p["outer"][*key], REDACTED, "{key:?}");
                assert_eq!(paths, vec![format!("outer.{key}")], "{key:?}");
            } else {
                assert_eq!(p["outer"][*key], "hunter2", "{key:?}");
                assert!(paths.is_empty(), "{key:?}: {paths:?}");
            }
            assert_eq!(p["outer"]["keep"], 1);
        }
    }

    #[test]
    fn given_nested_secrets_when_redacted_then_values_are_replaced_and_paths_reported() {
        let mut p = json!({
            "Password": "hunter2",
            "db": {"API_KEY": "k", "host": "h"},
            "list": [{"token": "t"}, {"ok": 1}, {"dbPassword": "p"}],
            "tokenizer": "kept"
        });
        let paths = redact(&mut p);
        assert_eq!(p["Password"], REDACTED);
        assert_eq!(p["db"]["API_KEY"], REDACTED);
        assert_eq!(p["db"]["host"], "h");
        assert_eq!(p["list"][0]["token"], REDACTED);
        assert_eq!(p["list"][2]["dbPassword"], REDACTED);
        assert_eq!(p["tokenizer"], "kept");
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(sorted, vec!["Password", "db.API_KEY", "list.0.token", "list.2.dbPassword"]);
    }

    #[test]
    fn given_a_clean_payload_when_redacted_then_nothing_changes() {
        let mut p = json!({"a": [1, 2, {"b": "c"}], "next_page_token": "p2"});
        let before = p.clone();
        assert!(redact(&mut p).is_empty());
        assert_eq!(p, before);
    }

    #[test]
    fn secret_objects_are_replaced_whole() {
        let mut p = json!({"clientSecret": {"nested": 1}});
        assert_eq!(redact(&mut p), vec!["clientSecret"]);
        assert_eq!(p["clientSecret"], REDACTED);
    }
}
