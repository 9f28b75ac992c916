//! A span's attributes (spans.csv `attrs`, a JSON object) extended by the fields of a
//! struct: the heap's figures and the late spans on a rep's root span.

use serde::Serialize;

/// A span's attribute object (JSON text) with the fields of `extra` (a struct that
/// serialises to an object) added; other attributes stay, and text that is no object
/// starts an empty one.
pub fn merge_attrs(attrs: &str, extra: &impl Serialize) -> String {
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(attrs).unwrap_or_default();
    if let Ok(serde_json::Value::Object(mine)) = serde_json::to_value(extra) {
        map.extend(mine);
    }
    serde_json::Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::heap::HeapStats;

    #[test]
    fn the_heap_figures_join_a_spans_attributes() {
        let h = HeapStats {
            heap_arena_bytes: 4,
            heap_free_bytes: 3,
            heap_top_bytes: 2,
            heap_mmapped_bytes: 1,
        };
        let v: serde_json::Value =
            serde_json::from_str(&merge_attrs(r#"{"circuits":1}"#, &h)).unwrap();
        assert_eq!(v["circuits"], 1);
        assert_eq!(v["heap_free_bytes"], 3);
        assert_eq!(v["heap_mmapped_bytes"], 1);
        let v: serde_json::Value = serde_json::from_str(&merge_attrs("", &h)).unwrap();
        assert_eq!(v["heap_arena_bytes"], 4);
    }
}
