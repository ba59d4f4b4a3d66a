//! Run-level requests (`/v1/estimate`, `/v1/compare`, `/v1/rank`), parsed at the edge: the cell, each run's
//! scores with their ids, reference scores and clusters, the version, the level and the
//! target half-width. Every problem is named by row and field; nothing partial gets through.

use std::collections::{BTreeMap, HashMap};

use super::covariates::{self, Covariates};
use super::inputs::{Door, ItemInputs, Items};
pub use super::inputs::{RawItem, RawRun};
use super::{CellKey, GroupName, ItemId, JudgeName, JudgeVersion, Problem, RubricName};
use judgecal_stats::runlevel::inference::Estimand;
use judgecal_stats::runlevel::rank::{ErrorRate, LabelGoal, MAX_RUNS, RankSettings};
use judgecal_stats::runlevel::{AnswerSettings, MIN_LABELLED, RunItems};

/// One run's estimate, asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimateRequest {
    pub key: CellKey,
    pub run: RunItems,
    /// What the run's items give beside the judge score: covariates, or a panel's members'
    /// scores.
    pub inputs: ItemInputs,
    /// Covariates held at these values for every item (a length-controlled estimate).
    pub hold: Covariates,
    pub version: Option<i64>,
    /// The judge version that scored the run.
    pub judge_version: Option<JudgeVersion>,
    pub settings: AnswerSettings,
    /// A panel's missing member scores are taken as missing at random without the runs' test.
    pub assume_missing_at_random: bool,
}

/// Two runs' difference, asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRequest {
    pub key: CellKey,
    pub a: RunItems,
    pub b: RunItems,
    /// What the items of run a and of run b give beside the judge score.
    pub inputs: [ItemInputs; 2],
    /// Covariates held at these values for every item of both runs.
    pub hold: Covariates,
    pub version: Option<i64>,
    /// The judge versions that scored runs a and b.
    pub judge_versions: [Option<JudgeVersion>; 2],
    pub settings: AnswerSettings,
    /// A panel's missing member scores are taken as missing at random without the runs' test.
    pub assume_missing_at_random: bool,
}

/// A run as sent, with its group and judge version; `run` is `Err` where it was neither
/// `scores` nor `items` (the problem names the field).
#[derive(Debug, Clone)]
pub struct RawRunWithGroup {
    pub run: Result<RawRun, Problem>,
    pub group: Option<String>,
    pub judge_version: Option<String>,
}

/// A run's judge version, or its problem named `{prefix}judge_version`.
fn parse_judge_version(
    prefix: &str,
    raw: Option<&str>,
    problems: &mut Vec<Problem>,
) -> Option<JudgeVersion> {
    raw.and_then(|v| {
        JudgeVersion::parse(v)
            .map_err(|e| problems.push(Problem::at(None, &format!("{prefix}judge_version"), e)))
            .ok()
    })
}

impl EstimateRequest {
    /// Checks the whole request, every problem named by row and field.
    pub fn parse(
        judge: &str,
        rubric: &str,
        run: RawRunWithGroup,
        version: Option<i64>,
        raw: RawSettings,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let hold = parse_hold(raw.hold.clone(), &mut problems);
        let assume_missing_at_random = raw.assume_missing_at_random.unwrap_or(false);
        let (key, settings) = parse_common(judge, rubric, version, raw, &mut problems);
        let judge_version = parse_judge_version("", run.judge_version.as_deref(), &mut problems);
        let run = match run.run {
            Ok(r) => parse_run(
                "",
                r,
                run.group.as_deref(),
                &mut ClusterNames::default(),
                &mut problems,
            ),
            Err(p) => {
                problems.push(p);
                ParsedRun::default()
            }
        };
        match key {
            Some(key) if problems.is_empty() => Ok(Self {
                key,
                run: run.items,
                inputs: run.inputs,
                hold,
                assume_missing_at_random,
                version,
                judge_version,
                settings,
            }),
            _ => Err(problems),
        }
    }

    /// The name of the field that holds the run.
    pub fn field(&self) -> &'static str {
        if self.run.ids.is_some() {
            "items"
        } else {
            "scores"
        }
    }
}

