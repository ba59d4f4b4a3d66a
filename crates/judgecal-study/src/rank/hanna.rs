//! Rankings of HANNA's systems by each judge and rubric, against the people's ranking.

use super::labels::*;
use super::*;

/// Kendall's τ-b between two orderings' values.
pub fn kendall(a: &[f64], b: &[f64]) -> f64 {
    let (mut concordant, mut discordant, mut ties_a, mut ties_b) = (0.0f64, 0.0, 0.0, 0.0);
    for i in 0..a.len() {
        for k in i + 1..a.len() {
            let (x, y) = ((a[i] - a[k]).signum(), (b[i] - b[k]).signum());
            match (a[i] == a[k], b[i] == b[k]) {
                (true, true) => {}
                (true, false) => ties_a += 1.0,
                (false, true) => ties_b += 1.0,
                (false, false) if x == y => concordant += 1.0,
                _ => discordant += 1.0,
            }
        }
    }
    let d = ((concordant + discordant + ties_a) * (concordant + discordant + ties_b)).sqrt();
    if d > 0.0 {
        (concordant - discordant) / d
    } else {
        0.0
    }
}

/// One HANNA cell ranked: the judge's 11 systems on the odd stories, the anchors the even.
#[derive(Debug, Clone, PartialEq)]
pub struct HannaRow {
    pub judge: String,
    pub rubric: String,
    pub systems: usize,
    /// Kendall τ against the human ranking: raw judge means, de-biased (judge scores only),
    /// de-biased with `labels` per system.
    pub tau_raw: f64,
    pub tau_plain: f64,
    /// The mean over the label samples.
    pub tau_labelled: f64,
    pub pairs: usize,
    /// Pairs resolved, and resolved in the wrong order, without and (summed over the label
    /// samples) with the labels.
    pub resolved_plain: usize,
    pub wrong_plain: usize,
    pub resolved_labelled: usize,
    pub wrong_labelled: usize,
    /// Rank intervals covering the human rank, every system's: without labels, and in how
    /// many of the label samples.
    pub covered_plain: bool,
    pub covered_labelled: usize,
    /// Label samples: each a fresh random set of `labels` stories, the same for every system.
    pub samples: usize,
    /// `None` where the labels study was not asked for.
    pub needed: Option<Needed>,
    /// The pair bound ([`pair_bound`]): per-run counts, and one count on every run.
    pub bound: (usize, usize),
}

