//! The metric contract the dashboards may query (CONTRACT §11, the directive and fan-out series
//! of §14 and §15, plus the sweeper's expiry-lag histogram), a minimal PromQL reader that finds every series selector, label matcher and
//! grouping label in an expression, and the promtool rules file that lets `promtool check
//! rules` parse every expression for real.
//!
//! Deliberately not a PromQL parser: it tokenizes, balances brackets and classifies
//! identifiers, which is enough to catch a misspelt series or label. Full syntax checking is
//! promtool's job when it is installed.

use std::collections::BTreeSet;

/// How a contract series is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// Exposed as `<name>_bucket` (with `le`), `<name>_sum` and `<name>_count`.
    Histogram,
}

/// Every series a dashboard may reference: CONTRACT §11, the series of §14 (directives) and §15
/// (fan-out), §17 (auth failures), plus `signalbus_sweeper_expiry_lag_seconds` (the sweeper's on-time histogram)
/// and the gateways' back-pressure: `signalbus_backpressure_pacing_share` (where it paces from) and
/// `signalbus_backpressure_wait_seconds` (what sends waited for it).
pub const ALLOWED_SERIES: &[(&str, Kind, &[&str])] = &[
    (
        "signalbus_signals_sent_total",
        Kind::Counter,
        &["signal_type", "delivery_class", "recipient_state", "publish_path"],
    ),
    ("signalbus_signals_bounced_total", Kind::Counter, &["signal_type", "recipient_state"]),
    ("signalbus_unknown_recipient_rejections_total", Kind::Counter, &["signal_type", "sender"]),
    ("signalbus_signals_delivered_total", Kind::Counter, &["signal_type", "via"]),
    ("signalbus_signals_expired_total", Kind::Counter, &["signal_type", "reason"]),
    ("signalbus_signal_recalls_total", Kind::Counter, &["outcome"]),
    ("signalbus_time_to_delivery_seconds", Kind::Histogram, &["signal_type", "via"]),
    ("signalbus_sessions", Kind::Gauge, &["kind", "surface"]),
    ("signalbus_disconnects_total", Kind::Counter, &["reason"]),
    ("signalbus_event_append_seconds", Kind::Histogram, &[]),
    ("signalbus_projector_lag_events", Kind::Gauge, &["projection"]),
    ("signalbus_projector_applied_events_total", Kind::Counter, &["projection"]),
    ("signalbus_sweeper_runs_total", Kind::Counter, &[]),
    ("signalbus_sweeper_last_run_timestamp_seconds", Kind::Gauge, &[]),
    ("signalbus_sweeper_expiry_lag_seconds", Kind::Histogram, &[]),
    ("signalbus_directives_created_total", Kind::Counter, &["directive_type"]),
    ("signalbus_directives_finished_total", Kind::Counter, &["directive_type", "outcome"]),
    ("signalbus_directive_duration_seconds", Kind::Histogram, &["directive_type", "outcome"]),
    ("signalbus_fanouts_total", Kind::Counter, &["signal_type"]),
    ("signalbus_auth_failures_total", Kind::Counter, &["reason"]),
    ("signalbus_backpressure_pacing_share", Kind::Gauge, &[]),
    ("signalbus_backpressure_wait_seconds", Kind::Histogram, &["gate"]),
];

/// Labels Prometheus attaches to every scraped series.
pub const TARGET_LABELS: &[&str] = &["job", "instance"];

