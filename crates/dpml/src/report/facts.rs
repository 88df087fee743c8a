//! JSON values as readable HTML: objects as labelled lists, arrays of numbers as
//! comma-separated figures, snake_case keys as words. Used for the parts of a report whose
//! shape belongs to another crate (a training recipe) and for facts a page does not lay out
//! itself, so the page states everything its JSON states without printing JSON.

use maud::{Markup, html};
use serde_json::Value;

use super::Num;

/// A JSON key as words: `batch_size` → "batch size".
pub fn label(key: &str) -> String {
    key.replace('_', " ")
}

/// One value, rendered without JSON syntax.
pub fn value(v: &Value) -> Markup {
    match v {
        Value::Null => html! { "none" },
        Value::Bool(b) => html! { (if *b { "yes" } else { "no" }) },
        Value::Number(n) => html! { (Num(n.as_f64().unwrap_or(f64::NAN))) },
        Value::String(s) => html! { (s) },
        Value::Array(items) if items.is_empty() => html! { "none" },
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => html! {
            @for (i, item) in items.iter().enumerate() {
                @if i > 0 { ", " }
                (value(item))
            }
        },
        Value::Array(items) => html! {
            ol { @for item in items { li { (value(item)) } } }
        },
        // Serialised enums ({"kind": "sgd", "momentum": 0.9}): the variant, then its fields.
        Value::Object(map) if map.get("kind").is_some_and(Value::is_string) => html! {
            (value(&map["kind"]))
            @if map.len() > 1 {
                " ("
                @for (i, (k, v)) in map.iter().filter(|(k, _)| *k != "kind").enumerate() {
                    @if i > 0 { ", " }
                    (label(k)) " " (value(v))
                }
                ")"
            }
        },
        Value::Object(map) => html! {
            dl.facts {
                @for (k, v) in map {
                    dt { (label(k)) } dd { (value(v)) }
                }
            }
        },
    }
}

/// Two-column table rows, one per entry of `map` whose key passes `keep`.
pub fn rows<'a>(
    map: impl IntoIterator<Item = (&'a String, &'a Value)>,
    keep: impl Fn(&str) -> bool,
) -> Markup {
    html! {
        @for (k, v) in map {
            @if keep(k) {
                tr { td { (label(k)) } td { (value(v)) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_nested_values_without_json_syntax_and_escaped() {
        let v = json!({"privacy": {"target_epsilon": 1.5}, "hidden": [64, 32], "name": "<b>"});
        let html = value(&v).into_string();
        assert!(html.contains("target epsilon"), "{html}");
        assert!(html.contains("<data value=\"1.5\">1.5</data>"), "{html}");
        assert!(html.contains("&lt;b&gt;"), "{html}");
        assert!(!html.contains("{\""), "{html}");
    }
}
