//! A drift alarm with a stated guarantee, fast when a cell breaks and honest when anchors are
//! not independent.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/drift/".

use std::collections::{HashMap, VecDeque};

mod replay;

use super::units::Differences;
pub use super::units::{MAX_LAG, PRIOR_RHO, PRIOR_UNITS, PairSpread, RHO_MARGIN, UnitSpread};
pub use replay::{CheckedBatch, Dependence, Drift, Watch, drift, drift_path};

/// The chance that a version's miss rate exceeds the bound the alarm tests against, over the
/// draw of its training anchors. A cell's alarm is false with probability at most
/// `calibrators.drift_delta` + this.
pub const BOUND_DELTA: f64 = 0.001;

/// ρ is estimated from anchors at least this old.
pub const LAG: usize = 500;

/// The bets' memories, as half-lives in anchors.
pub const MEMORIES: [f64; 3] = [25.0, 100.0, 400.0];

/// The bets of the mixture: one per memory, the slowest last.
const BETS: usize = MEMORIES.len();

/// Pseudo-anchors at the null rate that each p̂ is shrunk with.
const PRIOR_ANCHORS: f64 = 10.0;

/// No p̂ bets on a miss rate above this.
const MAX_RATE: f64 = 0.9;

/// A named rater's key.
pub type UnitId = u64;

/// A session needs this many pairs of sessions before it (at lag 2 in the stream of uploads
/// naming no rater) before the alarm says whether misses cluster beyond what it assumes.
const CLUSTER_PAIRS: f64 = 20.0;

/// Standard errors above 0 at which the lag-2 correlation of uploads naming no rater says they
/// cluster beyond what the alarm assumes (one-sided, about 1 in 1,000 healthy looks).
const CLUSTER_Z: f64 = 3.09;

/// One bet of the mixture.
#[derive(Debug, Clone, PartialEq)]
struct Bet {
    /// The weight each earlier anchor keeps per anchor since.
    decay: f64,
    /// Exponentially weighted anchors and misses.
    weight: f64,
    misses: f64,
    /// Over anchors of returning raters' sessions only: exponentially weighted anchors, and
    /// their misses less the null's chance for each.
    returning: (f64, f64),
    log_wealth: f64,
}

impl Bet {
    /// How far above its null a returning rater's next anchor is bet to miss: the recent
    /// excess of such anchors over their nulls, shrunk towards 0 with [`PRIOR_ANCHORS`]
    /// pseudo-anchors, and never below 0.
    fn excess(&self) -> f64 {
        (self.returning.1 / (self.returning.0 + PRIOR_ANCHORS)).max(0.0)
    }

    fn rate(&self, a: f64) -> f64 {
        ((self.misses + PRIOR_ANCHORS * a) / (self.weight + PRIOR_ANCHORS))
            .clamp(a, MAX_RATE.max(a))
    }
}

/// An anchor's chance of missing next, in a session expected to miss at `prior` whose anchors
/// are alike as κ = (1 − ρ)/ρ says, given its `m` misses in `n` anchors: the beta-binomial's,
/// never below `prior` (see "A session that has not missed" above).
fn chance(prior: f64, kappa: f64, m: f64, n: f64) -> f64 {
    ((prior * kappa + m) / (kappa + n)).max(prior)
}

/// The most a named rater's anchors may win or lose (as a factor of the wealth): √(1/δ) at the
/// default δ = 0.01, and no more for a fleet's alarm (δ/2K), whose threshold is reached through
/// more raters, not through larger ones.
const RATER_CAP: f64 = 10.0;

/// The same for uploads naming no rater, over the last [`MAX_LAG`] + 1 together (they may be
/// one labeller's): uploads that prove a change reach the default threshold 1/δ = 100 only
/// over more than that many, one labeller's cannot.
const UPLOAD_CAP: f64 = 30.0;

/// Standard errors of a named rater's own miss share below which its next anchor's chance is
/// never bet (Wilson's lower bound).
const FLOOR_Z: f64 = 2.0;

/// Wilson's lower bound on the miss rate behind `m` misses in `n` anchors, at [`FLOOR_Z`]
/// standard errors (0 without anchors).
fn lower_bound(m: f64, n: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    let (p, z2) = (m / n, FLOOR_Z * FLOOR_Z);
    let centre = p + z2 / (2.0 * n);
    let spread = FLOOR_Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - spread) / (1.0 + z2 / n)).max(0.0)
}

/// The credibility weight of `n` earlier anchors alike as `rho` with the next: the share of
/// their miss rate's distance from the rate that the next anchor's expectation keeps.
fn credibility(n: f64, rho: f64) -> f64 {
    if n <= 0.0 || rho <= 0.0 {
        return 0.0;
    }
    n * rho / (1.0 + (n - 1.0) * rho)
}

/// The MA(1) coefficient the chain bets with is at most this: at 1 (a labeller effect as large
/// as an upload's whole spread) its expectation would never forget an upload.
const MAX_THETA: f64 = 0.5;

/// A named rater's sessions so far: anchors and misses in all, and in the last.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Past {
    all: (f64, f64),
    last: (f64, f64),
}

/// A session waiting for [`LAG`] anchors after it before its misses join the estimates.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pending {
    /// Anchors seen when it ended.
    ended: u64,
    rater: Option<UnitId>,
    session: (f64, f64),
    /// The session before it in its stream, if any.
    previous: Option<(f64, f64)>,
    /// For a session naming no rater: the one two before it.
    second: Option<(f64, f64)>,
}

/// A test martingale of "anchors miss at most at rate `alpha`", with sessions nested in raters
/// and each session expected from its rater's earlier ones and the one before it.
#[derive(Debug, Clone, PartialEq)]
pub struct MissAlarm {
    alpha: f64,
    delta: f64,
    /// The declared bound on every correlation, if any.
    max_rho: Option<f64>,
    bets: Vec<Bet>,
    /// Per named rater: its sessions so far.
    raters: HashMap<UnitId, Past>,
    /// The last [`MAX_LAG`] sessions naming no rater (the latest first), the log wealth each
    /// won (or lost), and what the chain expected the latest to miss at.
    unnamed: VecDeque<(f64, f64)>,
    won: VecDeque<f64>,
    chained: f64,
    /// Sessions not yet older than the lag.
    pending: VecDeque<Pending>,
    /// Over sessions older than the lag (and the version's training units): their spread,
    /// their raters' (per rater, its lagged totals), and their consecutive pairs'.
    sessions: UnitSpread,
    rater_spread: UnitSpread,
    lagged: HashMap<UnitId, (f64, f64)>,
    returns: PairSpread,
    /// The version's training uploads' consecutive pairs, their pairs further apart (lag 2
    /// first), and the watch's uploads' differences.
    chain: PairSpread,
    lags: Vec<PairSpread>,
    diffs: Differences,
    /// Per named rater: the log wealth its anchors have won (or lost) so far.
    gains: HashMap<UnitId, f64>,
    /// Pairs of uploads naming no rater two apart: the diagnostic of clustering beyond lag 1.
    second: PairSpread,
    /// Independent units seen: named raters, and sessions naming none.
    units: usize,
    /// log of the mixture's wealth (kept in logs: it can grow past f64 on a broken cell).
    log_wealth: f64,
    /// The largest log wealth so far.
    log_peak: f64,
    /// Anchors seen.
    pub seen: u64,
    /// The anchor (1-based) that first brought the wealth to 1/δ.
    pub alarmed_at: Option<u64>,
}

