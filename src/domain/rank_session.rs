//! Ranking sessions: a user who labels and asks again plans the looks before the first, and
//! the service holds them to it. A session binds the number of looks (each look is round k of
//! the planned rounds, at family-wise level 1 − α/rounds: Bonferroni over the looks), the
//! label seed (each look's label plan draws its items from it) and every label seen so far
//! (a later look must carry each earlier label unchanged: dropping an inconvenient label, or
//! changing its reference, would let the looks be chosen by their answers). A look past the
//! plan is refused. Without a session, `/v1/rank`'s guarantee is for the one look it answers,
//! and it takes no `round` or `rounds`.
//!
//! A session is also bound to what it looks at. Each run it has looked at belongs to it, by a
//! fingerprint of the run's items and judge scores (`fingerprint`): another session's look at
//! the same run is refused, so that a user who re-asks cannot open a fresh session, and with
//! it a fresh error budget, for each look. And every label a look carries must be of an item
//! one of the session's label plans drew (`Drawn`): the labelled path's guarantee assumes the
//! labelled items were drawn at random, not chosen.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{CellKey, Problem};
use judgecal_stats::runlevel::RunItems;

/// The most looks a session may plan.
pub const MAX_LOOKS: usize = 10;

/// What a session fixes when it is opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionPlan {
    /// Looks planned in all (1 to [`MAX_LOOKS`]).
    pub rounds: usize,
    /// The level every look's family holds at over all the looks together.
    pub level: f64,
    /// `familywise` or `per_pair`.
    pub error: String,
    /// Seeds every look's label plan.
    pub seed: u64,
    /// The calibrator version every look is answered by (none: the cell's active one at each
    /// look).
    pub version: Option<i64>,
}

/// Every label seen so far: run name → item (its id, or `#` and its 1-based position in a
/// run without ids) → reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Seen(pub BTreeMap<String, BTreeMap<String, f64>>);

/// An item's name in [`Seen`].
fn item_key(run: &RunItems, i: usize) -> String {
    match &run.ids {
        Some(ids) => ids[i].clone(),
        None => format!("#{}", i + 1),
    }
}

