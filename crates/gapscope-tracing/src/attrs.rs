//! A span's fields as gapscope attributes, held inline: a fixed number of fields, each
//! value a number, a bool or a short string copied into the span's own slot, so that
//! recording a field allocates nothing.

use std::fmt::{self, Write};

use tracing_core::field::{Field, Visit};

/// Fields kept per span; later ones are dropped (and counted in [`Attrs::dropped`]).
pub const MAX_FIELDS: usize = 8;
/// Bytes of a string value kept (cut at a character boundary).
pub const MAX_STR: usize = 62;

/// A string value, copied inline.
#[derive(Clone, Copy)]
pub struct InlineStr {
    len: u8,
    buf: [u8; MAX_STR],
}

impl InlineStr {
    const EMPTY: InlineStr = InlineStr {
        len: 0,
        buf: [0; MAX_STR],
    };

    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 characters are ever copied in (see `write_str`).
        std::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or("")
    }
}

impl Write for InlineStr {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            let mut b = [0u8; 4];
            let e = c.encode_utf8(&mut b);
            let at = self.len as usize;
            if at + e.len() > MAX_STR {
                // Full: the rest is dropped, not an error (a Debug impl must not fail).
                return Ok(());
            }
            self.buf[at..at + e.len()].copy_from_slice(e.as_bytes());
            self.len += e.len() as u8;
        }
        Ok(())
    }
}

impl fmt::Debug for InlineStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// One field's value.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(InlineStr),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(s) => f.write_str(s.as_str()),
        }
    }
}

/// A span's fields, in the order first recorded; a field recorded again replaces its value.
#[derive(Clone, Copy)]
pub struct Attrs {
    len: u8,
    /// Fields past [`MAX_FIELDS`] that were not kept.
    pub dropped: u8,
    items: [(&'static str, Value); MAX_FIELDS],
}

impl Default for Attrs {
    fn default() -> Self {
        Attrs {
            len: 0,
            dropped: 0,
            items: [("", Value::U64(0)); MAX_FIELDS],
        }
    }
}

impl Attrs {
    /// The fields kept.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.items[..self.len as usize].iter().map(|(k, v)| (*k, v))
    }

    fn set(&mut self, key: &'static str, value: Value) {
        if let Some(slot) = self.items[..self.len as usize]
            .iter_mut()
            .find(|(k, _)| *k == key)
        {
            slot.1 = value;
        } else if (self.len as usize) < MAX_FIELDS {
            self.items[self.len as usize] = (key, value);
            self.len += 1;
        } else {
            self.dropped = self.dropped.saturating_add(1);
        }
    }
}

impl Visit for Attrs {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), Value::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), Value::I64(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), Value::Bool(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.record_u64(field, v),
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.record_i64(field, v),
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        let mut s = InlineStr::EMPTY;
        let _ = s.write_str(value);
        self.set(field.name(), Value::Str(s));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut s = InlineStr::EMPTY;
        let _ = write!(s, "{value:?}");
        self.set(field.name(), Value::Str(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_cut_at_a_character_boundary() {
        let mut s = InlineStr::EMPTY;
        let text = "é".repeat(40); // 80 bytes
        s.write_str(&text).unwrap();
        assert_eq!(s.as_str().len(), 62);
        assert!(s.as_str().chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_field_set_again_replaces_and_extra_fields_are_counted() {
        let mut a = Attrs::default();
        a.set("x", Value::U64(1));
        a.set("x", Value::U64(2));
        for k in ["a", "b", "c", "d", "e", "f", "g", "h", "i"] {
            a.set(k, Value::Bool(true));
        }
        let got: Vec<String> = a.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(got[0], "x=2");
        assert_eq!(got.len(), MAX_FIELDS);
        assert_eq!(a.dropped, 2);
    }
}