impl MissAlarm {
    /// An alarm for a null miss rate `alpha` (0.05 for a 95% interval, or the version's bound)
    /// and false-alarm probability `delta` (0.01 by default).
    pub fn new(alpha: f64, delta: f64) -> Self {
        Self {
            alpha,
            delta,
            max_rho: None,
            bets: MEMORIES
                .iter()
                .map(|h| Bet {
                    decay: 0.5f64.powf(1.0 / h),
                    weight: 0.0,
                    misses: 0.0,
                    returning: (0.0, 0.0),
                    log_wealth: 0.0,
                })
                .collect(),
            raters: HashMap::new(),
            unnamed: VecDeque::new(),
            won: VecDeque::new(),
            chained: alpha,
            pending: VecDeque::new(),
            sessions: UnitSpread::default(),
            rater_spread: UnitSpread::default(),
            lagged: HashMap::new(),
            returns: PairSpread::default(),
            chain: PairSpread::default(),
            lags: Vec::new(),
            diffs: Differences::default(),
            gains: HashMap::new(),
            second: PairSpread::default(),
            units: 0,
            log_wealth: 0.0,
            log_peak: 0.0,
            seen: 0,
            alarmed_at: None,
        }
    }

    /// The same alarm, every correlation declared to be at most `max_rho` (`None`: estimated
    /// only).
    pub fn bounded(mut self, max_rho: Option<f64>) -> Self {
        self.max_rho = max_rho;
        self
    }

    /// The same alarm, its estimates of how alike a session's anchors are, and a rater's,
    /// starting from the training anchors' units. (Called before any anchor.)
    pub fn with_history(mut self, history: Option<&UnitSpread>) -> Self {
        self.sessions = history.cloned().unwrap_or_default();
        self.rater_spread = self.sessions.clone();
        self.chain = self.sessions.chain.clone();
        self.lags = self.sessions.lags.clone();
        self
    }

    fn capped(&self, rho: f64) -> f64 {
        self.max_rho.map_or(rho, |r| rho.min(r))
    }

    /// The miss rate the pairs' correlations are taken around: the lagged sessions', else the
    /// tested rate.
    fn mu(&self) -> f64 {
        self.sessions.mean().unwrap_or(self.alpha)
    }

    /// What a new session of `rater` may be expected to miss at before its first anchor, each
    /// with the weight of a lasting shift it already carries, and the chain's own expectation
    /// (for a session naming no rater). The null bets the largest; each bet the largest of
    /// them moved by its shift. The candidates: the rate; the credibility predictions from its
    /// rater's earlier sessions and from its rater's last one; and, naming no rater, the
    /// chain's: one labeller over two consecutive uploads makes uploads a moving average of
    /// order 1 in labellers' effects, whose best linear one-step prediction is
    /// c = a + θ·(the last upload's miss share − what the chain expected of it), θ the MA(1)
    /// coefficient of the uploads' lag-1 correlation r (θ/(1 + θ²) = r). A lasting shift s
    /// moves c by s·θ/(1 + θ), not by the last upload's whole credibility.
    fn prior(&self, rater: Option<UnitId>) -> (Vec<(f64, f64)>, f64) {
        let a = self.alpha;
        let mu = self.mu();
        let within = self.rho();
        let alike = |rho: f64| self.capped(rho).min(within);
        let mut candidates = vec![(a, 0.0)];
        let mut consider = |q: f64, z: f64| candidates.push((q, z));
        let mut chained = a;
        match rater {
            Some(r) => {
                if let Some(p) = self.raters.get(&r) {
                    for ((n, m), rho) in [
                        (p.all, alike(self.rater_spread.rho())),
                        (p.last, alike(self.returns.rho(mu))),
                    ] {
                        let z = credibility(n, rho);
                        consider(a + z * (m / n.max(1.0) - a), z);
                    }
                }
            }
            None => {
                if let Some(&(n, m)) = self.unnamed.front() {
                    let rho = alike(self.diffs.rho(mu, &self.chain));
                    let r = (n * rho / (1.0 + (n - 1.0).max(0.0) * within.max(rho))).min(0.5);
                    let theta = if r <= 0.0 {
                        0.0
                    } else {
                        (1.0 - (1.0 - 4.0 * r * r).max(0.0).sqrt()) / (2.0 * r)
                    }
                    .min(MAX_THETA);
                    chained = (a + theta * (m / n.max(1.0) - self.chained)).clamp(0.0, 1.0);
                    consider(chained, theta / (1.0 + theta));
                }
                if let Some((q, z)) = self.linear(&alike) {
                    consider(q, z);
                }
            }
        }
        (candidates, chained)
    }

    /// The best linear prediction of the next upload naming no rater from the last
    /// [`MAX_LAG`] (one labeller's uploads may span that many and the next), with the weight a
    /// lasting shift keeps in it: the Yule–Walker weights φ = Σ⁻¹c of the uploads' miss shares,
    /// Σ their covariances (an upload of n anchors varies as (1 + (n − 1)ρ)/n anchors' worth,
    /// two uploads k apart as the training uploads' lag-k correlation) and c theirs with the
    /// next. Made only from the version's training uploads' pairs: the watch's own would take a
    /// change for labellers (its differences at lag k straddle a change k times, which a few
    /// pairs cannot dilute). `None` without pairs beyond lag 1 (a version trained before they
    /// were kept), or with fewer than two uploads.
    fn linear(&self, alike: &dyn Fn(f64) -> f64) -> Option<(f64, f64)> {
        let k = self.unnamed.len();
        if k < 2 || self.lags.is_empty() {
            return None;
        }
        let mu = self.mu();
        // The correlation of two uploads d apart, d = 1 first.
        let lag: Vec<f64> = std::iter::once(&self.chain)
            .chain(&self.lags)
            .take(k)
            .map(|p| {
                p.estimate(mu)
                    .map_or(0.0, |r| alike(RHO_MARGIN * r.max(0.0)))
            })
            .chain(std::iter::repeat(0.0))
            .take(k)
            .collect();
        let within = self.rho();
        let sigma = nalgebra::DMatrix::from_fn(k, k, |i, j| {
            if i == j {
                let n = self.unnamed[i].0.max(1.0);
                (1.0 + (n - 1.0) * within) / n
            } else {
                lag[i.abs_diff(j) - 1]
            }
        });
        let c = nalgebra::DVector::from_fn(k, |i, _| lag[i]);
        if c.iter().all(|&x| x <= 0.0) {
            return None;
        }
        let phi = super::stats::cholesky(sigma)?.solve(&c);
        let a = self.alpha;
        let q = phi
            .iter()
            .zip(&self.unnamed)
            .map(|(f, &(n, m))| f * (m / n.max(1.0) - a))
            .sum::<f64>();
        Some(((a + q).clamp(0.0, 1.0), phi.sum().clamp(0.0, 1.0)))
    }

