//! Names that change with every occurrence grouped under one name, so that a diff
//! compares them as one span instead of thousands of one-off names: PyTorch's profiler
//! step counter (`ProfilerStep#3`), the ranges `torch.autograd.profiler.emit_nvtx` opens
//! (`aten::linear, seq = 54, op_id = 1`), and whatever a user maps. A rule is a regex
//! and a name; the name may use the regex's numbered groups (`$1`, `${1}`), and its
//! named groups (`(?P<step>\d+)`) are kept as the span's attributes, so the id is not
//! lost. The whole name is replaced when the regex matches anywhere in it (anchor it
//! with `^…$` to match whole names only). Rules are tried in order, the user's first,
//! then the defaults ([`DEFAULTS`]).
//!
//! Used by `gapscope import` (`--name-map REGEX=NAME`) and by command workloads
//! (`[workload] name_map`), whatever path their spans came through.

use std::borrow::Cow;

use regex::Regex;

/// Maps applied after the user's: PyTorch numbers its profiler steps, and `emit_nvtx`
/// puts the autograd sequence number, the op id and, where recorded, the input sizes in
/// each range's name. The NVTX forms match names as gapscope's NVTX library sends them
/// too (spaces and '=' become '_').
pub const DEFAULTS: &[(&str, &str)] = &[
    (r"^ProfilerStep#(?P<step>\d+)$", "ProfilerStep"),
    (
        r"^([^,]+),[ _]seq[ _][=_][ _](?P<seq>-?\d+)(?:,[ _]op_id[ _][=_][ _](?P<op_id>\d+))?",
        "$1",
    ),
    (r"^([^,]+),[ _]op_id[ _][=_][ _](?P<op_id>\d+)", "$1"),
];

/// Ordered rules from regex to name.
#[derive(Debug, Clone, Default)]
pub struct NameMap {
    rules: Vec<(Regex, String)>,
}

impl NameMap {
    /// The user's `REGEX=NAME` rules (split at the last `=`), then the defaults unless
    /// `defaults` is false.
    pub fn new(rules: &[String], defaults: bool) -> Result<NameMap, String> {
        let mut pairs = Vec::new();
        for r in rules {
            let Some((re, name)) = r.rsplit_once('=') else {
                return Err(format!("--name-map {r:?}: expected REGEX=NAME"));
            };
            pairs.push((re.to_string(), name.to_string()));
        }
        Self::from_pairs(&pairs, defaults).map_err(|e| format!("--name-map {e}"))
    }

    /// `(regex, name)` rules in this order, then the defaults unless `defaults` is false.
    pub fn from_pairs(pairs: &[(String, String)], defaults: bool) -> Result<NameMap, String> {
        let mut out = Vec::new();
        for (re, name) in pairs {
            if name.trim().is_empty() {
                return Err(format!("{re:?}: the name it maps to is empty"));
            }
            let re = super::user_regex(re).map_err(|e| format!("{re:?}: {e}"))?;
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

    /// Whether no rule would change a name.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The name `name` is grouped under.
    pub fn map<'a>(&'a self, name: &'a str) -> Cow<'a, str> {
        match self.apply(name) {
            Some((n, _)) => Cow::Owned(n),
            None => Cow::Borrowed(name),
        }
    }

    /// The name `name` is grouped under and the attributes its rule keeps (named groups
    /// that matched), or `None` where no rule matches.
    pub fn apply(&self, name: &str) -> Option<(String, Vec<(String, String)>)> {
        let (re, to) = self.rules.iter().find(|(re, _)| re.is_match(name))?;
        let caps = re.captures(name)?;
        let mut mapped = String::new();
        caps.expand(to, &mut mapped);
        if mapped.trim().is_empty() {
            // A group that matched nothing: keep the name rather than make an empty one.
            return None;
        }
        let attrs = re
            .capture_names()
            .flatten()
            .filter_map(|g| {
                caps.name(g)
                    .map(|m| (g.to_string(), m.as_str().to_string()))
            })
            .collect();
        Some((mapped, attrs))
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
        assert!(NameMap::new(&["x=".into()], true).is_err());
    }

    #[test]
    fn per_call_ids_are_grouped_and_kept_as_attributes() {
        let m = NameMap::from_pairs(&[], true).unwrap();
        let kv = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            m.apply("ProfilerStep#3"),
            Some(("ProfilerStep".into(), kv(&[("step", "3")])))
        );
        // emit_nvtx's ranges, as PyTorch names them and as the NVTX library sends them.
        assert_eq!(
            m.apply("aten::linear, seq = 54, op_id = 1"),
            Some(("aten::linear".into(), kv(&[("seq", "54"), ("op_id", "1")])))
        );
        assert_eq!(
            m.apply("aten::linear,_seq___54,_op_id___1"),
            Some(("aten::linear".into(), kv(&[("seq", "54"), ("op_id", "1")])))
        );
        assert_eq!(
            m.apply("aten::addmm, seq = 7, op_id = 9, sizes = [[32, 64], [64, 8]]"),
            Some(("aten::addmm".into(), kv(&[("seq", "7"), ("op_id", "9")])))
        );
        assert_eq!(
            m.apply("aten::empty, op_id = 12"),
            Some(("aten::empty".into(), kv(&[("op_id", "12")])))
        );
        assert_eq!(m.apply("gpu_prove"), None);
        assert_eq!(m.apply("a, b"), None);
        // A user's rule with a numbered group in the name and a named one kept.
        let u = NameMap::from_pairs(
            &[(
                r"^request-(?P<request>\d+)-(\w+)$".into(),
                "request_${2}".into(),
            )],
            false,
        )
        .unwrap();
        assert_eq!(
            u.apply("request-881-get"),
            Some(("request_get".into(), kv(&[("request", "881")])))
        );
    }
}
