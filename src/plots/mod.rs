//! Figures as data: panels of point clouds and lines, drawn by plotters as SVG (for browsers
//! and the report endpoint) or PNG (for documents). Text uses the bundled DejaVu Sans, so a
//! PNG renders the same on a machine with no fonts installed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// DejaVu Sans (Bitstream Vera licence; see assets/fonts/DejaVuSans.LICENSE).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

fn font_ready() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            register_font("sans-serif", FontStyle::Normal, FONT)
                .map_err(|_| "the bundled font could not be read".to_owned())
        })
        .clone()
}

/// Colours by role, so a method has one colour in every figure.
mod figures;

pub use figures::{
    CellPicture, CurvePoint, Estimate, PairwisePicture, cell_report, jitter, pairwise_report,
};

pub mod colour {
    use plotters::style::RGBColor;
    pub const REFERENCE: RGBColor = RGBColor(20, 20, 20);
    pub const RAW: RGBColor = RGBColor(150, 150, 150);
    pub const BAYES: RGBColor = RGBColor(31, 119, 180);
    pub const FLOW: RGBColor = RGBColor(214, 39, 40);
    pub const QUANTILE: RGBColor = RGBColor(44, 160, 44);
    pub const OTHER: RGBColor = RGBColor(148, 103, 189);
    /// The methods' colours, in the registry's order (`Method::ALL`); methods past its end
    /// take `OTHER`.
    pub const METHODS: [RGBColor; 5] = [RAW, QUANTILE, BAYES, FLOW, RGBColor(255, 127, 14)];
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    Dot,
    Cross,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Points(Mark),
    Line {
        dashed: bool,
    },
    /// A filled region: its points trace the outline (an upper edge, then the lower edge
    /// back).
    Area,
    /// Error bars: each pair of points is one bar's two ends (vertical or horizontal).
    Bars,
}

/// One named series of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub colour: RGBColor,
    pub kind: Kind,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn points(name: &str, colour: RGBColor, mark: Mark, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.to_owned(),
            colour,
            kind: Kind::Points(mark),
            points,
        }
    }

    pub fn line(name: &str, colour: RGBColor, dashed: bool, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.to_owned(),
            colour,
            kind: Kind::Line { dashed },
            points,
        }
    }

    /// The region between `lower` and `upper`, each (x, y) in x order.
    pub fn band(name: &str, colour: RGBColor, upper: &[(f64, f64)], lower: &[(f64, f64)]) -> Self {
        Self {
            name: name.to_owned(),
            colour,
            kind: Kind::Area,
            points: upper.iter().chain(lower.iter().rev()).copied().collect(),
        }
    }
}

/// One chart: axes, labels and its series, the first listed drawn first.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub series: Vec<Series>,
    /// Names for the integer ticks 0, 1, … of the x axis (categories); none: numbers.
    pub x_names: Vec<String>,
    /// The same for the y axis.
    pub y_names: Vec<String>,
}

impl Chart {
    /// A panel whose axes fit its series, with 5% margins.
    pub fn fitted(title: &str, x_label: &str, y_label: &str, series: Vec<Series>) -> Self {
        let span = |f: fn(&(f64, f64)) -> f64| {
            let (lo, hi) = series
                .iter()
                .flat_map(|s| s.points.iter().map(f))
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                });
            if lo > hi {
                (0.0, 1.0)
            } else {
                let pad = ((hi - lo) * 0.05).max(1e-6);
                (lo - pad, hi + pad)
            }
        };
        Self {
            title: title.to_owned(),
            x_label: x_label.to_owned(),
            y_label: y_label.to_owned(),
            x: span(|p| p.0),
            y: span(|p| p.1),
            series,
            x_names: Vec::new(),
            y_names: Vec::new(),
        }
    }
}