impl CompareRequest {
    /// Checks the whole request; problems of a run are named `a.` or `b.`.
    pub fn parse(
        judge: &str,
        rubric: &str,
        a: RawRunWithGroup,
        b: RawRunWithGroup,
        version: Option<i64>,
        raw: RawSettings,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let hold = parse_hold(raw.hold.clone(), &mut problems);
        let assume_missing_at_random = raw.assume_missing_at_random.unwrap_or(false);
        let (key, settings) = parse_common(judge, rubric, version, raw, &mut problems);
        let mut names = ClusterNames::default();
        let judge_versions = [
            parse_judge_version("a.", a.judge_version.as_deref(), &mut problems),
            parse_judge_version("b.", b.judge_version.as_deref(), &mut problems),
        ];
        let mut run =
            |prefix: &str, raw: RawRunWithGroup, problems: &mut Vec<Problem>| match raw.run {
                Ok(r) => parse_run(prefix, r, raw.group.as_deref(), &mut names, problems),
                Err(p) => {
                    problems.push(p);
                    ParsedRun::default()
                }
            };
        let a = run("a.", a, &mut problems);
        let b = run("b.", b, &mut problems);
        match key {
            Some(key) if problems.is_empty() => Ok(Self {
                key,
                a: a.items,
                b: b.items,
                inputs: [a.inputs, b.inputs],
                hold,
                assume_missing_at_random,
                version,
                judge_versions,
                settings,
            }),
            _ => Err(problems),
        }
    }
}

/// The largest judge score a run-level request takes: its sums and squares over a run stay
/// finite (a score of 1e221 made a ranking's estimates overflow to NaN).
pub const MAX_SCORE: f64 = super::MAX_MAGNITUDE;

/// K runs to rank, asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RankRequest {
    pub key: CellKey,
    /// Each run's name and items.
    pub runs: Vec<(String, RunItems)>,
    /// What each run's items give beside the judge score.
    pub inputs: Vec<ItemInputs>,
    /// Covariates held at these values for every item of every run.
    pub hold: Covariates,
    /// The judge version that scored each run.
    pub judge_versions: Vec<Option<JudgeVersion>>,
    pub version: Option<i64>,
    pub settings: AnswerSettings,
    pub rank: RankSettings,
    /// A panel's missing member scores are taken as missing at random without the runs' test.
    pub assume_missing_at_random: bool,
}

/// A ranking's own options, as sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawRankOptions {
    pub error: Option<String>,
    pub round: Option<usize>,
    pub rounds: Option<usize>,
    pub labels: Option<RawLabels>,
    /// A look of a ranking session, which binds `round` and `rounds`; a plain ranking takes
    /// neither (its guarantee is for its one look).
    pub session: bool,
}

/// A label plan, as asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawLabels {
    pub budget: Option<usize>,
    pub min_gap: Option<f64>,
    pub power: Option<f64>,
    pub seed: Option<u64>,
}

/// The most looks a ranking may plan.
pub const MAX_ROUNDS: usize = 10;

impl RankRequest {
    /// Checks the whole request; problems of a run are named `runs[i].` (from 0).
    pub fn parse(
        judge: &str,
        rubric: &str,
        runs: Vec<(String, RawRunWithGroup)>,
        version: Option<i64>,
        raw: RawSettings,
        options: RawRankOptions,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let hold = parse_hold(raw.hold.clone(), &mut problems);
        let assume_missing_at_random = raw.assume_missing_at_random.unwrap_or(false);
        let (key, settings) = parse_common(judge, rubric, version, raw, &mut problems);
        if runs.len() < 2 || runs.len() > MAX_RUNS {
            problems.push(Problem::at(
                None,
                "runs",
                format!("{} runs; a ranking takes 2 to {MAX_RUNS}", runs.len()),
            ));
        }
        let (runs, inputs, judge_versions) = parse_runs(runs, &mut problems);
        let rank = options.parse(settings.seed, &mut problems);
        match key {
            Some(key) if problems.is_empty() => Ok(Self {
                key,
                runs,
                inputs,
                hold,
                assume_missing_at_random,
                judge_versions,
                version,
                settings,
                rank,
            }),
            _ => Err(problems),
        }
    }
}

