//! Reads the Prometheus text exposition format (what `GET /metrics` returns) into the series it
//! exposes — each sample's metric name with its label names and values, and the `# TYPE` of
//! each family — so a test can check PromQL against what a real process actually serves.
//!
//! Deliberately not a full exposition parser: values, timestamps, `# HELP` text, exemplars and
//! OpenMetrics extensions are ignored; only names, labels and types matter to the dashboards.

use std::collections::{BTreeMap, BTreeSet};

/// Everything one scrape exposes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exposition {
    /// Sample name (`foo_bucket`, not the family `foo`) → label name → values seen.
    pub series: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Family name → `counter`, `gauge`, `histogram`, `summary` or `untyped`.
    pub types: BTreeMap<String, String>,
}

impl Exposition {
    /// The label names a sample name carries, or `None` when the scrape has no such sample.
    pub fn labels(&self, name: &str) -> Option<BTreeSet<&str>> {
        self.series.get(name).map(|l| l.keys().map(String::as_str).collect())
    }

    /// Whether some sample of `name` has `label="value"`.
    pub fn has_value(&self, name: &str, label: &str, value: &str) -> bool {
        self.series.get(name).and_then(|l| l.get(label)).is_some_and(|v| v.contains(value))
    }
}

/// Parses a scrape, or says which line it could not read.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut words = rest.split_whitespace();
            if words.next() == Some("TYPE") {
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    return Err(format!("line {}: malformed # TYPE", n + 1));
                };
                out.types.insert(name.to_string(), kind.to_string());
            }
            continue;
        }
        let (name, labels) = sample(line).map_err(|e| format!("line {}: {e}: {line}", n + 1))?;
        let entry = out.series.entry(name).or_default();
        for (k, v) in labels {
            entry.entry(k).or_default().insert(v);
        }
    }
    Ok(out)
}

/// One sample line's name and labels.
fn sample(line: &str) -> Result<(String, Vec<(String, String)>), String> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).ok_or("no value")?;
    let name = &line[..name_end];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut labels = Vec::new();
    let rest = &line[name_end..];
    let Some(body) = rest.strip_prefix('{') else { return Ok((name.to_string(), labels)) };
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    loop {
        while i < chars.len() && (chars[i] == ',' || chars[i] == ' ') {
            i += 1;
        }
        match chars.get(i) {
            Some('}') => return Ok((name.to_string(), labels)),
            None => return Err("unclosed {".into()),
            _ => {}
        }
        let start = i;
        while i < chars.len() && chars[i] != '=' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect::<String>().trim().to_string();
        if chars.get(i + 1) != Some(&'"') {
            return Err(format!("label {key} has no quoted value"));
        }
        i += 2;
        let mut value = String::new();
        loop {
            match chars.get(i) {
                None => return Err(format!("unterminated value of {key}")),
                Some('"') => break,
                Some('\\') => {
                    // The format escapes only backslash, quote and newline.
                    match chars.get(i + 1) {
                        Some('n') => value.push('\n'),
                        Some(c) => value.push(*c),
                        None => return Err("dangling escape".into()),
                    }
                    i += 2;
                }
                Some(c) => {
                    value.push(*c);
                    i += 1;
                }
            }
        }
        i += 1;
        labels.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reads_names_labels_values_and_types() {
        let text = "# HELP x_total help text\n# TYPE x_total counter\nx_total{a=\"1\",b=\"q\\\"u,o}te\"} 3\nx_total{a=\"2\"} 1\n\
                    # TYPE h_seconds histogram\nh_seconds_bucket{le=\"0.5\"} 1\nh_seconds_sum 0.1\nh_seconds_count 1\n";
        let e = parse(text).unwrap();
        assert_eq!(e.types["x_total"], "counter");
        assert_eq!(e.types["h_seconds"], "histogram");
        assert_eq!(e.labels("x_total").unwrap().into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(e.has_value("x_total", "a", "2"));
        assert!(e.has_value("x_total", "b", "q\"u,o}te"));
        assert_eq!(e.labels("h_seconds_bucket").unwrap().into_iter().collect::<Vec<_>>(), ["le"]);
        assert!(e.labels("h_seconds_sum").unwrap().is_empty());
        assert!(e.labels("h_seconds").is_none());
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        assert!(parse("x{a=1} 1").is_err());
        assert!(parse("x{a=\"1\" 1").is_err());
        assert!(parse("bad-name 1").is_err());
    }
}