    /// What a session of `rater` starts from against its cap: the log wealth its rater's
    /// anchors have won so far, what the last [`MAX_LAG`] uploads won where it names none (they
    /// count against its cap), and the log of the cap.
    fn allowance(&self, rater: Option<UnitId>) -> (f64, f64, f64) {
        match rater {
            Some(r) => (
                self.gains.get(&r).copied().unwrap_or(0.0),
                0.0,
                RATER_CAP.ln(),
            ),
            None => (0.0, self.won.iter().sum(), UPLOAD_CAP.ln()),
        }
    }

    /// One session: the anchors of one upload batch that one named rater labelled (`rater`),
    /// or those naming none, with whether each fell outside the interval. Returns whether the
    /// alarm is raised (it stays raised).
    pub fn observe_session(&mut self, rater: Option<UnitId>, misses: &[bool]) -> bool {
        if misses.is_empty() {
            return self.alarmed_at.is_some();
        }
        let a = self.alpha;
        let (candidates, chained) = self.prior(rater);
        let prior = candidates.iter().map(|c| c.0).fold(a, f64::max);
        let rho = self.rho().max(1e-9);
        let kappa = (1.0 - rho) / rho;
        let threshold = (1.0 / self.delta).ln();
        let (mut n, mut m) = (0.0, 0.0);
        // A named rater's anchors so far, and what they have won or lost (see "One rater").
        let before = rater.map(|r| self.raters.get(&r).map_or((0.0, 0.0), |p| p.all));
        // A named rater seen before: its expectation already carries what its earlier sessions
        // missed, a change included (see "Returning raters").
        let returning = before.is_some_and(|(n0, _)| n0 > 0.0);
        let (mut gain, earlier, cap) = self.allowance(rater);
        for &miss in misses {
            let x = f64::from(u8::from(miss));
            let floor = before.map_or(0.0, |(n0, m0)| lower_bound(m0 + m, n0 + n));
            let null = chance(prior, kappa, m, n).max(floor);
            let betting = self.max_rho.is_some() || (earlier + gain).abs() < cap;
            let old = self.log_wealth;
            let alts = if returning {
                std::array::from_fn(|i| (null + self.bets[i].excess()).min(MAX_RATE.max(null)))
            } else {
                self.alternatives(&candidates, null, |q| chance(q, kappa, m, n))
            };
            let stake = match (betting, self.max_rho) {
                (false, _) => 0.0,
                (true, Some(_)) => 1.0,
                (true, None) => self.stake(&alts, null, cap - earlier - gain),
            };
            for (bet, alt) in self.bets.iter_mut().zip(alts) {
                if stake > 0.0 {
                    let ratio = if miss {
                        alt / null
                    } else {
                        (1.0 - alt) / (1.0 - null)
                    };
                    bet.log_wealth += (1.0 + stake * (ratio - 1.0)).ln();
                }
                bet.weight = bet.decay * bet.weight + 1.0;
                bet.misses = bet.decay * bet.misses + x;
                if returning {
                    let (w, e) = bet.returning;
                    bet.returning = (bet.decay * w + 1.0, bet.decay * e + x - null);
                }
            }
            self.log_wealth = self.mixed_wealth();
            gain += self.log_wealth - old;
            self.log_peak = self.log_peak.max(self.log_wealth);
            n += 1.0;
            m += x;
            self.seen += 1;
            if self.alarmed_at.is_none() && self.log_peak >= threshold {
                self.alarmed_at = Some(self.seen);
            }
        }
        match rater {
            Some(r) => {
                self.gains.insert(r, gain);
            }
            None => {
                self.chained = chained;
                self.won.push_front(gain);
                self.won.truncate(MAX_LAG);
            }
        }
        self.record(rater, (n, m));
        self.alarmed_at.is_some()
    }

    /// What each bet bets the next anchor of a session that is not a returning rater's misses
    /// at: the largest of the null's `candidates` moved by the bet's excess over the tested
    /// rate (what it has not already carried, (1 − z)·step), as `within` reads it given the
    /// session's anchors so far, and never below `null`. The step is at least the slowest
    /// memory's ("A burst gives back", internals.md): after a run of misses that ends, every
    /// bet keeps betting it goes on and gives back what it won.
    fn alternatives(
        &self,
        candidates: &[(f64, f64)],
        null: f64,
        within: impl Fn(f64) -> f64,
    ) -> [f64; BETS] {
        let a = self.alpha;
        let prior = candidates.iter().map(|c| c.0).fold(a, f64::max);
        let remembered = self.bets[BETS - 1].rate(a);
        std::array::from_fn(|i| {
            let step = self.bets[i].rate(a).max(remembered) - a;
            let shifted = candidates
                .iter()
                .map(|&(q, z)| q + (1.0 - z) * step)
                .fold(prior, f64::max)
                .min(MAX_RATE.max(prior));
            within(shifted).max(null)
        })
    }

    /// The share of each bet staked on the next anchor: all of it, unless a miss (each bet
    /// betting `alts` against `null`) would raise the mixture's wealth by more than the factor
    /// e^`log_room` its cap leaves, where just enough that a miss reaches the cap exactly. Each
    /// bet's factor 1 + λ(LR − 1) keeps its expectation at 1; a cap that one anchor could
    /// overshoot would not bound what a rater or five uploads carry.
    fn stake(&self, alts: &[f64; BETS], null: f64, log_room: f64) -> f64 {
        // Far from the cap (the usual case) no bet's miss can reach it: stake all.
        if (alts.iter().fold(null, |x, &y| x.max(y)) / null).ln() <= log_room {
            return 1.0;
        }
        let room = log_room.exp() - 1.0;
        let top = self
            .bets
            .iter()
            .map(|b| b.log_wealth)
            .fold(f64::NEG_INFINITY, f64::max);
        let (weight, won) = self
            .bets
            .iter()
            .zip(alts)
            .fold((0.0, 0.0), |(w, l), (b, alt)| {
                let e = (b.log_wealth - top).exp();
                (w + e, l + e * alt / null)
            });
        let lift = won / weight - 1.0;
        if lift > room {
            (room / lift).clamp(0.0, 1.0)
        } else {
            1.0
        }
    }

