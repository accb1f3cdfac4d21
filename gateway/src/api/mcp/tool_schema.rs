//! The two pieces every tool definition is made of: a closed JSON-Schema object for its input,
//! and its annotations — shared by `catalog` and `team_tools`, so neither imports the other.
//!
//! Deliberately data only.

use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use serde_json::{json, Value};

pub fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let v = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match v {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("a json object literal"),
    }
}

pub fn annotations(read_only: bool, idempotent: bool, destructive: bool) -> ToolAnnotations {
    let mut a = ToolAnnotations::new();
    a.read_only_hint = Some(read_only);
    a.idempotent_hint = Some(idempotent);
    a.destructive_hint = Some(destructive && !read_only);
    // Other agents, not the outside world: the bus is a closed domain.
    a.open_world_hint = Some(false);
    a
}
