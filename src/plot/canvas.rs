//! Drawing primitives shared by the charts: pixel-space shapes and text on one plotters
//! drawing area, a linear axis with round ticks, time units, and the span colours.
//!
//! Charts draw in pixels rather than through plotters' chart builder so that every label
//! can be measured and shortened before it is placed: long span names never overlap.

use std::error::Error;
use std::sync::OnceLock;

use ab_glyph::{point, Font, FontRef, Glyph, GlyphId, PxScale, ScaleFont};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub use crate::units::TimeUnit;

/// Error of one drawing call; charts propagate it with `?`.
pub type DrawError = Box<dyn Error + Send + Sync>;
pub type Drawn<T = ()> = Result<T, DrawError>;

pub const FONT: &str = "sans-serif";
/// Font sizes in pixels, chosen to stay readable on a 1200-pixel-wide image.
pub const TITLE_PX: u32 = 22;
pub const LABEL_PX: u32 = 15;
pub const SMALL_PX: u32 = 13;

pub const INK: RGBColor = RGBColor(33, 33, 33);
pub const MUTED: RGBColor = RGBColor(110, 110, 110);
pub const GRID: RGBColor = RGBColor(225, 225, 225);
pub const GHOST: RGBColor = RGBColor(200, 40, 40);
pub const WORSE: RGBColor = RGBColor(190, 30, 30);
pub const BETTER: RGBColor = RGBColor(20, 130, 60);

/// Horizontal text alignment.
#[derive(Clone, Copy, Debug)]
pub enum Align {
    Left,
    Center,
    Right,
}

/// Pixel-space drawing on one area (origin top left).
pub struct Canvas<'a, DB: DrawingBackend> {
    pub area: &'a DrawingArea<DB, Shift>,
    /// Set glyphs ourselves, pixel by pixel (bitmaps), rather than emit text (SVG).
    raster_text: bool,
}

/// The embedded face (DejaVu Sans), parsed once.
fn face() -> &'static FontRef<'static> {
    static FACE: OnceLock<FontRef<'static>> = OnceLock::new();
    FACE.get_or_init(|| {
        FontRef::try_from_slice(super::FONT_BYTES).expect("the embedded font parses")
    })
}

/// Glyphs of `s` at `px` (line height) laid out from the pen position, with kerning.
fn layout(s: &str, px: u32, (x, baseline): (f32, f32)) -> (Vec<Glyph>, f32) {
    let scale = PxScale::from(px as f32);
    let font = face().as_scaled(scale);
    let mut caret = x;
    let mut prev: Option<GlyphId> = None;
    let mut glyphs = Vec::with_capacity(s.len());
    for ch in s.chars() {
        let id = font.glyph_id(ch);
        if let Some(p) = prev {
            caret += font.kern(p, id);
        }
        glyphs.push(id.with_scale_and_position(scale, point(caret, baseline)));
        caret += font.h_advance(id);
        prev = Some(id);
    }
    (glyphs, caret - x)
}

