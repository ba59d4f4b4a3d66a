//! What a rating rests on, checked at the request: the labelled comparisons drawn like the
//! run (the same systems, the same kinds of verdict), raters who are several, and verdicts
//! that do not put a system beyond every comparison. Each departure is a warning with a stable
//! code that names the systems it is about; none refuses, because each answer still says
//! something true of the labels it has, and the warning says what it cannot.
//!
//! Measured (`cargo test --lib service::pairwise::checks -- --nocapture`, seeded): over 400 worlds whose
//! run and labels are drawn alike (3–12 systems, 20–800 labels), a system or verdict check
//! fired in the share the test prints (at most 5%); a new system in a quarter of the run's
//! comparisons with 10 of 1,000 labels is named in every one of 100 worlds.

use std::collections::{BTreeMap, BTreeSet};

use judgecal_stats::warning::{Code, Warning};

use crate::domain::pairwise::comparisons::Comparison;
use crate::domain::{GroupName, RaterName};

/// A system whose share of the labelled comparisons is below its share of the run's over
/// this factor is under-labelled: the labelled set weighs its bias by the wrong share.
pub const UNDERLABELLED_FACTOR: f64 = 4.0;
/// Fewer run comparisons of a system than this and its shares are not compared.
pub const MIN_SYSTEM_COMPARISONS: usize = 10;
/// A kind of verdict (a, b, tie, a probability) holding at least this share of the run is
/// compared with its share among the labelled comparisons.
pub const KIND_SHARE: f64 = 0.2;
/// Fewer run comparisons in which the judge gives a system every win (or every loss) than this
/// and the system is not called unbounded.
pub const MIN_UNBOUNDED: usize = 5;

/// The kind of a verdict.
fn kind(v: f64) -> usize {
    if v == 1.0 {
        0
    } else if v == 0.0 {
        1
    } else if v == 0.5 {
        2
    } else {
        3
    }
}

const KINDS: [&str; 4] = ["\"a\"", "\"b\"", "\"tie\"", "a probability"];

fn shares(rows: &[&Comparison]) -> [f64; 4] {
    let mut count = [0.0; 4];
    for c in rows {
        count[kind(c.verdict)] += 1.0;
    }
    let n = rows.len().max(1) as f64;
    count.map(|c| c / n)
}

/// Each rated system's share of `rows` (the share of comparisons it takes part in).
fn system_shares<'a>(
    rows: &[&'a Comparison],
    rated: &BTreeSet<&'a GroupName>,
) -> BTreeMap<&'a GroupName, usize> {
    let mut out: BTreeMap<&GroupName, usize> = rated.iter().map(|&s| (s, 0)).collect();
    for c in rows {
        for s in [&c.a, &c.b] {
            if let Some(n) = out.get_mut(s) {
                *n += 1;
            }
        }
    }
    out
}