/// A ranking's runs, each named once: their items, inputs and judge versions.
#[allow(clippy::type_complexity)]
fn parse_runs(
    runs: Vec<(String, RawRunWithGroup)>,
    problems: &mut Vec<Problem>,
) -> (
    Vec<(String, RunItems)>,
    Vec<ItemInputs>,
    Vec<Option<JudgeVersion>>,
) {
    let mut names = ClusterNames::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut parsed = Vec::with_capacity(runs.len());
    let mut inputs = Vec::with_capacity(runs.len());
    let mut judge_versions = Vec::with_capacity(runs.len());
    for (i, (name, raw)) in runs.into_iter().enumerate() {
        let prefix = format!("runs[{i}].");
        judge_versions.push(parse_judge_version(
            &prefix,
            raw.judge_version.as_deref(),
            problems,
        ));
        let group = raw.group;
        if name.is_empty() || name.len() > 256 || name.chars().any(char::is_control) {
            problems.push(Problem::at(
                None,
                &format!("{prefix}name"),
                "1 to 256 characters, no control characters",
            ));
        } else if let Some(first) = seen.insert(name.clone(), i) {
            problems.push(Problem::at(
                None,
                &format!("{prefix}name"),
                format!("{name:?} is also runs[{first}]: name each run once"),
            ));
        }
        let run = match raw.run {
            Ok(r) => parse_run(&prefix, r, group.as_deref(), &mut names, problems),
            Err(p) => {
                problems.push(p);
                ParsedRun::default()
            }
        };
        inputs.push(run.inputs);
        parsed.push((name, run.items));
    }
    (parsed, inputs, judge_versions)
}

impl RawRankOptions {
    /// The ranking's settings: its error criterion, its look and the label plan asked for
    /// (seeded by `seed` unless it names its own).
    fn parse(self, seed: u64, problems: &mut Vec<Problem>) -> RankSettings {
        let mut rank = RankSettings::default();
        if let Some(e) = &self.error {
            match ErrorRate::parse(e) {
                Some(e) => rank.error = e,
                None => problems.push(Problem::at(
                    None,
                    "error",
                    format!("{e:?} is not an error criterion: `familywise` (every pair's interval holds at once, the default) or `per_pair` (each on its own)"),
                )),
            }
        }
        if !self.session {
            for (field, given) in [("round", self.round), ("rounds", self.rounds)] {
                if given.is_some() {
                    problems.push(Problem::at(
                        None,
                        field,
                        "looks are planned and bound only in a ranking session: open one with POST /v1/rank/sessions (its `rounds`) and send each look to POST /v1/rank/sessions/{id}/looks. A plain ranking answers one look, at the full level",
                    ));
                }
            }
        }
        rank.rounds = self.rounds.unwrap_or(1);
        rank.round = self.round.unwrap_or(1);
        if !(1..=MAX_ROUNDS).contains(&rank.rounds) {
            problems.push(Problem::at(
                None,
                "rounds",
                format!("the looks planned in all: 1 to {MAX_ROUNDS}, fixed before the first"),
            ));
        } else if !(1..=rank.rounds).contains(&rank.round) {
            problems.push(Problem::at(
                None,
                "round",
                format!(
                    "this look, from 1 to rounds ({}); each look spends 1/rounds of the error rate, so a look past the planned ones would spend more than the level allows",
                    rank.rounds
                ),
            ));
        }
        if let Some(l) = self.labels {
            rank.labels = Some(l.parse(seed, &rank, problems));
        }
        rank
    }
}

