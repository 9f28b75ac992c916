//! Charts of where the time went, drawn from a run folder: after `store` has the spans,
//! before `report` assembles them into a review. One file per chart, each behind the
//! [`Chart`] trait and drawn twice, as SVG and PNG.
//!
//! A chart's Δ is never its own arithmetic: the phase, distribution and change charts
//! draw the diff's changes ([`verdict::Changes`], which the report fills from the diffs)
//! coloured by the diff's verdicts. A chart of "the median rep" draws
//! [`RunView::representative_rep`].
//!
//! Text is set with the DejaVu Sans face embedded from `assets/fonts/`, so drawing needs
//! no system font. A chart that fails (or panics) yields an error for that chart only:
//! [`render_all`] never fails as a whole.

pub mod canvas;
pub mod change;
pub mod distributions;
pub mod gaps;
mod lanes;
mod merge;
pub mod phases;
pub mod timeline;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

pub use canvas::{DrawError, Drawn};

use crate::store::RunView;

static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded face under the generic family names plotters asks for.
pub fn register_font() -> Result<(), PlotError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        ["sans-serif", "serif", "monospace"].iter().all(|family| {
            plotters::style::register_font(family, FontStyle::Normal, FONT_BYTES).is_ok()
        })
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Font)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("the embedded font could not be loaded (assets/fonts/DejaVuSans.ttf is damaged?)")]
    Font,
    #[error("chart {chart}: drawing {path} failed: {message}")]
    Draw {
        chart: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("chart {chart}: {source}")]
    Write {
        chart: &'static str,
        source: crate::fsx::WriteError,
    },
    #[error("chart {chart}: {path}: {source}")]
    Io {
        chart: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Image formats a chart is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Svg => "svg",
            ImageFormat::Png => "png",
        }
    }
}

/// What a chart drew and what it could not (one line per missing piece of data).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Notes(pub Vec<String>);

impl Notes {
    pub fn push(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.0.contains(&note) {
            self.0.push(note);
        }
    }
}

/// One chart: a size and a drawing on a pixel canvas. `draw_svg` and `draw_png` both
/// forward to one generic drawing function (see [`chart_backends!`]).
pub trait Chart {
    /// File stem: `phases` gives phases.svg and phases.png.
    fn name(&self) -> &'static str;
    /// A heading for the report.
    fn title(&self) -> &'static str;
    /// One sentence telling a reader what the chart shows.
    fn caption(&self) -> &'static str;
    /// Pixel size for this run (charts grow with rows and panels).
    fn size(&self, input: &RunView) -> (u32, u32);
    /// Why this run gets no such chart (one line), when it does not: no file is written.
    fn not_drawn(&self, _input: &RunView) -> Option<String> {
        None
    }
    fn draw_svg(&self, input: &RunView, area: &DrawingArea<SVGBackend<'_>, Shift>) -> Drawn<Notes>;
    fn draw_png(
        &self,
        input: &RunView,
        area: &DrawingArea<BitMapBackend<'_>, Shift>,
    ) -> Drawn<Notes>;
}

/// Implements [`Chart::draw_svg`] and [`Chart::draw_png`] with the chart's generic
/// `fn draw<DB>(&self, input, canvas) -> Drawn<Notes>`.
macro_rules! chart_backends {
    () => {
        fn draw_svg(
            &self,
            input: &$crate::store::RunView,
            area: &plotters::drawing::DrawingArea<
                plotters::prelude::SVGBackend<'_>,
                plotters::coord::Shift,
            >,
        ) -> $crate::plot::Drawn<$crate::plot::Notes> {
            self.draw(input, &$crate::plot::canvas::Canvas::vector(area))
        }
        fn draw_png(
            &self,
            input: &$crate::store::RunView,
            area: &plotters::drawing::DrawingArea<
                plotters::prelude::BitMapBackend<'_>,
                plotters::coord::Shift,
            >,
        ) -> $crate::plot::Drawn<$crate::plot::Notes> {
            self.draw(input, &$crate::plot::canvas::Canvas::raster(area))
        }
    };
}
pub(crate) use chart_backends;

/// Every chart, in report order; `changes` are the diffs' changes the phase and
/// distribution charts print (empty: medians only, no Δ).
pub fn all_charts(changes: &verdict::Changes) -> Vec<Box<dyn Chart>> {
    vec![
        Box::new(phases::Phases {
            changes: changes.clone(),
        }),
        Box::new(gaps::Gaps),
        Box::new(timeline::Timeline),
        Box::new(distributions::Distributions {
            changes: changes.clone(),
        }),
    ]
}

/// A chart written to disk.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub chart: &'static str,
    pub title: &'static str,
    pub caption: &'static str,
    pub files: Vec<PathBuf>,
    pub notes: Notes,
    /// The chart does not apply to this run ([`Chart::not_drawn`]): why; no files.
    pub skipped: Option<String>,
}

/// The outcome of one chart: its files, or why it could not be drawn.
pub type ChartOutcome = Result<Rendered, PlotError>;