/// Every judge and rubric of HANNA (`path`, prompt variant `variant`) ranked, with `labels`
/// random labels per system for the labelled column, drawn `samples` times; `design`: the
/// labels each design needs, where asked.
pub fn hanna(
    path: &std::path::Path,
    variant: &str,
    labels: usize,
    samples: usize,
    seed: u64,
    design: Option<LabelDesign>,
    looks: usize,
) -> Result<Vec<HannaRow>, String> {
    use crate::systems::{cells, read, scored};
    let records = read(path)?;
    let never = std::sync::atomic::AtomicBool::new(false);
    let fit_run = Run::new(&never, &|_| {});
    let mut out = Vec::new();
    for (judge, rubric) in cells(&records, variant) {
        let mine = scored(&records, variant, &judge, &rubric);
        let (anchors, held): (Vec<&crate::systems::Record>, Vec<&crate::systems::Record>) =
            mine.iter().partition(|r| r.story.is_multiple_of(2));
        let cell = Cell {
            pairs: anchors.iter().map(|r| (r.score, r.human)).collect(),
            scale: (1.0, 5.0),
        };
        let names: Vec<Option<&str>> = anchors.iter().map(|r| Some(r.system.as_str())).collect();
        let (model, bias) = train_with_groups(Method::Bayes, &cell, &names, seed, &fit_run)?;
        let mut systems: Vec<&str> = held.iter().map(|r| r.system.as_str()).collect();
        systems.sort_unstable();
        systems.dedup();
        let (stories, runs) = paired_runs(&held, &systems);
        let basis = Basis {
            model: &model,
            anchors: &cell,
            groups: bias.as_ref(),
        };
        let settings = AnswerSettings {
            seed,
            ..AnswerSettings::default()
        };
        let human: Vec<f64> = runs.iter().map(|r| mean(&r.2)).collect();
        let raw: Vec<f64> = runs.iter().map(|r| mean(&r.1)).collect();
        let plain = rank::rank(
            basis,
            &with_labels(&runs, &[]),
            &settings,
            &RankSettings::default(),
        )?;
        // Sample 0 is the one the table has always shown; the others vary the stories.
        let samples: Vec<Ranking> = (0..samples.max(1) as u64)
            .map(|d| {
                let mut order: Vec<usize> = (0..stories.len()).collect();
                order.shuffle(&mut Rng::seed_from_u64(
                    seed ^ 0x4A11 ^ d.wrapping_mul(0x9E37_79B9),
                ));
                let picked = vec![order[..labels.min(order.len())].to_vec(); runs.len()];
                rank::rank(
                    basis,
                    &with_labels(&runs, &picked),
                    &settings,
                    &RankSettings::default(),
                )
            })
            .collect::<Result<_, _>>()?;
        let estimates =
            |r: &Ranking| -> Vec<f64> { r.runs.iter().map(|x| x.estimate.mean.estimate).collect() };
        let (rp, wp) = claims(&plain, &human);
        let (rl, wl) = samples
            .iter()
            .map(|r| claims(r, &human))
            .fold((0, 0), |(r, w), (a, b)| (r + a, w + b));
        let m = samples.len() as f64;
        out.push(HannaRow {
            judge: judge.clone(),
            rubric: rubric.clone(),
            systems: runs.len(),
            tau_raw: kendall(&raw, &human),
            tau_plain: kendall(&estimates(&plain), &human),
            tau_labelled: samples
                .iter()
                .map(|r| kendall(&estimates(r), &human))
                .sum::<f64>()
                / m,
            pairs: plain.pairs.len(),
            resolved_plain: rp,
            wrong_plain: wp,
            resolved_labelled: rl,
            wrong_labelled: wl,
            covered_plain: judge_ranks(&plain, &human),
            covered_labelled: samples.iter().filter(|r| judge_ranks(r, &human)).count(),
            samples: samples.len(),
            needed: design
                .map(|d| needed(basis, &runs, &settings, seed, d))
                .transpose()?,
            bound: bound_of(basis, &runs, looks)?,
        });
    }
    Ok(out)
}

/// The stories every system has a score for, so that the runs pair by story, and each
/// system's run of them: (system, judge scores, human scores).
#[allow(clippy::type_complexity)]
fn paired_runs(
    held: &[&crate::systems::Record],
    systems: &[&str],
) -> (Vec<u64>, Vec<(String, Vec<f64>, Vec<f64>)>) {
    let mut stories: Vec<u64> = held.iter().map(|r| r.story).collect();
    stories.sort_unstable();
    stories.dedup();
    stories.retain(|&s| {
        systems
            .iter()
            .all(|&g| held.iter().any(|r| r.system == g && r.story == s))
    });
    let runs = systems
        .iter()
        .map(|&g| {
            let (j, y) = stories
                .iter()
                .filter_map(|&s| held.iter().find(|r| r.system == g && r.story == s))
                .map(|r| (r.score, r.human))
                .unzip();
            (g.to_owned(), j, y)
        })
        .collect();
    (stories, runs)
}

/// A ranking's claims (pairs it orders) and how many of them the human means contradict.
fn claims(r: &Ranking, human: &[f64]) -> (usize, usize) {
    r.pairs
        .iter()
        .fold((0, 0), |(n, wrong), p| match p.higher() {
            Some(h) => {
                let other = if h == p.a { p.b } else { p.a };
                (n + 1, wrong + usize::from(human[h] < human[other]))
            }
            None => (n, wrong),
        })
}