impl RawLabels {
    /// The label plan's goal, asked at look `rank.round` of `rank.rounds`.
    fn parse(self, seed: u64, rank: &RankSettings, problems: &mut Vec<Problem>) -> LabelGoal {
        if self.seed.is_some_and(|s| i64::try_from(s).is_err()) {
            problems.push(Problem::at(None, "labels.seed", "0 to 9223372036854775807"));
        }
        let mut goal = LabelGoal {
            seed: self.seed.unwrap_or(seed),
            ..LabelGoal::default()
        };
        if rank.round >= rank.rounds && rank.rounds <= MAX_ROUNDS {
            problems.push(Problem::at(
                None,
                "rounds",
                format!(
                    "labels are for a later look, and this is look {} of {}: plan the looks from the start in a ranking session (POST /v1/rank/sessions with rounds = 2 or more), and ask its looks for labels",
                    rank.round, rank.rounds
                ),
            ));
        }
        if let Some(b) = self.budget {
            if b == 0 {
                problems.push(Problem::at(None, "labels.budget", "at least 1 label"));
            }
            goal.budget = Some(b);
        }
        if let Some(g) = self.min_gap {
            if g.is_finite() && g > 0.0 {
                goal.min_gap = g;
            } else {
                problems.push(Problem::at(
                    None,
                    "labels.min_gap",
                    "a positive number, in reference units: gaps below it need not be resolved",
                ));
            }
        }
        if let Some(p) = self.power {
            if (0.5..=0.99).contains(&p) {
                goal.power = p;
            } else {
                problems.push(Problem::at(None, "labels.power", "must lie in [0.5, 0.99]"));
            }
        }
        goal
    }
}

/// The interval's level, the planning target and what a comparison estimates, as sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSettings {
    pub level: Option<f64>,
    pub target_half_width: Option<f64>,
    pub estimand: Option<String>,
    /// Covariates to hold at a fixed value for every item.
    pub hold: Option<BTreeMap<String, f64>>,
    /// A panel's missing member scores are missing at random, given what the other members
    /// scored: the runs' own test of that is skipped.
    pub assume_missing_at_random: Option<bool>,
}

/// A request's `hold`: covariates to read every item at, each problem at `hold.<name>`.
fn parse_hold(raw: Option<BTreeMap<String, f64>>, problems: &mut Vec<Problem>) -> Covariates {
    covariates::from_map(None, "hold", &raw.unwrap_or_default(), problems)
}

/// Levels an interval may have.
pub const LEVELS: std::ops::RangeInclusive<f64> = 0.5..=0.999;

/// Gives each cluster name a number, the same in both runs of a comparison.
#[derive(Default)]
pub struct ClusterNames(HashMap<String, u64>);

impl ClusterNames {
    fn number(&mut self, name: &str) -> u64 {
        let next = self.0.len() as u64;
        *self.0.entry(name.to_owned()).or_insert(next)
    }
}

/// Checks one run and its group; `prefix` names it in problems (`""`, or `"a."` in a
/// comparison).
pub fn parse_run(
    prefix: &str,
    raw: RawRun,
    group: Option<&str>,
    clusters: &mut ClusterNames,
    problems: &mut Vec<Problem>,
) -> ParsedRun {
    let field = |f: &str| format!("{prefix}{f}");
    let group = group.and_then(|g| {
        GroupName::parse(g)
            .map(|g| g.as_str().to_owned())
            .map_err(|e| problems.push(Problem::at(None, &field("group"), e)))
            .ok()
    });
    let (mut run, inputs) = parse_items(prefix, raw, clusters, problems);
    run.group = group;
    ParsedRun { items: run, inputs }
}

/// A run as parsed: its items, and what they give beside the judge score (a panel's run:
/// each item's members' scores, which the service fuses into `items.scores` once it knows
/// the version).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedRun {
    pub items: RunItems,
    pub inputs: ItemInputs,
}