    /// The log of the bets' mean wealth (the mixture the alarm holds), computed stably.
    fn mixed_wealth(&self) -> f64 {
        let top = self
            .bets
            .iter()
            .map(|b| b.log_wealth)
            .fold(f64::NEG_INFINITY, f64::max);
        let mean: f64 = self
            .bets
            .iter()
            .map(|b| (b.log_wealth - top).exp())
            .sum::<f64>()
            / self.bets.len() as f64;
        top + mean.ln()
    }

    /// Keeps a session's misses: with its rater's, and waiting for the lag.
    fn record(&mut self, rater: Option<UnitId>, session: (f64, f64)) {
        let (previous, second) = match rater {
            Some(r) => {
                let past = self.raters.entry(r).or_default();
                let previous = (past.all.0 > 0.0).then_some(past.last);
                if past.all.0 == 0.0 {
                    self.units += 1;
                }
                past.all = (past.all.0 + session.0, past.all.1 + session.1);
                past.last = session;
                (previous, None)
            }
            None => {
                self.units += 1;
                let (previous, second) = (self.unnamed.front(), self.unnamed.get(1));
                let found = (previous.copied(), second.copied());
                self.unnamed.push_front(session);
                self.unnamed.truncate(MAX_LAG);
                found
            }
        };
        self.pending.push_back(Pending {
            ended: self.seen,
            rater,
            session,
            previous,
            second,
        });
        while let Some(p) = self.pending.front().copied() {
            if self.seen - p.ended < LAG as u64 {
                break;
            }
            self.pending.pop_front();
            self.lag(p);
        }
    }

    /// A session older than the lag joins the estimates.
    fn lag(&mut self, p: Pending) {
        let (n, m) = p.session;
        self.sessions.units += 1.0;
        self.sessions.add(n, m, 1.0);
        match p.rater {
            Some(r) => {
                let (n0, m0) = self.lagged.get(&r).copied().unwrap_or((0.0, 0.0));
                if n0 > 0.0 {
                    self.rater_spread.add(n0, m0, -1.0);
                } else {
                    self.rater_spread.units += 1.0;
                }
                self.rater_spread.add(n0 + n, m0 + m, 1.0);
                self.lagged.insert(r, (n0 + n, m0 + m));
                if let Some(previous) = p.previous {
                    self.returns.add(previous, p.session);
                }
            }
            None => {
                self.rater_spread.units += 1.0;
                self.rater_spread.add(n, m, 1.0);
                self.diffs.add(p.session.1 / p.session.0.max(1.0));
                if let Some(second) = p.second {
                    self.second.add(second, p.session);
                }
            }
        }
    }

    /// One upload batch whose anchors name no rater: one session. Returns whether the alarm is
    /// raised.
    pub fn observe_batch(&mut self, misses: &[bool]) -> bool {
        self.observe_session(None, misses)
    }

    /// The e-value: the wealth so far (≥ 1/δ raises the alarm).
    pub fn e_value(&self) -> f64 {
        self.log_wealth.exp()
    }

    /// The largest e-value so far: by Ville's inequality a healthy cell's ever reaches c with
    /// probability at most 1/c, which is what a fleet-wide alert needs.
    pub fn peak(&self) -> f64 {
        self.log_peak.exp()
    }

    /// The independent units seen: named raters, and sessions naming none.
    pub fn units(&self) -> usize {
        self.units
    }

    /// The intra-session correlation of misses the next anchor would be bet with.
    pub fn rho(&self) -> f64 {
        self.capped(self.sessions.rho())
    }

    /// Whether uploads naming no rater miss together beyond the next one (their correlation
    /// two uploads apart is above 0 by more than [`CLUSTER_Z`] standard errors): the alarm
    /// expects each from the one before only, so a labeller who uploads many batches without
    /// naming themselves makes it too eager. Naming raters fixes it.
    pub fn clustered(&self) -> bool {
        if self.second.pairs < CLUSTER_PAIRS {
            return false;
        }
        let size = self.sessions.anchors / self.sessions.units.max(1.0);
        self.second.z(self.mu(), self.sessions.rho(), size) > CLUSTER_Z
    }
}

#[cfg(test)]
mod tests {
    use crate::rng::Rng;
    use crate::rng::{RngExt, SeedableRng};

    use super::*;

    /// The window rule judgecal's coverage alert uses: over the last 200 anchors, a share
    /// inside below 85% (checked once at least 50 are in).
    fn window_alarm(misses: &[bool]) -> Option<usize> {
        let mut inside = 0usize;
        for (t, &m) in misses.iter().enumerate() {
            inside += usize::from(!m);
            if t >= 200 {
                inside -= usize::from(!misses[t - 200]);
            }
            let n = (t + 1).min(200);
            if n >= 50 && (inside as f64) < 0.85 * n as f64 {
                return Some(t + 1);
            }
        }
        None
    }

    fn run(rng: &mut Rng, rates: &[(usize, f64)]) -> Vec<bool> {
        rates
            .iter()
            .flat_map(|&(n, p)| (0..n).map(|_| rng.random::<f64>() < p).collect::<Vec<_>>())
            .collect()
    }

    /// A version's training units: twelve uploads of 100 naming no rater, missing at 5%, in
    /// order (their consecutive pairs start the estimate of how alike one upload is to the
    /// next).
    fn training_uploads(rng: &mut Rng) -> UnitSpread {
        let training: Vec<(f64, f64)> = (0..12)
            .map(|_| {
                let misses = (0..100).filter(|_| rng.random::<f64>() < 0.05).count();
                (100.0, misses as f64)
            })
            .collect();
        UnitSpread::of(training.iter().copied()).with_uploads(&training)
    }

    /// Each anchor a unit of its own: anchors assumed independent.
    fn first_alarm(misses: &[bool]) -> Option<u64> {
        let mut alarm = MissAlarm::new(0.05, 0.01);
        for (t, &m) in misses.iter().enumerate() {
            if alarm.observe_session(Some(t as UnitId), &[m]) {
                break;
            }
        }
        alarm.alarmed_at
    }