/// Draws `chart` into `dir` in each format. A panic inside plotters is turned into an
/// error for this chart.
pub fn render(
    chart: &dyn Chart,
    input: &RunView,
    dir: &Path,
    formats: &[ImageFormat],
) -> ChartOutcome {
    if let Some(why) = chart.not_drawn(input) {
        // An image of an earlier report in the same folder must not pass for this run's.
        for format in formats {
            let _ =
                std::fs::remove_file(dir.join(format!("{}.{}", chart.name(), format.extension())));
        }
        return Ok(Rendered {
            chart: chart.name(),
            title: chart.title(),
            caption: chart.caption(),
            files: Vec::new(),
            notes: Notes::default(),
            skipped: Some(why),
        });
    }
    register_font()?;
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Io {
        chart: chart.name(),
        path: dir.to_path_buf(),
        source,
    })?;
    let size = chart.size(input);
    let mut files = Vec::new();
    let mut notes = Notes::default();
    for &format in formats {
        let path = dir.join(format!("{}.{}", chart.name(), format.extension()));
        let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            draw_file(chart, input, size, format)
        }));
        let result = match drawn {
            Ok(r) => r,
            Err(panic) => Err(panic_message(&panic).into()),
        };
        match result {
            Ok((bytes, n)) => {
                // Whole or not at all: a report never links to a half-written image, and
                // a link or a device planted under the chart's name is not written to.
                crate::fsx::write_file(&path, &bytes).map_err(|source| PlotError::Write {
                    chart: chart.name(),
                    source,
                })?;
                for line in n.0 {
                    notes.push(line);
                }
                files.push(path);
            }
            Err(e) => {
                // An image of an earlier report under this name would be taken for this
                // one's: it goes (a regular file only; a link or a folder stays).
                if matches!(crate::fsx::check_target(&path), Ok(true)) {
                    let _ = std::fs::remove_file(&path);
                }
                return Err(PlotError::Draw {
                    chart: chart.name(),
                    path,
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(Rendered {
        chart: chart.name(),
        title: chart.title(),
        caption: chart.caption(),
        files,
        notes,
        skipped: None,
    })
}

/// Draws `chart` in `format` in memory: the file is written by the caller through
/// [`crate::fsx`], never by a backend that opens a path (and follows a link there).
fn draw_file(
    chart: &dyn Chart,
    input: &RunView,
    size: (u32, u32),
    format: ImageFormat,
) -> Drawn<(Vec<u8>, Notes)> {
    match format {
        ImageFormat::Svg => svg_bytes(size, |root| chart.draw_svg(input, root)),
        ImageFormat::Png => png_bytes(size, |root| chart.draw_png(input, root)),
    }
}

/// An SVG drawn by `draw` on a white canvas of `size`, as bytes.
pub(crate) fn svg_bytes<T>(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Drawn<T>,
) -> Drawn<(Vec<u8>, T)> {
    let mut text = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        root.fill(&WHITE)?;
        let drawn = draw(&root)?;
        root.present()?;
        drawn
    };
    Ok((text.into_bytes(), drawn))
}

/// A PNG drawn by `draw` on a white RGB canvas of `size`, encoded in memory.
pub(crate) fn png_bytes<T>(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Drawn<T>,
) -> Drawn<(Vec<u8>, T)> {
    let (w, h) = size;
    let len = (w as usize)
        .checked_mul(h as usize)
        .and_then(|n| n.checked_mul(3))
        .ok_or_else(|| format!("a {w} x {h} image is too large to draw"))?;
    let mut pixels = vec![0u8; len];
    let drawn = {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        root.fill(&WHITE)?;
        let drawn = draw(&root)?;
        root.present()?;
        drawn
    };
    let mut png = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut png),
        &pixels,
        w,
        h,
        image::ColorType::Rgb8,
    )?;
    Ok((png, drawn))
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("the drawing code panicked: {msg}")
}

/// Draws every chart; each outcome stands alone.
pub fn render_all(
    input: &RunView,
    dir: &Path,
    formats: &[ImageFormat],
    changes: &verdict::Changes,
) -> Vec<(&'static str, ChartOutcome)> {
    all_charts(changes)
        .iter()
        .map(|c| (c.name(), render(c.as_ref(), input, dir, formats)))
        .collect()
}

/// Title line and subtitle common to every chart; returns the y below them.
pub(crate) fn header<DB>(c: &canvas::Canvas<'_, DB>, title: &str, subtitle: &str) -> Drawn<i32>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    use canvas::*;
    let (w, _) = c.size();
    c.bold(
        &fit(title, TITLE_PX, w - 40),
        (20, 22),
        TITLE_PX,
        INK,
        Align::Left,
    )?;
    c.text(
        &fit(subtitle, SMALL_PX, w - 40),
        (20, 48),
        SMALL_PX,
        MUTED,
        Align::Left,
    )?;
    Ok(66)
}

/// Where the drawn rep stands among `n` reps ([`RunView::representative_rep`]): "the
/// median of 5 reps", "the lower middle of 6 reps (by wall time)".
pub(crate) fn median_rep_words(n: usize) -> String {
    if n % 2 == 1 {
        format!("the median of {n} reps")
    } else {
        format!("the lower of the two middle of {n} reps")
    }
}

/// One-line description of the run for chart subtitles.
pub(crate) fn run_line(input: &RunView) -> String {
    let m = &input.data.meta;
    format!(
        "{} · {} · run {}",
        m.experiment,
        m.workload.describe(),
        m.run_id
    )
}
