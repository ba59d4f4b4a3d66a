//! Pairwise ratings on Bradley–Terry worlds with known truth (`judgecal-study pairwise
//! --grid`): how often the ratings' 95% intervals (plain: the anchors as the labelled set;
//! labelled: with a share of the run too), every rank interval at once, the win rates', the
//! length coefficient's and every look's cover, and how wide the plain intervals are against
//! Bradley–Terry on the anchors alone. The worlds are in `world`.

mod repetition;
mod world;

pub use world::{PLAIN, PairwiseWorld};

use repetition::repetitions;

/// The judge most rows draw: first-position wins about 65%, a length bias, one system favoured
/// by 1 log-odds, 10% ties.
const USUAL: PairwiseWorld = PairwiseWorld {
    position: 1.0,
    length: 0.5,
    favour: 1.0,
    ties: 0.1,
    ..PLAIN
};

/// Raters who differ: each batch of 50 labels is one rater's, whose taste for each system is
/// N(0, 0.5²) log-odds. 20 systems (10 raters label the anchors, 4 the run), and a weak judge
/// of 5 systems (4 raters, 2).
const MANY_RATERS: PairwiseWorld = PairwiseWorld {
    systems: 20,
    anchors: 500,
    run: 10_000,
    labelled: 0.02,
    rater_sd: 0.5,
    rater_batch: 50,
    ..USUAL
};
const FEW_RATERS: PairwiseWorld = PairwiseWorld {
    noise: 2.5,
    labelled: 0.1,
    rater_sd: 0.5,
    rater_batch: 50,
    ..USUAL
};

/// A new system the judge favours by 1.5 log-odds, in as many of the run's battles as any
/// but in only 10 of the 1,000 anchors (no ties: the people's Bradley–Terry ratings are the
/// truth whatever the mix of pairs).
const NEW_SYSTEM: PairwiseWorld = PairwiseWorld {
    systems: 8,
    favour: 1.5,
    ties: 0.0,
    anchors: 1_000,
    run: 10_000,
    labelled: 0.02,
    new_labels: 10,
    ..USUAL
};

