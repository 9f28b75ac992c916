//! Intervals of one chart row reduced to what its pixels can show, so that drawing a
//! row costs at most a few rectangles per pixel column however many intervals it holds
//! (a rep of a million spans). An interval a pixel wide or wider is drawn alone; those
//! narrower are merged, per pixel column, into one mark per run of columns of one colour
//! (grey where colours mix; a column of one such interval draws it alone, a pixel
//! wide); an interval lying wholly under intervals drawn before it
//! on the row (overlapping spans of one level) is not drawn. The counts go into the
//! chart's notes, so a reader knows what a mark stands for.

use plotters::style::RGBColor;

/// Colour of a merged mark whose spans have different colours.
pub(crate) const MIXED: RGBColor = RGBColor(120, 120, 120);

/// One rectangle to draw on the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Mark {
    pub x0: i32,
    pub x1: i32,
    pub color: RGBColor,
    /// The interval drawn alone (index into the row's items), whose label may be set;
    /// None for a mark of merged intervals.
    pub alone: Option<usize>,
}

/// What a row draws and what it folded away.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RowMarks {
    pub marks: Vec<Mark>,
    /// Intervals narrower than a pixel, drawn merged.
    pub merged: usize,
    /// Intervals wholly under ones drawn before them, not drawn.
    pub hidden: usize,
}

impl RowMarks {
    pub fn merged_marks(&self) -> usize {
        self.marks.iter().filter(|m| m.alone.is_none()).count()
    }
}

/// Marks of `items` ((start, end, colour) on the row's clock) placed by `to_px` (a
/// clock value to a fractional pixel).
pub(crate) fn row_marks(items: &[(u64, u64, RGBColor)], to_px: impl Fn(u64) -> f64) -> RowMarks {
    // Three passes over one set of pixel columns: each interval placed (a wide one as its
    // own mark, a narrow one into its column), the columns folded, then runs of one colour
    // made.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (items[i].0, items[i].1));
    let mut out = RowMarks::default();
    // Narrow intervals per pixel column: its colour (or MIXED), how many, the first.
    let mut columns: Vec<(i32, RGBColor, usize, usize)> = Vec::new();
    let mut painted_to = i32::MIN;
    for i in order {
        let (s, e, color) = items[i];
        let (fs, fe) = (to_px(s), to_px(e.max(s)));
        if fe - fs < 1.0 {
            let col = fs.round() as i32;
            match columns.last_mut() {
                Some((c, k, n, _)) if *c == col => {
                    *n += 1;
                    if *k != color {
                        *k = MIXED;
                    }
                }
                _ => columns.push((col, color, 1, i)),
            }
            continue;
        }
        let (x0, x1) = (fs.round() as i32, fe.round() as i32);
        let start = x0.max(painted_to);
        if x1 <= start {
            out.hidden += 1;
            continue;
        }
        out.marks.push(Mark {
            x0: start,
            x1,
            color,
            // A span cut at its start by one drawn before it gets no label.
            alone: (start == x0).then_some(i),
        });
        painted_to = x1;
    }
    // Sorted by start, narrow intervals fill columns in order, but one column may come
    // back after a wide interval: sort and fold again.
    columns.sort_by_key(|c| c.0);
    let mut folded: Vec<(i32, RGBColor, usize, usize)> = Vec::new();
    for (col, color, n, first) in columns {
        match folded.last_mut() {
            Some((c, k, m, _)) if *c == col => {
                *m += n;
                if *k != color {
                    *k = MIXED;
                }
            }
            _ => folded.push((col, color, n, first)),
        }
    }
    // A column of one narrow interval draws it alone, a pixel wide; columns of more
    // make runs of one colour.
    let mut runs: Vec<Mark> = Vec::new();
    for (col, color, n, first) in folded {
        if n == 1 {
            out.marks.push(Mark {
                x0: col,
                x1: col + 1,
                color,
                alone: Some(first),
            });
            continue;
        }
        out.merged += n;
        if let Some(r) = runs.last_mut() {
            if col == r.x1 && r.color == color {
                r.x1 += 1;
                continue;
            }
        }
        runs.push(Mark {
            x0: col,
            x1: col + 1,
            color,
            alone: None,
        });
    }
    out.marks.extend(runs);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: RGBColor = RGBColor(1, 2, 3);
    const B: RGBColor = RGBColor(4, 5, 6);

    #[test]
    fn a_million_narrow_intervals_become_at_most_one_mark_per_pixel() {
        // 1,000,000 intervals of 1 ns, back to back, on a 1,000-pixel row of 1 ms.
        let items: Vec<(u64, u64, RGBColor)> = (0..1_000_000u64).map(|i| (i, i + 1, A)).collect();
        let m = row_marks(&items, |t| t as f64 / 1000.0);
        assert_eq!(m.merged, 1_000_000);
        assert_eq!(m.hidden, 0);
        // Adjacent columns of one colour make one run.
        assert_eq!(m.marks.len(), 1, "{:?}", &m.marks[..m.marks.len().min(5)]);
        assert_eq!((m.marks[0].x0, m.marks[0].x1), (0, 1001));
        assert_eq!(m.marks[0].alone, None);
    }

    #[test]
    fn wide_intervals_are_drawn_alone_and_mixed_columns_are_grey() {
        let items = vec![
            (0, 10_000, A),      // 10 px: alone
            (20_000, 20_100, A), // narrow
            (20_200, 20_300, B), // narrow, same column: mixed
            (30_000, 30_100, B), // narrow, its own run
            (2_000, 5_000, B),   // wholly under the first: hidden
        ];
        let m = row_marks(&items, |t| t as f64 / 1000.0);
        assert_eq!((m.merged, m.hidden), (2, 1));
        assert_eq!(
            m.marks[0],
            Mark {
                x0: 0,
                x1: 10,
                color: A,
                alone: Some(0)
            }
        );
        // The lone narrow interval at 30 is drawn alone, a pixel wide.
        assert_eq!(m.merged_marks(), 1);
        assert_eq!(
            m.marks[1],
            Mark {
                x0: 30,
                x1: 31,
                color: B,
                alone: Some(3)
            }
        );
        assert_eq!((m.marks[2].x0, m.marks[2].color), (20, MIXED));
    }
}
