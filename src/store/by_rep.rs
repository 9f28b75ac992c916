//! A run folder's spans a rep at a time: the readers that reduce each rep to a few
//! numbers (the end of a run's table and headline) hold one rep's rows, not the run's.
//! A run writes each rep's rows together, so spans.csv is read once, in order, and a
//! rep's rows are handed over when the next rep's first row is read; each rep gets the
//! checks [`RunData::load`] makes of the whole table (values, ids, parent chains, its
//! count against runs.csv).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::integrity::{
    check_run_values, check_spans_from, check_unique_reps, uncommitted, uncommitted_reason,
};
use super::parts::{part_paths, PartStart};
use super::{
    gz_path, present, read_complete_each, RunData, RunRow, SpanRow, StoreError, RUNS, SPANS,
};

impl RunData {
    /// The folder's meta.json and runs.csv, checked as [`RunData::load`] checks them,
    /// with its spans left in spans.csv for [`RunData::for_each_rep`].
    pub fn load_spans_by_rep(dir: &Path) -> Result<Self, StoreError> {
        let (meta, runs) = RunData::read_head(dir)?;
        check_unique_reps(&dir.join(RUNS), &runs)?;
        check_run_values(&dir.join(RUNS), &runs)?;
        Ok(RunData {
            dir: dir.to_path_buf(),
            meta,
            runs,
            spans: Vec::new(),
            spans_on_disk: true,
        })
    }

    /// Calls `each` with the spans of each rep in turn (in file order), in the order of
    /// each rep's first row: from the loaded rows, or read from the folder a rep at a
    /// time where they were left there. A folder whose rep's rows are not together (no
    /// run writes one) is an error there; [`RunData::load`] reads it.
    pub fn for_each_rep(&self, mut each: impl FnMut(&[&SpanRow])) -> Result<(), StoreError> {
        if !self.spans_on_disk {
            let mut order: Vec<u32> = Vec::new();
            let mut rows: HashMap<u32, Vec<u32>> = HashMap::new();
            for (k, s) in self.spans.iter().enumerate() {
                rows.entry(s.rep)
                    .or_insert_with(|| {
                        order.push(s.rep);
                        Vec::new()
                    })
                    .push(k as u32);
            }
            for rep in order {
                let mine = rows.remove(&rep).unwrap_or_default();
                let spans: Vec<&SpanRow> = mine.iter().map(|&k| &self.spans[k as usize]).collect();
                drop(mine);
                each(&spans);
            }
            return Ok(());
        }
        let mut reps = Reps {
            dir: &self.dir,
            runs: &self.runs,
            parts: Vec::new(),
            rows: Vec::new(),
            first: 0,
            read: 0,
            done: HashSet::new(),
            each: &mut each,
        };
        for p in part_paths(&self.dir, SPANS)? {
            let path = match !present(&p) && present(&gz_path(&p)) {
                true => gz_path(&p),
                false => p.clone(),
            };
            reps.parts.push(PartStart {
                path,
                first: reps.read,
            });
            read_complete_each(&p, |row: SpanRow| reps.add(row))?;
        }
        reps.hand_over()?;
        // A rep runs.csv has that spans.csv holds no row of.
        for r in &self.runs {
            if reps.done.contains(&r.rep) {
                continue;
            }
            if let Some(why) = uncommitted_reason(r, 0) {
                return Err(uncommitted(&self.dir, r, &why));
            }
        }
        Ok(())
    }
}

/// The rep being read, and what was read before it.
struct Reps<'a, F: FnMut(&[&SpanRow])> {
    dir: &'a Path,
    runs: &'a [RunRow],
    parts: Vec<PartStart>,
    /// The rows of the rep being read.
    rows: Vec<SpanRow>,
    /// Its first row's number among every part's rows.
    first: usize,
    /// Rows read so far.
    read: usize,
    /// Reps handed over (or being read).
    done: HashSet<u32>,
    each: &'a mut F,
}

impl<F: FnMut(&[&SpanRow])> Reps<'_, F> {
    fn add(&mut self, row: SpanRow) -> Result<(), StoreError> {
        if self.rows.last().is_some_and(|r| r.rep != row.rep) {
            self.hand_over()?;
        }
        if self.rows.is_empty() {
            if !self.done.insert(row.rep) {
                let (path, line) = super::parts::locate(&self.parts, self.read);
                return Err(StoreError::Parse {
                    path,
                    line,
                    message: format!(
                        "rep {}'s rows are not together (a run writes each rep's rows at \
                         once): the file was edited",
                        row.rep
                    ),
                });
            }
            self.first = self.read;
        }
        self.rows.push(row);
        self.read += 1;
        Ok(())
    }

    /// Checks the rep read and hands it to `each`.
    fn hand_over(&mut self) -> Result<(), StoreError> {
        let Some(rep) = self.rows.first().map(|r| r.rep) else {
            return Ok(());
        };
        check_spans_from(&self.parts, self.first, &self.rows)?;
        if let Some(r) = self.runs.iter().find(|r| r.rep == rep) {
            if let Some(why) = uncommitted_reason(r, self.rows.len()) {
                return Err(uncommitted(self.dir, r, &why));
            }
        }
        let spans: Vec<&SpanRow> = self.rows.iter().collect();
        (self.each)(&spans);
        drop(spans);
        self.rows.clear();
        Ok(())
    }
}
