//! A series over commits, drawn with its steps: each measured commit's reps (dots) and
//! their median (line), a vertical band at each step (red: regressed, green: improved,
//! amber: suspected) labelled with its change, and the segments' medians. SVG and PNG,
//! with the embedded face (plot::canvas), so no system font is needed.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::detect::StepVerdict;
use super::series::{Analysed, SeriesKey};
use crate::plot::canvas::{nice_ticks, Align, Axis, Canvas};
use crate::plot::{register_font, Drawn};

const W: u32 = 960;
const H: u32 = 420;

fn draw<DB: DrawingBackend>(a: &Analysed, c: &Canvas<'_, DB>) -> Drawn
where
    DB::ErrorType: 'static,
{
    // One chart top to bottom: title, axes, confirmed steps, medians between them, the
    // series' points and the commits' labels. Every part draws on the same axes.
    c.rect((0, 0), (W as i32, H as i32), WHITE.to_rgba())?;
    let k = &a.series.key;
    let title = format!("{} — {}", k.metric, k.workload);
    c.text(&title, (16, 16), 16, BLACK, Align::Left)?;
    let sub = format!(
        "[{}] on host {} ({}); σ between commits {:.4}",
        k.variant_key, k.host_id, k.hostname, a.detection.noise
    );
    c.text(&sub, (16, 36), 11, RGBColor(90, 90, 90), Align::Left)?;
    let pts = &a.series.points;
    let n = pts.len();
    let values = pts.iter().flat_map(|p| p.values.iter().copied());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 1e-3).max(1e-12);
    let (x0, x1, y0, y1) = (80, W as i32 - 20, H as i32 - 70, 56);
    let ys = Axis::new(lo - pad, hi + pad, y0, y1);
    let xs = Axis::new(-0.5, n as f64 - 0.5, x0, x1);
    for t in nice_ticks(lo - pad, hi + pad, 6) {
        let y = ys.px(t);
        c.line(&[(x0, y), (x1, y)], RGBColor(230, 230, 230).to_rgba(), 1)?;
        c.text(&tick(t), (x0 - 6, y), 10, BLACK, Align::Right)?;
    }
    for s in &a.steps {
        let x = (xs.px(s.step.index as f64 - 1.0) + xs.px(s.step.index as f64)) / 2;
        let col = match s.step.verdict {
            StepVerdict::Regressed => RGBColor(200, 40, 40),
            StepVerdict::Improved => RGBColor(30, 140, 60),
            StepVerdict::Suspected => RGBColor(220, 150, 20),
        };
        c.rect((x - 2, y1), (x + 2, y0), col.mix(0.5))?;
        let label = format!("{:+.1}% {}", s.step.change * 100.0, s.step.verdict);
        c.text(&label, (x + 6, y1 + 8), 11, col, Align::Left)?;
    }
    // Segment medians between confirmed steps.
    let mut cuts: Vec<usize> = a
        .steps
        .iter()
        .filter(|s| s.step.verdict != StepVerdict::Suspected)
        .map(|s| s.step.index)
        .collect();
    cuts.insert(0, 0);
    cuts.push(n);
    for w in cuts.windows(2) {
        if let Some(m) = crate::stats::median(&a.detection.medians[w[0]..w[1]]) {
            let (xa, xb) = (xs.px(w[0] as f64 - 0.4), xs.px(w[1] as f64 - 0.6));
            c.line(
                &[(xa, ys.px(m)), (xb, ys.px(m))],
                RGBColor(120, 120, 200).to_rgba(),
                2,
            )?;
        }
    }
    let line: Vec<(i32, i32)> = a
        .detection
        .medians
        .iter()
        .enumerate()
        .map(|(i, &m)| (xs.px(i as f64), ys.px(m)))
        .collect();
    c.line(&line, RGBColor(40, 40, 40).to_rgba(), 1)?;
    for (i, p) in pts.iter().enumerate() {
        for &v in &p.values {
            c.dot(
                (xs.px(i as f64), ys.px(v)),
                2,
                RGBColor(60, 90, 160).mix(0.6),
            )?;
        }
    }
    let every = n.div_ceil(12).max(1);
    for (i, p) in pts.iter().enumerate().step_by(every) {
        let x = xs.px(i as f64);
        c.text(
            &p.sha[..p.sha.len().min(7)],
            (x, y0 + 14),
            10,
            BLACK,
            Align::Center,
        )?;
    }
    c.text(
        "measured first-parent commits, oldest left",
        ((x0 + x1) / 2, y0 + 36),
        11,
        RGBColor(90, 90, 90),
        Align::Center,
    )?;
    Ok(())
}

