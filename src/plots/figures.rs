//! The figures the service draws: a cell's calibration report and a pairwise cell's report,
//! built as charts for `plots` to draw.

use plotters::prelude::RGBColor;

use super::{Chart, Figure, Kind, Mark, Series, colour};

/// A point of a fitted curve: the input, its corrected score, and the 95% predictive band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub x: f64,
    pub score: f64,
    pub band: Option<(f64, f64)>,
}

/// What the picture of one cell's version shows.
pub struct CellPicture<'a> {
    pub title: String,
    /// The rubric's scale.
    pub scale: (f64, f64),
    /// What the version corrects: `judge score`, or a panel's `fused score`.
    pub input: &'a str,
    /// The anchors as the version saw them: (input, reference), and its corrected score of
    /// each.
    pub pairs: &'a [(f64, f64)],
    pub corrected: &'a [f64],
    /// The fitted curve over the anchors' range.
    pub curve: &'a [CurvePoint],
    /// Each group's held-out mean residual (reference − corrected) and its standard error; the
    /// picture draws its negative, the bias (corrected − reference), as the page's table does.
    pub groups: &'a [(String, f64, f64)],
    /// The anchors' held-out corrections, where the version kept them: (input, reference, the
    /// corrected score of a fit that did not see the anchor). Empty: the residuals panel
    /// shows `corrected`, which the fit saw.
    pub held_out: &'a [(f64, f64, f64)],
}

/// `values` spread for display where they pile up: on a scale with few distinct levels (at
/// most a third as many as values), each moves by up to 0.3 of the smallest gap between
/// levels, by a hash of its position, so the same data draws the same picture.
pub fn jitter(values: &[f64]) -> Vec<f64> {
    let mut levels: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    if levels.len() < 2 || 3 * levels.len() > values.len() {
        return values.to_vec();
    }
    let gap = levels
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::INFINITY, f64::min);
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            // SplitMix64 of the position: a uniform in [0, 1).
            let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let u = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
            v + (u - 0.5) * 0.6 * gap
        })
        .collect()
}

