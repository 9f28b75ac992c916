//! [`Count`]: a span row's optional counter in 8 bytes. A row holds eight of them
//! (instructions … process CPU time); as `Option<u64>` each takes 16 bytes, so a run of
//! millions of spans held half a gigabyte of tags and padding. The value `u64::MAX`
//! stands for "not recorded"; a recorded count saturates one below it (no real count
//! of events or nanoseconds reaches 2^64 − 1). In files it is what `Option<u64>` is: a
//! number or an empty field.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An optional count, `Option<u64>` in 8 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Count(u64);

impl Count {
    /// Not recorded.
    pub const NONE: Count = Count(u64::MAX);

    /// A recorded count (saturating one below the "not recorded" value).
    pub const fn some(v: u64) -> Count {
        Count(if v == u64::MAX { u64::MAX - 1 } else { v })
    }

    pub const fn get(self) -> Option<u64> {
        if self.0 == u64::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    pub const fn is_some(self) -> bool {
        self.0 != u64::MAX
    }

    pub const fn is_none(self) -> bool {
        self.0 == u64::MAX
    }

    pub fn map<U>(self, f: impl FnOnce(u64) -> U) -> Option<U> {
        self.get().map(f)
    }

    pub fn filter(self, keep: impl FnOnce(&u64) -> bool) -> Option<u64> {
        self.get().filter(keep)
    }

    pub fn unwrap_or(self, default: u64) -> u64 {
        self.get().unwrap_or(default)
    }

    pub fn unwrap_or_default(self) -> u64 {
        self.unwrap_or(0)
    }
}

impl Default for Count {
    fn default() -> Self {
        Count::NONE
    }
}

impl std::fmt::Debug for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl From<Option<u64>> for Count {
    fn from(v: Option<u64>) -> Self {
        v.map_or(Count::NONE, Count::some)
    }
}

impl From<Count> for Option<u64> {
    fn from(c: Count) -> Self {
        c.get()
    }
}

impl PartialEq<Option<u64>> for Count {
    fn eq(&self, other: &Option<u64>) -> bool {
        self.get() == *other
    }
}

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<u64>::deserialize(d).map(Count::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_an_option_in_eight_bytes() {
        assert_eq!(std::mem::size_of::<Count>(), 8);
        assert_eq!(Count::from(None).get(), None);
        assert_eq!(Count::from(Some(0)).get(), Some(0));
        assert_eq!(Count::from(Some(12345)).get(), Some(12345));
        assert_eq!(Count::default(), Count::NONE);
        // The one value that means "not recorded" is never a recorded count.
        assert_eq!(Count::some(u64::MAX).get(), Some(u64::MAX - 1));
    }

    #[test]
    fn in_a_csv_row_it_reads_and_writes_as_an_option() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Row {
            a: Count,
            b: Count,
        }
        let text = "a,b\n7,\n";
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let row: Row = r.deserialize().next().unwrap().unwrap();
        assert_eq!(row.a, Some(7));
        assert!(row.b.is_none());
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(&row).unwrap();
        assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), text);
        assert_eq!(serde_json::to_string(&row).unwrap(), r#"{"a":7,"b":null}"#);
    }
}