fn parse_items(
    prefix: &str,
    raw: RawRun,
    clusters: &mut ClusterNames,
    problems: &mut Vec<Problem>,
) -> (RunItems, ItemInputs) {
    let field = |f: &str| format!("{prefix}{f}");
    let mut items = Items::check(prefix, raw, Door::RUN, problems);
    let inputs = items.take_inputs();
    let Items {
        items, as_items, ..
    } = items;
    let scores = items.iter().map(|i| i.score).collect();
    if !as_items {
        return (RunItems::scores(scores), inputs);
    }
    let labelled = items.iter().filter(|i| i.reference.is_some()).count();
    let with_cluster = items.first().is_some_and(|i| i.cluster.is_some());
    if labelled >= MIN_LABELLED && with_cluster {
        let mut labelled_clusters: Vec<&str> = items
            .iter()
            .filter(|i| i.reference.is_some())
            .filter_map(|i| i.cluster.as_deref())
            .collect();
        labelled_clusters.sort_unstable();
        labelled_clusters.dedup();
        if labelled_clusters.len() < 2 {
            problems.push(Problem::at(
                None,
                &field("cluster"),
                "the labelled items lie in one cluster; a cluster-robust interval needs labelled items in at least 2 clusters (label items of another cluster, or send no clusters)",
            ));
        }
    }
    if (1..MIN_LABELLED).contains(&labelled) {
        problems.push(Problem::at(
            None,
            &field("reference"),
            format!(
                "{labelled} items carry a reference; the labelled path needs at least {MIN_LABELLED}, drawn at random from the run (or send none for the plain estimate)"
            ),
        ));
    }
    let run = RunItems {
        scores,
        reference: if labelled > 0 {
            items.iter().map(|i| i.reference).collect()
        } else {
            Vec::new()
        },
        clusters: with_cluster.then(|| {
            items
                .iter()
                .map(|i| clusters.number(i.cluster.as_deref().unwrap_or_default()))
                .collect()
        }),
        ids: items.first().is_some_and(|i| i.id.is_some()).then(|| {
            items
                .into_iter()
                .map(|i| i.id.map(ItemId::into_string).unwrap_or_default())
                .collect()
        }),
        ..RunItems::default()
    };
    (run, inputs)
}

