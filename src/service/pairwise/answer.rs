//! The ratings answer (`POST /v1/ratings`), built where the service rates and served as it is:
//! each system's rating, interval, rank interval and win rates, best first, the controls, the
//! calibrated preference, the labelling plan and the warnings.

use std::collections::BTreeMap;

use judgecal_stats::pairwise::powered::Powered;
use judgecal_stats::pairwise::rate;
use judgecal_stats::pairwise::ratings::RankIntervals;
use judgecal_stats::pairwise::win_rate::WinRate;
use judgecal_stats::rng::{Rng, SeedableRng};
use judgecal_stats::warning::Warning;
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::pairwise::ratings::RatingsRequest;
use crate::domain::{CovariateName, GroupName, ItemId};

/// A system's win rate (people's preference) with its interval at `level`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = WinRateDto)]
pub struct WinRateAnswer {
    pub estimate: f64,
    #[schema(min_items = 2, max_items = 2)]
    pub interval: [f64; 2],
    /// The run's comparisons it is over.
    pub comparisons: usize,
    /// The labelled comparisons (the cell's and the run's) correcting the judge's.
    pub labelled: usize,
}

/// One system's rating, its interval and rank interval, and its win rates.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = SystemRatingDto)]
pub struct SystemRating {
    #[schema(value_type = String)]
    pub system: GroupName,
    /// Bradley–Terry rating on the natural log-odds scale: people prefer a over b with
    /// probability σ(rating_a − rating_b).
    pub rating: f64,
    pub standard_error: f64,
    /// At `level`; [0, 0] for the baseline.
    #[schema(min_items = 2, max_items = 2)]
    pub interval: [f64; 2],
    /// [best, worst] ranks (1 the highest rating); every system's hold at once at `level`.
    #[schema(value_type = Vec<i64>, min_items = 2, max_items = 2, example = json!([1, 3]))]
    pub rank_interval: [usize; 2],
    /// The run's comparisons of this system.
    pub comparisons: usize,
    /// The share of its comparisons with the baseline whose answer people prefer (a tie
    /// counts ½), with its interval at `level`; null for the baseline, and where fewer than
    /// 30 labelled comparisons of the pair correct the judge's.
    pub win_rate: Option<WinRateAnswer>,
    /// The same over every comparison of the system (its rate against the field).
    pub field_win_rate: Option<WinRateAnswer>,
}

/// A controlled covariate's coefficient, with its interval at `level`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = ControlDto)]
pub struct Control {
    #[schema(value_type = String)]
    pub covariate: CovariateName,
    /// Log-odds of people preferring a per unit of a's covariate value.
    pub coefficient: f64,
    #[schema(min_items = 2, max_items = 2)]
    pub interval: [f64; 2],
}

/// One candidate of the calibrated preference with its held-out figures.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = CalibrationCandidateDto)]
pub struct CandidateFigures {
    pub inputs: String,
    /// Held-out (5-fold) mean log-loss on the cell's labelled comparisons, in nats.
    pub log_loss: f64,
    /// Held-out share whose more likely side people preferred.
    pub accuracy: f64,
}

/// The calibrated preference the ratings read.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = RatingsCalibrationDto)]
pub struct RatingsCalibration {
    /// The calibrated preference: the choice of the cell's newest trained version of the
    /// run's judge version (`version`), fitted again on the labelled comparisons of now; with
    /// no such version, the one `auto` chose at this request (lowest held-out log-loss).
    pub chosen: String,
    /// The trained version whose choice it is; null where chosen at this request.
    pub version: Option<i64>,
    pub candidates: Vec<CandidateFigures>,
    /// The covariates it reads: those every comparison carries.
    #[schema(value_type = Vec<String>)]
    pub covariates: Vec<CovariateName>,
}

/// The ratings of a run's systems by the people's preference, best first.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = RatingsResponse)]
pub struct RatingsAnswer {
    #[schema(value_type = String)]
    pub baseline: GroupName,
    pub level: f64,
    /// Highest rating first.
    pub systems: Vec<SystemRating>,
    /// The controls' coefficients (empty without `control`).
    pub controls: Vec<Control>,
    pub comparisons: usize,
    /// The run's comparisons with a preference.
    pub labelled: usize,
    /// The cell's labelled comparisons of both rated systems in the labelled set.
    pub anchors: usize,
    /// The weight the judge's calibrated verdicts got against the labels (PPI++'s λ: 0 the
    /// labels alone, 1 full weight).
    pub prediction_weight: f64,
    pub calibration: RatingsCalibration,
    /// With `target_half_width` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<LabelPlan>,
    /// What the ratings rest on that the request departs from: systems with few or no
    /// labelled comparisons (`unlabelled_systems`, `underlabelled_systems`), a run unlike the
    /// labelled set (`run_unlike_labelled`, `input_missing`), systems the judge puts beyond
    /// every comparison (`unbounded_systems`), one rater (`single_rater`, `dominant_rater`).
    pub warnings: Vec<Warning>,
}

