//! Figures as data: panels of point clouds and lines, drawn by plotters as SVG (for browsers
//! and the report endpoint) or PNG (for documents). Text uses the bundled DejaVu Sans, so a
//! PNG renders the same on a machine with no fonts installed.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// DejaVu Sans (Bitstream Vera licence; see assets/fonts/DejaVuSans.LICENSE).
static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");

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
    Line { dashed: bool },
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
}

/// One chart: axes, labels and its series, the first listed drawn first.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub series: Vec<Series>,
}

impl Panel {
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
        }
    }
}

/// A figure: a title over a grid of panels, `columns` wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub title: String,
    pub columns: usize,
    pub panels: Vec<Panel>,
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> DrawResult<DB> {
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(p.x.0..p.x.1, p.y.0..p.y.1)?;
    chart
        .configure_mesh()
        .x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .label_style(("sans-serif", 12))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let inside = |&(x, y): &(f64, f64)| {
        x.is_finite() && y.is_finite() && x >= p.x.0 && x <= p.x.1 && y >= p.y.0 && y <= p.y.1
    };
    for s in &p.series {
        let colour = s.colour;
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(inside).collect();
        let legend = match &s.kind {
            Kind::Points(Mark::Dot) => chart.draw_series(
                pts.iter()
                    .map(|&c| Circle::new(c, 2, colour.mix(0.6).filled())),
            )?,
            Kind::Points(Mark::Cross) => chart.draw_series(
                pts.iter()
                    .map(|&c| Cross::new(c, 2, colour.mix(0.7).stroke_width(1))),
            )?,
            Kind::Line { dashed: false } => {
                chart.draw_series(LineSeries::new(pts, colour.stroke_width(2)))?
            }
            Kind::Line { dashed: true } => {
                chart.draw_series(DashedLineSeries::new(pts, 6, 4, colour.stroke_width(2)))?
            }
        };
        if !s.name.is_empty() {
            legend.label(&s.name).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(3))
            });
        }
    }
    if p.series.iter().any(|s| !s.name.is_empty()) {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 12))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    Ok(())
}

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

/// The report of one cell's version: corrected against reference on its anchors, and the
/// residuals against the judge score. `pairs` are (judge, reference); `corrected` the
/// version's scores for them.
pub fn cell_report(
    title: &str,
    scale: (f64, f64),
    pairs: &[(f64, f64)],
    corrected: &[f64],
) -> Figure {
    let (lo, hi) = scale;
    let raw: Vec<(f64, f64)> = pairs.iter().map(|&(j, y)| (y, j)).collect();
    let cal: Vec<(f64, f64)> = pairs
        .iter()
        .zip(corrected)
        .map(|(&(_, y), &c)| (y, c))
        .collect();
    let resid: Vec<(f64, f64)> = pairs
        .iter()
        .zip(corrected)
        .map(|(&(j, y), &c)| (j, c - y))
        .collect();
    let raw_resid: Vec<(f64, f64)> = pairs.iter().map(|&(j, y)| (j, j - y)).collect();
    let mut left = Panel::fitted(
        "Corrected against reference",
        "reference score",
        "score",
        vec![
            Series::points("raw judge", colour::RAW, Mark::Cross, raw),
            Series::points("corrected", colour::BAYES, Mark::Dot, cal),
            Series::line("y = x", colour::REFERENCE, true, vec![(lo, lo), (hi, hi)]),
        ],
    );
    left.x = (lo - 0.2, hi + 0.2);
    let (j_lo, j_hi) = (left.y.0.min(lo), left.y.1.max(hi));
    let right = Panel::fitted(
        "Residuals (score − reference)",
        "judge score",
        "residual",
        vec![
            Series::points("raw judge", colour::RAW, Mark::Cross, raw_resid),
            Series::points("corrected", colour::BAYES, Mark::Dot, resid),
            Series::line("", colour::REFERENCE, true, vec![(j_lo, 0.0), (j_hi, 0.0)]),
        ],
    );
    Figure {
        title: title.to_owned(),
        columns: 2,
        panels: vec![left, right],
    }
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
                Panel::fitted(
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
                Panel::fitted("right", "x", "y", vec![]),
            ],
        };
        let s = svg(&f).unwrap();
        for text in ["A test figure", "left", "right", "dots", "a line"] {
            assert!(s.contains(text), "{text} missing");
        }
        // Two dots, as circles.
        assert_eq!(s.matches("<circle").count(), 2);
        let dir = tempfile::tempdir().unwrap();
        write(&f, &dir.path().join("fig")).unwrap();
        let png = std::fs::read(dir.path().join("fig.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(dir.path().join("fig.svg").exists());
    }
}
