//! What a request's items give the corrector beside their judge scores, as one value: nothing
//! more, each item's covariates, or (a panel's items, whose judge score the panel's fusion
//! makes) each member's score. Every request that takes items (a correction, a run of an
//! estimate, a comparison or a ranking) carries one `ItemInputs` instead of a parallel vector
//! per kind of input, so the states the wire refuses (a panel item with covariates, covariates
//! for some runs' items and members for others of one run) cannot be built, and a new kind
//! of input is one variant here, read by the one layer in front of the corrector
//! (`service::layered` for covariates, the panel's fusion for members).

use std::collections::{BTreeMap, HashMap};

use super::covariates::{self, Covariates};
use super::panel::{MemberScores, member_scores};
use super::{ItemId, Problem, repeats};

/// A request's items' inputs beside the judge score, one entry per item where there are any.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ItemInputs {
    /// The judge score is each item's only input.
    #[default]
    Score,
    /// Each item's covariates (empty for an item that gave none); some item gave some.
    Covariates(Vec<Covariates>),
    /// A panel's items: each member's score, by name. The items' judge scores are placeholders
    /// until the service fuses these for the served version.
    Members(Vec<MemberScores>),
    /// Each item's further scores by the same judge version (empty for an item scored once);
    /// some item has some. The service corrects each item at its scores' one-score equivalent.
    Repeats(Vec<Vec<f64>>),
}

impl ItemInputs {
    /// The items' covariates, where they carry some.
    pub fn covariates(&self) -> Option<&[Covariates]> {
        match self {
            ItemInputs::Covariates(c) => Some(c),
            _ => None,
        }
    }

    /// A panel's items' members' scores.
    pub fn members(&self) -> Option<&[MemberScores]> {
        match self {
            ItemInputs::Members(m) => Some(m),
            _ => None,
        }
    }

    /// Each item's further scores, where some item carries repeats.
    pub fn repeats(&self) -> Option<&[Vec<f64>]> {
        match self {
            ItemInputs::Repeats(r) => Some(r),
            _ => None,
        }
    }

    /// Whether these are a panel's items.
    pub fn is_panel(&self) -> bool {
        matches!(self, ItemInputs::Members(_))
    }
}

/// One item of a run as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RawItem {
    pub id: Option<String>,
    /// A judge's score.
    pub score: Option<f64>,
    /// A panel's item: each member's score, by name.
    pub members: Option<BTreeMap<String, f64>>,
    /// A judge's item: its covariates.
    pub covariates: Option<BTreeMap<String, f64>>,
    /// A judge's item: its further scores by the same judge version.
    pub repeats: Option<Vec<f64>>,
    pub reference: Option<f64>,
    pub cluster: Option<String>,
}

/// A run as sent: bare scores, or items.
#[derive(Debug, Clone, PartialEq)]
pub enum RawRun {
    Scores(Vec<f64>),
    Items(Vec<RawItem>),
}

/// The door a request's items came through: what it refuses beyond the checks every item
/// gets, and what its messages add.
#[derive(Debug, Clone, Copy)]
pub struct Door {
    /// Ids must name one item each.
    pub unique_ids: bool,
    /// What an id is for, said where some items have one and others none.
    pub id_reason: &'static str,
}

impl Door {
    /// `/v1/correct`: ids are echoed back, so an id may repeat.
    pub const CORRECTION: Door = Door {
        unique_ids: false,
        id_reason: "",
    };
    /// A run of `/v1/estimate`, `/v1/compare` or `/v1/rank`: ids pair two runs' items.
    pub const RUN: Door = Door {
        unique_ids: true,
        id_reason: " (ids pair the items of two runs)",
    };
}

/// One item as checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Item {
    pub id: Option<ItemId>,
    /// A judge's score; 0 for a panel's item, whose score the service fuses from `members`.
    pub score: f64,
    /// A judge's item: its covariates (empty where it gave none).
    pub covariates: Covariates,
    /// A panel's item: each member's score (empty for a judge's item).
    pub members: MemberScores,
    /// A judge's item: its further scores by the same judge version.
    pub repeats: Vec<f64>,
    /// A run's labelled item: its reference score.
    pub reference: Option<f64>,
    /// A run's item: what it shares its errors with.
    pub cluster: Option<String>,
}

/// What every item of a request gives beside its judge score (one kind for all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InputKind {
    #[default]
    Score,
    Covariates,
    Members,
    Repeats,
}

/// A request's items, each checked once, whichever endpoint they came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Items {
    pub items: Vec<Item>,
    pub kind: InputKind,
    /// Sent as `items` (objects), not bare `scores`: the field that problems name.
    pub as_items: bool,
}