/// The labels that bring every rating's half-width to `target_half_width`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = PairwiseLabelPlanDto)]
pub struct LabelPlan {
    /// `reached`; `more_labelled` (label `needed` more of the run's comparisons: those in
    /// `label`); `out_of_reach` (labelling every unlabelled comparison of the run would not
    /// do it: the predictions' own noise, or too few comparisons of some system; send a
    /// larger run).
    #[schema(value_type = String)]
    pub outcome: &'static str,
    pub needed: Option<usize>,
    /// The item ids to send to people: a seeded uniform draw among the run's unlabelled
    /// comparisons, so that labelled they are drawn as the run is. Upload them with their
    /// `preference` (or send them in the next request) and rate again.
    #[schema(value_type = Vec<String>)]
    pub label: Vec<ItemId>,
    /// The widest rating half-width now, and the one expected with `needed` more labels
    /// (the labelled term's variance falls as 1/labels, the prediction weight held).
    pub widest_half_width: f64,
    pub expected_half_width: Option<f64>,
}

/// The plan for `target` at `level`, drawing from `unlabelled` (the run's item ids).
pub(in crate::service) fn label_plan(
    powered: &Powered,
    level: f64,
    target: f64,
    mut unlabelled: Vec<ItemId>,
) -> LabelPlan {
    let now = powered.widest_half_width(level, 0);
    let needed = powered.labels_for(level, target, unlabelled.len());
    let outcome = match needed {
        Some(0) => "reached",
        Some(_) => "more_labelled",
        None => "out_of_reach",
    };
    let label = match needed {
        Some(m) if m > 0 => {
            use judgecal_stats::rng::SliceRandom;
            unlabelled.shuffle(&mut Rng::seed_from_u64(0));
            unlabelled.truncate(m);
            unlabelled.sort();
            unlabelled
        }
        _ => Vec::new(),
    };
    LabelPlan {
        outcome,
        needed,
        label,
        widest_half_width: now,
        expected_half_width: needed.map(|m| powered.widest_half_width(level, m)),
    }
}

/// What a rating's answer is built from.
pub(in crate::service) struct Answered<'a> {
    pub rated: rate::Rated,
    pub ranks: RankIntervals,
    pub version: Option<i64>,
    pub index: &'a BTreeMap<&'a GroupName, usize>,
    pub baseline: usize,
    pub k: usize,
    pub request: &'a RatingsRequest,
    pub covariates: Vec<CovariateName>,
    pub plan: Option<LabelPlan>,
    pub warnings: Vec<Warning>,
}

fn pair<T: Copy>((a, b): (T, T)) -> [T; 2] {
    [a, b]
}

/// The ratings answer: each system's rating, interval, rank interval and win rates, best first.
pub(in crate::service) fn answer(a: Answered<'_>) -> RatingsAnswer {
    let Answered {
        rated,
        ranks,
        version,
        index,
        baseline,
        k,
        request,
        covariates,
        plan,
        warnings,
    } = a;
    let (level, run) = (request.level, &request.batch.comparisons);
    let r = &rated.powered.ratings;
    let intervals = r.intervals(level);
    let z = r.quantile(level);
    let by_index: Vec<&GroupName> = {
        let mut v: Vec<(&GroupName, usize)> = index.iter().map(|(s, &i)| (*s, i)).collect();
        v.sort_by_key(|&(_, i)| i);
        v.into_iter().map(|(s, _)| s).collect()
    };
    let answer = |w: &Option<WinRate>| {
        w.map(|w| WinRateAnswer {
            estimate: w.estimate,
            interval: pair(w.interval(level)),
            comparisons: w.comparisons,
            labelled: w.labelled,
        })
    };
    let mut systems: Vec<SystemRating> = (0..k)
        .map(|i| SystemRating {
            system: by_index[i].clone(),
            rating: r.ratings[i],
            standard_error: r.standard_error(i),
            interval: pair(intervals[i]),
            rank_interval: pair(ranks.ranks[i]),
            comparisons: r.comparisons[i],
            win_rate: answer(&rated.win_rates[i][0]),
            field_win_rate: answer(&rated.win_rates[i][1]),
        })
        .collect();
    systems.sort_by(|a, b| b.rating.total_cmp(&a.rating).then(a.system.cmp(&b.system)));
    RatingsAnswer {
        baseline: by_index[baseline].clone(),
        level,
        systems,
        controls: request
            .control
            .iter()
            .zip(&rated.powered.controls)
            .map(|(name, &(coefficient, se))| Control {
                covariate: name.clone(),
                coefficient,
                interval: [coefficient - z * se, coefficient + z * se],
            })
            .collect(),
        comparisons: run.len(),
        labelled: rated.run_labelled,
        anchors: rated.anchors_used,
        prediction_weight: rated.powered.lambda,
        calibration: RatingsCalibration {
            chosen: rated.choice.candidate.name(),
            version,
            candidates: rated
                .choice
                .candidates
                .iter()
                .map(|(c, h)| CandidateFigures {
                    inputs: c.name(),
                    log_loss: h.log_loss,
                    accuracy: h.accuracy,
                })
                .collect(),
            covariates,
        },
        plan,
        warnings,
    }
}
