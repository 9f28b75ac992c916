//! The end-of-run table of an external subject: the program's own spans in tree order
//! (instead of the prover's phases), and what its span lines held per variant. Linear in
//! the spans: a program may send a million of them.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

use crate::protocol::LineCounts;
use crate::store::{CommandMeta, RepStatus, RunData, SpanRow};

/// Deepest level of the program's spans shown (the root is 0).
const MAX_DEPTH: usize = 3;
/// Most rows shown.
const MAX_ROWS: usize = 24;

/// Rows of the table: (span name, label, self time rather than total), the run's root
/// first (the program's wall time, spawn to exit), its main thread's time
/// outside any span, then the program's spans depth first, siblings by start, over the
/// first measured ok rep of each variant (`firsts`: [`first_reps`], walked into `walks`).
pub fn rows(data: &RunData, firsts: &[u32], walks: &mut Walks) -> Vec<(String, String, bool)> {
    let root = data.meta.phases().root.clone();
    let mut out = vec![
        (root.clone(), format!("total ({root})"), false),
        (root, "  outside spans (main thread)".to_string(), true),
    ];
    let mut seen = BTreeSet::new();
    for rep in firsts {
        for (name, depth) in walks.remove(rep).unwrap_or_default() {
            if out.len() >= MAX_ROWS {
                break;
            }
            if seen.insert(name.clone()) {
                let label = format!("{}{}", "  ".repeat(depth - 1), name);
                out.push((name, label, false));
            }
        }
    }
    out
}

/// Per rep walked ([`walk`]): its span names in table order, each with its depth.
pub type Walks = HashMap<u32, Vec<(String, usize)>>;

/// The first measured ok rep of each variant (in the variants' order): the reps whose
/// spans [`rows`] shows.
pub fn first_reps(data: &RunData) -> Vec<u32> {
    (data.meta.variants.iter())
        .filter_map(|v| {
            (data.runs.iter())
                .find(|r| r.variant == v.name && !r.warmup && r.status == RepStatus::Ok)
                .map(|r| r.rep)
        })
        .collect()
}

/// The spans of one rep below its roots, depth first, siblings by start, each name once
/// (with its depth where first met), at most [`MAX_ROWS`] of them.
pub fn walk(mine: &[&SpanRow]) -> Vec<(String, usize)> {
    let by_id: HashMap<u64, &SpanRow> = mine.iter().map(|s| (s.span_id, *s)).collect();
    let mut children: HashMap<Option<u64>, Vec<&SpanRow>> = HashMap::new();
    for s in mine {
        children.entry(s.parent_id).or_default().push(s);
    }
    for c in children.values_mut() {
        c.sort_by_key(|s| s.start_ns);
    }
    let roots: Vec<u64> = mine
        .iter()
        .filter(|s| s.parent_id.is_none())
        .map(|s| s.span_id)
        .collect();
    let mut stack: Vec<(u64, usize)> = roots.into_iter().rev().map(|id| (id, 0)).collect();
    let (mut out, mut seen) = (Vec::new(), BTreeSet::new());
    // Each span is looked up by its id and visited once (the store refuses repeated
    // ids and loops), and the walk ends with the list: linear in the spans.
    while let Some((id, depth)) = stack.pop() {
        if out.len() >= MAX_ROWS {
            break;
        }
        if depth < MAX_DEPTH {
            for c in children.get(&Some(id)).into_iter().flatten().rev() {
                stack.push((c.span_id, depth + 1));
            }
        }
        let Some(s) = by_id.get(&id) else {
            continue;
        };
        if depth > 0 && seen.insert(s.name.clone()) {
            out.push((s.name.to_string(), depth));
        }
    }
    out
}

/// One cell of the line-count rows.
type CountCell = fn(&LineCounts) -> String;

/// What the program's span lines held, per variant: lines that did not parse, begins
/// never ended and ends never begun, spans outside the rep (another clock).
pub fn line_counts(e: &CommandMeta, variants: &[String], width: usize) -> String {
    let mut s = String::new();
    let rows: [(&str, CountCell); 3] = [
        ("span lines unparseable", |c| c.unparseable.to_string()),
        ("unmatched begins/ends", |c| {
            format!("{}/{}", c.unmatched_begins, c.unmatched_ends)
        }),
        ("spans outside the rep", |c| c.outside_rep.to_string()),
    ];
    let refused = |c: &LineCounts| c.refused_ids.to_string();
    let any_refused = variants
        .iter()
        .any(|v| e.variants.get(v).is_some_and(|m| m.lines.refused_ids > 0));
    let extra =
        any_refused.then_some(("span ids refused (twice, self, loop)", refused as CountCell));
    for (label, f) in rows.into_iter().chain(extra) {
        let _ = write!(s, "{label:<width$}");
        for v in variants {
            let cell = e.variants.get(v).map(|m| f(&m.lines)).unwrap_or("-".into());
            let _ = write!(s, " {cell:>14}");
        }
        s.push('\n');
    }
    for v in variants {
        if let Some(e) = e.variants.get(v).and_then(|m| m.examples.first()) {
            let _ = writeln!(s, "  {v}, first unparseable line: {e}");
        }
    }
    s
}