    #[test]
    fn a_healthy_cell_almost_never_alarms_and_a_broken_one_soon_does() {
        // 500 runs of 5,000 anchors at exactly the nominal 5% miss rate: Ville's inequality
        // allows at most δ = 1% of runs to ever alarm.
        let mut rng = Rng::seed_from_u64(1);
        let (mut healthy_alarms, mut window_false) = (0, 0);
        let (mut delays, mut window_delays) = (Vec::new(), Vec::new());
        let mut window_missed = 0;
        for _ in 0..500 {
            let misses = run(&mut rng, &[(5000, 0.05)]);
            healthy_alarms += usize::from(first_alarm(&misses).is_some());
            window_false += usize::from(window_alarm(&misses).is_some());
            // 1,000 healthy anchors, then a miss rate of 15%.
            let misses = run(&mut rng, &[(1000, 0.05), (4000, 0.15)]);
            if let Some(t) = first_alarm(&misses) {
                delays.push(t as f64 - 1000.0);
            }
            match window_alarm(&misses) {
                Some(t) => window_delays.push(t as f64 - 1000.0),
                None => window_missed += 1,
            }
        }
        delays.sort_by(f64::total_cmp);
        window_delays.sort_by(f64::total_cmp);
        let median = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        eprintln!(
            "e-process: false alarms in {healthy_alarms} of 500 healthy runs; after a jump to 15%, alarmed in {} of 500, median delay {} anchors (an early alarm counts negative); window rule: false alarms in {window_false} of 500, median delay {} ({window_missed} never)",
            delays.len(),
            median(&delays),
            median(&window_delays)
        );
        assert!(healthy_alarms <= 5, "{healthy_alarms} false alarms");
        assert!(delays.len() >= 495, "{} of 500 alarmed", delays.len());
        assert!(median(&delays) < 250.0, "median delay {}", median(&delays));
    }

    /// 5,000 anchors in batches of 50 whose anchors share a rater offset: each batch misses at
    /// its own rate p_b ~ Beta(0.5, 9.5) (mean exactly 5%, so the cell is healthy).
    fn batched(rng: &mut Rng) -> Vec<CheckedBatch> {
        use rand_distr::{Beta, Distribution};
        let rate = Beta::new(0.5, 9.5).expect("valid Beta");
        (0..100)
            .map(|_| {
                let p: f64 = rate.sample(rng);
                CheckedBatch::unrated((0..50).map(|_| rng.random::<f64>() < p).collect())
            })
            .collect()
    }

    #[test]
    fn batches_that_miss_together_raise_no_more_false_alarms_than_delta() {
        // 500 healthy runs. Betting per batch stays within δ = 1%; betting per anchor, which
        // treats the batch's anchors as independent, fires far more often.
        let mut rng = Rng::seed_from_u64(8);
        let (mut per_batch, mut per_anchor) = (0, 0);
        for _ in 0..500 {
            let batches = batched(&mut rng);
            per_batch += usize::from(drift(&batches, 0.05, 0.01, Dependence::default()).alarm);
            let anchors: Vec<bool> = batches.iter().flat_map(|b| b.misses.clone()).collect();
            per_anchor += usize::from(first_alarm(&anchors).is_some());
        }
        eprintln!(
            "batch effect: per-batch bets alarmed in {per_batch} of 500 healthy runs, per-anchor bets in {per_anchor}"
        );
        assert!(per_batch <= 8, "{per_batch} false alarms");
        assert!(
            per_anchor >= 50,
            "{per_anchor}: the batch effect did not bite"
        );
        // A real shift still raises it: the same batches, then batches missing at 25%.
        let mut caught = 0;
        for _ in 0..100 {
            let mut batches = batched(&mut rng);
            batches.truncate(20);
            batches.extend((0..40).map(|_| {
                CheckedBatch::unrated((0..50).map(|_| rng.random::<f64>() < 0.25).collect())
            }));
            caught += usize::from(drift(&batches, 0.05, 0.01, Dependence::default()).alarm);
        }
        assert!(caught >= 95, "{caught} of 100 shifted runs alarmed");
    }

    #[test]
    fn testing_against_the_versions_bound_holds_whatever_its_calibration_draw() {
        // 400 versions, each with a band cut from 120 held-out residuals (ranks 3 and 118 of
        // uniforms: the version's true miss rate is 1 − (r₁₁₈ − r₃), above 5% for about 45%
        // of them), watched over 40,000 healthy anchors in batches of 50. Against the nominal 5% the alarm fires
        // for many versions whose calibration draw was unlucky; against the bound at most
        // δ + the bound's own failure rate.
        use crate::conformal::Intervals;
        let mut rng = Rng::seed_from_u64(9);
        let version = Intervals::one_bin(120);
        let bound = version.miss_bound(BOUND_DELTA);
        let (mut nominal, mut bounded) = (0, 0);
        for _ in 0..400 {
            let mut r: Vec<f64> = (0..120).map(|_| rng.random::<f64>()).collect();
            r.sort_by(f64::total_cmp);
            let miss = 1.0 - (r[117] - r[2]);
            let batches: Vec<CheckedBatch> = (0..800)
                .map(|_| {
                    CheckedBatch::unrated((0..50).map(|_| rng.random::<f64>() < miss).collect())
                })
                .collect();
            nominal += usize::from(drift(&batches, 0.05, 0.01, Dependence::default()).alarm);
            bounded += usize::from(drift(&batches, bound, 0.01, Dependence::default()).alarm);
        }
        eprintln!(
            "calibration draw: bound {bound:.3}; alarms in {nominal} of 400 healthy versions against 5%, {bounded} against the bound"
        );
        assert!(nominal >= 20, "{nominal}");
        assert!(bounded <= 6, "{bounded}");
    }

    #[test]
    fn the_wealth_is_a_mixture_of_beta_binomial_likelihood_ratios() {
        let a = 0.05;
        let mut alarm = MissAlarm::new(a, 0.01);
        // No history: every bet's rate is a, so the first factor is 1.
        alarm.observe_session(Some(0), &[true]);
        assert_eq!(alarm.e_value(), 1.0);
        // A second rater's first anchor: every bet has seen one miss, p̂ = (1 + 10a)/11; a
        // new rater has no history, so its chance of missing is a under the null, p̂ under
        // each bet.
        let p: f64 = (1.0 + PRIOR_ANCHORS * a) / (1.0 + PRIOR_ANCHORS);
        let second = (1.0 - p) / (1.0 - a);
        alarm.observe_session(Some(1), &[false]);
        assert!((alarm.e_value() - second).abs() < 1e-12);
        // A second session of rater 0 (one miss in one anchor before): expected at
        // a + z(1 − a) with the credibility z = ρ of one earlier anchor at the prior ρ
        // (nothing is older than the lag). Her one miss in one anchor puts Wilson's lower
        // bound at (1 + 2 − 2)/(1 + 4) = 0.2, above that expectation: the null bets 0.2. A
        // returning rater is bet on by how far returning raters' anchors have missed beyond
        // their nulls, and none has yet: the factor is 1.
        let rho = RHO_MARGIN * PRIOR_RHO;
        assert!(a + rho * (1.0 - a) < 0.2);
        assert!((lower_bound(1.0, 1.0) - 0.2).abs() < 1e-12);
        alarm.observe_session(Some(0), &[true]);
        assert!((alarm.e_value() - second).abs() < 1e-12);
        // Her third session: two misses in two anchors put Wilson's bound at
        // (1 + 2 − 1)/(1 + 2) = 1/3, above both credibility predictions, so the null bets 1/3.
        // Each bet's excess is the one returning anchor's, 1 − 0.2, shrunk with the
        // pseudo-anchors: 0.8/(1 + 10); a miss wins (1/3 + excess)/(1/3).
        assert!((lower_bound(2.0, 2.0) - 1.0 / 3.0).abs() < 1e-12);
        let excess = 0.8 / (1.0 + PRIOR_ANCHORS);
        let third = (1.0 / 3.0 + excess) * 3.0;
        alarm.observe_session(Some(0), &[true]);
        assert!(
            (alarm.e_value() - second * third).abs() < 1e-12,
            "{} against {}",
            alarm.e_value(),
            second * third
        );
        assert_eq!(alarm.units(), 2);
    }