/// The grid's rows: the ranges (2–50 systems: two alone, a weak judge favouring one,
/// first-position win rates near 50–86%, a length bias, a favoured system, 0–30% ties,
/// 200–2,000 anchors, runs of 1,000–100,000), panels (rows 9, 10), style control (11, 12),
/// labels from raters who differ, in batches (13, 14; and naming them, 16, 17), and a user
/// who rates the run after each of four labelling batches (15).
pub const GRID: [PairwiseWorld; 24] = [
    PairwiseWorld {
        systems: 2,
        position: 2.5,
        length: 0.5,
        favour: 1.0,
        noise: 2.5,
        ties: 0.2,
        labelled: 0.05,
        ..PLAIN
    },
    PairwiseWorld {
        labelled: 0.1,
        ..PLAIN
    },
    PairwiseWorld {
        position: 2.5,
        length: 0.5,
        favour: 1.0,
        ties: 0.3,
        run: 10_000,
        labelled: 0.02,
        ..PLAIN
    },
    PairwiseWorld {
        systems: 20,
        anchors: 500,
        run: 10_000,
        labelled: 0.02,
        ..USUAL
    },
    PairwiseWorld {
        systems: 20,
        position: 1.0,
        favour: 0.5,
        noise: 2.5,
        ties: 0.1,
        anchors: 2_000,
        run: 10_000,
        labelled: 0.02,
        ..PLAIN
    },
    PairwiseWorld {
        systems: 20,
        position: 1.0,
        length: 0.5,
        favour_sd: 0.7,
        ties: 0.1,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        ..PLAIN
    },
    PairwiseWorld {
        systems: 50,
        anchors: 2_000,
        run: 10_000,
        labelled: 0.02,
        ..USUAL
    },
    PairwiseWorld {
        systems: 50,
        position: 2.5,
        length: 0.5,
        favour: 1.0,
        ties: 0.2,
        anchors: 2_000,
        run: 100_000,
        labelled: 0.002,
        ..PLAIN
    },
    // Panels: two weak judges, and three judges of 20 systems.
    PairwiseWorld {
        noise: 2.5,
        labelled: 0.05,
        panel: 2,
        ..USUAL
    },
    PairwiseWorld {
        systems: 20,
        noise: 1.5,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        panel: 3,
        ..USUAL
    },
    // Style control: people prefer the longer answer (0.3 log-odds per unit of the log
    // length ratio), the systems differ in length, the judge rewards length more, and the
    // ratings control for it. Over the field, and in AlpacaEval's layout (every system
    // against the baseline, as a), where the run's mean length difference is not 0.
    PairwiseWorld {
        systems: 20,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        people_length: 0.3,
        verbose: 0.5,
        controlled: true,
        ..USUAL
    },
    PairwiseWorld {
        noise: 1.0,
        anchors: 400,
        run: 2_000,
        labelled: 0.05,
        people_length: 0.3,
        verbose: 0.7,
        controlled: true,
        against_baseline: true,
        ..USUAL
    },
    // Raters who differ (not named).
    MANY_RATERS,
    FEW_RATERS,
    // A user who rates the run after each of four labelling batches of 100 (a weak judge, so
    // that the labels move the answer).
    PairwiseWorld {
        noise: 2.5,
        run: 10_000,
        labelled: 0.04,
        looks: 4,
        ..USUAL
    },
    // Rows 13 and 14 again, each label naming its rater: the intervals count raters.
    PairwiseWorld {
        named: true,
        ..MANY_RATERS
    },
    PairwiseWorld {
        named: true,
        ..FEW_RATERS
    },
    // Labels mixed unlike the run (issue 83's review): a new system the judge favours by 1.5
    // log-odds, in as many battles as any but in only 10 (or 30) of 1,000 labelled
    // comparisons; and Zipf runs, where a few systems fight most battles while the labels
    // are spread evenly. No ties, so that the people's Bradley–Terry ratings are the truth
    // whatever the mix of pairs.
    NEW_SYSTEM,
    PairwiseWorld {
        new_labels: 30,
        ..NEW_SYSTEM
    },
    PairwiseWorld {
        systems: 20,
        ties: 0.0,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        zipf: true,
        ..USUAL
    },
    PairwiseWorld {
        systems: 8,
        favour: 1.5,
        ties: 0.0,
        anchors: 500,
        run: 5_000,
        labelled: 0.02,
        zipf: true,
        ..USUAL
    },
    // Rows 16 and 17 with one rater holding half of each labelled set.
    PairwiseWorld {
        named: true,
        lead_share: 0.5,
        ..MANY_RATERS
    },
    PairwiseWorld {
        named: true,
        lead_share: 0.5,
        ..FEW_RATERS
    },
    // A judge blind on one system (issue 83's review): coin flips on its comparisons.
    PairwiseWorld {
        systems: 8,
        ties: 0.0,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        blind: true,
        ..USUAL
    },
];

/// One world's counts over its repetitions.
#[derive(Debug, Clone, Default)]
pub struct PairwiseCounts {
    pub reps: usize,
    pub agreement: f64,
    pub first_wins: f64,
    pub covered: [usize; 2],
    pub intervals: usize,
    pub ranks_held: [usize; 2],
    pub width: [f64; 2],
    pub alone_width: f64,
    pub alone_rated: usize,
    /// Win rates (against the baseline, over the field) that covered, and were given,
    /// plain and labelled.
    pub wins_covered: [usize; 2],
    pub wins: [usize; 2],
    /// The length coefficient's intervals that covered, plain and labelled (controlled rows).
    pub control_covered: [usize; 2],
    /// The labelled path's rating intervals that covered at every look (rows of several).
    pub every_look: usize,
    pub failures: usize,
    /// Each system's plain intervals that covered (index 0, the baseline, stays 0).
    pub by_system: Vec<usize>,
    /// Reps with finite ratings alone where the last system's plain interval was wider than
    /// the anchors' alone.
    pub last_wider: usize,
    /// The sum over those reps of the last system's plain width ÷ the anchors' alone.
    pub last_ratio: f64,
}

