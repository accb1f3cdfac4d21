//! A tiny reader for the YAML subset the provisioning files use — block mappings, block
//! sequences (`- ` items, including `- key: value` mappings), plain and quoted scalars,
//! comments — into `serde_json::Value`, so the tests can check the files without a YAML crate.
//!
//! Deliberately rejects everything else (flow collections, anchors, multi-line scalars, tabs):
//! the provisioning files are kept inside this subset, and the checker says so when they leave it.

use serde_json::{Map, Value};

#[derive(Debug, Clone)]
struct Line {
    number: usize,
    indent: usize,
    text: String,
}

/// Parses `text`, or says which line it could not read.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut lines = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.contains('\t') {
            return Err(format!("line {}: tab", n + 1));
        }
        let stripped = strip_comment(raw);
        if stripped.trim().is_empty() || stripped.trim() == "---" {
            continue;
        }
        let indent = stripped.len() - stripped.trim_start().len();
        lines.push(Line { number: n + 1, indent, text: stripped.trim().to_string() });
    }
    if lines.is_empty() {
        return Ok(Value::Null);
    }
    let mut i = 0;
    let indent = lines[0].indent;
    let v = block(&mut lines, &mut i, indent)?;
    if i < lines.len() {
        return Err(format!("line {}: unexpected indentation", lines[i].number));
    }
    Ok(v)
}

/// The line without a trailing `# comment` (a `#` at the start or after whitespace, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev_space => return &line[..i],
            None => {}
        }
        prev_space = c == ' ';
    }
    line
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

fn block(lines: &mut [Line], i: &mut usize, indent: usize) -> Result<Value, String> {
    if is_item(&lines[*i].text) {
        sequence(lines, i, indent)
    } else {
        mapping(lines, i, indent)
    }
}

fn sequence(lines: &mut [Line], i: &mut usize, indent: usize) -> Result<Value, String> {
    let mut items = Vec::new();
    while *i < lines.len() && lines[*i].indent == indent && is_item(&lines[*i].text) {
        let rest = lines[*i].text[1..].trim_start().to_string();
        if rest.is_empty() {
            *i += 1;
            if *i < lines.len() && lines[*i].indent > indent {
                let inner = lines[*i].indent;
                items.push(block(lines, i, inner)?);
            } else {
                items.push(Value::Null);
            }
        } else if split_key(&rest).is_some() || is_item(&rest) {
            // `- key: value` opens a mapping whose keys sit where `key` starts.
            let inner = indent + (lines[*i].text.len() - rest.len());
            lines[*i].indent = inner;
            lines[*i].text = rest;
            items.push(block(lines, i, inner)?);
        } else {
            items.push(scalar(&rest));
            *i += 1;
        }
    }
    Ok(Value::Array(items))
}

fn mapping(lines: &mut [Line], i: &mut usize, indent: usize) -> Result<Value, String> {
    let mut map = Map::new();
    while *i < lines.len() && lines[*i].indent == indent && !is_item(&lines[*i].text) {
        let number = lines[*i].number;
        let (key, value) = split_key(&lines[*i].text).ok_or_else(|| format!("line {number}: expected `key: value`"))?;
        let (key, value) = (unquote(&key), value.to_string());
        *i += 1;
        let v = if !value.is_empty() {
            if value.starts_with('[') || value.starts_with('{') || value.starts_with('&') || value.starts_with('*') {
                return Err(format!("line {number}: flow collections and anchors are outside the subset"));
            }
            if value == "|" || value == ">" || value.starts_with("|") || value.starts_with('>') {
                return Err(format!("line {number}: block scalars are outside the subset"));
            }
            scalar(&value)
        } else if *i < lines.len() && lines[*i].indent > indent {
            let inner = lines[*i].indent;
            block(lines, i, inner)?
        } else if *i < lines.len() && lines[*i].indent == indent && is_item(&lines[*i].text) {
            sequence(lines, i, indent)?
        } else {
            Value::Null
        };
        if map.insert(key.clone(), v).is_some() {
            return Err(format!("line {number}: duplicate key {key}"));
        }
    }
    if *i < lines.len() && lines[*i].indent > indent {
        return Err(format!("line {}: unexpected indentation", lines[*i].number));
    }
    Ok(Value::Object(map))
}

/// Splits `key: value` / `key:` at the first `:` followed by a space or the end, outside quotes.
fn split_key(text: &str) -> Option<(String, &str)> {
    let mut quote: Option<char> = None;
    let bytes: Vec<char> = text.chars().collect();
    let mut offset = 0;
    for (idx, c) in bytes.iter().enumerate() {
        match quote {
            Some(q) if *c == q => quote = None,
            Some(_) => {}
            None if *c == '"' || *c == '\'' => quote = Some(*c),
            None if *c == ':' && (idx + 1 == bytes.len() || bytes[idx + 1] == ' ') => {
                let key = text[..offset].trim().to_string();
                if key.is_empty() {
                    return None;
                }
                return Some((key, text[offset + 1..].trim()));
            }
            None => {}
        }
        offset += c.len_utf8();
    }
    None
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && ((s.starts_with('"') && s.ends_with('"')) || (s.starts_with('\'') && s.ends_with('\''))) {
        s[1..s.len() - 1].to_string()
    } else {
        s.to_string()
    }
}

fn scalar(s: &str) -> Value {
    let s = s.trim();
    if s.starts_with('"') || s.starts_with('\'') {
        return Value::String(unquote(s));
    }
    match s {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" | "~" => return Value::Null,
        _ => {}
    }
    if let Ok(n) = s.parse::<i64>() {
        return Value::from(n);
    }
    Value::String(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse;
    use serde_json::json;

    #[test]
    fn reads_the_provisioning_subset() {
        let text = "# c\napiVersion: 1\nlist:\n  - name: a # trailing\n    uid: \"x#y\"\n    json:\n      db: ${DB}\n      n: 5\n  - name: b\nplain:\n- 1\n- two\n";
        assert_eq!(
            parse(text).unwrap(),
            json!({"apiVersion": 1, "list": [{"name": "a", "uid": "x#y", "json": {"db": "${DB}", "n": 5}}, {"name": "b"}], "plain": [1, "two"]})
        );
    }

    #[test]
    fn rejects_what_it_does_not_read() {
        assert!(parse("a: [1, 2]").is_err());
        assert!(parse("a: 1\n   b: 2").is_err());
        assert!(parse("a: 1\na: 2").is_err());
        assert!(parse("a:\tb").is_err());
    }
}