/// A figure: a title over a grid of panels, `columns` wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub title: String,
    pub columns: usize,
    pub panels: Vec<Chart>,
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Chart) -> DrawResult<DB> {
    // The legend goes in a strip under the chart, never over the data.
    let named: Vec<&Series> = p.series.iter().filter(|s| !s.name.is_empty()).collect();
    let (plot, strip) = if named.is_empty() {
        (area.clone(), None)
    } else {
        let height = area.dim_in_pixel().1 as i32;
        let (plot, strip) = area.split_vertically(height - LEGEND_HEIGHT);
        (plot, Some(strip))
    };
    // Category names on the y axis (a long list of systems reads down, not across), the label
    // area as wide as the longest.
    let longest = p
        .y_names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0) as u32;
    let y_area = if longest == 0 {
        48
    } else {
        (16 + 7 * longest).min(140)
    };
    // Drawn within drawable ranges; a point outside them is left out (a band clamped to them),
    // as plotters maps a far point past i32.
    let (xr, yr) = (drawable(p.x), drawable(p.y));
    let mut chart = ChartBuilder::on(&plot)
        .caption(&p.title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(y_area)
        .build_cartesian_2d(xr.clone(), yr.clone())?;
    let name_of = |names: &[String], x: f64| {
        let k = x.round();
        if (x - k).abs() < 1e-6 && k >= 0.0 {
            names.get(k as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let names = |x: &f64| name_of(&p.x_names, *x);
    let y_names = |y: &f64| name_of(&p.y_names, *y);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .label_style(("sans-serif", 12))
        .light_line_style(WHITE.mix(0.0));
    if !p.x_names.is_empty() {
        mesh.x_labels(p.x_names.len() + 2).x_label_formatter(&names);
    }
    if !p.y_names.is_empty() {
        mesh.y_labels(p.y_names.len() + 2)
            .y_label_formatter(&y_names);
    }
    mesh.draw()?;
    for s in &p.series {
        draw_series(&mut chart, s, &xr, &yr)?;
    }
    if let Some(strip) = strip {
        draw_legend(&strip, &named)?;
    }
    Ok(())
}

/// The chart's area in data coordinates.
type Plane<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One series, its points within the drawable ranges (a band's and a bar's clamped to them).
fn draw_series<DB: DrawingBackend>(
    chart: &mut Plane<'_, DB>,
    s: &Series,
    xr: &std::ops::Range<f64>,
    yr: &std::ops::Range<f64>,
) -> DrawResult<DB> {
    let inside =
        |&(x, y): &(f64, f64)| (xr.start..=xr.end).contains(&x) && (yr.start..=yr.end).contains(&y);
    let clamp = |(x, y): (f64, f64)| (x.clamp(xr.start, xr.end), y.clamp(yr.start, yr.end));
    let colour = s.colour;
    let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(inside).collect();
    match &s.kind {
        Kind::Points(Mark::Dot) => {
            let opacity = dot_opacity(pts.len());
            chart.draw_series(
                pts.iter()
                    .map(|&c| Circle::new(c, 2, colour.mix(opacity).filled())),
            )?;
        }
        Kind::Points(Mark::Cross) => {
            chart.draw_series(
                pts.iter()
                    .map(|&c| Cross::new(c, 2, colour.mix(0.6).stroke_width(1))),
            )?;
        }
        Kind::Line { dashed: false } => {
            chart.draw_series(LineSeries::new(pts, colour.stroke_width(2)))?;
        }
        Kind::Line { dashed: true } => {
            chart.draw_series(DashedLineSeries::new(pts, 6, 4, colour.stroke_width(2)))?;
        }
        Kind::Area => {
            let outline: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&c| clamp(c))
                .collect();
            chart.draw_series(std::iter::once(Polygon::new(
                outline,
                colour.mix(0.18).filled(),
            )))?;
        }
        Kind::Bars => {
            chart.draw_series(s.points.chunks_exact(2).map(|ends| {
                PathElement::new(vec![clamp(ends[0]), clamp(ends[1])], colour.stroke_width(2))
            }))?;
        }
    }
    Ok(())
}

/// The legend, in a strip under the chart: each named series' mark and name.
fn draw_legend<DB: DrawingBackend>(
    strip: &DrawingArea<DB, Shift>,
    named: &[&Series],
) -> DrawResult<DB> {
    let mut x = 56;
    for s in named {
        let (colour, y) = (s.colour, LEGEND_HEIGHT / 2);
        match s.kind {
            Kind::Points(_) => strip.draw(&Circle::new((x + 8, y), 3, colour.filled()))?,
            Kind::Area => strip.draw(&Rectangle::new(
                [(x, y - 5), (x + 16, y + 5)],
                colour.mix(0.3).filled(),
            ))?,
            _ => strip.draw(&PathElement::new(
                vec![(x, y), (x + 16, y)],
                colour.stroke_width(3),
            ))?,
        }
        strip.draw(&Text::new(
            s.name.clone(),
            (x + 22, y - 7),
            ("sans-serif", 12).into_font(),
        ))?;
        x += 34 + 7 * s.name.chars().count() as i32;
    }
    Ok(())
}

/// How opaque each of `n` dots is drawn: half up to 200, fainter beyond (down to a tenth), so
/// that where hundreds pile up the pile reads darker than a few scattered dots.
fn dot_opacity(n: usize) -> f64 {
    (0.5 * (200.0 / n.max(1) as f64).sqrt()).clamp(0.1, 0.5)
}

/// The height of a panel's legend strip, in pixels.
const LEGEND_HEIGHT: i32 = 22;

fn draw_figure<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, f: &Figure) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let root = root.titled(&f.title, ("sans-serif", 20))?;
    let columns = f.columns.max(1);
    let rows = f.panels.len().div_ceil(columns).max(1);
    let areas = root.split_evenly((rows, columns));
    for (area, panel) in areas.iter().zip(&f.panels) {
        draw_panel(area, panel)?;
    }
    root.present()
}