impl PairwiseCounts {
    /// The lowest share of any non-baseline system's plain intervals that covered, and the
    /// last system's (a new system's, where the row has one).
    pub fn worst_and_last(&self) -> (f64, f64) {
        let reps = self.reps.max(1) as f64;
        let shares: Vec<f64> = self
            .by_system
            .iter()
            .skip(1)
            .map(|&c| c as f64 / reps)
            .collect();
        (
            shares.iter().copied().fold(f64::INFINITY, f64::min),
            shares.last().copied().unwrap_or(f64::NAN),
        )
    }

    fn add(mut self, o: PairwiseCounts) -> PairwiseCounts {
        self.reps += o.reps;
        self.agreement += o.agreement;
        self.first_wins += o.first_wins;
        for p in 0..2 {
            self.covered[p] += o.covered[p];
            self.ranks_held[p] += o.ranks_held[p];
            self.width[p] += o.width[p];
            self.wins_covered[p] += o.wins_covered[p];
            self.wins[p] += o.wins[p];
            self.control_covered[p] += o.control_covered[p];
        }
        self.intervals += o.intervals;
        self.alone_width += o.alone_width;
        self.alone_rated += o.alone_rated;
        self.every_look += o.every_look;
        self.last_wider += o.last_wider;
        self.last_ratio += o.last_ratio;
        self.failures += o.failures;
        if self.by_system.len() < o.by_system.len() {
            self.by_system.resize(o.by_system.len(), 0);
        }
        for (s, c) in o.by_system.iter().enumerate() {
            self.by_system[s] += c;
        }
        self
    }
}

/// Runs `reps` repetitions of `world` from `seed`, on every core.
pub fn run(world: &PairwiseWorld, reps: usize, seed: u64) -> PairwiseCounts {
    crate::parallel(|t, threads| {
        let mine: Vec<usize> = (t..reps).step_by(threads).collect();
        repetitions(world, &mine, seed)
    })
    .into_iter()
    .fold(PairwiseCounts::default(), PairwiseCounts::add)
}

/// What a row adds to the first rows' worlds, in words.
fn features(w: &PairwiseWorld) -> String {
    let mut said = Vec::new();
    if w.controlled {
        said.push(format!(
            "people prefer length by {} log-odds, systems' lengths sd {}; controlled",
            w.people_length, w.verbose
        ));
    }
    if w.against_baseline {
        said.push("every system against the baseline".to_owned());
    }
    if w.rater_sd > 0.0 {
        said.push(format!(
            "raters' tastes N(0, {}²), batches of {}{}{}",
            w.rater_sd,
            w.rater_batch,
            if w.named { ", raters named" } else { "" },
            if w.lead_share > 0.0 {
                format!(", one rater holding {:.0}%", 100.0 * w.lead_share)
            } else {
                String::new()
            }
        ));
    }
    if w.looks > 1 {
        said.push(format!("rated after each of {} labelling batches", w.looks));
    }
    if w.new_labels > 0 {
        said.push(format!(
            "a new system (favoured) in {} of the anchors",
            w.new_labels
        ));
    }
    if w.zipf {
        said.push("Zipf run, even labels".to_owned());
    }
    if w.blind {
        said.push("the judge blind on the last system".to_owned());
    }
    if said.is_empty() {
        "—".to_owned()
    } else {
        said.join("; ")
    }
}

