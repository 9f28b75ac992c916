//! The search: binary search over a first-parent history whose first commit is good and
//! whose last is bad, with commits that cannot be judged skipped (as `git bisect skip`
//! does). It assumes the metric changes once between the ends (monotone); it knows
//! nothing of how a commit is judged.

use serde::{Deserialize, Serialize};

/// What the judge said of one commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Good,
    Bad,
    /// Not judged (did not build, or its measurement could not tell).
    Skip,
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchOutcome {
    /// The first bad commit's index, when one commit is left.
    pub first_bad: Option<usize>,
    /// The commits that may be the first bad one (skipped commits and the bad one after
    /// them), oldest first; one element when `first_bad` is set.
    pub candidates: Vec<usize>,
    /// The last good index.
    pub last_good: usize,
    /// Every commit judged, in the order judged.
    pub steps: Vec<(usize, Label)>,
}

/// Searches `len` commits (index 0 good, `len - 1` bad, as given: they are not judged),
/// asking `judge` about the commit in the middle of what is left, or the one nearest it
/// that has not been skipped.
pub fn search<E>(
    len: usize,
    mut judge: impl FnMut(usize) -> Result<Label, E>,
) -> Result<SearchOutcome, E> {
    assert!(len >= 2, "a history to search has a good and a bad end");
    let (mut lo, mut hi) = (0, len - 1);
    let mut skipped = std::collections::BTreeSet::new();
    let mut steps = Vec::new();
    while let Some(i) = next(lo, hi, &skipped) {
        let label = judge(i)?;
        steps.push((i, label));
        match label {
            Label::Good => lo = i,
            Label::Bad => hi = i,
            Label::Skip => {
                skipped.insert(i);
            }
        }
    }
    let candidates: Vec<usize> = (lo + 1..=hi).collect();
    Ok(SearchOutcome {
        first_bad: (candidates.len() == 1).then_some(hi),
        candidates,
        last_good: lo,
        steps,
    })
}

/// The untried commit strictly between `lo` and `hi` nearest their middle (the lower one
/// of two as near).
fn next(lo: usize, hi: usize, skipped: &std::collections::BTreeSet<usize>) -> Option<usize> {
    let mid = (lo + hi) / 2;
    (lo + 1..hi)
        .filter(|i| !skipped.contains(i))
        .min_by_key(|&i| (i.abs_diff(mid), i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(len: usize, first_bad: usize, skip: &[usize]) -> SearchOutcome {
        search::<()>(len, |i| {
            Ok(if skip.contains(&i) {
                Label::Skip
            } else if i >= first_bad {
                Label::Bad
            } else {
                Label::Good
            })
        })
        .unwrap()
    }

    #[test]
    fn every_position_of_the_first_bad_commit_is_found_in_log2_steps() {
        for len in 2..40 {
            for bad in 1..len {
                let o = run(len, bad, &[]);
                assert_eq!(o.first_bad, Some(bad), "len {len} bad {bad}");
                assert_eq!(o.last_good, bad - 1);
                let max = (len as f64).log2().ceil() as usize;
                assert!(o.steps.len() <= max, "len {len}: {} steps", o.steps.len());
                // Ends are never judged.
                assert!(o.steps.iter().all(|(i, _)| *i != 0 && *i != len - 1));
            }
        }
    }

    #[test]
    fn skipped_commits_are_stepped_around() {
        // The middle (4) does not build: its neighbours are judged instead.
        let o = run(9, 6, &[4]);
        assert_eq!(o.first_bad, Some(6));
        assert_eq!(o.steps[0], (4, Label::Skip));
        assert_eq!(o.steps[1].0, 3);
        // The skipped commit may be the first bad one: both are candidates.
        let o = run(9, 4, &[4]);
        assert_eq!(o.first_bad, None);
        assert_eq!(o.candidates, vec![4, 5]);
        assert_eq!(o.last_good, 3);
        // Everything between the ends skipped: all of it is a candidate.
        let o = run(5, 2, &[1, 2, 3]);
        assert_eq!((o.first_bad, o.candidates), (None, vec![1, 2, 3, 4]));
        assert_eq!(o.steps.len(), 3);
    }

    #[test]
    fn adjacent_ends_need_no_step_and_errors_stop_the_search() {
        let o = run(2, 1, &[]);
        assert_eq!((o.first_bad, o.steps.len()), (Some(1), 0));
        let e = search(10, |i| if i == 4 { Err(i) } else { Ok(Label::Good) });
        assert_eq!(e, Err(4));
    }
}
