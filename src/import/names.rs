//! Names that change with every occurrence (`ProfilerStep#3`, kernels with template
//! arguments) grouped under one name, so that the diff compares them as one span:
//! `--name-map REGEX=NAME`, tried in the order given, then the defaults
//! ([`DEFAULTS`]: Kineto's step counter). The whole name is replaced when the regex
//! matches anywhere in it (anchor it with `^…$` to match whole names only). Each
//! distinct name is mapped once.

use regex::Regex;

/// Maps every importer applies after the user's: PyTorch's profiler numbers its steps.
pub const DEFAULTS: &[(&str, &str)] = &[(r"^ProfilerStep#\d+$", "ProfilerStep")];

/// The name maps of one import.
#[derive(Debug, Clone, Default)]
pub struct NameMap {
    rules: Vec<(Regex, String)>,
}

impl NameMap {
    /// The user's `REGEX=NAME` rules (split at the last `=`), then the defaults unless
    /// `defaults` is false.
    pub fn new(rules: &[String], defaults: bool) -> Result<NameMap, String> {
        let mut out = Vec::new();
        for r in rules {
            let Some((re, name)) = r.rsplit_once('=') else {
                return Err(format!("--name-map {r:?}: expected REGEX=NAME"));
            };
            if name.trim().is_empty() {
                return Err(format!("--name-map {r:?}: the NAME after '=' is empty"));
            }
            let re = Regex::new(re).map_err(|e| format!("--name-map {r:?}: {e}"))?;
            out.push((re, name.to_string()));
        }
        if defaults {
            for (re, name) in DEFAULTS {
                out.push((
                    Regex::new(re).expect("default maps compile"),
                    name.to_string(),
                ));
            }
        }
        Ok(NameMap { rules: out })
    }

    /// The name `name` is imported as.
    pub fn map<'a>(&'a self, name: &'a str) -> &'a str {
        self.rules
            .iter()
            .find(|(re, _)| re.is_match(name))
            .map_or(name, |(_, n)| n.as_str())
    }

    /// The rules as written, for meta.json.
    pub fn describe(&self) -> Vec<String> {
        self.rules
            .iter()
            .map(|(re, n)| format!("{}={n}", re.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_rules_come_first_and_the_step_counter_is_grouped_by_default() {
        let m = NameMap::new(&["gemm.*=gemm".into(), "^a=b=c".into()], true).unwrap();
        assert_eq!(m.map("ProfilerStep#12"), "ProfilerStep");
        assert_eq!(m.map("ProfilerStep#12x"), "ProfilerStep#12x");
        assert_eq!(m.map("ampere_sgemm_128x64"), "gemm");
        assert_eq!(m.map("a=b"), "c");
        assert_eq!(m.map("other"), "other");
        let plain = NameMap::new(&[], false).unwrap();
        assert_eq!(plain.map("ProfilerStep#1"), "ProfilerStep#1");
        assert!(NameMap::new(&["nothing".into()], true).is_err());
        assert!(NameMap::new(&["(=x".into()], true).is_err());
    }
}