    #[test]
    fn a_session_that_has_not_missed_is_never_bet_below_its_expectation() {
        // The beta-binomial's chance for 50 anchors without a miss at ρ = 0.1 (κ = 9) is
        // 0.05·9/(9 + 50) ≈ 0.0076; the bet's is the session's expectation itself.
        assert_eq!(chance(0.05, 9.0, 0.0, 50.0), 0.05);
        // A session that has missed: the beta-binomial's, (0.05·9 + 5)/(9 + 10).
        assert!((chance(0.05, 9.0, 5.0, 10.0) - 5.45 / 19.0).abs() < 1e-12);
        // A declared bound caps the correlation bet with, not the estimate's floor.
        let alarm = MissAlarm::new(0.05, 0.01).bounded(Some(0.0));
        assert_eq!(alarm.rho(), 0.0);
        assert_eq!(MissAlarm::new(0.05, 0.01).rho(), RHO_MARGIN * PRIOR_RHO);
        // Credibility: none without history or correlation; 50 anchors at ρ = 0.1 keep
        // 5/5.9 of their distance from the rate.
        assert_eq!(credibility(0.0, 0.1), 0.0);
        assert_eq!(credibility(50.0, 0.0), 0.0);
        assert!((credibility(50.0, 0.1) - 5.0 / 5.9).abs() < 1e-12);
    }

    #[test]
    fn a_session_is_expected_from_the_upload_before_it_where_uploads_share_labellers() {
        // Uploads naming no rater whose labeller uploads two consecutive batches of 50, each
        // labeller missing at a rate from Beta(0.5, 9.5) (mean 5%: healthy), 40,000 anchors:
        // expecting each upload from the one before keeps false alarms within δ = 1%.
        // Upload after upload the chain's correlation is estimated; where labellers upload
        // one batch each it is near 0, and a change is bet on as fast.
        use rand_distr::{Beta, Distribution};
        let law = Beta::new(0.5, 9.5).expect("valid Beta");
        let mut rng = Rng::seed_from_u64(21);
        let mut alarms = 0;
        for _ in 0..300 {
            let mut alarm = MissAlarm::new(0.05, 0.01);
            let mut p = 0.05;
            for b in 0..800 {
                if b % 2 == 0 {
                    p = law.sample(&mut rng);
                }
                let batch: Vec<bool> = (0..50).map(|_| rng.random::<f64>() < p).collect();
                if alarm.observe_batch(&batch) {
                    break;
                }
            }
            alarms += usize::from(alarm.alarmed_at.is_some());
        }
        eprintln!("two batches per labeller, not named: {alarms} of 300 alarmed");
        assert!(alarms <= 6, "{alarms} of 300");
    }

    #[test]
    fn uploads_that_cluster_beyond_the_next_are_flagged_not_called_drift() {
        // Labellers of five consecutive batches naming none, at rates from Beta(0.5, 9.5):
        // the lag-2 correlation shows it within 20,000 anchors in nearly every watch;
        // independent uploads are almost never flagged.
        use rand_distr::{Beta, Distribution};
        let law = Beta::new(0.5, 9.5).expect("valid Beta");
        let mut rng = Rng::seed_from_u64(22);
        let mut flagged = [0usize; 2];
        for _ in 0..100 {
            for (k, per) in [5usize, 1].into_iter().enumerate() {
                let mut alarm = MissAlarm::new(0.05, 0.01);
                let mut p = 0.05;
                for b in 0..400 {
                    if b % per == 0 {
                        p = law.sample(&mut rng);
                    }
                    let batch: Vec<bool> = (0..50).map(|_| rng.random::<f64>() < p).collect();
                    alarm.observe_batch(&batch);
                }
                flagged[k] += usize::from(alarm.clustered());
            }
        }
        eprintln!(
            "flagged as clustered: five batches per labeller {}, one {}",
            flagged[0], flagged[1]
        );
        assert!(flagged[0] >= 90, "{flagged:?}");
        assert!(flagged[1] <= 2, "{flagged:?}");
    }

    #[test]
    fn the_intra_unit_correlation_is_estimated_from_the_units() {
        // Units of 50 at rates drawn from Beta(0.5, 9.5): ρ = 1/(0.5 + 9.5 + 1) = 1/11.
        use rand_distr::{Beta, Distribution};
        let mut rng = Rng::seed_from_u64(3);
        let law = Beta::new(0.5, 9.5).expect("valid Beta");
        let mut alarm = MissAlarm::new(0.05, 0.01);
        for u in 0..2000 {
            let p: f64 = law.sample(&mut rng);
            let batch: Vec<bool> = (0..50).map(|_| rng.random::<f64>() < p).collect();
            alarm.observe_session(Some(u), &batch);
        }
        let expected = RHO_MARGIN / 11.0;
        assert!((alarm.rho() - expected).abs() < 0.015, "{}", alarm.rho());
        // Independent anchors: near 0 (the prior's weight fades with the units).
        let mut alarm = MissAlarm::new(0.05, 0.01);
        for u in 0..2000 {
            let batch: Vec<bool> = (0..50).map(|_| rng.random::<f64>() < 0.05).collect();
            alarm.observe_session(Some(u), &batch);
        }
        assert!(alarm.rho() < 0.005, "{}", alarm.rho());
    }