/// The warnings of a rating of `run` against the labelled set `labelled` (the cell's labelled
/// comparisons between the run's systems, and the run's own labelled ones), whose map reads
/// the swapped verdict where `reads_swapped`.
pub fn check(run: &[Comparison], labelled: &[&Comparison], reads_swapped: bool) -> Vec<Warning> {
    let run_rows: Vec<&Comparison> = run.iter().collect();
    let rated: BTreeSet<&GroupName> = run.iter().flat_map(|c| [&c.a, &c.b]).collect();
    let shares = Shares {
        run: system_shares(&run_rows, &rated),
        labelled: system_shares(labelled, &rated),
        run_total: run.len(),
        labelled_total: labelled.len(),
    };
    [
        missing_swapped(run, reads_swapped),
        unlike_verdicts(&run_rows, labelled),
        shares.unlabelled(),
        shares.underlabelled(),
        unbounded(run),
        raters(labelled),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Each rated system's count of comparisons in the run and among the labelled ones.
struct Shares<'a> {
    run: BTreeMap<&'a GroupName, usize>,
    labelled: BTreeMap<&'a GroupName, usize>,
    run_total: usize,
    labelled_total: usize,
}

/// The inputs the map reads: the swapped verdict where it reads one.
fn missing_swapped(run: &[Comparison], reads_swapped: bool) -> Option<Warning> {
    let lacking = run.iter().filter(|c| c.verdict_swapped.is_none()).count();
    if reads_swapped && lacking > 0 {
        return Some(
            Warning::new(
                Code::InputMissing,
                format!(
                    "{lacking} of the run's {} comparisons lack verdict_swapped, which the cell's calibrated preference \
                     reads (it was chosen on labelled comparisons judged in both orders): the run was rated with the \
                     map on the first verdict alone, fitted on the same labels; send verdict_swapped to be rated as the \
                     cell was calibrated",
                    run.len()
                ),
            )
            .at("comparisons.verdict_swapped")
        );
    }
    None
}

/// The kinds of verdict, the run's against the labelled ones'.
fn unlike_verdicts(run_rows: &[&Comparison], labelled: &[&Comparison]) -> Option<Warning> {
    let (in_run, in_labels) = (shares(run_rows), shares(labelled));
    let unlike: Vec<String> = (0..4)
        .filter(|&k| in_run[k] >= KIND_SHARE && in_labels[k] < in_run[k] / UNDERLABELLED_FACTOR)
        .map(|k| {
            format!(
                "{} in {:.0}% of the run against {:.0}% of the labelled comparisons",
                KINDS[k],
                100.0 * in_run[k],
                100.0 * in_labels[k]
            )
        })
        .collect();
    if !unlike.is_empty() {
        return Some(
            Warning::new(
                Code::RunUnlikeLabelled,
                format!(
                    "the run's verdicts are unlike the labelled comparisons' ({}): the calibrated preference is \
                     extrapolated to verdicts it was fitted on few of, and the correction by the labels assumes the run \
                     is drawn like them; label a sample of this run (send it with `preference`)",
                    unlike.join("; ")
                ),
            )
            .at("comparisons.verdict")
        );
    }
    None
}

impl Shares<'_> {
    /// Systems in the run with no labelled comparison.
    fn unlabelled(&self) -> Option<Warning> {
        let none: Vec<&GroupName> = self
            .run
            .iter()
            .filter(|&(s, &n)| n > 0 && self.labelled.get(s).copied().unwrap_or(0) == 0)
            .map(|(s, _)| *s)
            .collect();
        if !none.is_empty() {
            return Some(
                Warning::new(
                    Code::UnlabelledSystems,
                    format!(
                        "{} {} no labelled comparison: {} rating{} rest{} on the judge's verdicts alone, and the judge's \
                         favour for or against {} is neither measured nor in the interval; label some of {} comparisons",
                        names(&none),
                        if none.len() == 1 { "has" } else { "have" },
                        if none.len() == 1 { "its" } else { "their" },
                        if none.len() == 1 { "" } else { "s" },
                        if none.len() == 1 { "s" } else { "" },
                        if none.len() == 1 { "it" } else { "them" },
                        if none.len() == 1 { "its" } else { "their" },
                    ),
                )
                .systems(&none)
            );
        }
        None
    }

    /// Systems far rarer among the labelled comparisons than in the run.
    fn underlabelled(&self) -> Option<Warning> {
        let (n_run, n_lab) = (
            self.run_total.max(1) as f64,
            self.labelled_total.max(1) as f64,
        );
        let under: Vec<(&GroupName, f64, f64)> = self
            .run
            .iter()
            .filter(|&(_, &n)| n >= MIN_SYSTEM_COMPARISONS)
            .filter_map(|(s, &n)| {
                let labels = self.labelled.get(s).copied().unwrap_or(0);
                let (run_share, lab_share) = (n as f64 / n_run, labels as f64 / n_lab);
                (labels > 0 && lab_share < run_share / UNDERLABELLED_FACTOR)
                    .then_some((*s, run_share, lab_share))
            })
            .collect();
        if !under.is_empty() {
            let said: Vec<String> = under
                .iter()
                .map(|(s, r, l)| {
                    format!(
                        "{s} (in {:.1}% of the run's comparisons, {:.1}% of the labelled)",
                        100.0 * r,
                        100.0 * l
                    )
                })
                .collect();
            return Some(
                Warning::new(
                    Code::UnderlabelledSystems,
                    format!(
                        "the labelled comparisons hold far fewer of some systems than the run does: {}. The map's term for \
                         the judge's favour toward each is shrunk where its labels are few, so some of that favour stays in \
                         the rating; label a sample of the run's comparisons of {}",
                        said.join("; "),
                        if under.len() == 1 { "it" } else { "them" }
                    ),
                )
                .systems(under.iter().map(|u| u.0))
            );
        }
        None
    }
}

