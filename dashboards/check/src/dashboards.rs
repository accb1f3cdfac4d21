//! Loads `dashboards/*.json` and lists every query in them (panel targets and template
//! variable queries) with the panel it belongs to and the datasource it runs on.
//!
//! Deliberately does not judge the queries: `sql_macros` and `promql` and the tests do.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One dashboard file, parsed.
#[derive(Debug, Clone)]
pub struct Dashboard {
    pub file: String,
    pub json: Value,
}

/// What a query is written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Language {
    /// Raw SQL for the PostgreSQL datasource; `format` is `table` or `time_series`.
    Sql {
        format: String,
    },
    PromQl,
}

/// One query of one panel (or of one template variable, with `panel_type == "variable"`).
#[derive(Debug, Clone)]
pub struct Query {
    pub file: String,
    pub panel: String,
    pub panel_type: String,
    pub ref_id: String,
    pub datasource_type: String,
    pub datasource_uid: String,
    pub language: Language,
    pub text: String,
    /// Field names the panel's overrides address by name (`matcher.id == "byName"`).
    pub override_names: Vec<String>,
}

pub const PG_TYPE: &str = "grafana-postgresql-datasource";
pub const PROM_TYPE: &str = "prometheus";

/// Every `*.json` directly in `dir`, sorted by name.
pub fn load_all(dir: &Path) -> Vec<Dashboard> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
            let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            let file = p.file_name().expect("file name").to_string_lossy().into_owned();
            Dashboard { file, json }
        })
        .collect()
}

/// Every panel, with the panels nested in collapsed rows flattened in.
pub fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            if let Some(nested) = p.get("panels") {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn datasource_of(v: &Value) -> Option<(String, String)> {
    let ds = v.get("datasource")?;
    Some((str_of(ds, "type").to_string(), str_of(ds, "uid").to_string()))
}

fn language_of(ds_type: &str, target: &Value) -> Option<(Language, String)> {
    match ds_type {
        PG_TYPE => {
            Some((Language::Sql { format: str_of(target, "format").to_string() }, str_of(target, "rawSql").to_string()))
        }
        PROM_TYPE => Some((Language::PromQl, str_of(target, "expr").to_string())),
        _ => None,
    }
}

/// Every query of a dashboard: panel targets first, then template variable queries.
/// Panics on a target whose datasource is neither PostgreSQL nor Prometheus.
pub fn queries(d: &Dashboard) -> Vec<Query> {
    let mut out = Vec::new();
    for panel in panels(&d.json) {
        let panel_type = str_of(panel, "type");
        if panel_type == "row" {
            continue;
        }
        let title = str_of(panel, "title").to_string();
        let override_names: Vec<String> = panel["fieldConfig"]["overrides"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["matcher"]["id"] == "byName")
            .filter_map(|o| o["matcher"]["options"].as_str().map(str::to_string))
            .collect();
        let panel_ds = datasource_of(panel);
        for target in panel["targets"].as_array().into_iter().flatten() {
            let (ds_type, ds_uid) = datasource_of(target)
                .or_else(|| panel_ds.clone())
                .unwrap_or_else(|| panic!("{}: panel {title:?} has a target without a datasource", d.file));
            let (language, text) = language_of(&ds_type, target)
                .unwrap_or_else(|| panic!("{}: panel {title:?} uses datasource type {ds_type:?}", d.file));
            out.push(Query {
                file: d.file.clone(),
                panel: title.clone(),
                panel_type: panel_type.to_string(),
                ref_id: str_of(target, "refId").to_string(),
                datasource_type: ds_type,
                datasource_uid: ds_uid,
                language,
                text,
                override_names: override_names.clone(),
            });
        }
    }
    for var in d.json["templating"]["list"].as_array().into_iter().flatten() {
        if str_of(var, "type") != "query" {
            continue;
        }
        let name = str_of(var, "name");
        let (ds_type, ds_uid) =
            datasource_of(var).unwrap_or_else(|| panic!("{}: variable {name} has no datasource", d.file));
        let raw = match &var["query"] {
            Value::String(s) => s.clone(),
            q => str_of(q, "query").to_string(),
        };
        let (language, text) = match ds_type.as_str() {
            PG_TYPE => (Language::Sql { format: "table".into() }, raw),
            PROM_TYPE => (Language::PromQl, label_values_selector(&raw)),
            other => panic!("{}: variable {name} uses datasource type {other:?}", d.file),
        };
        out.push(Query {
            file: d.file.clone(),
            panel: format!("variable {name}"),
            panel_type: "variable".into(),
            ref_id: "var".into(),
            datasource_type: ds_type,
            datasource_uid: ds_uid,
            language,
            text,
            override_names: Vec::new(),
        });
    }
    out
}

/// The series selector inside Grafana's `label_values(selector, label)` (or the query itself
/// when it is plain PromQL), so variable queries are checked like panel expressions.
pub fn label_values_selector(query: &str) -> String {
    let q = query.trim();
    let Some(inner) = q.strip_prefix("label_values(").and_then(|r| r.strip_suffix(')')) else {
        return q.to_string();
    };
    let mut depth = 0i32;
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => return inner[..i].trim().to_string(),
            _ => {}
        }
    }
    inner.trim().to_string()
}

