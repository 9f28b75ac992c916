//! A Chrome trace event's `args`, read in one pass without building a JSON tree: the
//! scalar arguments are written straight into the text of the span's attributes, and the
//! few the importer reads itself (Kineto's `correlation`, `device`, `stream`, `bytes`,
//! `grid`, `block`; a metadata event's `name`) are kept as values. A Kineto op has a
//! dozen arguments and a profile millions of ops: a map of values per event was most of
//! the reading time.

use std::fmt;

use serde::de::{self, Deserialize, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Most attributes one span keeps (Kineto's ops carry a dozen; shapes are the big ones).
pub const MAX_ATTRS: usize = 24;
/// Longest attribute value kept as written; longer ones are cut and say so.
pub const MAX_ATTR_CHARS: usize = 256;

/// What the importer keeps of an event's `args`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Args {
    /// The scalar arguments as JSON object members (`"k":v` joined by commas).
    members: String,
    kept: usize,
    pub correlation: Option<u64>,
    pub device: Option<u64>,
    pub stream: Option<u64>,
    pub bytes: Option<u64>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    /// A metadata event's `name` (thread or process name).
    pub name: Option<String>,
}

impl Args {
    /// Adds a member (its value already JSON text), up to [`MAX_ATTRS`].
    pub fn push(&mut self, key: &str, json_value: &str) {
        if self.kept >= MAX_ATTRS {
            return;
        }
        if !self.members.is_empty() {
            self.members.push(',');
        }
        self.members
            .push_str(&serde_json::Value::from(key).to_string());
        self.members.push(':');
        self.members.push_str(json_value);
        self.kept += 1;
    }

    /// The attributes as a JSON object's text, `cat` first; None when there are none.
    pub fn into_attrs(self, cat: Option<&str>) -> Option<Box<str>> {
        let cat = cat.map(|c| format!("\"cat\":{}", serde_json::Value::from(c)));
        match (cat, self.members.is_empty()) {
            (None, true) => None,
            (None, false) => Some(format!("{{{}}}", self.members).into()),
            (Some(c), true) => Some(format!("{{{c}}}").into()),
            (Some(c), false) => Some(format!("{{{c},{}}}", self.members).into()),
        }
    }
}

/// One argument's value: JSON text where it is a scalar (strings cut at
/// [`MAX_ATTR_CHARS`]), its number where it is one, three numbers where it is an
/// array of three; nothing for other arrays and objects (skipped unread).
#[derive(Debug, Default)]
struct Scalar {
    text: Option<String>,
    number: Option<u64>,
    triple: Option<[u32; 3]>,
    string: Option<String>,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an argument value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar {
            text: Some(v.to_string()),
            ..Default::default()
        })
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar {
            text: Some(v.to_string()),
            number: Some(v),
            ..Default::default()
        })
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar {
            text: Some(v.to_string()),
            number: u64::try_from(v).ok(),
            ..Default::default()
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar {
            text: Some(serde_json::Value::from(v).to_string()),
            ..Default::default()
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        let shown = if v.chars().count() > MAX_ATTR_CHARS {
            let cut: String = v.chars().take(MAX_ATTR_CHARS).collect();
            format!("{cut}…")
        } else {
            v.to_string()
        };
        Ok(Scalar {
            text: Some(serde_json::Value::from(shown).to_string()),
            string: Some(v.to_string()),
            ..Default::default()
        })
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar {
            text: Some("null".into()),
            ..Default::default()
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        // Kineto's grid and block: three numbers. Anything else is skipped.
        let mut v = Vec::new();
        let mut numeric = true;
        while numeric {
            match seq.next_element::<serde_json::Value>()? {
                Some(x) => match x.as_u64() {
                    Some(n) if v.len() < 3 => v.push(n as u32),
                    _ => numeric = false,
                },
                None => break,
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar {
            triple: (numeric && v.len() == 3).then(|| [v[0], v[1], v[2]]),
            ..Default::default()
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::default())
    }
}

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Args, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Args;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of arguments")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args, A::Error> {
                let mut a = Args::default();
                while let Some(key) = map.next_key::<String>()? {
                    let v: Scalar = map.next_value()?;
                    match key.as_str() {
                        "correlation" => a.correlation = v.number,
                        "device" => a.device = v.number,
                        "stream" => a.stream = v.number,
                        "bytes" => a.bytes = v.number,
                        "grid" => a.grid = v.triple,
                        "block" => a.block = v.triple,
                        "name" => a.name.clone_from(&v.string),
                        _ => {}
                    }
                    if let Some(t) = &v.text {
                        a.push(&key, t);
                    }
                }
                Ok(a)
            }
            fn visit_unit<E>(self) -> Result<Args, E> {
                Ok(Args::default())
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_become_attribute_text_and_kineto_fields_are_kept() {
        let a: Args = serde_json::from_str(
            r#"{"correlation": 7, "grid": [1, 2, 3], "Input Dims": [[1, 2]], "s": "a\"b",
                "x": -1.5, "deep": {"k": 1}, "ok": true}"#,
        )
        .unwrap();
        assert_eq!((a.correlation, a.grid), (Some(7), Some([1, 2, 3])));
        let text = a.clone().into_attrs(Some("cpu_op")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"cat": "cpu_op", "correlation": 7, "s": "a\"b", "x": -1.5, "ok": true})
        );
        assert_eq!(Args::default().into_attrs(None), None);
        let long: Args =
            serde_json::from_str(&format!(r#"{{"k": "{}"}}"#, "x".repeat(300))).unwrap();
        assert!(long.into_attrs(None).unwrap().ends_with("x…\"}"));
    }
}