/// The report of one cell's version: the anchors (jittered where they pile up) with the
/// fitted curve and its predictive band; the residuals against the input; and, where the
/// anchors name groups, each group's held-out bias with its 95% interval.
pub fn cell_report(c: &CellPicture) -> Figure {
    let xs = jitter(&c.pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let (lo, hi) = c.scale;
    let x_range = c
        .pairs
        .iter()
        .map(|p| p.0)
        .fold((lo, hi), |(a, b), x| (a.min(x), b.max(x)));
    let mut panels = vec![fit_chart(c, &xs, x_range), residual_chart(c, &xs, x_range)];
    if !c.groups.is_empty() {
        panels.push(bias_chart(c.groups));
    }
    Figure {
        title: c.title.clone(),
        columns: panels.len(),
        panels,
    }
}

/// The anchors (`xs` their jittered inputs) with the fitted curve and its predictive band.
fn fit_chart(c: &CellPicture, xs: &[f64], (x_lo, x_hi): (f64, f64)) -> Chart {
    let (lo, hi) = c.scale;
    let ys = jitter(&c.pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let anchors: Vec<(f64, f64)> = xs.iter().copied().zip(ys.iter().copied()).collect();
    let fitted: Vec<(f64, f64)> = c.curve.iter().map(|p| (p.x, p.score)).collect();
    let edges: Vec<((f64, f64), (f64, f64))> = c
        .curve
        .iter()
        // The band within the rubric's scale, as the API clips it: a reference cannot lie
        // outside the scale.
        .filter_map(|p| {
            p.band
                .map(|(l, h)| ((p.x, h.clamp(lo, hi)), (p.x, l.clamp(lo, hi))))
        })
        .collect();
    let upper: Vec<(f64, f64)> = edges.iter().map(|e| e.0).collect();
    let lower: Vec<(f64, f64)> = edges.iter().map(|e| e.1).collect();
    let mut series = Vec::new();
    if !upper.is_empty() {
        series.push(Series::band(
            "95% predictive band",
            colour::BAYES,
            &upper,
            &lower,
        ));
    }
    series.extend([
        Series::points("anchors", colour::RAW, Mark::Dot, anchors),
        Series::line("fitted", colour::BAYES, false, fitted),
        Series::line(
            "no correction",
            colour::REFERENCE,
            true,
            vec![(x_lo, x_lo), (x_hi, x_hi)],
        ),
    ]);
    let mut chart = Chart::fitted(
        &format!("Reference against {}", c.input),
        c.input,
        "reference score",
        series,
    );
    chart.y = (lo - 0.2, hi + 0.2);
    chart
}

/// The residuals against the input: uncorrected, and corrected (held out where the version
/// kept its held-out predictions).
fn residual_chart(c: &CellPicture, xs: &[f64], (x_lo, x_hi): (f64, f64)) -> Chart {
    let (resid, corrected_name): (Vec<(f64, f64)>, &str) = if c.held_out.is_empty() {
        let resid = xs
            .iter()
            .zip(c.pairs.iter().zip(c.corrected))
            .map(|(&x, (&(_, y), &k))| (x, k - y))
            .collect();
        (resid, "corrected (in sample)")
    } else {
        let hx = jitter(&c.held_out.iter().map(|h| h.0).collect::<Vec<_>>());
        let resid = hx
            .iter()
            .zip(c.held_out)
            .map(|(&x, &(_, y, k))| (x, k - y))
            .collect();
        (resid, "corrected (held out)")
    };
    let raw_resid: Vec<(f64, f64)> = xs
        .iter()
        .zip(c.pairs)
        .map(|(&x, &(j, y))| (x, j - y))
        .collect();
    Chart::fitted(
        "Residuals (score − reference)",
        c.input,
        "residual",
        vec![
            Series::points("uncorrected", colour::RAW, Mark::Cross, raw_resid),
            Series::points(corrected_name, colour::BAYES, Mark::Dot, resid),
            Series::line("", colour::REFERENCE, true, vec![(x_lo, 0.0), (x_hi, 0.0)]),
        ],
    )
}

/// Each group's held-out bias with its 95% interval, one row per group, read down (eleven
/// systems' names fit, as they would not across): corrected − reference, as the page's table
/// and the agreement report give it (the held-out mean residual is reference − corrected).
fn bias_chart(groups: &[(String, f64, f64)]) -> Chart {
    let g = groups.len() as f64;
    let means: Vec<(f64, f64)> = groups
        .iter()
        .enumerate()
        .map(|(k, (_, m, _))| (-m, k as f64))
        .collect();
    let bars: Vec<(f64, f64)> = groups
        .iter()
        .enumerate()
        .flat_map(|(k, (_, m, se))| [(-m - 1.96 * se, k as f64), (-m + 1.96 * se, k as f64)])
        .collect();
    let mut bias = Chart::fitted(
        "Held-out bias by group",
        "corrected − reference",
        "",
        vec![
            Series {
                name: "95% interval".into(),
                colour: colour::BAYES,
                kind: Kind::Bars,
                points: bars,
            },
            Series::points("held-out bias", colour::BAYES, Mark::Dot, means),
            Series::line(
                "",
                colour::REFERENCE,
                true,
                vec![(0.0, -0.5), (0.0, g - 0.5)],
            ),
        ],
    );
    bias.y = (-0.5, g - 0.5);
    bias.y_names = groups.iter().map(|(n, _, _)| n.clone()).collect();
    bias
}

/// One estimate with its 95% interval, for a picture.
pub struct Estimate {
    pub name: String,
    pub estimate: f64,
    pub interval: [f64; 2],
}

/// What the picture of a pairwise cell's version shows.
pub struct PairwisePicture {
    pub title: String,
    /// Held-out calibration: (mean prediction, people's mean preference) per bin.
    pub reliability: Vec<(f64, f64)>,
    /// The shares read for the judge and for people (`None` where not read), by diagnostic.
    pub shares: Vec<(String, Option<Estimate>, Option<Estimate>)>,
    pub favouritism: Vec<Estimate>,
}

/// Points at `x + shift` for each estimate, with their intervals as bars.
fn estimates(name: &str, colour: RGBColor, shift: f64, at: &[(usize, &Estimate)]) -> [Series; 2] {
    let points = at
        .iter()
        .map(|(k, e)| (*k as f64 + shift, e.estimate))
        .collect();
    let bars = at
        .iter()
        .flat_map(|(k, e)| {
            let x = *k as f64 + shift;
            [(x, e.interval[0]), (x, e.interval[1])]
        })
        .collect();
    [
        Series::points(name, colour, Mark::Dot, points),
        Series {
            name: String::new(),
            colour,
            kind: Kind::Bars,
            points: bars,
        },
    ]
}

/// The report of a pairwise cell's version: the calibrated preference's held-out reliability
/// against the diagonal; the judge's shares beside the people's (first-shown wins, longer
/// answer wins, swap flips) with 95% intervals; each system's favouritism with its interval.
pub fn pairwise_report(c: &PairwisePicture) -> Figure {
    let reliability = Chart {
        x: (0.0, 1.0),
        y: (0.0, 1.0),
        ..Chart::fitted(
            "Held-out calibration",
            "predicted P(people prefer a)",
            "people prefer a (share)",
            vec![
                Series::line(
                    "perfect",
                    colour::REFERENCE,
                    true,
                    vec![(0.0, 0.0), (1.0, 1.0)],
                ),
                Series::points("bins", colour::BAYES, Mark::Dot, c.reliability.clone()),
                Series::line("", colour::BAYES, false, c.reliability.clone()),
            ],
        )
    };
    let judge: Vec<(usize, &Estimate)> = c
        .shares
        .iter()
        .enumerate()
        .filter_map(|(k, s)| s.1.as_ref().map(|e| (k, e)))
        .collect();
    let people: Vec<(usize, &Estimate)> = c
        .shares
        .iter()
        .enumerate()
        .filter_map(|(k, s)| s.2.as_ref().map(|e| (k, e)))
        .collect();
    let n = c.shares.len() as f64;
    let mut series = vec![Series::line(
        "",
        colour::RAW,
        true,
        vec![(-0.5, 0.5), (n - 0.5, 0.5)],
    )];
    series.extend(estimates("judge", colour::FLOW, -0.12, &judge));
    series.extend(estimates("people", colour::REFERENCE, 0.12, &people));
    let shares = Chart {
        x: (-0.5, n - 0.5),
        y: (0.0, 1.0),
        x_names: c.shares.iter().map(|s| s.0.clone()).collect(),
        ..Chart::fitted("Judge and people", "", "share (95% interval)", series)
    };
    let k = c.favouritism.len() as f64;
    let at: Vec<(usize, &Estimate)> = c.favouritism.iter().enumerate().collect();
    let mut series = vec![Series::line(
        "",
        colour::RAW,
        true,
        vec![(-0.5, 0.0), ((k - 0.5).max(0.5), 0.0)],
    )];
    series.extend(estimates("judge minus people", colour::FLOW, 0.0, &at));
    let fitted = Chart::fitted(
        "Favouritism by system",
        "",
        "preference for the system",
        series,
    );
    let favouritism = Chart {
        x: (-0.5, (k - 0.5).max(0.5)),
        y: (fitted.y.0.min(-0.1), fitted.y.1.max(0.1)),
        x_names: c.favouritism.iter().map(|e| e.name.clone()).collect(),
        ..fitted
    };
    Figure {
        title: c.title.clone(),
        columns: 3,
        panels: vec![reliability, shares, favouritism],
    }
}
