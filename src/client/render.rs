//! Printing answers: the bus's JSON verbatim with `--json`, else a plain aligned table.
//!
//! Deliberately generic over the JSON shape, so a field the bus adds shows up without a CLI change.

use serde_json::Value;

/// Prints `value` as JSON, or as a table of `columns` taken from `rows` (objects).
pub fn print(json: bool, value: &Value, rows: Option<&[Value]>, columns: &[&str]) {
    if json {
        println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
        return;
    }
    match rows {
        Some(rows) => table(rows, columns),
        None => key_values(value),
    }
}

/// One value as a table cell: strings bare, null as `-`, anything else as JSON.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn table(rows: &[Value], columns: &[&str]) {
    print!("{}", table_text(rows, columns));
}

/// `rows` (objects) as an aligned table of `columns`, headed by their names in capitals, each
/// line ending in a newline; `(none)` under the header when there is no row.
pub fn table_text(rows: &[Value], columns: &[&str]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(|r| columns.iter().map(|c| cell(r.get(*c))).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| cells.iter().map(|r| r[i].chars().count()).chain([c.len()]).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let mut line = |vals: Vec<String>| {
        let parts: Vec<String> = vals.iter().zip(&widths).map(|(v, w)| format!("{v:<w$}")).collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(columns.iter().map(|c| c.to_uppercase()).collect());
    for r in cells {
        line(r);
    }
    if rows.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

/// Label–value lines in the order given, the values aligned, each line ending in a newline.
pub fn pairs_text(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs.iter().map(|(k, v)| format!("{k:<width$}  {v}").trim_end().to_string() + "\n").collect()
}

fn key_values(value: &Value) {
    match value {
        Value::Object(map) => {
            let width = map.keys().map(|k| k.len()).max().unwrap_or(0);
            for (k, v) in map {
                let shown = match v {
                    Value::Object(_) | Value::Array(_) => v.to_string(),
                    other => cell(Some(other)),
                };
                println!("{k:<width$}  {shown}");
            }
        }
        other => println!("{}", cell(Some(other))),
    }
}

/// Prints a failure's message (and its hint) to stderr, in JSON with `--json`.
pub fn failure(json: bool, f: &super::http::Failure) {
    use super::http::Failure;
    match f {
        Failure::Bus { status, body, hint } if json => {
            eprintln!("{}", serde_json::json!({"status": status, "body": body, "hint": hint}));
        }
        Failure::Bus { status, body, hint } => {
            let code = body.pointer("/error/code").and_then(Value::as_str).unwrap_or("error");
            let msg = body.pointer("/error/message").and_then(Value::as_str).map(str::to_string);
            let outcome = body.get("outcome").and_then(Value::as_str);
            match (outcome, msg) {
                (Some(o), _) => eprintln!("{o}"),
                (None, Some(m)) => eprintln!("error: {code}: {m} (http {status})"),
                (None, None) => eprintln!("error: http {status}: {body}"),
            }
            if let Some(h) = hint {
                eprintln!("hint: {h}");
            }
        }
        Failure::Failed(m) | Failure::Unreachable(m) | Failure::Usage(m) | Failure::Ended { message: m, .. } => {
            eprintln!("error: {m}")
        }
    }
}
