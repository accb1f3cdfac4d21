//! Checks a PromQL expression against what a real `/metrics` scrape exposes: every selected
//! series is served, every label a matcher or a grouping names is on it (or is one Prometheus
//! adds at scrape time), and every value an `=` matcher pins was actually seen.
//!
//! Deliberately does not judge the expression's syntax (`promql` and promtool do) and knows no
//! contract: the scrape is the only source of truth here, the allow-list is `promql`'s.

use std::collections::BTreeSet;

use crate::exposition::Exposition;
use crate::promql::{self, TARGET_LABELS};

/// Reads `expr` (Grafana variables already substituted) and checks it against `exposed`.
pub fn check(expr: &str, exposed: &Exposition) -> Result<promql::References, String> {
    let refs = promql::references(expr)?;
    let mut known: BTreeSet<&str> = TARGET_LABELS.iter().copied().collect();
    for (name, matchers) in &refs.selectors {
        let labels = exposed.labels(name).ok_or_else(|| format!("series {name} is not on /metrics"))?;
        for m in matchers {
            if !labels.contains(m.as_str()) && !TARGET_LABELS.contains(&m.as_str()) {
                return Err(format!("{name} on /metrics has no label {m} (it has {labels:?})"));
            }
        }
        known.extend(labels);
    }
    for g in &refs.grouping {
        if !known.contains(g.as_str()) {
            return Err(format!("grouping label {g} is on none of the selected series as scraped"));
        }
    }
    for (name, label, value) in &refs.equalities {
        if !TARGET_LABELS.contains(&label.as_str()) && !exposed.has_value(name, label, value) {
            return Err(format!("{name}{{{label}=\"{value}\"}} matches nothing on /metrics"));
        }
    }
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::exposition::parse;

    #[test]
    fn accepts_only_what_the_scrape_serves() {
        let e = parse(
            "# TYPE r_total counter\nr_total{outcome=\"recalled\"} 1\n# TYPE d_seconds histogram\n\
             d_seconds_bucket{via=\"ws_push\",le=\"+Inf\"} 1\nd_seconds_count{via=\"ws_push\"} 1\n",
        )
        .unwrap();
        assert!(check("sum by (outcome) (rate(r_total{job=~\".*\"}[1m]))", &e).is_ok());
        assert!(check("sum(rate(r_total{outcome=\"recalled\"}[1m]))", &e).is_ok());
        assert!(check("sum by (le) (rate(d_seconds_bucket{via=\"ws_push\"}[1m]))", &e).is_ok());
        assert!(check("sum by (instance) (rate(d_seconds_count[1m]))", &e).is_ok());
        assert!(check("sum(rate(r_total{outcome=\"recaled\"}[1m]))", &e).is_err(), "a value never seen");
        assert!(check("sum by (state) (rate(r_total[1m]))", &e).is_err(), "a label not served");
        assert!(check("rate(d_seconds_sum[1m])", &e).is_err(), "a sample not served");
        assert!(check("r_total{via=~\"x\"}", &e).is_err(), "a matcher label not served");
        assert!(check("r_total{outcome!=\"anything\"}", &e).is_ok(), "only = pins a value");
    }
}