/// Checks the cell, the version and the settings.
pub fn parse_common(
    judge: &str,
    rubric: &str,
    version: Option<i64>,
    raw: RawSettings,
    problems: &mut Vec<Problem>,
) -> (Option<CellKey>, AnswerSettings) {
    let judge = JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
    let rubric =
        RubricName::parse(rubric).map_err(|e| problems.push(Problem::at(None, "rubric", e)));
    if version.is_some_and(|v| v < 1) {
        problems.push(Problem::at(None, "version", "versions count from 1"));
    }
    let mut settings = AnswerSettings::default();
    if let Some(level) = raw.level {
        if LEVELS.contains(&level) {
            settings.level = level;
        } else {
            problems.push(Problem::at(
                None,
                "level",
                "must lie in [0.5, 0.999] (0.95 for a 95% interval)",
            ));
        }
    }
    if let Some(e) = &raw.estimand {
        match Estimand::parse(e) {
            Some(e) => settings.estimand = e,
            None => problems.push(Problem::at(
                None,
                "estimand",
                format!("{e:?} is not an estimand: `runs` (the runs' own difference, the default) or `population` (the mean difference over the prompts the paired items were drawn from)"),
            )),
        }
    }
    if let Some(t) = raw.target_half_width {
        if t.is_finite() && t > 0.0 {
            settings.target = Some(t);
        } else {
            problems.push(Problem::at(
                None,
                "target_half_width",
                "must be a positive number, in score units",
            ));
        }
    }
    let key = match (judge, rubric) {
        (Ok(judge), Ok(rubric)) => Some(CellKey { judge, rubric }),
        _ => None,
    };
    (key, settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: Option<&str>, score: f64, reference: Option<f64>) -> RawItem {
        RawItem {
            id: id.map(str::to_owned),
            score: Some(score),
            members: None,
            covariates: None,
            repeats: None,
            reference,
            cluster: None,
        }
    }

    #[test]
    fn every_bad_row_and_field_is_named() {
        let mut problems = Vec::new();
        let run = RawRun::Items(vec![
            item(Some("x"), 3.0, Some(3.5)),
            item(Some("x"), f64::NAN, None),
            item(None, 2.0, Some(f64::INFINITY)),
        ]);
        parse_run("a.", run, None, &mut ClusterNames::default(), &mut problems);
        let named: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert!(named.contains(&(Some(2), "a.id")), "{named:?}");
        assert!(named.contains(&(Some(2), "a.score")), "{named:?}");
        assert!(named.contains(&(Some(3), "a.reference")), "{named:?}");
        assert!(named.contains(&(Some(3), "a.id")), "{named:?}");
        // Two labelled items are too few for the labelled path.
        assert!(named.contains(&(None, "a.reference")), "{named:?}");
    }

    #[test]
    fn a_runs_inputs_are_one_kind_a_panel_item_with_covariates_refused() {
        let parse = |items: Vec<RawItem>| {
            let mut problems = Vec::new();
            let run = parse_run(
                "",
                RawRun::Items(items),
                None,
                &mut ClusterNames::default(),
                &mut problems,
            );
            (run.inputs, problems)
        };
        let with_length = |score: f64, length: Option<f64>| RawItem {
            covariates: length.map(|l| BTreeMap::from([("length".to_owned(), l)])),
            ..item(None, score, None)
        };
        let member = |score: f64| RawItem {
            score: None,
            members: Some(BTreeMap::from([("gpt".to_owned(), score)])),
            ..item(None, 0.0, None)
        };
        let (inputs, problems) = parse(vec![item(None, 3.0, None), item(None, 4.0, None)]);
        assert_eq!((inputs, problems.len()), (ItemInputs::Score, 0));
        // One item's covariates make every item's entry; the one that gave none is empty.
        let (inputs, problems) = parse(vec![with_length(3.0, Some(812.0)), with_length(4.0, None)]);
        assert!(problems.is_empty(), "{problems:?}");
        let given = inputs.covariates().expect("covariates");
        assert_eq!(given.len(), 2);
        assert_eq!(given[0].values().copied().collect::<Vec<_>>(), [812.0]);
        assert!(given[1].is_empty() && inputs.members().is_none());
        let (inputs, problems) = parse(vec![member(3.0), member(4.5)]);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(inputs.is_panel() && inputs.covariates().is_none());
        assert_eq!(inputs.members().map(<[_]>::len), Some(2));
        let (_, problems) = parse(vec![
            member(3.0),
            RawItem {
                covariates: Some(BTreeMap::from([("length".to_owned(), 9.0)])),
                ..member(4.0)
            },
        ]);
        let named: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(named, [(Some(2), "covariates")]);
        // Repeats: one item's make every item's entry; with covariates they are refused, and a
        // bad score is named by its row.
        let with_repeats = |score: f64, r: Vec<f64>| RawItem {
            repeats: Some(r),
            ..item(None, score, None)
        };
        let (inputs, problems) = parse(vec![
            with_repeats(3.0, vec![4.0, 3.0]),
            item(None, 2.0, None),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(inputs.repeats(), Some(&[vec![4.0, 3.0], vec![]][..]));
        let (_, problems) = parse(vec![
            with_repeats(3.0, vec![f64::NAN]),
            RawItem {
                repeats: Some(vec![2.0]),
                ..with_length(3.0, Some(9.0))
            },
        ]);
        let named: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert!(named.contains(&(Some(1), "repeats")), "{named:?}");
        assert!(named.contains(&(Some(2), "repeats")), "{named:?}");
    }

    #[test]
    fn clusters_are_numbered_alike_across_runs_and_levels_are_bounded() {
        let mut names = ClusterNames::default();
        let mut problems = Vec::new();
        let with = |c: &str| RawItem {
            cluster: Some(c.into()),
            ..item(None, 3.0, None)
        };
        let a = parse_run(
            "a.",
            RawRun::Items(vec![with("p1"), with("p2"), with("p1")]),
            Some("BART"),
            &mut names,
            &mut problems,
        )
        .items;
        let b = parse_run(
            "b.",
            RawRun::Items(vec![with("p2")]),
            None,
            &mut names,
            &mut problems,
        )
        .items;
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(a.clusters, Some(vec![0, 1, 0]));
        assert_eq!(b.clusters, Some(vec![1]));
        assert_eq!(
            (a.group.as_deref(), b.group.as_deref()),
            (Some("BART"), None)
        );
        let (key, settings) = parse_common(
            "g",
            "r",
            None,
            RawSettings {
                level: Some(0.9),
                target_half_width: Some(0.05),
                estimand: Some("population".into()),
                hold: None,
                assume_missing_at_random: None,
            },
            &mut problems,
        );
        assert!(key.is_some() && problems.is_empty());
        assert_eq!((settings.level, settings.target), (0.9, Some(0.05)));
        assert_eq!(settings.estimand, Estimand::Population);
        parse_common(
            "g",
            "r",
            Some(0),
            RawSettings {
                level: Some(1.0),
                target_half_width: Some(-1.0),
                estimand: Some("prompts".into()),
                hold: None,
                assume_missing_at_random: None,
            },
            &mut problems,
        );
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            ["version", "level", "estimand", "target_half_width"]
        );
    }
}