/// The grid's table, Markdown: every row, or only `rows` (numbered from 1).
pub fn report(reps: usize, seed: u64, rows: &[usize]) -> Result<String, String> {
    if let Some(r) = rows.iter().find(|&&r| r == 0 || r > GRID.len()) {
        return Err(format!("the grid has rows 1 to {}; got {r}", GRID.len()));
    }
    let mut out = String::from(
        "| row | systems | judge (panel: its members) | judge: first-position wins | agrees with people | favoured system | ties | anchors | run | run labelled | also | rating intervals cover: plain / labelled | rank intervals jointly: plain / labelled | plain width ÷ anchors alone | labelled width ÷ plain | win rates cover: plain / labelled | length coefficient covers: plain / labelled | labelled covers at every look | failed reps |\n|---:|---:|---|---|---|---|---|---:|---:|---:|---|---|---|---|---|---|---|---|---:|\n",
    );
    let mut mixed = Vec::new();
    for (i, w) in GRID.iter().enumerate() {
        if !rows.is_empty() && !rows.contains(&(i + 1)) {
            continue;
        }
        let c = run(w, reps, seed);
        let reps_done = c.reps.max(1) as f64;
        let share = |x: usize, n: usize| 100.0 * x as f64 / n.max(1) as f64;
        let ratio = if c.alone_rated > 0 {
            format!(
                "{:.2} (of {} reps with finite ratings alone)",
                (c.width[0] / reps_done) / (c.alone_width / c.alone_rated as f64),
                c.alone_rated
            )
        } else if w.controlled {
            "— (controlled)".into()
        } else {
            "— (the anchors alone rate no system finitely)".into()
        };
        let control = if w.controlled {
            format!(
                "{:.1}% / {:.1}%",
                share(c.control_covered[0], c.reps),
                share(c.control_covered[1], c.reps)
            )
        } else {
            "—".into()
        };
        let looks = if w.looks > 1 {
            format!("{:.1}%", share(c.every_look, c.intervals))
        } else {
            "—".into()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.0}% | {:.0}% | {} | {:.0}% | {} | {} | {:.1}% | {} | {:.1}% / {:.1}% | {:.1}% / {:.1}% | {ratio} | {:.3} | {:.1}% / {:.1}% | {control} | {looks} | {} |\n",
            i + 1,
            w.systems,
            if w.panel == 0 {
                "one".to_owned()
            } else {
                format!("a panel of {}", w.panel)
            },
            100.0 * c.first_wins / (c.reps + c.failures).max(1) as f64,
            100.0 * c.agreement / (c.reps + c.failures).max(1) as f64,
            if w.favour_sd > 0.0 {
                format!("every system by N(0, {}²) log-odds", w.favour_sd)
            } else {
                format!("+{} log-odds", w.favour)
            },
            100.0 * w.ties,
            w.anchors,
            w.run,
            100.0 * w.labelled,
            features(w),
            share(c.covered[0], c.intervals),
            share(c.covered[1], c.intervals),
            share(c.ranks_held[0], c.reps),
            share(c.ranks_held[1], c.reps),
            c.width[1] / c.width[0].max(f64::MIN_POSITIVE),
            share(c.wins_covered[0], c.wins[0]),
            share(c.wins_covered[1], c.wins[1]),
            c.failures,
        ));
        if w.new_labels > 0 || w.zipf || w.blind {
            let (worst, last) = c.worst_and_last();
            mixed.push(format!(
                "| {} | {} | {:.1}% | {:.1}% | {} | {:.1}% ({:.2}×) | {} |\n",
                i + 1,
                features(w),
                share(c.covered[0], c.intervals),
                100.0 * worst,
                if w.new_labels > 0 || w.blind {
                    format!("{:.1}%", 100.0 * last)
                } else {
                    "—".to_owned()
                },
                share(c.last_wider, c.alone_rated),
                c.last_ratio / c.alone_rated.max(1) as f64,
                c.failures
            ));
        }
    }
    if !mixed.is_empty() {
        out.push_str(
            "\nLabels mixed unlike the run, or a system the judge cannot read; plain path (the cell's anchors as the labelled set):\n\n| row | world | rating intervals cover, pooled | the worst system's | the new (or unread) system's | the last system's wider than anchors alone (mean width ÷ theirs) | failed reps |\n|---:|---|---|---|---|---|---:|\n",
        );
        for m in mixed {
            out.push_str(&m);
        }
    }
    Ok(out)
}
