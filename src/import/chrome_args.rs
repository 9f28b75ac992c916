//! A Chrome trace event's `args`, read in one pass without building a JSON tree: the
//! scalar arguments are written straight into the text of the span's attributes, and the
//! few the importer reads itself (Kineto's `correlation`, `device`, `stream`, `bytes`,
//! `grid`, `block`; a metadata event's `name`) are kept as values. A Kineto op has a
//! dozen arguments and a profile millions of ops: a map of values per event was most of
//! the reading time.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Most attributes one span keeps (Kineto's ops carry a dozen; shapes are the big ones).
pub const MAX_ATTRS: usize = 24;
/// Longest attribute value kept as written; longer ones are cut and say so.
pub const MAX_ATTR_CHARS: usize = 256;
/// Bytes reserved for an event's attribute text at its first member.
const TYPICAL_ATTRS_BYTES: usize = 192;

/// What the importer keeps of an event's `args`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Args {
    /// The scalar arguments as JSON object members (`"k":v` joined by commas), written
    /// by serde_json where they need escapes.
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
    /// No arguments yet, their members to be written in `buffer` (emptied): a buffer
    /// one event's arguments had is reused by the next ([`Args::take_members`]).
    pub(super) fn in_buffer(mut buffer: String) -> Args {
        buffer.clear();
        Args {
            members: buffer,
            ..Args::default()
        }
    }

    /// The buffer the members were written in, emptied, for [`Args::in_buffer`]; the
    /// arguments keep no member.
    pub(super) fn take_members(&mut self) -> String {
        self.kept = 0;
        let mut m = std::mem::take(&mut self.members);
        m.clear();
        m
    }

    /// Adds a member (its value already JSON text), up to [`MAX_ATTRS`].
    pub fn push(&mut self, key: &str, json_value: &str) {
        if self.member(key) {
            self.members.push_str(json_value);
        }
    }

    /// Starts a member `"key":` when there is room for one; whether there was.
    fn member(&mut self, key: &str) -> bool {
        if self.kept >= MAX_ATTRS {
            return false;
        }
        if !self.members.is_empty() {
            self.members.push(',');
        } else if self.members.capacity() == 0 {
            // Room for a Kineto op's members in one allocation.
            self.members.reserve(TYPICAL_ATTRS_BYTES);
        }
        json_into(&mut self.members, key);
        self.members.push(':');
        self.kept += 1;
        true
    }

    /// A number argument: kept as text, and as the value of the fields read by name.
    pub(super) fn number(&mut self, key: &str, text: &str, n: Option<u64>) {
        match key {
            "correlation" => self.correlation = n,
            "device" => self.device = n,
            "stream" => self.stream = n,
            "bytes" => self.bytes = n,
            _ => {}
        }
        if self.member(key) {
            self.members.push_str(text);
        }
    }

    /// A string argument: kept as JSON text (cut past [`MAX_ATTR_CHARS`]).
    pub(super) fn string(&mut self, key: &str, v: &str) {
        if key == "name" {
            self.name = Some(v.to_string());
        }
        if !self.member(key) {
            return;
        }
        // A string of at most MAX_ATTR_CHARS bytes has at most as many chars.
        if v.len() <= MAX_ATTR_CHARS || v.chars().count() <= MAX_ATTR_CHARS {
            json_into(&mut self.members, v);
        } else {
            let cut: String = v.chars().take(MAX_ATTR_CHARS).collect();
            json_into(&mut self.members, &format!("{cut}…"));
        }
    }

    /// The attributes as a JSON object's text, `cat` first; None when there are none.
    pub fn into_attrs(mut self, cat: Option<&str>) -> Option<String> {
        let mut out = String::new();
        self.write_attrs(cat, &mut out).then_some(out)
    }

    /// Appends the attributes to `out` as a JSON object's text, `cat` first, and says
    /// whether there were any (nothing is written where there are none). The fields
    /// read by name stay; the members are emptied.
    pub fn write_attrs(&mut self, cat: Option<&str>, out: &mut String) -> bool {
        let had_members = !self.members.is_empty();
        self.kept = 0;
        if cat.is_none() && !had_members {
            return false;
        }
        out.push('{');
        if let Some(c) = cat {
            out.push_str("\"cat\":");
            json_into(out, c);
            if had_members {
                out.push(',');
            }
        }
        out.push_str(&self.members);
        out.push('}');
        self.members.clear();
        true
    }
}

/// `s` as a JSON string, appended to `out` (as it is where nothing in it needs an
/// escape, as most names do not).
fn json_into(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).expect("a string serialises"));
    }
}

/// A string of an event (its name, category or phase, an argument's key): borrowed
/// from the event's text where it holds no escapes. (serde borrows a `Cow` field only
/// where it is not inside an `Option`.)
#[derive(Debug)]
pub struct Text<'de>(pub Cow<'de, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// The reader of one argument's value into `args` (serde's, as inside an event), for
/// [`super::chrome_scan`]'s values it does not read itself.
pub(super) fn value_seed<'a>(args: &'a mut Args, key: &'a str) -> Value<'a> {
    Value { args, key }
}

/// One argument's value, written straight into its [`Args`]: JSON text where it is a
/// scalar (strings cut at [`MAX_ATTR_CHARS`]), its number where it is one, three
/// numbers where it is an array of three (`grid`, `block`); other arrays and objects
/// are skipped unread.
pub(super) struct Value<'a> {
    args: &'a mut Args,
    key: &'a str,
}

impl<'de> DeserializeSeed<'de> for Value<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Value<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an argument value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.args.push(self.key, if v { "true" } else { "false" });
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.args
            .number(self.key, itoa::Buffer::new().format(v), Some(v));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        let n = u64::try_from(v).ok();
        self.args.number(self.key, itoa::Buffer::new().format(v), n);
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        if self.args.member(self.key) {
            let text = serde_json::to_string(&v).expect("a number serialises");
            self.args.members.push_str(&text);
        }
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.args.string(self.key, v);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.args.push(self.key, "null");
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // Kineto's grid and block: three numbers. Anything else is skipped.
        let mut v = [0u32; 3];
        let (mut n, mut numeric) = (0usize, true);
        while numeric {
            match seq.next_element::<Whole>()? {
                Some(Whole(Some(x))) if n < 3 => {
                    v[n] = x as u32;
                    n += 1;
                }
                Some(_) => numeric = false,
                None => break,
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        let triple = (numeric && n == 3).then_some(v);
        match self.key {
            "grid" => self.args.grid = triple,
            "block" => self.args.block = triple,
            _ => {}
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

/// An array element: its value where it is a whole number ≥ 0, else None (read past).
struct Whole(Option<u64>);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Whole, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Whole;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Whole, E> {
                Ok(Whole(Some(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Whole, E> {
                Ok(Whole(u64::try_from(v).ok()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Whole, E> {
                Ok(Whole(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Whole, E> {
                Ok(Whole(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Whole, E> {
                Ok(Whole(None))
            }
            fn visit_unit<E>(self) -> Result<Whole, E> {
                Ok(Whole(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Whole, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Whole(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Whole, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Whole(None))
            }
        }
        d.deserialize_any(V)
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
                while let Some(Text(key)) = map.next_key::<Text>()? {
                    map.next_value_seed(Value {
                        args: &mut a,
                        key: &key,
                    })?;
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