impl Items {
    /// Checks a request's items, `prefix` naming them (`""`, or a comparison's `"a."`): a
    /// judge's `score` or a panel's `scores` (one or the other, the same for every item),
    /// each finite within ±1e9; covariates on a judge's items only; repeats on a judge's
    /// items without covariates; a reference within ±1e9; a cluster of 1 to 256 characters,
    /// on every item or none; ids valid, on every item or none, and distinct where `door`
    /// says so. Each problem names its row (from 1) and field.
    pub fn check(prefix: &str, raw: RawRun, door: Door, problems: &mut Vec<Problem>) -> Items {
        let field = |f: &str| format!("{prefix}{f}");
        let raw = match raw {
            RawRun::Scores(scores) => return Self::scores(&field("scores"), scores, problems),
            RawRun::Items(items) => items,
        };
        if raw.is_empty() {
            problems.push(Problem::at(None, &field("items"), "give at least one item"));
        }
        let panel = raw.iter().any(|i| i.members.is_some());
        let with_id = raw.iter().any(|i| i.id.is_some());
        let with_cluster = raw.iter().any(|i| i.cluster.is_some());
        let with_covariates = raw.iter().any(|i| i.covariates.is_some());
        let item_repeats = repeats::of_run(
            prefix,
            raw.iter().map(|i| i.repeats.clone()).collect(),
            panel || with_covariates,
            problems,
        );
        let batch = Batch {
            prefix,
            door,
            panel,
            with_id,
            with_cluster,
        };
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut items: Vec<Item> = raw
            .into_iter()
            .enumerate()
            .map(|(i, item)| batch.item(i + 1, item, &mut seen, problems))
            .collect();
        let kind = if panel {
            InputKind::Members
        } else if with_covariates {
            InputKind::Covariates
        } else if let Some(r) = item_repeats {
            for (item, r) in items.iter_mut().zip(r) {
                item.repeats = r;
            }
            InputKind::Repeats
        } else {
            InputKind::Score
        };
        Items {
            items,
            kind,
            as_items: true,
        }
    }

    /// Bare scores at `field`: at least one, each finite within ±1e9.
    fn scores(field: &str, scores: Vec<f64>, problems: &mut Vec<Problem>) -> Items {
        if scores.is_empty() {
            problems.push(Problem::at(None, field, "give at least one score"));
        }
        let items = scores
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                if let Err(e) = super::bounded(s) {
                    problems.push(Problem::at(Some(i + 1), field, e));
                }
                Item {
                    score: s,
                    ..Item::default()
                }
            })
            .collect();
        Items {
            items,
            kind: InputKind::Score,
            as_items: false,
        }
    }

    /// What the items give beside their judge scores, as the run-level statistics read it
    /// (moved out of the items).
    pub fn take_inputs(&mut self) -> ItemInputs {
        let items = &mut self.items;
        match self.kind {
            InputKind::Score => ItemInputs::Score,
            InputKind::Covariates => ItemInputs::Covariates(
                items
                    .iter_mut()
                    .map(|i| std::mem::take(&mut i.covariates))
                    .collect(),
            ),
            InputKind::Members => ItemInputs::Members(
                items
                    .iter_mut()
                    .map(|i| std::mem::take(&mut i.members))
                    .collect(),
            ),
            InputKind::Repeats => ItemInputs::Repeats(
                items
                    .iter_mut()
                    .map(|i| std::mem::take(&mut i.repeats))
                    .collect(),
            ),
        }
    }
}

/// What every item of one request is checked against: its door, and whether the request is a
/// panel's and gives ids and clusters.
struct Batch<'a> {
    prefix: &'a str,
    door: Door,
    panel: bool,
    with_id: bool,
    with_cluster: bool,
}

impl Batch<'_> {
    /// Item `row` (from 1), checked; `seen` holds the ids met so far.
    fn item(
        &self,
        row: usize,
        item: RawItem,
        seen: &mut HashMap<String, usize>,
        problems: &mut Vec<Problem>,
    ) -> Item {
        let field = |f: &str| format!("{}{f}", self.prefix);
        let at = |f: &str, problem: String| Problem::at(Some(row), &field(f), problem);
        let mut checked = Item {
            reference: item.reference,
            ..Item::default()
        };
        if self.panel && item.covariates.is_some() {
            problems.push(at(
                covariates::FIELD,
                "a panel's items carry members' `scores`; covariates are for a judge's items"
                    .into(),
            ));
        }
        if let Some(c) = &item.covariates {
            checked.covariates =
                covariates::from_map(Some(row), &field(covariates::FIELD), c, problems);
        }
        match (item.score, item.members) {
            (Some(_), Some(_)) => {
                problems.push(at("score", "give `score` or `scores`, not both".into()))
            }
            (Some(s), None) if !self.panel => match super::bounded(s) {
                Ok(s) => checked.score = s,
                Err(e) => problems.push(at("score", e)),
            },
            (None, Some(m)) => {
                checked.members = member_scores(Some(row), &field("scores"), m, problems)
            }
            _ if self.panel => problems.push(at(
                "scores",
                "every item of a panel gives `scores`, {member: score}".into(),
            )),
            _ => problems.push(at(
                "score",
                "missing: a judge's item gives `score`, a panel's `scores`".into(),
            )),
        }
        if let Some(Err(e)) = item.reference.map(super::bounded) {
            problems.push(at("reference", e));
        }
        match item.id {
            Some(id) => match ItemId::named(&id) {
                Err(e) => problems.push(at("id", e)),
                Ok(named) => {
                    if self.door.unique_ids
                        && let Some(first) = seen.insert(named.as_str().to_owned(), row)
                    {
                        problems.push(at(
                            "id",
                            format!("{id:?} is also item {first}: ids name one item each"),
                        ));
                    }
                    checked.id = Some(named);
                }
            },
            None if self.with_id => problems.push(at(
                "id",
                format!("give every item an id or none{}", self.door.id_reason),
            )),
            None => {}
        }
        match item.cluster {
            Some(c) if c.is_empty() || c.len() > 256 => {
                problems.push(at("cluster", "1 to 256 characters".into()))
            }
            None if self.with_cluster => {
                problems.push(at("cluster", "give every item a cluster or none".into()))
            }
            c => checked.cluster = c,
        }
        checked
    }
}