/// A run's fingerprint: SHA-256 over its items' ids (or positions) and judge scores, in
/// order, never its labels (a later look adds labels to the same run).
pub fn fingerprint(run: &RunItems) -> String {
    let mut hash = Sha256::new();
    for (i, score) in run.scores.iter().enumerate() {
        match &run.ids {
            Some(ids) => {
                hash.update([1u8]);
                hash.update((ids[i].len() as u64).to_le_bytes());
                hash.update(ids[i].as_bytes());
            }
            None => {
                hash.update([0u8]);
                hash.update((i as u64).to_le_bytes());
            }
        }
        hash.update(score.to_bits().to_le_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The items the session's label plans drew: run name → item names (as in [`Seen`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drawn(pub BTreeMap<String, BTreeSet<String>>);

impl Drawn {
    /// The problems of a look whose runs carry labels of items no label plan of this session
    /// drew (labels seen at an earlier look, from before sessions kept their draws, pass).
    pub fn check(&self, seen: &Seen, runs: &[(String, RunItems)]) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (i, (name, run)) in runs.iter().enumerate() {
            let (drawn, earlier) = (self.0.get(name), seen.0.get(name));
            let outside: Vec<String> = run
                .reference
                .iter()
                .enumerate()
                .filter(|(_, y)| y.is_some())
                .map(|(k, _)| item_key(run, k))
                .filter(|key| {
                    !drawn.is_some_and(|d| d.contains(key))
                        && !earlier.is_some_and(|e| e.contains_key(key))
                })
                .collect();
            if let Some(first) = outside.first() {
                problems.push(Problem::at(
                    None,
                    &format!("runs[{i}].items"),
                    format!(
                        "{} labelled item(s) of run {name:?} (the first: item {first}) were not drawn by a label plan of this session; a session's labels are the items its plans draw (ask a look for `labels` to get a plan), because its guarantee assumes the labelled items were drawn at random, not chosen. Send them as anchors, or rank with them once through /v1/rank",
                        outside.len()
                    ),
                ));
            }
        }
        problems
    }

    /// These draws and a look's plan: `plan[k]` the items drawn from `runs[k]` (positions; a
    /// run as its name and item ids, if any).
    pub fn after(&self, runs: &[(String, Option<Vec<String>>)], plan: &[Vec<usize>]) -> Drawn {
        let mut out = self.clone();
        for ((name, ids), items) in runs.iter().zip(plan) {
            if items.is_empty() {
                continue;
            }
            out.0
                .entry(name.clone())
                .or_default()
                .extend(items.iter().map(|&i| match ids {
                    Some(ids) => ids[i].clone(),
                    None => format!("#{}", i + 1),
                }));
        }
        out
    }
}

impl Seen {
    /// The problems of a look whose runs do not carry every label seen before, by run and
    /// item: a run left out, an item dropped or its reference changed.
    pub fn check(&self, runs: &[(String, RunItems)]) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (name, labels) in &self.0 {
            let Some((i, (_, run))) = runs.iter().enumerate().find(|(_, r)| &r.0 == name) else {
                problems.push(Problem::at(
                    None,
                    "runs",
                    format!(
                        "run {name:?} carried {} labels at an earlier look of this session; every look keeps every run's labels",
                        labels.len()
                    ),
                ));
                continue;
            };
            let references = run.references();
            let here: BTreeMap<String, Option<f64>> = (0..run.scores.len())
                .map(|k| (item_key(run, k), references[k]))
                .collect();
            for (item, y) in labels {
                let now = here.get(item).copied().flatten();
                if now != Some(*y) {
                    problems.push(Problem::at(
                        None,
                        &format!("runs[{i}].items"),
                        format!(
                            "item {item} was labelled {y} at an earlier look of this session, and {}; every look keeps every label unchanged",
                            match (here.get(item), now) {
                                (None, _) => "this look leaves the item out".to_owned(),
                                (Some(_), None) => "this look sends it without a reference".to_owned(),
                                (Some(_), Some(z)) => format!("this look labels it {z}"),
                            }
                        ),
                    ));
                }
            }
        }
        problems
    }

    /// These labels and the look's.
    pub fn after(&self, runs: &[(String, RunItems)]) -> Seen {
        let mut out = self.clone();
        for (name, run) in runs {
            let references = run.references();
            for (k, y) in references.iter().enumerate() {
                if let Some(y) = y {
                    out.0
                        .entry(name.clone())
                        .or_default()
                        .insert(item_key(run, k), *y);
                }
            }
        }
        out
    }

    pub fn labels(&self) -> usize {
        self.0.values().map(BTreeMap::len).sum()
    }
}

/// A stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSession {
    pub id: Uuid,
    pub key: CellKey,
    pub plan: SessionPlan,
    /// Looks taken.
    pub looks: usize,
    pub seen: Seen,
    pub drawn: Drawn,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl RankSession {
    /// The round the next look is, or why there is none.
    pub fn next_round(&self) -> Result<usize, String> {
        if self.looks >= self.plan.rounds {
            Err(format!(
                "ranking session {} planned {} looks and has taken them all; its family's error rate is spent. Open a new session for new runs (its guarantee is its own)",
                self.id, self.plan.rounds
            ))
        } else {
            Ok(self.looks + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ids: Option<&[&str]>, references: &[Option<f64>]) -> RunItems {
        RunItems {
            scores: vec![3.0; references.len()],
            reference: references.to_vec(),
            ids: ids.map(|i| i.iter().map(|s| (*s).to_owned()).collect()),
            ..RunItems::default()
        }
    }

    #[test]
    fn a_look_must_keep_every_label_seen_before() {
        let first = vec![
            ("a".to_owned(), run(Some(&["x", "y"]), &[Some(4.0), None])),
            ("b".to_owned(), run(None, &[None, Some(2.0)])),
        ];
        let seen = Seen::default().after(&first);
        assert_eq!(seen.labels(), 2);
        assert!(seen.check(&first).is_empty());
        // More labels, in another order: fine.
        let more = vec![
            ("b".to_owned(), run(None, &[Some(1.0), Some(2.0)])),
            (
                "a".to_owned(),
                run(Some(&["y", "x"]), &[Some(3.0), Some(4.0)]),
            ),
        ];
        assert!(seen.check(&more).is_empty());
        assert_eq!(seen.after(&more).labels(), 4);
        // A changed reference, a dropped item, a dropped run: each named.
        let changed = vec![
            ("a".to_owned(), run(Some(&["x"]), &[Some(5.0)])),
            ("b".to_owned(), run(None, &[None, None])),
        ];
        let problems = seen.check(&changed);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].problem.contains("this look labels it 5"));
        assert_eq!(problems[1].field, "runs[1].items");
        assert!(problems[1].problem.contains("#2") && problems[1].problem.contains("without"));
        let dropped = vec![("b".to_owned(), run(None, &[None, Some(2.0)]))];
        assert!(seen.check(&dropped)[0].problem.contains("run \"a\""));
    }

    #[test]
    fn labels_must_be_of_drawn_items_and_a_run_is_known_by_its_items_and_scores() {
        let keys = vec![(
            "a".to_owned(),
            Some(vec!["x".to_owned(), "y".to_owned(), "z".to_owned()]),
        )];
        let drawn = Drawn::default().after(&keys, &[vec![2, 0]]);
        let labelled =
            |refs: &[Option<f64>]| vec![("a".to_owned(), run(Some(&["x", "y", "z"]), refs))];
        let seen = Seen::default();
        assert!(
            drawn
                .check(&seen, &labelled(&[Some(1.0), None, Some(2.0)]))
                .is_empty()
        );
        // y was not drawn: named, with the run's field.
        let problems = drawn.check(&seen, &labelled(&[Some(1.0), Some(3.0), None]));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "runs[0].items");
        assert!(problems[0].problem.contains("item y"), "{problems:?}");
        // Nothing drawn from a run at all: every label of it refused; a label seen before
        // sessions kept their draws passes.
        let other = vec![("b".to_owned(), run(None, &[Some(1.0), Some(2.0)]))];
        assert!(
            drawn.check(&seen, &other)[0]
                .problem
                .starts_with("2 labelled")
        );
        let earlier = Seen::default().after(&[("b".to_owned(), run(None, &[Some(1.0), None]))]);
        assert!(
            drawn.check(&earlier, &other)[0]
                .problem
                .starts_with("1 labelled")
        );
        // The fingerprint reads items and scores, never labels.
        let plain = run(Some(&["x", "y"]), &[None, None]);
        let with_label = run(Some(&["x", "y"]), &[Some(4.0), None]);
        assert_eq!(fingerprint(&plain), fingerprint(&with_label));
        let mut moved = plain.clone();
        moved.scores[1] = 3.5;
        assert_ne!(fingerprint(&plain), fingerprint(&moved));
        assert_ne!(
            fingerprint(&plain),
            fingerprint(&run(Some(&["x", "w"]), &[None, None]))
        );
        assert_ne!(fingerprint(&plain), fingerprint(&run(None, &[None, None])));
        assert_eq!(fingerprint(&plain).len(), 64);
    }

    #[test]
    fn a_session_refuses_a_look_past_its_plan() {
        let mut s = RankSession {
            id: Uuid::nil(),
            key: CellKey {
                judge: crate::domain::JudgeName::parse("j").unwrap(),
                rubric: crate::domain::RubricName::parse("r").unwrap(),
            },
            plan: SessionPlan {
                rounds: 2,
                level: 0.95,
                error: "familywise".into(),
                seed: 0,
                version: None,
            },
            looks: 0,
            seen: Seen::default(),
            drawn: Drawn::default(),
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        assert_eq!(s.next_round(), Ok(1));
        s.looks = 1;
        assert_eq!(s.next_round(), Ok(2));
        s.looks = 2;
        assert!(s.next_round().unwrap_err().contains("planned 2 looks"));
    }
}
