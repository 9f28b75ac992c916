//! The phase chart read back from its SVG: a bar whose stacked medians are not the
//! median end-to-end time says so with both numbers.

use std::path::Path;

use super::{variant_phases, Phases};
use crate::plot::{render, ImageFormat};
use crate::store::RunView;
use crate::units::fmt_ns_short;

#[test]
fn a_bar_that_is_not_its_label_says_so_with_both_numbers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu");
    let view = RunView::load(&dir).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let r = render(&Phases::default(), &view, tmp.path(), &[ImageFormat::Svg]).unwrap();
    let svg = std::fs::read_to_string(tmp.path().join("phases.svg")).unwrap();
    let notes = r.notes.0.join("\n");
    let mut apart = 0;
    for v in view.variants() {
        let p = variant_phases(&view, &v);
        let (sum, wall) = (p.critical.values().sum::<f64>(), p.wall_ns.unwrap());
        let both = format!("{} · bar {}", fmt_ns_short(wall), fmt_ns_short(sum));
        if (wall - sum).abs() > 0.01 * wall {
            apart += 1;
            assert!(svg.contains(&both), "{v}: {both} not in the SVG");
            assert!(notes.contains(&format!("{v}: its bar")), "{notes}");
        } else {
            assert!(svg.contains(&fmt_ns_short(wall)) && !svg.contains(&both));
        }
    }
    // The committed run has such a bar: the test reads one.
    assert!(
        apart > 0,
        "no variant's bar differs from its median: {notes}"
    );
}

/// The committed quickstart run with every leaf span twenty times over under twenty
/// names, in every rep: hundreds of names, each with time in every rep; and how many.
fn many_names() -> (RunView, usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu");
    let mut data = RunView::load(&dir).unwrap().data;
    let parents: std::collections::HashSet<(u32, u64)> = data
        .spans
        .iter()
        .filter_map(|s| s.parent_id.map(|p| (s.rep, p)))
        .collect();
    let leaves: Vec<_> = data
        .spans
        .iter()
        .filter(|s| s.parent_id.is_some() && !parents.contains(&(s.rep, s.span_id)))
        .cloned()
        .collect();
    for j in 1..=20u64 {
        for l in &leaves {
            let mut c = l.clone();
            c.span_id += j << 40;
            c.name = format!("{}_{j}", l.name).into();
            data.spans.push(c);
        }
    }
    let names: std::collections::HashSet<&str> =
        data.spans.iter().map(|s| s.name.as_str()).collect();
    let names = names.len();
    assert!(names > 4 * super::model::MAX_NAMES, "{names} names");
    (RunView::new(data), names)
}

/// A run with hundreds of span names draws its phase chart at a fixed size: the names
/// with the least time are summed into one "+N other names" segment and row.
#[test]
fn many_names_fold_into_one_segment_at_a_fixed_size() {
    let (view, _) = many_names();
    let chart = Phases::default();
    let (_, crit, other) = chart.model(&view);
    let rows = super::table_rows(&crit, &other).len();
    assert!(rows <= 4 * super::model::MAX_NAMES + 2, "{rows} table rows");
    let tmp = tempfile::tempdir().unwrap();
    render(&chart, &view, tmp.path(), &[ImageFormat::Svg]).unwrap();
    let svg = std::fs::read_to_string(tmp.path().join("phases.svg")).unwrap();
    assert!(
        svg.contains(" other names"),
        "no folded row: {:?}",
        crit.iter().rev().take(3).collect::<Vec<_>>()
    );
    // Each variant's folded segment holds the time of the names it stands for: the
    // bar's length is unchanged by folding.
    for p in chart.model(&view).0 {
        let all: f64 = super::variant_phases(&view, &p.variant)
            .critical
            .values()
            .sum();
        let folded: f64 = p.critical.values().sum();
        assert!(
            (all - folded).abs() <= 1e-6 * all.max(1.0),
            "{all} vs {folded}"
        );
    }
}

/// The distributions chart of such a run draws a fixed number of panels and says how
/// many span times it left out.
#[test]
fn many_names_draw_a_fixed_number_of_distributions() {
    use crate::plot::Chart;
    let (view, _) = many_names();
    let chart = crate::plot::distributions::Distributions::default();
    let (_, h) = chart.size(&view);
    assert!(h <= 66 + 12 * 230 + 10, "{h} px high");
    let tmp = tempfile::tempdir().unwrap();
    let r = render(&chart, &view, tmp.path(), &[ImageFormat::Svg]).unwrap();
    let notes = r.notes.0.join("\n");
    assert!(
        notes.contains(" other span times not drawn: the 48 with the largest median"),
        "{notes}"
    );
}

/// The timeline of such a run lists a fixed number of names in its legend, the rest as
/// one "+N other names" entry.
#[test]
fn many_names_keep_the_timeline_legend_short() {
    use crate::plot::Chart;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu");
    let chart = crate::plot::timeline::Timeline;
    let (_, before) = chart.size(&RunView::load(&dir).unwrap());
    let (view, _) = many_names();
    let (_, after) = chart.size(&view);
    // 60 names fill at most a few more legend rows than the run's own (22 px each).
    assert!(
        after <= before + 8 * 22,
        "{before} px before, {after} px with many names"
    );
    let tmp = tempfile::tempdir().unwrap();
    render(&chart, &view, tmp.path(), &[ImageFormat::Svg]).unwrap();
    let svg = std::fs::read_to_string(tmp.path().join("timeline.svg")).unwrap();
    assert!(svg.contains(" other names"), "no folded legend entry");
}