fn judge_ranks(r: &Ranking, truth: &[f64]) -> bool {
    judge(r, truth).1
}

pub fn hanna_table(rows: &[HannaRow], labels: usize) -> String {
    let samples = rows.first().map_or(1, |r| r.samples);
    let of = if samples > 1 {
        format!(" ({samples} samples)")
    } else {
        String::new()
    };
    let mut out = format!(
        "| judge | rubric | Kendall τ: raw → de-biased → {labels} labels/system | pairs resolved (wrong order): judge only, {labels} labels{of} | ranks covered | labels to resolve every gap > 0.1: planned, uniform | pair bound: per system, one count |\n|---|---|---:|---:|---:|---:|---:|\n"
    );
    let show = |x: Option<usize>| x.map_or("unreached".to_string(), |x| x.to_string());
    let yes = |b: bool| if b { "yes" } else { "no" };
    for r in rows {
        let covered = if r.samples > 1 {
            format!("{}/{}", r.covered_labelled, r.samples)
        } else {
            yes(r.covered_labelled == r.samples).to_string()
        };
        let needed = r.needed.map_or("–, –".to_string(), |n| {
            format!("{}, {}", show(n.planned), show(n.uniform))
        });
        out.push_str(&format!(
            "| {} | {} | {:.2} → {:.2} → {:.2} | {}/{} ({}), {}/{} ({}) | {}, {covered} | {needed} | {}, {} |\n",
            r.judge,
            r.rubric,
            r.tau_raw,
            r.tau_plain,
            r.tau_labelled,
            r.resolved_plain,
            r.pairs,
            r.wrong_plain,
            r.resolved_labelled,
            r.pairs * r.samples,
            r.wrong_labelled,
            yes(r.covered_plain),
            r.bound.0,
            r.bound.1,
        ));
    }
    let n = rows.len().max(1) as f64;
    let avg = |f: &dyn Fn(&HannaRow) -> f64| rows.iter().map(f).sum::<f64>() / n;
    let sum = |f: &dyn Fn(&HannaRow) -> usize| rows.iter().map(f).sum::<usize>();
    let share = |x: usize, of: usize| 100.0 * x as f64 / of.max(1) as f64;
    out.push_str(&format!(
        "\nMean Kendall τ over {} cells: raw {:.3}, de-biased {:.3}, with {labels} labels {:.3}. Resolved pairs: {:.1}% → {:.1}%, wrong order {} → {} (in {} rankings). Rank intervals covering every system: {} of {} → {} of {}.",
        rows.len(),
        avg(&|r| r.tau_raw),
        avg(&|r| r.tau_plain),
        avg(&|r| r.tau_labelled),
        share(sum(&|r| r.resolved_plain), sum(&|r| r.pairs)),
        share(sum(&|r| r.resolved_labelled), sum(&|r| r.pairs * r.samples)),
        sum(&|r| r.wrong_plain),
        sum(&|r| r.wrong_labelled),
        sum(&|r| r.samples),
        rows.iter().filter(|r| r.covered_plain).count(),
        rows.len(),
        sum(&|r| r.covered_labelled),
        sum(&|r| r.samples),
    ));
    let needed: Vec<Needed> = rows.iter().filter_map(|r| r.needed).collect();
    if !needed.is_empty() {
        let (p, u, both) = totals(&needed);
        out.push_str(&format!(
            " Labels to resolve every pair with a human gap above 0.1, over the {both} cells where both designs reach it: planned {p}, uniform {u} ({:.0}% fewer).",
            100.0 * (1.0 - p as f64 / u.max(1) as f64),
        ));
    }
    let (per_run, one) = (sum(&|r| r.bound.0), sum(&|r| r.bound.1));
    out.push_str(&format!(
        " Pair bound: per-system counts {per_run}, one count {one} ({:.0}% fewer).\n",
        100.0 * (1.0 - per_run as f64 / one.max(1) as f64),
    ));
    out
}