impl<'a, DB> Canvas<'a, DB>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    /// A canvas whose text is emitted as text (SVG: the viewer sets it).
    pub fn vector(area: &'a DrawingArea<DB, Shift>) -> Self {
        Canvas {
            area,
            raster_text: false,
        }
    }

    /// A canvas whose text is rasterised here from the embedded face (PNG).
    pub fn raster(area: &'a DrawingArea<DB, Shift>) -> Self {
        Canvas {
            area,
            raster_text: true,
        }
    }

    pub fn size(&self) -> (i32, i32) {
        let (w, h) = self.area.dim_in_pixel();
        (w as i32, h as i32)
    }

    pub fn rect(&self, (x0, y0): (i32, i32), (x1, y1): (i32, i32), color: RGBAColor) -> Drawn {
        self.area
            .draw(&Rectangle::new([(x0, y0), (x1, y1)], color.filled()))?;
        Ok(())
    }

    pub fn outline(
        &self,
        (x0, y0): (i32, i32),
        (x1, y1): (i32, i32),
        color: RGBAColor,
        width: u32,
    ) -> Drawn {
        self.area.draw(&Rectangle::new(
            [(x0, y0), (x1, y1)],
            color.stroke_width(width),
        ))?;
        Ok(())
    }

    /// A rectangle filled pale and crossed by diagonal stripes: the look of time that no
    /// span accounts for.
    pub fn hatch(&self, (x0, y0): (i32, i32), (x1, y1): (i32, i32), color: RGBColor) -> Drawn {
        let (x0, x1) = (x0.min(x1), x0.max(x1));
        let (y0, y1) = (y0.min(y1), y0.max(y1));
        if x1 <= x0 || y1 <= y0 {
            return Ok(());
        }
        self.rect((x0, y0), (x1, y1), color.mix(0.18))?;
        let h = y1 - y0;
        let step = 7;
        // Stripes rising to the right: x = c + (y1 - y), clipped to the box.
        let mut c = x0 - h;
        while c < x1 {
            let (mut ax, mut ay) = (c, y1);
            let (mut bx, mut by) = (c + h, y0);
            if ax < x0 {
                ay -= x0 - ax;
                ax = x0;
            }
            if bx > x1 {
                by += bx - x1;
                bx = x1;
            }
            if ax <= bx {
                self.line(&[(ax, ay), (bx, by)], color.mix(0.75), 1)?;
            }
            c += step;
        }
        self.outline((x0, y0), (x1, y1), color.mix(0.9), 1)
    }

    pub fn line(&self, points: &[(i32, i32)], color: RGBAColor, width: u32) -> Drawn {
        self.area.draw(&PathElement::new(
            points.to_vec(),
            color.stroke_width(width),
        ))?;
        Ok(())
    }

    pub fn dot(&self, (x, y): (i32, i32), radius: i32, color: RGBAColor) -> Drawn {
        self.area
            .draw(&Circle::new((x, y), radius, color.filled()))?;
        Ok(())
    }

    /// Text vertically centred on `y`.
    pub fn text(
        &self,
        s: &str,
        (x, y): (i32, i32),
        px: u32,
        color: RGBColor,
        align: Align,
    ) -> Drawn {
        if s.is_empty() {
            return Ok(());
        }
        if self.raster_text {
            return self.set_glyphs(s, (x, y), px, color, align);
        }
        let h = match align {
            Align::Left => HPos::Left,
            Align::Center => HPos::Center,
            Align::Right => HPos::Right,
        };
        let style = (FONT, px)
            .into_font()
            .color(&color)
            .pos(Pos::new(h, VPos::Center));
        self.area.draw(&Text::new(s.to_string(), (x, y), style))?;
        Ok(())
    }

    /// Draws glyph coverage as blended pixels. plotters' own ab_glyph path drops each
    /// glyph's side bearing, which spaces letters unevenly; this one keeps it.
    fn set_glyphs(
        &self,
        s: &str,
        (x, y): (i32, i32),
        px: u32,
        color: RGBColor,
        align: Align,
    ) -> Drawn {
        let width = text_width(s, px) as f32;
        let left = match align {
            Align::Left => x as f32,
            Align::Center => x as f32 - width / 2.0,
            Align::Right => x as f32 - width,
        };
        let font = face().as_scaled(PxScale::from(px as f32));
        // Centre the box from ascender to descender on y.
        let baseline = (y as f32 + (font.ascent() + font.descent()) / 2.0).round();
        let (glyphs, _) = layout(s, px, (left, baseline));
        let mut pixels = Vec::new();
        for g in glyphs {
            if let Some(outline) = face().outline_glyph(g) {
                let b = outline.px_bounds();
                outline.draw(|gx, gy, cov| {
                    if cov > 0.02 {
                        pixels.push((
                            b.min.x as i32 + gx as i32,
                            b.min.y as i32 + gy as i32,
                            cov.min(1.0),
                        ));
                    }
                });
            }
        }
        for (px, py, cov) in pixels {
            self.area.draw_pixel((px, py), &color.mix(cov as f64))?;
        }
        Ok(())
    }

    /// A time axis's ticks: a grid line from `top` to `bottom` and a label at `label_y`
    /// for each of `axis`'s ticks (about `count`), in `unit`. Returns the ticks' x pixels.
    pub fn time_ticks(
        &self,
        axis: &Axis,
        unit: &TimeUnit,
        count: usize,
        (top, bottom): (i32, i32),
        grid: RGBAColor,
        label_y: i32,
    ) -> Drawn<Vec<i32>> {
        let ticks = axis.ticks(count);
        let step = ticks.get(1).map(|t| t - ticks[0]).unwrap_or(1.0);
        let mut xs = Vec::with_capacity(ticks.len());
        for t in &ticks {
            let px = axis.px(*t);
            self.line(&[(px, top), (px, bottom)], grid, 1)?;
            self.text(
                &unit.tick(*t, step),
                (px, label_y),
                SMALL_PX,
                INK,
                Align::Center,
            )?;
            xs.push(px);
        }
        Ok(xs)
    }

    pub fn bold(
        &self,
        s: &str,
        (x, y): (i32, i32),
        px: u32,
        color: RGBColor,
        align: Align,
    ) -> Drawn {
        // One embedded face: a title is set larger rather than in a bold face.
        self.text(s, (x, y), px + 2, color, align)
    }
}

/// Width in pixels of `s` set at `px` in the embedded face (SVG viewers set it a little
/// smaller, so a label that fits here fits there).
pub fn text_width(s: &str, px: u32) -> i32 {
    layout(s, px, (0.0, 0.0)).1.ceil() as i32
}

/// `s` shortened with an ellipsis to fit `max_px`; empty when not even one character and
/// the ellipsis fit.
pub fn fit(s: &str, px: u32, max_px: i32) -> String {
    if text_width(s, px) <= max_px {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut n = chars.len();
    while n > 0 {
        n -= 1;
        let t: String = chars[..n].iter().collect::<String>() + "…";
        if n > 0 && text_width(&t, px) <= max_px {
            return t;
        }
    }
    String::new()
}

/// A linear map from values to pixels.
#[derive(Clone, Copy, Debug)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub px_lo: i32,
    pub px_hi: i32,
}