/// Names of the dashboard's template variables.
pub fn variable_names(d: &Dashboard) -> Vec<String> {
    d.json["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect()
}

/// Every `datasource` object anywhere in the dashboard, as (type, uid).
pub fn datasource_refs(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    if k == "datasource" {
                        if let Some(o) = child.as_object() {
                            let get = |key: &str| o.get(key).and_then(Value::as_str).unwrap_or("").to_string();
                            out.push((get("type"), get("uid")));
                        } else if let Some(s) = child.as_str() {
                            out.push((String::new(), s.to_string()));
                        }
                    }
                    walk(child, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}

/// A datasource a dashboard asks for when imported (`__inputs`) and resolves when provisioned
/// (a `datasource` template variable of the same name, whose current value is the uid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasourceInput {
    /// `DS_PROMETHEUS`: panels say `"uid": "${DS_PROMETHEUS}"`.
    pub name: String,
    /// The plugin id (`prometheus`, `grafana-postgresql-datasource`).
    pub plugin_id: String,
    /// The uid the template variable selects when nothing else does (the provisioned one).
    pub default_uid: String,
}

/// The dashboard's datasource inputs, checked: each `__inputs` entry of type `datasource` has a
/// `datasource` template variable of the same name, querying the same plugin, with a current
/// uid; and every variable of type `datasource` is an input.
pub fn datasource_inputs(d: &Dashboard) -> Result<Vec<DatasourceInput>, String> {
    let vars: Vec<&Value> = d.json["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| str_of(v, "type") == "datasource")
        .collect();
    let inputs: Vec<&Value> = d.json["__inputs"].as_array().into_iter().flatten().collect();
    let mut out = Vec::new();
    for input in &inputs {
        let name = str_of(input, "name");
        if str_of(input, "type") != "datasource" {
            return Err(format!("{}: __inputs {name:?} is not of type datasource", d.file));
        }
        let plugin_id = str_of(input, "pluginId");
        let var = vars
            .iter()
            .find(|v| str_of(v, "name") == name)
            .ok_or_else(|| format!("{}: __inputs {name} has no datasource variable {name}", d.file))?;
        if str_of(var, "query") != plugin_id {
            return Err(format!("{}: variable {name} queries {:?}, not {plugin_id:?}", d.file, str_of(var, "query")));
        }
        let default_uid = str_of(&var["current"], "value");
        if default_uid.is_empty() || default_uid.starts_with('$') {
            return Err(format!("{}: variable {name} has no current datasource uid", d.file));
        }
        out.push(DatasourceInput { name: name.into(), plugin_id: plugin_id.into(), default_uid: default_uid.into() });
    }
    if let Some(v) = vars.iter().find(|v| !out.iter().any(|i| i.name == str_of(v, "name"))) {
        return Err(format!("{}: datasource variable {} is not in __inputs", d.file, str_of(v, "name")));
    }
    Ok(out)
}

/// The uid a datasource reference ends up with when provisioned: `${NAME}` resolves through the
/// input `NAME` (which must be of the reference's type), a literal uid is itself.
pub fn resolve_uid(inputs: &[DatasourceInput], ds_type: &str, uid: &str) -> Result<String, String> {
    let Some(name) = uid.strip_prefix("${").and_then(|r| r.strip_suffix('}')) else {
        return Ok(uid.to_string());
    };
    let input = inputs.iter().find(|i| i.name == name).ok_or_else(|| format!("{uid} is no datasource input"))?;
    if input.plugin_id != ds_type {
        return Err(format!("{uid} is a {} datasource, used as {ds_type:?}", input.plugin_id));
    }
    Ok(input.default_uid.clone())
}

#[cfg(test)]
mod tests {
    use super::{label_values_selector, resolve_uid, DatasourceInput};

    #[test]
    fn inputs_resolve_by_name_and_type() {
        let inputs = [DatasourceInput {
            name: "DS_PROMETHEUS".into(),
            plugin_id: "prometheus".into(),
            default_uid: "signalbus-prom".into(),
        }];
        assert_eq!(resolve_uid(&inputs, "prometheus", "${DS_PROMETHEUS}").unwrap(), "signalbus-prom");
        assert_eq!(resolve_uid(&inputs, "prometheus", "literal").unwrap(), "literal");
        assert!(resolve_uid(&inputs, "grafana-postgresql-datasource", "${DS_PROMETHEUS}").is_err());
        assert!(resolve_uid(&inputs, "prometheus", "${DS_OTHER}").is_err());
    }

    #[test]
    fn label_values_yields_its_selector() {
        assert_eq!(label_values_selector("label_values(up{job=\"a,b\"}, job)"), "up{job=\"a,b\"}");
        assert_eq!(label_values_selector("label_values(foo, le)"), "foo");
        assert_eq!(label_values_selector("sum(foo)"), "sum(foo)");
    }
}
