//! [`Shared`]: the text of a span row's repeated columns (its variant, name, thread name
//! and attributes), one allocation per distinct text instead of one per row. A folder of
//! millions of spans has a few dozen distinct names and variants: read as `String`s,
//! their four heap strings were about 40% of a row's memory.
//!
//! Rows read from a table share their texts through a small per-thread table of the
//! texts seen last ([`Shared::from`] of a `&str` looks it up); one made from a `String`
//! keeps that string's text as its own.
//!
//! A `Shared` is one thin pointer (8 bytes: an `Arc` of a boxed text), not a fat
//! `Arc<str>` (16): a span row holds four, so each row is 32 bytes smaller, about 128 MB
//! at 4 million spans.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Longest text the per-thread table keeps (attribute texts of this length are rarely
/// repeated).
const MAX_SHARED_LEN: usize = 256;
/// Most texts it keeps; past that it starts again empty (the rows keep theirs).
const MAX_SHARED: usize = 4096;

thread_local! {
    static SEEN: RefCell<HashSet<Shared>> = RefCell::new(HashSet::new());
}

/// An immutable text shared by every row that repeats it.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shared(Arc<Box<str>>);

impl Shared {
    pub fn as_str(&self) -> &str {
        &self.0[..]
    }

    /// A text of its own (not looked up).
    fn own(s: &str) -> Shared {
        Shared(Arc::new(Box::from(s)))
    }

    /// The text of `s`, shared with earlier rows of this thread that had it.
    fn seen(s: &str) -> Shared {
        if s.len() > MAX_SHARED_LEN {
            return Shared::own(s);
        }
        SEEN.with(|seen| {
            let mut seen = seen.borrow_mut();
            if let Some(t) = seen.get(s) {
                return t.clone();
            }
            if seen.len() >= MAX_SHARED {
                seen.clear();
            }
            let t = Shared::own(s);
            seen.insert(t.clone());
            t
        })
    }
}

impl Deref for Shared {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Shared {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Shared {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Shared {
    fn from(s: &str) -> Shared {
        Shared::seen(s)
    }
}

impl From<&String> for Shared {
    fn from(s: &String) -> Shared {
        Shared::seen(s)
    }
}

impl From<String> for Shared {
    fn from(s: String) -> Shared {
        Shared::seen(&s)
    }
}

impl From<Shared> for String {
    fn from(s: Shared) -> String {
        s.as_str().to_string()
    }
}

impl PartialEq<str> for Shared {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}

impl PartialEq<&str> for Shared {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}

impl PartialEq<String> for Shared {
    fn eq(&self, o: &String) -> bool {
        self.as_str() == o.as_str()
    }
}

impl PartialEq<Shared> for str {
    fn eq(&self, o: &Shared) -> bool {
        self == o.as_str()
    }
}

impl PartialEq<Shared> for &str {
    fn eq(&self, o: &Shared) -> bool {
        *self == o.as_str()
    }
}

impl PartialEq<Shared> for String {
    fn eq(&self, o: &Shared) -> bool {
        self.as_str() == o.as_str()
    }
}

impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl serde::Serialize for Shared {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Shared, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Shared;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a text")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Shared, E> {
                Ok(Shared::seen(v))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_on_one_thread_share_a_repeated_text() {
        let rows: Vec<(Shared, u32)> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader("work,1\nwork,2\nother,3\n".as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(Arc::ptr_eq(&rows[0].0 .0, &rows[1].0 .0));
        assert_eq!(std::mem::size_of::<Shared>(), 8, "one thin pointer");
        assert_eq!(rows[2].0, "other");
        assert_eq!(format!("{} {:?}", rows[0].0, rows[0].0), "work \"work\"");
        // Long texts are the row's own, and equal by their text.
        let long = "x".repeat(MAX_SHARED_LEN + 1);
        let (a, b) = (Shared::from(long.as_str()), Shared::from(long.clone()));
        assert!(!Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, b);
        assert_eq!(a, long);
        // Past its size the table starts again; the texts stay right.
        let many: Vec<Shared> = (0..MAX_SHARED + 10)
            .map(|i| Shared::from(i.to_string()))
            .collect();
        assert!(many.iter().enumerate().all(|(i, s)| *s == i.to_string()));
        // Written back as the plain text.
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize((&rows[0].0, 1)).unwrap();
        assert_eq!(
            String::from_utf8(w.into_inner().unwrap()).unwrap(),
            "work,1\n"
        );
    }
}