/// The figure's pixel size: 420 × 360 per panel.
fn size(f: &Figure) -> (u32, u32) {
    let columns = f.columns.max(1);
    let rows = f.panels.len().div_ceil(columns).max(1);
    (420 * columns as u32, 360 * rows as u32 + 30)
}

/// A range an axis can be drawn over: finite, of a width its ticks can step across. plotters
/// steps its ticks by adding a width to a bound, which never ends where the width is infinite
/// (an overflowed span) or lost below the bound's precision: such a range is redrawn around its
/// middle.
fn drawable((lo, hi): (f64, f64)) -> std::ops::Range<f64> {
    const MAX: f64 = 1e12;
    let (lo, hi) = (
        if lo.is_finite() {
            lo.clamp(-MAX, MAX)
        } else {
            -MAX
        },
        if hi.is_finite() {
            hi.clamp(-MAX, MAX)
        } else {
            MAX
        },
    );
    let magnitude = lo.abs().max(hi.abs()).max(1.0);
    if hi - lo >= 1e-6 * magnitude {
        return lo..hi;
    }
    let middle = lo / 2.0 + hi / 2.0;
    let half = 1e-3 * magnitude;
    middle - half..middle + half
}

/// The figure as an SVG document.
pub fn svg(f: &Figure) -> Result<String, String> {
    font_ready()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size(f)).into_drawing_area();
        draw_figure(root, f).map_err(|e| format!("drawing {}: {e}", f.title))?;
    }
    Ok(out)
}

