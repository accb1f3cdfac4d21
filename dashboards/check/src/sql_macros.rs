//! Expands what Grafana's PostgreSQL datasource expands before a query reaches the database:
//! template variables (`$name`, `${name}`) and the macros `$__timeFilter`, `$__timeFrom`,
//! `$__timeTo`, `$__timeGroup`, `$__timeGroupAlias` and `$__interval`, into concrete SQL the
//! way Grafana writes them (`BETWEEN '<rfc3339>' AND '<rfc3339>'`, epoch buckets).
//!
//! Deliberately supports only those macros and fails on any other `$` left in the text, so a
//! panel using a macro this checker cannot expand fails loudly instead of passing unchecked.

/// The values one expansion uses.
#[derive(Debug, Clone)]
pub struct Context {
    /// Start and end of the dashboard time range, RFC 3339 (e.g. `2026-05-03T10:00:00Z`).
    pub from: String,
    pub to: String,
    /// `$__interval` in seconds.
    pub interval_seconds: u64,
    /// Template variables and the SQL text each expands to (already quoted, as Grafana quotes
    /// multi-value variables: `'a','b'`).
    pub variables: Vec<(String, String)>,
}

/// Expands `sql`, or says what could not be expanded.
pub fn expand(sql: &str, ctx: &Context) -> Result<String, String> {
    let with_vars = expand_variables(sql, ctx);
    let expanded = expand_macros(&with_vars, ctx)?;
    if let Some(at) = expanded.find('$') {
        let rest: String = expanded[at..].chars().take(30).collect();
        return Err(format!("unexpanded `{rest}`"));
    }
    Ok(expanded)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `$name` (not followed by an identifier character) and `${name}`; `$__...` is left alone.
fn expand_variables(sql: &str, ctx: &Context) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    'outer: while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        for (name, value) in &ctx.variables {
            let braced = format!("{{{name}}}");
            if let Some(tail) = after.strip_prefix(&braced) {
                out.push_str(value);
                rest = tail;
                continue 'outer;
            }
            if let Some(tail) = after.strip_prefix(name.as_str()) {
                if !tail.starts_with(is_ident) {
                    out.push_str(value);
                    rest = tail;
                    continue 'outer;
                }
            }
        }
        out.push('$');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Parses an interval argument: `$__interval`, `'5m'`, `5m`, `30s`, `1h`, `1d`.
fn interval_seconds(arg: &str, ctx: &Context) -> Result<u64, String> {
    let a = arg.trim().trim_matches('\'');
    if a == "$__interval" {
        return Ok(ctx.interval_seconds);
    }
    let split = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
    let n: u64 = a[..split].parse().map_err(|_| format!("bad interval {arg:?}"))?;
    let unit = match &a[split..] {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => return Err(format!("bad interval unit {other:?} in {arg:?}")),
    };
    Ok(n * unit)
}

/// Splits `a, f(b, c), d` at top-level commas.
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut in_str = false;
    for (i, c) in args.char_indices() {
        match c {
            '\'' => in_str = !in_str,
            '(' if !in_str => depth += 1,
            ')' if !in_str => depth -= 1,
            ',' if depth == 0 && !in_str => {
                out.push(args[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = args[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last.to_string());
    }
    out
}

fn expand_macros(sql: &str, ctx: &Context) -> Result<String, String> {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("$__") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let name_len = after.find(|c: char| !is_ident(c)).unwrap_or(after.len());
        let name = &after[..name_len];
        let tail = &after[name_len..];
        if !tail.starts_with('(') {
            match name {
                "interval" => out.push_str(&format!("'{}s'", ctx.interval_seconds)),
                "interval_ms" => out.push_str(&(ctx.interval_seconds * 1000).to_string()),
                other => return Err(format!("unknown variable $__{other}")),
            }
            rest = tail;
            continue;
        }
        // Find the matching parenthesis.
        let mut depth = 0i32;
        let mut close = None;
        for (i, c) in tail.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close.ok_or_else(|| format!("unclosed $__{name}("))?;
        let args = split_args(&tail[1..close]);
        let arg = |i: usize| -> Result<&str, String> {
            args.get(i)
                .map(String::as_str)
                .filter(|a| !a.is_empty())
                .ok_or_else(|| format!("$__{name} needs argument {i}"))
        };
        let text = match name {
            "timeFilter" => format!("{} BETWEEN '{}' AND '{}'", arg(0)?, ctx.from, ctx.to),
            "timeFrom" => format!("'{}'", ctx.from),
            "timeTo" => format!("'{}'", ctx.to),
            "timeGroup" | "timeGroupAlias" => {
                let secs = interval_seconds(arg(1)?, ctx)?;
                if args.len() > 2 {
                    return Err(format!("$__{name}: the fill argument is not supported by this checker"));
                }
                let group = format!("floor(extract(epoch from {})/{secs})*{secs}", arg(0)?);
                if name == "timeGroupAlias" {
                    format!("{group} AS \"time\"")
                } else {
                    group
                }
            }
            other => return Err(format!("unsupported macro $__{other}")),
        };
        out.push_str(&text);
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            from: "2026-05-03T10:00:00Z".into(),
            to: "2026-05-03T16:00:00Z".into(),
            interval_seconds: 60,
            variables: vec![("tenant".into(), "'default'".into()), ("stale_after".into(), "60".into())],
        }
    }

    #[test]
    fn macros_expand_like_grafana() {
        let sql = "SELECT $__timeGroupAlias(t, $__interval), count(*) FROM x WHERE $__timeFilter(t) AND tenant IN ($tenant) GROUP BY 1";
        assert_eq!(
            expand(sql, &ctx()).unwrap(),
            "SELECT floor(extract(epoch from t)/60)*60 AS \"time\", count(*) FROM x \
             WHERE t BETWEEN '2026-05-03T10:00:00Z' AND '2026-05-03T16:00:00Z' AND tenant IN ('default') GROUP BY 1"
        );
        assert_eq!(expand("$__timeGroup(a, '5m')", &ctx()).unwrap(), "floor(extract(epoch from a)/300)*300");
        assert_eq!(expand("make_interval(secs => ${stale_after})", &ctx()).unwrap(), "make_interval(secs => 60)");
    }

    #[test]
    fn variables_respect_identifier_boundaries() {
        assert_eq!(expand("$tenant", &ctx()).unwrap(), "'default'");
        assert!(expand("$tenant_id", &ctx()).is_err());
    }

    #[test]
    fn anything_unexpanded_is_an_error() {
        assert!(expand("$__unixEpochFilter(t)", &ctx()).is_err());
        assert!(expand("$nope", &ctx()).is_err());
        assert!(expand("$__timeGroup(t, $__interval, 0)", &ctx()).is_err());
    }
}