/// Systems the judge puts beyond every comparison.
fn unbounded(run: &[Comparison]) -> Option<Warning> {
    let mut record: BTreeMap<&GroupName, (usize, usize, usize)> = BTreeMap::new();
    for c in run {
        let (wa, wb) = (c.verdict == 1.0, c.verdict == 0.0);
        let a = record.entry(&c.a).or_default();
        *a = (a.0 + 1, a.1 + usize::from(wa), a.2 + usize::from(wb));
        let b = record.entry(&c.b).or_default();
        *b = (b.0 + 1, b.1 + usize::from(wb), b.2 + usize::from(wa));
    }
    let unbounded: Vec<&GroupName> = record
        .iter()
        .filter(|&(_, &(n, won, lost))| n >= MIN_UNBOUNDED && (won == n || lost == n))
        .map(|(s, _)| *s)
        .collect();
    if !unbounded.is_empty() {
        return Some(
            Warning::new(
                Code::UnboundedSystems,
                format!(
                    "the judge gives {} every win or every loss of {} comparisons in the run: on the judge's \
                     verdicts alone {} rating is unbounded, and the one given is the calibrated preference's \
                     extrapolation, as far as its labels carry it; read {} rank, not {} distance",
                    names(&unbounded),
                    if unbounded.len() == 1 { "its" } else { "their" },
                    if unbounded.len() == 1 { "its" } else { "each" },
                    if unbounded.len() == 1 { "its" } else { "their" },
                    if unbounded.len() == 1 { "its" } else { "their" },
                ),
            )
            .systems(&unbounded)
        );
    }
    None
}

/// The raters: one, or one holding most labels.
fn raters(labelled: &[&Comparison]) -> Option<Warning> {
    let mut by_rater: BTreeMap<Option<&RaterName>, usize> = BTreeMap::new();
    for c in labelled {
        *by_rater.entry(c.rater.as_ref()).or_default() += 1;
    }
    let named: Vec<(&RaterName, usize)> = by_rater
        .iter()
        .filter_map(|(r, &n)| r.map(|r| (r, n)))
        .collect();
    let unnamed = by_rater.get(&None).copied().unwrap_or(0);
    if let [(rater, n)] = named.as_slice()
        && unnamed == 0
    {
        return Some(
            Warning::new(
                Code::SingleRater,
                format!(
                    "every one of the {n} labelled comparisons is rater {rater}'s: how much one rater's taste moves the \
                     ratings cannot be measured with one rater, so the interval counts the labels as independent and \
                     holds for people who judge as {rater} does, not for people at large; label with two or more raters"
                ),
            )
            .at("comparisons.rater")
        );
    } else if let Some((rater, n)) = named.iter().max_by_key(|(_, n)| *n)
        && named.len() > 1
        && *n as f64 > 0.5 * labelled.len() as f64
    {
        return Some(
            Warning::new(
                Code::DominantRater,
                format!(
                    "rater {rater} gave {n} of the {} labelled comparisons: the interval counts raters, and with one \
                     holding most labels it leans on that rater's taste (it covers less than its level where raters \
                     differ); spread the labels over more raters",
                    labelled.len()
                ),
            )
            .at("comparisons.rater")
        );
    }
    None
}