/// Drawings run at most this many at once, each on a blocking thread: a runaway one holds one
/// slot, never the runtime.
static DRAWING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// How long a drawing may take before its request is answered 503.
pub const DRAW_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Draws `figure` as SVG off the async runtime, within [`DRAW_WITHIN`] (waiting for a slot
/// included).
pub async fn draw_svg(figure: Figure) -> crate::error::Result<String> {
    let work = async {
        let _slot = DRAWING
            .acquire()
            .await
            .map_err(|_| crate::error::Error::Internal("the drawing slots are closed".into()))?;
        crate::error::blocking("drawing a picture", move || svg(&figure))
            .await?
            .map_err(crate::error::Error::Internal)
    };
    tokio::time::timeout(DRAW_WITHIN, work).await.map_err(|_| {
        crate::error::Error::TimedOut(format!(
            "the picture took longer than {} s to draw",
            DRAW_WITHIN.as_secs()
        ))
    })?
}

/// Writes the figure as `stem.svg` and `stem.png`.
pub fn write(f: &Figure, stem: &Path) -> Result<(), String> {
    let svg_text = svg(f)?;
    let svg_path = stem.with_extension("svg");
    std::fs::write(&svg_path, svg_text)
        .map_err(|e| format!("writing {}: {e}", svg_path.display()))?;
    let png_path = stem.with_extension("png");
    let root = BitMapBackend::new(&png_path, size(f)).into_drawing_area();
    draw_figure(root, f).map_err(|e| format!("writing {}: {e}", png_path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_renders_its_titles_series_and_legend() {
        let f = Figure {
            title: "A test figure".into(),
            columns: 2,
            panels: vec![
                Chart::fitted(
                    "left",
                    "x",
                    "y",
                    vec![
                        Series::points(
                            "dots",
                            colour::BAYES,
                            Mark::Dot,
                            vec![(1.0, 2.0), (2.0, 3.0)],
                        ),
                        Series::line("a line", colour::FLOW, true, vec![(1.0, 1.0), (2.0, 2.0)]),
                    ],
                ),
                Chart::fitted("right", "x", "y", vec![]),
            ],
        };
        let s = svg(&f).unwrap();
        for text in ["A test figure", "left", "right", "dots", "a line"] {
            assert!(s.contains(text), "{text} missing");
        }
        // Two dots, as circles, and the legend's marker for them.
        assert_eq!(s.matches("<circle").count(), 3);
        let dir = tempfile::tempdir().unwrap();
        write(&f, &dir.path().join("fig")).unwrap();
        let png = std::fs::read(dir.path().join("fig.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(dir.path().join("fig.svg").exists());
    }

    #[test]
    fn ranges_are_drawable_whatever_the_data() {
        assert_eq!(super::drawable((1.0, 5.0)), 1.0..5.0);
        for (lo, hi) in [
            (-1e308, 1e308),
            (f64::NEG_INFINITY, f64::NAN),
            (1e9, 1e9),
            (3.0, 3.0),
            (5.0, 1.0),
        ] {
            let r = super::drawable((lo, hi));
            assert!(r.start.is_finite() && r.end.is_finite(), "{lo} {hi}: {r:?}");
            let magnitude = r.start.abs().max(r.end.abs()).max(1.0);
            assert!(r.end - r.start >= 1e-6 * magnitude, "{lo} {hi}: {r:?}");
        }
    }

    /// A cell on an integer scale: 300 anchors at 5 judge levels, a fitted line and band, two
    /// groups.
    #[test]
    fn a_cell_report_jitters_piled_anchors_and_keeps_its_legend_off_the_data() {
        let pairs: Vec<(f64, f64)> = (0..300)
            .map(|i| (1.0 + (i % 5) as f64, 1.0 + ((i * 7) % 5) as f64))
            .collect();
        let corrected: Vec<f64> = pairs.iter().map(|p| 0.5 + 0.8 * p.0).collect();
        let curve: Vec<CurvePoint> = (0..=40)
            .map(|k| {
                let x = 1.0 + k as f64 / 10.0;
                CurvePoint {
                    x,
                    score: 0.5 + 0.8 * x,
                    band: Some((x - 1.0, x + 1.0)),
                }
            })
            .collect();
        let held_out: Vec<(f64, f64, f64)> =
            pairs.iter().map(|&(j, y)| (j, y, 0.6 + 0.75 * j)).collect();
        let groups = [
            ("sys-a".to_owned(), 0.1, 0.05),
            ("sys-b".to_owned(), -0.2, 0.05),
        ];
        let f = cell_report(&CellPicture {
            title: "j/r: version 1 (bayes), 300 anchors".into(),
            scale: (1.0, 5.0),
            input: "judge score",
            pairs: &pairs,
            corrected: &corrected,
            curve: &curve,
            groups: &groups,
            held_out: &held_out,
        });
        assert_eq!(f.panels.len(), 3);
        let s = svg(&f).unwrap();
        for text in [
            "fitted",
            "95% predictive band",
            "sys-a",
            "sys-b",
            "Held-out bias by group",
            "corrected (held out)",
        ] {
            assert!(s.contains(text), "{text} missing");
        }
        // The groups read down the bias panel: one row each, their names on the y axis.
        assert_eq!(f.panels[2].y_names, ["sys-a", "sys-b"]);
        assert_eq!(f.panels[2].y, (-0.5, 1.5));
        // Dots grow fainter where hundreds pile up, so that a pile reads darker.
        assert_eq!((dot_opacity(50), dot_opacity(200)), (0.5, 0.5));
        assert!((dot_opacity(800) - 0.25).abs() < 1e-12 && dot_opacity(100_000) == 0.1);
        // The anchors spread around their 5 levels, not in 5 columns.
        let xs: std::collections::BTreeSet<i64> = f.panels[0].series[1]
            .points
            .iter()
            .map(|p| (p.0 * 1000.0) as i64)
            .collect();
        assert!(xs.len() > 100, "{} distinct", xs.len());
        assert!(
            f.panels[0].series[1]
                .points
                .iter()
                .all(|p| (p.0 - p.0.round()).abs() <= 0.3)
        );
        // Every legend entry sits in the strip under its chart: below the x axis' labels.
        let (_, height) = size(&f);
        let legend_y = |name: &str| -> i32 {
            // The SVG writer puts a text's content on its own line.
            let at = s
                .find(&format!(">\n{name}\n<"))
                .or_else(|| s.find(&format!(">{name}<")))
                .unwrap();
            let tag = &s[s[..at].rfind("<text").unwrap()..at];
            let y = tag.split(" y=\"").nth(1).unwrap();
            y[..y.find('"').unwrap()].parse::<f64>().unwrap() as i32
        };
        for name in ["anchors", "fitted", "held-out bias"] {
            assert!(
                legend_y(name) > height as i32 - LEGEND_HEIGHT - 8,
                "{name} at {}",
                legend_y(name)
            );
        }
        // Piled-up values only: a continuous scale is drawn as it is.
        let smooth: Vec<f64> = (0..300).map(|i| i as f64 / 7.0).collect();
        assert_eq!(jitter(&smooth), smooth);
    }
}