    #[test]
    fn the_training_anchors_units_start_the_estimate() {
        // Four training units of 100 anchors that each missed 5 times: no spread between
        // units, so the estimate is 0, shrunk towards the prior with the weight of 5 units
        // against 4, and widened.
        let history = UnitSpread::of([(100.0, 5.0); 4]);
        let alarm = MissAlarm::new(0.05, 0.01).with_history(Some(&history));
        let expected = RHO_MARGIN * PRIOR_UNITS * PRIOR_RHO / (4.0 + PRIOR_UNITS);
        assert!((alarm.rho() - expected).abs() < 1e-12, "{}", alarm.rho());
        // They are the version's, not the watch's: no unit or anchor of the e-value.
        assert_eq!((alarm.units(), alarm.seen), (0, 0));
        // Units that missed at their own rates (all 10 misses in one): the estimate is near 1.
        let clustered = UnitSpread::of([(10.0, 10.0), (10.0, 0.0), (10.0, 0.0), (10.0, 0.0)]);
        let alarm = MissAlarm::new(0.05, 0.01).with_history(Some(&clustered));
        assert!(alarm.rho() > RHO_MARGIN * PRIOR_RHO, "{}", alarm.rho());
        // Then uploads of 100 missing at 20%, after 1,000 healthy anchors in uploads of 100,
        // against a bound of 7.3%: starting from twelve independent training uploads of 100,
        // the alarm fires within 800 anchors of the change in far more watches than from the
        // prior, whose larger ρ expects each upload's misses to cluster. (No five uploads
        // alone can raise it: they may be one labeller's, and carry at most UPLOAD_CAP
        // together. Before that cap covered five uploads, two shifted uploads of 500 fired in
        // 80-100 of 100 from the training units and 0-5 from the prior.)
        let mut rng = Rng::seed_from_u64(14);
        let mut inside = [0usize; 2];
        for _ in 0..100 {
            let history = training_uploads(&mut rng);
            let healthy: Vec<Vec<bool>> = (0..10)
                .map(|_| (0..100).map(|_| rng.random::<f64>() < 0.05).collect())
                .collect();
            let shifted: Vec<Vec<bool>> = (0..20)
                .map(|_| (0..100).map(|_| rng.random::<f64>() < 0.2).collect())
                .collect();
            for (k, history) in [None, Some(&history)].into_iter().enumerate() {
                let mut alarm = MissAlarm::new(0.073, 0.01).with_history(history);
                for batch in &healthy {
                    alarm.observe_batch(batch);
                }
                for batch in &shifted {
                    alarm.observe_batch(batch);
                }
                inside[k] += usize::from(alarm.alarmed_at.is_some_and(|t| t > 1000 && t <= 1800));
            }
        }
        eprintln!(
            "fired within 800 anchors of the change: from the prior {}, from the training units {}",
            inside[0], inside[1]
        );
        assert!(inside[1] >= 45, "{inside:?}");
        assert!(inside[0] <= 25, "{inside:?}");
    }

    #[test]
    fn a_jump_inside_one_batch_is_bet_on_within_it() {
        // 1,000 healthy anchors in batches of 100 at 5%, tested against a bound of 7.3%,
        // then batches of 100 missing at 20% (the review's scenario), the version trained on
        // twelve uploads of 100 naming no rater. Declared independent (drift_max_rho = 0), the
        // alarm fires within 600 anchors of the change in nearly every watch. By default an
        // upload naming no rater may be one labeller's fifth: five uploads together carry at
        // most UPLOAD_CAP, so (almost) none fires within the first five, and each upload is
        // also expected from the last four as the training uploads one to four apart were
        // alike. Most fire within 1,000 anchors (163 of 200; 167 before the caps were exact)
        // and nearly all within 1,500 (188).
        // Before issue 85: 110-140 within 600 and 180 within 1,000, and one unnamed labeller
        // of five uploads raised false alarms in 16% of healthy watches.
        let mut rng = Rng::seed_from_u64(12);
        let (mut declared, mut within, mut later, mut last) = (0, 0, 0, 0);
        for _ in 0..200 {
            let history = training_uploads(&mut rng);
            let mut alarms = [None, Some(0.0)].map(|max_rho| {
                MissAlarm::new(0.073, 0.01)
                    .bounded(max_rho)
                    .with_history(Some(&history))
            });
            for b in 0..25 {
                let p = if b < 10 { 0.05 } else { 0.2 };
                let batch: Vec<bool> = (0..100).map(|_| rng.random::<f64>() < p).collect();
                for alarm in &mut alarms {
                    alarm.observe_batch(&batch);
                }
            }
            let fired =
                |a: &MissAlarm, by: u64| a.alarmed_at.is_some_and(|t| t > 1000 && t <= 1000 + by);
            declared += usize::from(fired(&alarms[1], 600));
            within += usize::from(fired(&alarms[0], 500));
            later += usize::from(fired(&alarms[0], 1000));
            last += usize::from(fired(&alarms[0], 1500));
        }
        eprintln!(
            "jump to 20%: declared independent {declared} of 200 within 600 anchors; by default {within} within 500, {later} within 1,000, {last} within 1,500"
        );
        assert!(
            declared >= 190,
            "{declared} of 200 declared fired within 600 anchors"
        );
        assert!(
            within <= 10 && later >= 150 && last >= 185,
            "by default {within} of 200 within 500, {later} within 1,000, {last} within 1,500"
        );
    }

    #[test]
    fn the_path_is_the_alarm_after_each_batch() {
        // Batches of 20 missing 5% then 40%, half of them naming one of two raters.
        let batches: Vec<CheckedBatch> = (0..16)
            .map(|b| CheckedBatch {
                misses: (0..20).map(|i| i < if b < 6 { 1 } else { 8 }).collect(),
                raters: (0..20)
                    .map(|i| (i % 2 == 0).then(|| format!("r{}", b % 2)))
                    .collect(),
            })
            .collect();
        let path = drift_path(&batches, 0.05, 0.01, Dependence::default());
        assert_eq!(path.len(), 16);
        for (i, d) in path.iter().enumerate() {
            assert_eq!(*d, drift(&batches[..=i], 0.05, 0.01, Dependence::default()));
            assert_eq!(d.anchors, 20 * (i + 1));
        }
        assert!(path[15].alarm && !path[0].alarm && path[15].e_value > path[5].e_value);
        assert_eq!(drift(&[], 0.05, 0.01, Dependence::default()).anchors, 0);
    }