fn names(systems: &[&GroupName]) -> String {
    systems
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ItemId;

    fn row(i: usize, a: &str, b: &str, verdict: f64, preference: Option<f64>) -> Comparison {
        Comparison {
            item_id: ItemId::parse(&format!("i{i}")).unwrap(),
            a: GroupName::parse(a).unwrap(),
            b: GroupName::parse(b).unwrap(),
            verdict,
            verdict_swapped: Some(verdict),
            preference,
            rater: None,
            covariates: Default::default(),
        }
    }

    fn codes(w: &[Warning]) -> Vec<Code> {
        w.iter().map(|w| w.code).collect()
    }

    /// A run drawn like its labels says nothing; each departure says its own code and names
    /// what it is about.
    #[test]
    fn each_departure_is_named_and_a_matched_run_says_nothing() {
        let systems = ["m1", "m2", "m3"];
        let verdict = |i: usize| [1.0, 0.0, 0.5, 1.0, 0.0][i % 5];
        let run: Vec<Comparison> = (0..90)
            .map(|i| row(i, systems[i % 3], systems[(i + 1) % 3], verdict(i), None))
            .collect();
        let labels: Vec<Comparison> = (0..30)
            .map(|i| {
                row(
                    100 + i,
                    systems[i % 3],
                    systems[(i + 1) % 3],
                    verdict(i),
                    Some(1.0),
                )
            })
            .collect();
        let refs: Vec<&Comparison> = labels.iter().collect();
        assert_eq!(codes(&check(&run, &refs, true)), []);

        // No swapped verdict where the map reads it; every verdict a tie.
        let ties: Vec<Comparison> = run
            .iter()
            .map(|c| Comparison {
                verdict: 0.5,
                verdict_swapped: None,
                ..c.clone()
            })
            .collect();
        let w = check(&ties, &refs, true);
        assert_eq!(codes(&w), [Code::InputMissing, Code::RunUnlikeLabelled]);
        assert_eq!(w[0].field.as_deref(), Some("comparisons.verdict_swapped"));
        assert_eq!(
            codes(&check(&ties, &refs, false)),
            [Code::RunUnlikeLabelled]
        );

        // A fourth system in the run with no labels, and one with few; the judge gives m4
        // every win.
        let mut wider = run.clone();
        wider.extend((0..30).map(|i| row(200 + i, "m4", systems[i % 3], 1.0, None)));
        let few: Vec<Comparison> = labels
            .iter()
            .filter(|c| c.a.as_str() != "m3" && c.b.as_str() != "m3")
            .cloned()
            .chain([row(300, "m3", "m1", 1.0, Some(1.0))])
            .collect();
        let few_refs: Vec<&Comparison> = few.iter().collect();
        let w = check(&wider, &few_refs, true);
        assert_eq!(
            codes(&w),
            [
                Code::UnlabelledSystems,
                Code::UnderlabelledSystems,
                Code::UnboundedSystems
            ]
        );
        assert_eq!(w[0].systems, ["m4"]);
        assert_eq!(w[1].systems, ["m3"]);
        assert_eq!(w[2].systems, ["m4"]);

        // One rater, then one rater holding most labels.
        let rated = |who: &dyn Fn(usize) -> &'static str| -> Vec<Comparison> {
            labels
                .iter()
                .enumerate()
                .map(|(i, c)| Comparison {
                    rater: Some(RaterName::parse(who(i)).unwrap()),
                    ..c.clone()
                })
                .collect()
        };
        let one = rated(&|_| "ann");
        let w = check(&run, &one.iter().collect::<Vec<_>>(), true);
        assert_eq!(codes(&w), [Code::SingleRater]);
        let most = rated(&|i| if i % 3 == 0 { "bob" } else { "ann" });
        let w = check(&run, &most.iter().collect::<Vec<_>>(), true);
        assert_eq!(codes(&w), [Code::DominantRater]);
        let even = rated(&|i| ["ann", "bob", "cy"][i % 3]);
        assert_eq!(
            codes(&check(&run, &even.iter().collect::<Vec<_>>(), true)),
            []
        );
    }

    /// How often the checks fire, counted over seeded worlds. Matched: K systems, the run's
    /// and the labels' pairs drawn alike (uniform pairs, verdicts a, b or tie with fixed
    /// chances), 20 to 800 labels, 1 to 6 raters named evenly; the checks that compare shares
    /// (under-labelled systems, unlike verdicts, unbounded systems) may fire in at most 5% of
    /// worlds. (A system with no label at all is named whenever it happens, which is no false
    /// alarm; the rater checks read the design, not chance.) A new system in a quarter of the
    /// run's comparisons with 10 of 1,000 labels is named every time.
    #[test]
    fn the_checks_fire_where_the_labels_differ_and_rarely_where_they_do_not() {
        use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
        let mut rng = Rng::seed_from_u64(83);
        let names: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
        let draw = |rng: &mut Rng, k: usize, i: usize, new: Option<usize>| {
            let a = match new {
                Some(s) => s,
                None => rng.random_range(0..k),
            };
            let b = (a + rng.random_range(1..k)) % k;
            let u: f64 = rng.random();
            let v = if u < 0.45 {
                1.0
            } else if u < 0.9 {
                0.0
            } else {
                0.5
            };
            row(i, &names[a], &names[b], v, None)
        };
        let (worlds, mut fired) = (400, 0);
        for w in 0..worlds {
            let k = 3 + w % 10;
            let n = [20, 50, 200, 800][w % 4];
            let raters = 1 + w % 6;
            let run: Vec<Comparison> = (0..2_000).map(|i| draw(&mut rng, k, i, None)).collect();
            let labels: Vec<Comparison> = (0..n)
                .map(|i| Comparison {
                    preference: Some(1.0),
                    rater: Some(RaterName::parse(&format!("r{}", i % raters)).unwrap()),
                    ..draw(&mut rng, k, 10_000 + i, None)
                })
                .collect();
            let w = check(&run, &labels.iter().collect::<Vec<_>>(), false);
            fired += usize::from(w.iter().any(|w| {
                [
                    Code::UnderlabelledSystems,
                    Code::RunUnlikeLabelled,
                    Code::UnboundedSystems,
                ]
                .contains(&w.code)
            }));
        }
        eprintln!("matched worlds with a warning: {fired}/{worlds}");
        assert!(fired * 20 <= worlds, "{fired}/{worlds}");

        let mut named = 0;
        for _ in 0..100 {
            let k = 8;
            let run: Vec<Comparison> = (0..2_000)
                .map(|i| {
                    let new = (i % 4 == 0).then_some(k - 1);
                    draw(&mut rng, k, i, new)
                })
                .collect();
            let mut labels: Vec<Comparison> = (0..990)
                .map(|i| Comparison {
                    preference: Some(1.0),
                    ..draw(&mut rng, k - 1, 10_000 + i, None)
                })
                .collect();
            labels.extend((0..10).map(|i| Comparison {
                preference: Some(1.0),
                ..draw(&mut rng, k, 20_000 + i, Some(k - 1))
            }));
            let w = check(&run, &labels.iter().collect::<Vec<_>>(), false);
            named += usize::from(
                w.iter()
                    .any(|w| w.code == Code::UnderlabelledSystems && w.systems == ["m7"]),
            );
        }
        eprintln!("a new system with 10 of 1,000 labels named: {named}/100");
        assert_eq!(named, 100);
    }
}
