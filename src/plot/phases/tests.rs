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