impl Axis {
    pub fn new(lo: f64, hi: f64, px_lo: i32, px_hi: i32) -> Self {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Axis {
            lo,
            hi,
            px_lo,
            px_hi,
        }
    }

    pub fn px(&self, v: f64) -> i32 {
        self.pxf(v).round() as i32
    }

    /// The pixel of `v`, unrounded (what tells an interval narrower than a pixel).
    pub fn pxf(&self, v: f64) -> f64 {
        let t = (v - self.lo) / (self.hi - self.lo);
        self.px_lo as f64 + t * (self.px_hi - self.px_lo) as f64
    }

    /// Round tick values inside [lo, hi], about `count` of them.
    pub fn ticks(&self, count: usize) -> Vec<f64> {
        nice_ticks(self.lo, self.hi, count)
    }
}

/// Round ticks (1, 2 or 5 × 10^k apart) covering [lo, hi], as close to `count` of
/// them as those steps allow.
pub fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 || count == 0 {
        return vec![lo];
    }
    let mag = 10f64.powf((span / count as f64).log10().floor());
    let step = [0.5, 1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .min_by(|a, b| {
            let da = (span / a - count as f64).abs();
            let db = (span / b - count as f64).abs();
            da.total_cmp(&db)
        })
        .unwrap_or(mag);
    let mut out = Vec::new();
    let mut k = (lo / step).ceil();
    while k * step <= hi + step * 1e-9 {
        let v = k * step;
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        k += 1.0;
    }
    out
}

const PALETTE: [RGBColor; 12] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(118, 183, 178),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
    RGBColor(95, 75, 139),
    RGBColor(140, 180, 90),
    RGBColor(60, 140, 200),
];

/// The colour of inner (kernel) time in the gaps chart, as of `kernels`.
pub const INNER_COLOR: RGBColor = PALETTE[2];

/// The Groth16 prover's span names (its phases and kernels) get fixed colours so that
/// every chart of its runs agrees; other names get a stable colour from their hash.
pub fn span_color(name: &str) -> RGBColor {
    let base = name.split('[').next().unwrap_or(name);
    let fixed = match base {
        "prove" => Some(RGBColor(150, 150, 150)),
        "synthesis" => Some(PALETTE[0]),
        "gpu_prove" => Some(RGBColor(120, 120, 120)),
        "entry" => Some(PALETTE[9]),
        "prep" => Some(PALETTE[4]),
        "split_vectors_alloc" => Some(PALETTE[7]),
        "kernels" => Some(INNER_COLOR),
        "ntt_h" => Some(PALETTE[5]),
        "msm_h" => Some(PALETTE[10]),
        "msm_l" => Some(PALETTE[3]),
        "msm_a" => Some(PALETTE[11]),
        "msm_b_g1" => Some(PALETTE[6]),
        "b_g2_msm" => Some(PALETTE[1]),
        "assemble" => Some(PALETTE[8]),
        "drop" => Some(RGBColor(214, 96, 77)),
        "drop_assignments" => Some(RGBColor(180, 60, 60)),
        _ => None,
    };
    let c = fixed.unwrap_or_else(|| {
        let h = base
            .bytes()
            .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
        PALETTE[(h as usize) % PALETTE.len()]
    });
    if name.len() > base.len() {
        // Per-item children (synthesis[i]) in a lighter shade of their parent.
        lighten(c, 0.4)
    } else {
        c
    }
}

/// `c` moved towards white by `t` (0 to 1).
pub fn lighten(c: RGBColor, t: f64) -> RGBColor {
    let l = |x: u8| (x as f64 + (255.0 - x as f64) * t).round() as u8;
    RGBColor(l(c.0), l(c.1), l(c.2))
}

/// Colours of variants (first is the baseline).
pub fn variant_color(index: usize) -> RGBColor {
    [
        PALETTE[0], PALETTE[1], PALETTE[2], PALETTE[4], PALETTE[5], PALETTE[7],
    ][index % 6]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = nice_ticks(0.0, 47.0, 5);
        assert_eq!(t, vec![0.0, 10.0, 20.0, 30.0, 40.0]);
        let t = nice_ticks(0.0, 1.3, 6);
        assert_eq!(t.len(), 7);
        assert!((t[1] - 0.2).abs() < 1e-12);
        // A range that a 1-2-5 rule would cover with a single tick.
        assert_eq!(
            nice_ticks(700.0, 9700.0, 4),
            vec![2000.0, 4000.0, 6000.0, 8000.0]
        );
    }

    #[test]
    fn long_names_are_cut_to_width() {
        let s = "split_vectors_alloc_with_a_very_long_suffix";
        let f = fit(s, LABEL_PX, 80);
        assert!(f.ends_with('…'), "{f}");
        assert!(text_width(&f, LABEL_PX) <= 80);
        assert_eq!(fit("prove", LABEL_PX, 200), "prove");
        assert_eq!(fit("prove", LABEL_PX, 2), "");
    }
}