/// The labels a series may carry, or `None` when it is not in the allow-list.
pub fn series_labels(name: &str) -> Option<Vec<&'static str>> {
    for (base, kind, labels) in ALLOWED_SERIES {
        let mut with_target: Vec<&'static str> = labels.to_vec();
        with_target.extend_from_slice(TARGET_LABELS);
        match kind {
            Kind::Counter | Kind::Gauge if name == *base => return Some(with_target),
            Kind::Histogram => {
                if let Some(suffix) = name.strip_prefix(base) {
                    match suffix {
                        "_bucket" => {
                            with_target.push("le");
                            return Some(with_target);
                        }
                        "_sum" | "_count" => return Some(with_target),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// PromQL functions and aggregation operators the dashboards may call.
const FUNCTIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "topk",
    "bottomk",
    "quantile",
    "stddev",
    "stdvar",
    "group",
    "count_values",
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "histogram_quantile",
    "clamp_min",
    "clamp_max",
    "clamp",
    "abs",
    "ceil",
    "floor",
    "round",
    "time",
    "vector",
    "scalar",
    "sort",
    "sort_desc",
    "label_replace",
    "label_join",
    "absent",
    "absent_over_time",
    "changes",
    "resets",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "sum_over_time",
    "count_over_time",
    "last_over_time",
    "timestamp",
];
/// Keywords that take a parenthesised label list.
const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
/// Other keywords.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];

/// What an expression references.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct References {
    /// Each selector's metric name with the label names its matchers use.
    pub selectors: Vec<(String, Vec<String>)>,
    /// Labels named in `by (...)`, `without (...)`, `on (...)` and the like.
    pub grouping: BTreeSet<String>,
    /// Every `label="value"` equality matcher, as (series, label, value): the values a dashboard
    /// pins, which a real scrape can confirm.
    pub equalities: Vec<(String, String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A string literal's content (escapes kept as written: dashboards pin plain words).
    Str(String),
    Num,
    Punct(char),
    Op(String),
}

fn tokenize(expr: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            let q = c;
            i += 1;
            let start = i;
            while i < chars.len() && chars[i] != q {
                if chars[i] == '\\' && q != '`' {
                    i += 1;
                }
                i += 1;
            }
            if i >= chars.len() {
                return Err("unterminated string".into());
            }
            toks.push(Tok::Str(chars[start..i].iter().collect()));
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                i += 1;
            }
            toks.push(Tok::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                // exponent sign: 1e-9
                if (chars[i] == 'e' || chars[i] == 'E')
                    && i + 1 < chars.len()
                    && (chars[i + 1] == '-' || chars[i + 1] == '+')
                {
                    i += 1;
                }
                i += 1;
            }
            toks.push(Tok::Num);
        } else if "(){}[],".contains(c) {
            toks.push(Tok::Punct(c));
            i += 1;
        } else if "+-*/%^".contains(c) {
            toks.push(Tok::Op(c.to_string()));
            i += 1;
        } else if "=!<>~".contains(c) {
            let start = i;
            while i < chars.len() && "=!<>~".contains(chars[i]) {
                i += 1;
            }
            toks.push(Tok::Op(chars[start..i].iter().collect()));
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(toks)
}

/// Reads `expr` (Grafana variables already substituted) and lists what it references.
pub fn references(expr: &str) -> Result<References, String> {
    let toks = tokenize(expr)?;
    let mut refs = References::default();
    let mut stack: Vec<char> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct(c @ ('(' | '[')) => {
                if *c == '[' {
                    // A range or subquery duration: skip to the closing bracket.
                    let close = toks[i..].iter().position(|t| *t == Tok::Punct(']')).ok_or("unclosed [")?;
                    i += close + 1;
                    continue;
                }
                stack.push(*c);
            }
            Tok::Punct(')') => {
                if stack.pop() != Some('(') {
                    return Err("unbalanced )".into());
                }
            }
            Tok::Punct(c @ ('{' | '}' | ']')) => return Err(format!("unexpected {c}")),
            Tok::Ident(word) => {
                let next = toks.get(i + 1);
                if GROUPING.contains(&word.as_str()) {
                    if next == Some(&Tok::Punct('(')) {
                        let close = toks[i..].iter().position(|t| *t == Tok::Punct(')')).ok_or("unclosed (")?;
                        for t in &toks[i + 2..i + close] {
                            match t {
                                Tok::Ident(l) => {
                                    refs.grouping.insert(l.clone());
                                }
                                Tok::Punct(',') => {}
                                other => return Err(format!("unexpected {other:?} in {word} (...)")),
                            }
                        }
                        i += close + 1;
                        continue;
                    }
                } else if KEYWORDS.contains(&word.as_str()) {
                } else if next == Some(&Tok::Punct('('))
                    || matches!(next, Some(Tok::Ident(n)) if n == "by" || n == "without")
                {
                    if !FUNCTIONS.contains(&word.as_str()) {
                        return Err(format!("unknown function {word}"));
                    }
                } else {
                    // A series selector, with or without matchers.
                    let mut labels = Vec::new();
                    if next == Some(&Tok::Punct('{')) {
                        let close = toks[i..].iter().position(|t| *t == Tok::Punct('}')).ok_or("unclosed {")?;
                        let inner = &toks[i + 2..i + close];
                        for matcher in inner.split(|t| *t == Tok::Punct(',')) {
                            match matcher {
                                [] => {}
                                [Tok::Ident(l), Tok::Op(op), Tok::Str(v)] => {
                                    labels.push(l.clone());
                                    if op == "=" {
                                        refs.equalities.push((word.clone(), l.clone(), v.clone()));
                                    }
                                }
                                other => return Err(format!("bad matcher {other:?} in {word}{{...}}")),
                            }
                        }
                        i += close;
                    }
                    refs.selectors.push((word.clone(), labels));
                }
            }
            Tok::Str(_) | Tok::Num | Tok::Op(_) | Tok::Punct(_) => {}
        }
        i += 1;
    }
    if !stack.is_empty() {
        return Err("unclosed (".into());
    }
    if refs.selectors.is_empty() && !expr.contains("time()") {
        return Err("no series selector".into());
    }
    Ok(refs)
}

/// Checks `expr` against the allow-list: every selector names an allowed series, every matcher
/// a label of that series, every grouping label a label of some selected series.
pub fn check(expr: &str) -> Result<References, String> {
    let refs = references(expr)?;
    let mut known: BTreeSet<&str> = BTreeSet::new();
    for (name, matchers) in &refs.selectors {
        let labels = series_labels(name).ok_or_else(|| format!("series {name} is not in the metric contract"))?;
        for m in matchers {
            if !labels.contains(&m.as_str()) {
                return Err(format!("{name} has no label {m} (it has {labels:?})"));
            }
        }
        known.extend(labels);
    }
    for g in &refs.grouping {
        if !known.contains(g.as_str()) {
            return Err(format!("grouping label {g} is on none of the selected series"));
        }
    }
    Ok(refs)
}

/// Replaces Grafana's variables with values Prometheus accepts: durations for the interval
/// variables, `.*` for template variables (used only inside `=~` matchers).
pub fn substitute_grafana(expr: &str, template_variables: &[String]) -> Result<String, String> {
    let mut out = expr.replace("$__rate_interval", "1m").replace("$__interval", "1m").replace("$__range", "1h");
    let mut names: Vec<&String> = template_variables.iter().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for n in names {
        out = out.replace(&format!("${{{n}}}"), ".*").replace(&format!("${n}"), ".*");
    }
    match out.find('$') {
        Some(at) => Err(format!("unexpanded `{}`", &out[at..out.len().min(at + 30)])),
        None => Ok(out),
    }
}

/// A Prometheus rules file with one recording rule per expression, for `promtool check rules`.
pub fn rules_file(exprs: &[String]) -> String {
    let mut out = String::from("groups:\n  - name: signalbus-dashboards\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let quoted = serde_json::to_string(e).expect("a string serializes");
        out.push_str(&format!("      - record: signalbus_dashboards:expr_{i}\n        expr: {quoted}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_expose_bucket_sum_count_only() {
        assert!(series_labels("signalbus_event_append_seconds_bucket").unwrap().contains(&"le"));
        assert!(series_labels("signalbus_event_append_seconds_count").is_some());
        assert!(series_labels("signalbus_event_append_seconds").is_none());
        assert!(series_labels("signalbus_sessions_bucket").is_none());
        assert!(series_labels("signalbus_sweeper_leader").is_none());
    }

    #[test]
    fn references_are_found() {
        let r = references(
            "histogram_quantile(0.95, sum by (le, via) (rate(signalbus_time_to_delivery_seconds_bucket{job=~\".*\", via!=\"x\"}[1m]))) or vector(0)",
        )
        .unwrap();
        assert_eq!(
            r.selectors,
            vec![("signalbus_time_to_delivery_seconds_bucket".to_string(), vec!["job".to_string(), "via".to_string()])]
        );
        assert_eq!(r.grouping.iter().cloned().collect::<Vec<_>>(), vec!["le".to_string(), "via".to_string()]);
        assert!(references("sum(x) by (le").is_err());
        assert!(references("sum(rate(x[1m])").is_err());
        assert!(references("nosuchfn(x)").is_err());
    }

    #[test]
    fn check_rejects_unknown_series_and_labels() {
        assert!(check("sum by (outcome) (rate(signalbus_signal_recalls_total[1m]))").is_ok());
        assert!(check("sum by (state) (rate(signalbus_signal_recalls_total[1m]))").is_err());
        assert!(check("signalbus_sessions{surface=\"ws\", tenant=\"a\"}").is_err());
        assert!(check("rate(signalbus_signal_recall_total[1m])").is_err());
        assert!(check("time() - max(signalbus_sweeper_last_run_timestamp_seconds)").is_ok());
        assert!(check("1e-9 * signalbus_sessions").is_ok());
    }

    #[test]
    fn grafana_variables_are_substituted() {
        let vars = vec!["job".to_string()];
        assert_eq!(
            substitute_grafana("rate(x{job=~\"$job\"}[$__rate_interval])", &vars).unwrap(),
            "rate(x{job=~\".*\"}[1m])"
        );
        assert!(substitute_grafana("x{a=\"$other\"}", &vars).is_err());
    }
}