/// A tick label short enough for the margin: 1.5e9 rather than 1500000000.0000.
fn tick(v: f64) -> String {
    if v != 0.0 && !(1e-3..1e5).contains(&v.abs()) {
        format!("{v:.3e}")
    } else {
        format!("{v:.4}")
    }
}

/// `<metric>-<workload>-<variant>-<host>-<hash>`: readable, with the characters of a
/// file name only, and one file per series (the hash is of the whole key, so two
/// variants whose names agree past the cut, or once sanitised, still get two files).
fn file_stem(k: &SeriesKey) -> String {
    let raw = format!(
        "{}-{}-{}-{}",
        k.metric, k.workload, k.variant_key, k.host_id
    );
    let readable: String = raw
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' {
                ch
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    let whole = format!(
        "{}\n{}\n{}\n{}\n{}",
        k.metric, k.workload, k.variant_key, k.host_id, k.hostname
    );
    let hash = crate::store::experiment_sha256(&whole);
    format!("{readable}-{}", &hash[..10])
}

/// Writes `<dir>/<metric>-<workload>-<variant>-<host>-<hash>.svg` and `.png`.
pub fn write(a: &Analysed, dir: &Path) -> Result<Vec<PathBuf>, String> {
    register_font().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let stem = file_stem(&a.series.key);
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    // Drawn in memory and written whole through fsx: never through a link planted
    // under a chart's name, never over a device.
    let (svg_bytes, ()) =
        crate::plot::svg_bytes((W, H), |root| draw_on(a, root, false).map_err(Into::into))
            .map_err(|e| e.to_string())?;
    let (png_bytes, ()) =
        crate::plot::png_bytes((W, H), |root| draw_on(a, root, true).map_err(Into::into))
            .map_err(|e| e.to_string())?;
    for (path, bytes) in [(&svg, svg_bytes), (&png, png_bytes)] {
        crate::fsx::write_file(path, &bytes).map_err(|e| e.to_string())?;
    }
    Ok(vec![svg, png])
}

fn draw_on<DB: DrawingBackend>(
    a: &Analysed,
    area: &DrawingArea<DB, Shift>,
    raster: bool,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let c = if raster {
        Canvas::raster(area)
    } else {
        Canvas::vector(area)
    };
    draw(a, &c).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_of_a_series_gets_its_own_file() {
        let key = |variant: &str| SeriesKey {
            metric: "prove.total".into(),
            workload: "porep 2^10 x1".into(),
            variant_key: variant.into(),
            host_id: "h1".into(),
            hostname: "box".into(),
        };
        let (a, b) = (key("backend=cpu,drop=sync"), key("backend=cpu,drop=async"));
        assert_ne!(file_stem(&a), file_stem(&b));
        assert!(file_stem(&a).starts_with("prove.total-porep_2_10_x1-backend_cpu_drop_sync-h1-"));
        // Keys alike once sanitised, or past the cut, still differ.
        assert_ne!(file_stem(&key("drop=a/b")), file_stem(&key("drop=a_b")));
        let long = "k".repeat(200);
        assert_ne!(
            file_stem(&key(&format!("{long}1"))),
            file_stem(&key(&format!("{long}2")))
        );
        assert_eq!(file_stem(&a), file_stem(&a.clone()));
    }
}