    /// Of `cells` healthy cells (seeds from `first`) in the issue-85 world, how many alarm: the
    /// world of the API check `five_uploads_of_one_unnamed_labeller_...` without the service.
    /// References are the judge score plus a labeller's offset (20% of the variance) plus
    /// noise, the labeller naming no rater and changing every five uploads (each cell at its own
    /// phase). A version of the identity map trained on 24 uploads of 50 at judge scores
    /// uniform on [2, 4], its conformal intervals (five bins) and training units made as the
    /// service makes them; then 100 uploads of 50 at judge scores 2.5, 2.75, … 3.5, their
    /// spread set so they miss at the version's bound on average.
    fn unnamed_labellers_of_five(first: u64, cells: u64) -> usize {
        use crate::corrector::Corrected;
        use crate::stats::{normal_cdf, standard_normal};
        let share: f64 = 0.2;
        let scores = [2.5, 2.75, 3.0, 3.25, 3.5];
        let mut bounds = HashMap::new();
        let mut alarms = 0;
        for c in first..first + cells {
            let mut rng = Rng::seed_from_u64(c * 7919 + 1);
            let mut o = 0.0;
            let mut offset = |b: u64, sd: f64, rng: &mut Rng| {
                if b == 0 || (b + c).is_multiple_of(5) {
                    o = share.sqrt() * sd * standard_normal(rng);
                }
                o
            };
            let (mut pairs, mut uploads) = (Vec::new(), Vec::new());
            for b in 0..24 {
                let o = offset(b, 0.3, &mut rng);
                for _ in 0..50 {
                    let j = 2.0 + 2.0 * rng.random::<f64>();
                    pairs.push((
                        j,
                        j + o + 0.3 * (1.0 - share).sqrt() * standard_normal(&mut rng),
                    ));
                    uploads.push(Some(b as i64));
                }
            }
            let held: Vec<Option<Corrected>> =
                pairs.iter().map(|p| Some(Corrected::score(p.0))).collect();
            let intervals = crate::conformal::Intervals::of(&pairs, &held, c)
                .unwrap()
                .with_units(&pairs, &held, (&uploads, &uploads), c);
            // The bound depends only on the bins' sizes: drawn once per sizes.
            let sizes: Vec<usize> = intervals.bins.iter().map(|b| b.anchors).collect();
            let bound = *bounds
                .entry(sizes)
                .or_insert_with(|| intervals.miss_bound(BOUND_DELTA));
            let bands: Vec<(f64, f64)> = scores
                .iter()
                .map(|&j| {
                    intervals
                        .bins
                        .iter()
                        .find(|b| b.holds(j))
                        .unwrap()
                        .band
                        .unwrap()
                })
                .collect();
            let sd = crate::stats::bisect(0.01, 5.0, 60, |sd| {
                let rate = bands
                    .iter()
                    .map(|(lo, hi)| normal_cdf(lo / sd) + 1.0 - normal_cdf(hi / sd))
                    .sum::<f64>();
                rate / 5.0 < bound
            });
            let mut alarm = MissAlarm::new(bound, 0.01).with_history(intervals.units.as_ref());
            for b in 0..100 {
                let o = offset(b, sd, &mut rng);
                let misses: Vec<bool> = (0..50)
                    .map(|i| {
                        let j = scores[i % 5];
                        let y = j + o + sd * (1.0 - share).sqrt() * standard_normal(&mut rng);
                        let u = rng.random::<f64>();
                        intervals.misses(j, y, &Corrected::score(j), u).unwrap()
                    })
                    .collect();
                if alarm.observe_batch(&misses) {
                    break;
                }
            }
            alarms += usize::from(alarm.alarmed_at.is_some());
        }
        alarms
    }

    #[test]
    fn one_unnamed_labeller_of_five_uploads_at_the_bound_alarms_in_few_healthy_cells() {
        // 2,000 cells: 23 (1.15%) alarm when this was written. Before (issue 85's first pass) the
        // training units' misses were counted against bands made from those same labellers'
        // anchors (which absorb their offsets, so later labellers miss more alike than the
        // training showed), no bet gave back a burst's winnings and the cap could be overshot by
        // one anchor: about 5% of 6,000 cells of an emulation of this world (the API check read
        // 3 of 60 then, 11 of 240 with more rubrics; now 1 of 60 and 2 of 240).
        let alarms = unnamed_labellers_of_five(0, 2000);
        eprintln!(
            "five uploads a labeller, not named, at the bound: {alarms} of 2,000 cells alarmed"
        );
        assert!(alarms <= 40, "{alarms} of 2,000");
    }

    /// Of 200 watches where a team of `team` named raters takes turns uploading batches of 50
    /// (each rater's miss rate its own, log-normal around the team's), misses jump from 5% to
    /// 17% after 1,000 anchors: how many alarm within 10,000 anchors after the jump, and the
    /// median delay of those that do.
    fn fixed_team(team: usize, declared: bool) -> (usize, f64) {
        let mut delays = Vec::new();
        for w in 0..200u64 {
            let mut rng = Rng::seed_from_u64(w + 99);
            let tastes: Vec<f64> = (0..team)
                .map(|_| (0.3 * crate::stats::standard_normal(&mut rng)).exp())
                .collect();
            let mean = tastes.iter().sum::<f64>() / team as f64;
            let mut alarm = MissAlarm::new(0.05, 0.01).bounded(declared.then_some(0.0));
            for b in 0..220 {
                let rate = if b < 20 { 0.05 } else { 0.17 };
                let p = rate * tastes[b % team] / mean;
                let batch: Vec<bool> = (0..50).map(|_| rng.random::<f64>() < p).collect();
                if alarm.observe_session(Some((b % team) as UnitId), &batch) {
                    break;
                }
            }
            if let Some(t) = alarm.alarmed_at.filter(|&t| t > 1000) {
                delays.push((t - 1000) as f64);
            }
        }
        delays.sort_by(f64::total_cmp);
        let median = delays.get(delays.len() / 2).copied().unwrap_or(f64::NAN);
        (delays.len(), median)
    }

    #[test]
    fn a_fixed_teams_change_is_caught_in_most_watches_and_more_raters_or_a_bound_catch_all() {
        // The review's power gap: a fixed team of 4 named raters, misses 5% -> 17%. Each
        // rater's later sessions are expected from its own earlier ones (its taste may be its
        // own), so a change the whole team shares is absorbed by each rater's history as it
        // grows, and each rater carries at most a factor RATER_CAP: the watches that do not
        // alarm within a few hundred anchors of the jump never do. 132 of 200 alarm (median
        // 415 anchors after the jump; the review measured 46% within 38,000). Twice the team,
        // 179; four times, 200; declared independent (drift_max_rho = 0), 200 (median 111).
        let four = fixed_team(4, false);
        let (eight, sixteen, declared) = (
            fixed_team(8, false),
            fixed_team(16, false),
            fixed_team(4, true),
        );
        eprintln!(
            "fixed team, 5% -> 17%, caught within 10,000 (of 200, median delay): 4 raters {four:?}, 8 {eight:?}, 16 {sixteen:?}, 4 declared independent {declared:?}"
        );
        assert!(four.0 >= 120, "{four:?}");
        assert!(eight.0 >= 170 && sixteen.0 >= 195 && declared.0 >= 195);
        assert!(declared.1 < four.1, "{declared:?} {four:?}");
    }
}
