//! The drift alarm over a cell's stored batches: each batch's checks replayed in order
//! through a fresh [`MissAlarm`], named raters one unit across batches, and what the alarm
//! says after each (the gauges, the report's evidence over time).

use std::collections::HashMap;

use super::{MissAlarm, UnitId, UnitSpread};

/// One checked upload batch: whether each anchor missed, and its rater where it names one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckedBatch {
    pub misses: Vec<bool>,
    /// Empty, or one per anchor.
    pub raters: Vec<Option<String>>,
}

impl CheckedBatch {
    /// A batch with no rater named.
    pub fn unrated(misses: Vec<bool>) -> Self {
        Self {
            misses,
            raters: Vec::new(),
        }
    }
}

/// What the drift alarm says of one cell's active version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    /// Anchors checked since the version was activated.
    pub anchors: usize,
    /// The independent units they came in (raters, and batches naming none).
    pub units: usize,
    /// The miss rate tested against: the version's bound.
    pub miss_bound: f64,
    /// The e-process's current value (its wealth); the alarm fires when it reaches 1/δ.
    pub e_value: f64,
    /// The largest e-value since the activation.
    pub peak: f64,
    /// Whether it has reached 1/δ since the activation (it stays raised until the next).
    pub alarm: bool,
    /// The intra-session correlation of misses the next anchor would be bet with.
    pub rho: f64,
    /// Whether uploads naming no rater miss together beyond what the alarm assumes (see
    /// [`MissAlarm::clustered`]): its false-alarm rate is then not what it says, and the
    /// uploads should name their raters.
    pub clustered: bool,
}

/// A cell's two e-processes over the same checks: its own alarm, and the fleet's (tested
/// against the version's bound at the fleet's level, alarmed at the fleet's threshold).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Watch {
    pub cell: Drift,
    pub fleet: Drift,
}

/// How a cell's alarm bets beyond its bound: the declared bound on the intra-unit correlation
/// (`calibrators.drift_max_rho`), and the version's training anchors' units.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dependence<'a> {
    pub max_rho: Option<f64>,
    pub history: Option<&'a UnitSpread>,
}

/// Replays the batches `b` in order through a fresh alarm against the miss rate `miss_bound`:
/// each named rater is one unit across batches, each batch's anchors naming none another.
pub fn drift(b: &[CheckedBatch], miss_bound: f64, delta: f64, d: Dependence<'_>) -> Drift {
    replay(b, miss_bound, delta, d, None)
}

/// The alarm as it stood after each of `batches` (the evidence over time a report draws).
pub fn drift_path(b: &[CheckedBatch], bound: f64, delta: f64, d: Dependence<'_>) -> Vec<Drift> {
    let mut path = Vec::with_capacity(b.len());
    replay(b, bound, delta, d, Some(&mut path));
    path
}

/// [`drift`], each step's alarm pushed to `path` where given.
fn replay(
    batches: &[CheckedBatch],
    miss_bound: f64,
    delta: f64,
    dependence: Dependence<'_>,
    mut path: Option<&mut Vec<Drift>>,
) -> Drift {
    let mut alarm = MissAlarm::new(miss_bound, delta)
        .bounded(dependence.max_rho)
        .with_history(dependence.history);
    let (mut raters, mut anchors): (HashMap<&str, UnitId>, usize) = (HashMap::new(), 0);
    let snapshot = |alarm: &MissAlarm, anchors| Drift {
        anchors,
        units: alarm.units(),
        miss_bound,
        e_value: alarm.e_value(),
        peak: alarm.peak(),
        alarm: alarm.alarmed_at.is_some(),
        rho: alarm.rho(),
        clustered: alarm.clustered(),
    };
    for batch in batches {
        // The batch's sessions by first anchor: one per named rater, one for those naming none.
        let mut sessions: Vec<(Option<UnitId>, Vec<bool>)> = Vec::new();
        for (i, &miss) in batch.misses.iter().enumerate() {
            let rater = batch.raters.get(i).and_then(Option::as_deref).map(|r| {
                let next = raters.len() as UnitId;
                *raters.entry(r).or_insert(next)
            });
            match sessions.iter_mut().find(|(r, _)| *r == rater) {
                Some((_, misses)) => misses.push(miss),
                None => sessions.push((rater, vec![miss])),
            }
        }
        for (rater, misses) in sessions {
            alarm.observe_session(rater, &misses);
        }
        anchors += batch.misses.len();
        if let Some(p) = path.as_deref_mut() {
            p.push(snapshot(&alarm, anchors));
        }
    }
    snapshot(&alarm, anchors)
}
