//! Predictive intervals that hold on anchors a version never saw, for every method.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/conformal.rs".

use serde::{Deserialize, Serialize};

use super::corrector::Corrected;
use super::cv;
use super::units::{MAX_LAG, UnitSpread};
use std::collections::HashMap;

/// The intervals' nominal coverage.
pub const LEVEL: f64 = 0.95;

/// A bin of the judge score needs this many held-out anchors.
pub const MIN_BIN: usize = 100;

/// At most this many bins.
pub const MAX_BINS: usize = 5;

/// Groups of the cross-fitted coverage check.
const CHECK_GROUPS: usize = 5;

/// Where a version's predictive intervals come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BandSource {
    /// The corrected score plus the bin's band of held-out residuals.
    Conformal,
    /// The method's own interval, its half-width scaled by the bin's band of held-out
    /// residuals in units of that half-width (the Bayesian posterior predictive).
    Scaled,
    /// The method's own, as served by versions trained before bands were conformalised.
    Method,
}

/// One bin of the judge score: judge scores in [`from`, `to`) (open where `None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// Held-out anchors in the bin.
    pub anchors: usize,
    /// The band of residuals added to the corrected score (`conformal`), or of residuals in
    /// units of the method's half-width (`scaled`).
    pub band: Option<(f64, f64)>,
    /// Share of the bin's held-out anchors inside their interval (`None` where it could not be
    /// measured).
    pub held_out_coverage: Option<f64>,
    /// The tie-breaks u of the held-out anchors at the band's lower and upper edges: the
    /// edges are (band.0, ties.0) and (band.1, ties.1) in (residual, u) order. `None` for
    /// versions trained before ties were broken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ties: Option<(f64, f64)>,
    /// The ranks of the band's edges among the bin's held-out residuals ([`ranks`]). `None`
    /// for versions trained before the ranks were kept, whose bands are at
    /// [`ranks_before_split`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<(usize, usize)>,
}

/// Whether judge score `j` lies in [`from`, `to`) (open where `None`).
fn within((from, to): (Option<f64>, Option<f64>), j: f64) -> bool {
    from.is_none_or(|f| j >= f) && to.is_none_or(|t| j < t)
}

impl Bin {
    /// Whether judge score `j` falls in this bin.
    pub fn holds(&self, j: f64) -> bool {
        within((self.from, self.to), j)
    }
}

/// A version's predictive intervals and how often they covered held-out anchors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intervals {
    pub level: f64,
    pub source: BandSource,
    pub bins: Vec<Bin>,
    /// Held-out anchors the coverage was measured on.
    pub held_out: usize,
    /// Share of them inside their interval.
    pub held_out_coverage: Option<f64>,
    /// The training anchors' misses against these bands, summed per unit (rater, or upload):
    /// where the drift alarm's estimate of the intra-unit correlation starts. `None` for
    /// versions trained before units were kept, and where the anchors' units are not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<UnitSpread>,
}

/// The 1-based ranks (lo, hi) of a 95% split-conformal band's edges among `n` residuals: of
/// the n + 1 gaps a new residual falls in with equal chance, the band misses m = ⌊(n + 1)·0.05⌋,
/// ⌈m/2⌉ below and ⌊m/2⌋ above, so it covers exactly (hi − lo)/(n + 1) = 1 − m/(n + 1) ≥ 95% on
/// a continuous scale. `None` with fewer than 39 residuals, where a band would be the whole
/// line on one side.
pub fn ranks(n: usize) -> Option<(usize, usize)> {
    // 1 − 0.95 is a hair above 0.05 in binary, so a product that should be whole is not
    // floored below it; the guard keeps it so should that ever change.
    let misses = ((n + 1) as f64 * (1.0 - LEVEL) + 1e-9).floor() as usize;
    let lo = misses.div_ceil(2);
    let hi = n + 1 - (misses - lo);
    (lo >= 1 && hi <= n).then_some((lo, hi))
}

/// The ranks of versions trained before [`ranks`] split the misses once: each tail kept to
/// ⌊(n + 1)·0.025⌋ gaps, 2.5% and 97.5% order statistics. Their miss law is read with these.
fn ranks_before_split(n: usize) -> Option<(usize, usize)> {
    let tail = (1.0 - LEVEL) / 2.0;
    let lo = ((n + 1) as f64 * tail).floor() as usize;
    let hi = ((n + 1) as f64 * (1.0 - tail)).ceil() as usize;
    (lo >= 1 && hi <= n).then_some((lo, hi))
}

/// The split-conformal band of `residuals` at [`ranks`]; `None` with fewer than 39, where
/// those ranks do not exist.
pub fn band(mut residuals: Vec<f64>) -> Option<(f64, f64)> {
    let (lo, hi) = ranks(residuals.len())?;
    residuals.sort_by(f64::total_cmp);
    Some((residuals[lo - 1], residuals[hi - 1]))
}

/// The band of `residuals` (each with its tie-break u) in (residual, u) order, and the
/// tie-breaks at its edges: the same band as [`band`]'s.
fn band_with_ties(mut residuals: Vec<(f64, f64)>) -> Option<((f64, f64), (f64, f64))> {
    let (lo, hi) = ranks(residuals.len())?;
    residuals.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let (l, h) = (residuals[lo - 1], residuals[hi - 1]);
    Some(((l.0, h.0), (l.1, h.1)))
}

/// The held-out anchors' tie-breaks, in their order: uniform draws from `seed`.
fn held_out_ties(n: usize, seed: u64) -> Vec<f64> {
    use crate::rng::{Rng, RngExt, SeedableRng};
    let mut rng = Rng::seed_from_u64(seed ^ 0x71E5_B4EA);
    (0..n).map(|_| rng.random::<f64>()).collect()
}

/// A new anchor's tie-break: uniform on [0, 1), from its item id and the version it is
/// checked against (a hash, so every replica draws the same, and independent of its scores).
pub fn tie_break(item: &str, version: &str) -> f64 {
    // FNV-1a over both, then splitmix64's finaliser.
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in item.bytes().chain([0xFF]).chain(version.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The half-width a scaled band is measured in: that of the method's own interval.
fn scale_of(c: &Corrected) -> Option<f64> {
    c.predictive.map(|(lo, hi)| ((hi - lo) / 2.0).max(1e-12))
}

/// Bins of the judge scores `js` (any order): cut between distinct scores, each with at least
/// [`MIN_BIN`] of them (one bin when there are fewer).
fn cut(js: &[f64]) -> Vec<(Option<f64>, Option<f64>)> {
    let mut sorted = js.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let bins = (n / MIN_BIN).clamp(1, MAX_BINS);
    let target = n.div_ceil(bins);
    let mut edges = Vec::new();
    let mut count = 0;
    for i in 0..n {
        count += 1;
        let boundary = i + 1 < n && sorted[i + 1] > sorted[i];
        if boundary && count >= target && n - (i + 1) >= MIN_BIN && edges.len() + 1 < bins {
            edges.push((sorted[i] + sorted[i + 1]) / 2.0);
            count = 0;
        }
    }
    let mut out = Vec::with_capacity(edges.len() + 1);
    let mut from = None;
    for &e in &edges {
        out.push((from, Some(e)));
        from = Some(e);
    }
    out.push((from, None));
    out
}

/// A held-out anchor as [`Intervals::with_units`] reads it: judge score, reference, held-out
/// prediction, unit, upload place and tie-break.
type HeldAnchor<'a, K> = (f64, f64, &'a Corrected, Option<&'a K>, Option<i64>, f64);

fn share(inside: usize, of: usize) -> Option<f64> {
    (of > 0).then(|| inside as f64 / of as f64)
}

impl Intervals {
    /// A conformal version of one bin over the whole scale, with `held_out` held-out anchors
    /// and no band: what the drift studies bound a miss rate with.
    pub fn one_bin(held_out: usize) -> Self {
        Intervals {
            level: 0.95,
            source: BandSource::Conformal,
            bins: vec![Bin {
                from: None,
                to: None,
                anchors: held_out,
                band: None,
                held_out_coverage: None,
                ties: None,
                ranks: ranks(held_out),
            }],
            held_out,
            held_out_coverage: None,
            units: None,
        }
    }

    /// The intervals of a version whose held-out predictions of `pairs` (judge, reference) are
    /// `held_out` (`None` where an anchor was never held out). `None` when no interval can be
    /// made: a method without its own needs 39 held-out anchors.
    pub fn of(pairs: &[(f64, f64)], held_out: &[Option<Corrected>], seed: u64) -> Option<Self> {
        let held: Vec<(f64, f64, Corrected)> = pairs
            .iter()
            .zip(held_out)
            .filter_map(|(&(j, y), c)| c.map(|c| (j, y, c)))
            .collect();
        if held.is_empty() {
            return None;
        }
        let own = held.iter().all(|h| h.2.predictive.is_some());
        // Residuals in the unit of the band: reference units, or the method's half-width.
        let residual = |h: &(f64, f64, Corrected)| {
            let scale = if own {
                scale_of(&h.2).unwrap_or(1.0)
            } else {
                1.0
            };
            (h.1 - h.2.score) / scale
        };
        let js: Vec<f64> = held.iter().map(|h| h.0).collect();
        let edges = cut(&js);
        let bin_of = |j: f64| {
            edges
                .iter()
                .position(|&edge| within(edge, j))
                .unwrap_or(edges.len() - 1)
        };
        let bins_of: Vec<usize> = js.iter().map(|&j| bin_of(j)).collect();
        let residuals_where = |keep: &dyn Fn(usize) -> bool, b: usize| -> Vec<f64> {
            held.iter()
                .enumerate()
                .filter(|&(i, _)| bins_of[i] == b && keep(i))
                .map(|(_, h)| residual(h))
                .collect()
        };
        // Whether each held-out anchor fell inside a band made without it.
        let group = cv::folds(held.len(), CHECK_GROUPS, seed);
        let inside: Option<Vec<bool>> = (0..CHECK_GROUPS)
            .map(|g| {
                (0..edges.len())
                    .map(|b| band(residuals_where(&|i| group[i] != g, b)))
                    .collect::<Option<Vec<_>>>()
            })
            .collect::<Option<Vec<_>>>()
            .map(|bands| {
                held.iter()
                    .enumerate()
                    .map(|(i, h)| {
                        let (lo, hi) = bands[group[i]][bins_of[i]];
                        (lo..=hi).contains(&residual(h))
                    })
                    .collect()
            });
        let ties = held_out_ties(held.len(), seed);
        let bins: Vec<Bin> = edges
            .iter()
            .enumerate()
            .map(|(b, &(from, to))| {
                let members: Vec<usize> = (0..held.len()).filter(|&i| bins_of[i] == b).collect();
                let edges = band_with_ties(
                    members
                        .iter()
                        .map(|&i| (residual(&held[i]), ties[i]))
                        .collect(),
                );
                Bin {
                    from,
                    to,
                    anchors: members.len(),
                    band: edges.map(|e| e.0),
                    ties: edges.map(|e| e.1),
                    ranks: ranks(members.len()),
                    held_out_coverage: inside.as_ref().and_then(|inside| {
                        share(
                            members.iter().filter(|&&i| inside[i]).count(),
                            members.len(),
                        )
                    }),
                }
            })
            .collect();
        if bins.iter().any(|b| b.band.is_none()) {
            return None;
        }
        Some(Self {
            level: LEVEL,
            source: if own {
                BandSource::Scaled
            } else {
                BandSource::Conformal
            },
            held_out: held.len(),
            held_out_coverage: inside
                .as_ref()
                .and_then(|inside| share(inside.iter().filter(|&&x| x).count(), inside.len())),
            bins,
            units: None,
        })
    }

    /// The same intervals, with the misses of the anchors `pairs` (held-out predictions
    /// `held_out`) against their bands counted per unit, `units[i]` naming anchor i's (`None`
    /// where it is not known; such anchors are left out). `seed` is the one the intervals were
    /// made with: each held-out anchor's miss is the alarm's, its tie broken by its own u.
    /// `order[i]` is anchor i's upload's place in upload order (any increasing key, such as
    /// its time) where it names no rater (`None` where it names one, or where it is not
    /// known): consecutive such uploads make the pairs of [`UnitSpread::chain`], and each is
    /// counted against bands that did not see its neighbours (`apart_from_neighbours`).
    pub fn with_units<K: Eq + std::hash::Hash>(
        mut self,
        pairs: &[(f64, f64)],
        held_out: &[Option<Corrected>],
        (units, order): (&[Option<K>], &[Option<i64>]),
        seed: u64,
    ) -> Self {
        let ties = held_out_ties(held_out.iter().flatten().count(), seed);
        // The held-out anchors: judge score, reference, prediction, unit, upload place, u.
        let held: Vec<_> = pairs
            .iter()
            .zip(held_out)
            .zip(
                units
                    .iter()
                    .zip(order.iter().chain(std::iter::repeat(&None))),
            )
            .filter_map(|((p, c), unit)| c.as_ref().map(|c| (p, c, unit)))
            .zip(&ties)
            .map(|((&(j, y), c, (unit, place)), &u)| (j, y, c, unit.as_ref(), *place, u))
            .collect();
        let apart = self.apart_from_neighbours(&held);
        let mut per: std::collections::HashMap<&K, (f64, f64)> = Default::default();
        let mut uploads: std::collections::BTreeMap<i64, (f64, f64)> = Default::default();
        for &(j, y, c, unit, place, u) in &held {
            let missed = match place.and_then(|p| apart.get(&p)) {
                Some(bands) => bands.misses(j, y, c, u),
                None => self.misses(j, y, c, u),
            };
            let (Some(unit), Some(missed)) = (unit, missed) else {
                continue;
            };
            let x = f64::from(u8::from(missed));
            let counts = per.entry(unit).or_default();
            counts.0 += 1.0;
            counts.1 += x;
            if let Some(place) = place {
                let counts = uploads.entry(place).or_default();
                counts.0 += 1.0;
                counts.1 += x;
            }
        }
        let spread = UnitSpread::of(per.into_values())
            .with_uploads(&uploads.into_values().collect::<Vec<_>>());
        self.units = (spread.units >= 2.0).then_some(spread);
        self
    }

    /// Per upload naming no rater (by its place in upload order): these bands with each bin's
    /// edges made again without the held-out anchors of that upload and of the uploads up to
    /// [`MAX_LAG`] places either side (one labeller's uploads may span that many), so that
    /// the upload's misses are counted as a new labeller's would be, against bands that did
    /// not see it. Bands made from all anchors have absorbed the training labellers' own
    /// offsets: their uploads miss less alike than the next labeller's will, and the alarm,
    /// starting from them, would expect too little of a labeller's later uploads (issue 85).
    /// A bin that would lose more than half its anchors (a version trained on few uploads)
    /// keeps its edges. Empty for methods serving their own interval.
    fn apart_from_neighbours<K>(&self, held: &[HeldAnchor<'_, K>]) -> HashMap<i64, Intervals> {
        let mut out = HashMap::new();
        if !matches!(self.source, BandSource::Conformal | BandSource::Scaled) {
            return out;
        }
        // Places are any increasing keys (the service's are upload times): neighbours are
        // counted by rank.
        let places: std::collections::BTreeSet<i64> = held.iter().filter_map(|h| h.4).collect();
        let rank: HashMap<i64, i64> = places.iter().zip(0..).map(|(&p, r)| (p, r)).collect();
        // Per bin: its held-out anchors' (residual, u, upload rank) in (residual, u) order,
        // and how many each rank holds.
        let mut sorted: Vec<Vec<(f64, f64, Option<i64>)>> = vec![Vec::new(); self.bins.len()];
        for &(j, y, c, _, place, u) in held {
            let place = place.map(|p| rank[&p]);
            let scale = match self.source {
                BandSource::Scaled => scale_of(c),
                _ => Some(1.0),
            };
            if let (Some(b), Some(s)) = (self.bins.iter().position(|b| b.holds(j)), scale) {
                sorted[b].push(((y - c.score) / s, u, place));
            }
        }
        for bin in &mut sorted {
            bin.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        }
        let counts: Vec<HashMap<i64, usize>> = sorted
            .iter()
            .map(|bin| {
                let mut c = HashMap::new();
                for p in bin.iter().filter_map(|x| x.2) {
                    *c.entry(p).or_default() += 1;
                }
                c
            })
            .collect();
        let lag = MAX_LAG as i64;
        for (&key, &p) in &rank {
            let near = |q: Option<i64>| q.is_some_and(|q| q.abs_diff(p) <= MAX_LAG as u64);
            let mut apart = self.clone();
            for (b, bin) in apart.bins.iter_mut().enumerate() {
                let left_out: usize = (p - lag..=p + lag).filter_map(|q| counts[b].get(&q)).sum();
                let kept = sorted[b].len() - left_out;
                if 2 * kept < sorted[b].len() {
                    continue;
                }
                let Some((lo, hi)) = ranks(kept) else {
                    continue;
                };
                // The lo-th kept from the bottom and the (kept − hi + 1)-th from the top: each
                // walk passes at most the left-out anchors beyond its rank.
                let low = sorted[b].iter().filter(|x| !near(x.2)).nth(lo - 1);
                let high = sorted[b].iter().rev().filter(|x| !near(x.2)).nth(kept - hi);
                if let (Some(l), Some(h)) = (low, high) {
                    bin.band = Some((l.0, h.0));
                    bin.ties = Some((l.1, h.1));
                }
            }
            out.insert(key, apart);
        }
        out
    }

    /// Whether an anchor (judge score `j`, reference `y`, `raw` the corrector's output for
    /// `j` before these intervals) misses the band, its tie at an edge broken by `u` (uniform
    /// on [0, 1), independent of the anchor: [`tie_break`]): the drift alarm's miss. Versions
    /// without tie-breaks, or serving the method's own interval, miss where the served
    /// interval does. `None` where there is no interval.
    pub fn misses(&self, j: f64, y: f64, raw: &Corrected, u: f64) -> Option<bool> {
        let bin = self.bins.iter().find(|b| b.holds(j));
        if let (BandSource::Conformal | BandSource::Scaled, Some(bin)) = (self.source, bin)
            && let (Some((lo, hi)), Some((tie_lo, tie_hi))) = (bin.band, bin.ties)
        {
            let scale = match self.source {
                BandSource::Scaled => scale_of(raw)?,
                _ => 1.0,
            };
            let r = (y - raw.score) / scale;
            let below = r < lo || (r == lo && u < tie_lo);
            let above = r > hi || (r == hi && u > tie_hi);
            return Some(below || above);
        }
        let mut served = *raw;
        self.apply(&[j], std::slice::from_mut(&mut served));
        served.predictive.map(|(lo, hi)| !(lo..=hi).contains(&y))
    }

    /// A bound on the share of new anchors the bands miss that holds, given the anchors the
    /// version was trained on, with probability at least 1 − `delta` over their draw, for new
    /// anchors exchangeable with them (their judge scores spread over the bins as the held-out
    /// anchors were). Each bin's band is a split-conformal band of its held-out residuals,
    /// whose miss rate given them is m_b ~ Beta(n_b + 1 − k_b, k_b) (k_b the ranks between
    /// its ends), independently across bins; a new anchor misses with probability
    /// Σ_b w_b·m_b, w_b the bin's share. The bound is that sum's 1 − `delta` quantile, from
    /// 40/`delta` seeded draws (the same on every replica). A bound for each bin alone would
    /// need `delta` split between the bins, and come out near 15% at 600 anchors instead of
    /// about 8%.
    ///
    /// A version serving its method's own interval has no such guarantee: its bound is the
    /// nominal miss rate.
    pub fn miss_bound(&self, delta: f64) -> f64 {
        use crate::rng::Rng;
        use crate::rng::SeedableRng;
        use rand_distr::{Beta, Distribution};
        let nominal = 1.0 - self.level;
        if self.source == BandSource::Method {
            return nominal;
        }
        let total: usize = self.bins.iter().map(|b| b.anchors).sum();
        let laws: Vec<(f64, Beta<f64>)> = self
            .bins
            .iter()
            .filter_map(|b| {
                let (lo, hi) = b.ranks.or_else(|| ranks_before_split(b.anchors))?;
                let k = (hi - lo) as f64;
                let law = Beta::new(b.anchors as f64 + 1.0 - k, k).ok()?;
                Some((b.anchors as f64 / total as f64, law))
            })
            .collect();
        if laws.is_empty() {
            return nominal;
        }
        let mut rng = Rng::seed_from_u64(0x6D15_5B0D);
        let draws = (40.0 / delta).ceil() as usize;
        let mut sums: Vec<f64> = (0..draws)
            .map(|_| laws.iter().map(|(w, law)| w * law.sample(&mut rng)).sum())
            .collect();
        sums.sort_by(f64::total_cmp);
        let at = ((1.0 - delta) * draws as f64).ceil() as usize;
        sums[at.min(draws - 1)].max(nominal)
    }

    /// Gives each of `corrected` (the corrections of `scores`) its interval: the bin's band
    /// around the corrected score, in reference units or in the method's own half-width,
    /// widened where needed to hold the credible interval. A reference cannot be placed more
    /// surely than the mean it scatters around: where held-out residuals are all about 0
    /// (references copied from a formula of the judge score), the band alone came out
    /// narrower than the posterior's interval for the mean.
    pub fn apply(&self, scores: &[f64], corrected: &mut [Corrected]) {
        if self.source == BandSource::Method {
            return;
        }
        for (&j, c) in scores.iter().zip(corrected) {
            let bin = self.bins.iter().find(|b| b.holds(j));
            let scale = match self.source {
                BandSource::Scaled => scale_of(c),
                _ => Some(1.0),
            };
            if let (Some((lo, hi)), Some(scale)) = (bin.and_then(|b| b.band), scale) {
                let (lo, hi) = (c.score + lo * scale, c.score + hi * scale);
                c.predictive = Some(match c.credible {
                    Some((m_lo, m_hi)) => (lo.min(m_lo), hi.max(m_hi)),
                    None => (lo, hi),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rng::Rng;
    use crate::rng::{RngExt, SeedableRng};

    use super::*;
    use crate::stats::standard_normal;

    #[test]
    fn a_training_upload_is_checked_against_bands_that_did_not_see_its_labeller() {
        // 20 uploads of 100 anchors naming no rater, residuals N(0, 1), except uploads 8 to
        // 11, one labeller's, whose references sit 3 above. The bands made from all 2,000 hold
        // the labeller's 400 (their upper edge near 4.1, where 2.5% of all lie above): against
        // them the labeller's uploads miss about 12% of their anchors. Made without each of
        // those uploads and its four neighbours either side (the whole labeller), the upper
        // edge is near 1.96 and they miss about 85%: some 340 misses where there were 50.
        let mut rng = Rng::seed_from_u64(3);
        let (mut pairs, mut order) = (Vec::new(), Vec::new());
        for u in 0..20i64 {
            let offset = if (8..12).contains(&u) { 3.0 } else { 0.0 };
            for _ in 0..100 {
                let j = 3.0 + rng.random::<f64>();
                pairs.push((j, j + offset + standard_normal(&mut rng)));
                order.push(Some(u * 1_000 + 17));
            }
        }
        let held: Vec<Option<Corrected>> =
            pairs.iter().map(|p| Some(Corrected::score(p.0))).collect();
        let intervals = Intervals::of(&pairs, &held, 5).unwrap();
        let units = intervals
            .clone()
            .with_units(&pairs, &held, (&order, &order), 5)
            .units
            .unwrap();
        let apart_misses = units.misses;
        // The same misses against the bands from all anchors.
        let ties = held_out_ties(pairs.len(), 5);
        let (mut all, mut labeller) = (0.0, 0.0);
        for (i, (&(j, y), &u)) in pairs.iter().zip(&ties).enumerate() {
            let missed = intervals.misses(j, y, &Corrected::score(j), u).unwrap();
            all += f64::from(u8::from(missed));
            if (800..1200).contains(&i) {
                labeller += f64::from(u8::from(missed));
            }
        }
        assert!(
            labeller < 100.0,
            "{labeller} of the labeller's 400 missed the full bands"
        );
        assert!(
            apart_misses > all + 250.0,
            "{apart_misses} misses apart from neighbours, {all} against the full bands"
        );
        assert_eq!(units.units, 20.0);
        assert_eq!(units.anchors, 2000.0);
    }

    #[test]
    fn the_rank_correction_needs_39_residuals() {
        assert!(band((0..38).map(f64::from).collect()).is_none());
        // n = 39: ranks 1 and 39, the extremes.
        assert_eq!(band((0..39).map(f64::from).collect()), Some((0.0, 38.0)));
        // n = 199: ranks 5 and 195.
        assert_eq!(band((0..199).map(f64::from).collect()), Some((4.0, 194.0)));
    }

    #[test]
    fn the_ranks_miss_the_most_whole_gaps_that_keep_95_percent() {
        for n in 39..3000 {
            let (lo, hi) = ranks(n).unwrap();
            let gaps = (n + 1) as f64;
            let inside = (hi - lo) as f64 / gaps;
            // At least 95%, and one gap fewer would not be.
            assert!(inside >= 0.95 - 1e-12, "n = {n}: {inside}");
            assert!(
                (hi - lo - 1) as f64 / gaps < 0.95,
                "n = {n}: one fewer still holds"
            );
            // The misses split evenly, the odd one below.
            let (below, above) = (lo, n + 1 - hi);
            assert!(
                below == above || below == above + 1,
                "n = {n}: {below} / {above}"
            );
            // Never more inside than the two tails rounded apart.
            let (l, h) = ranks_before_split(n).unwrap();
            assert!(hi - lo <= h - l, "n = {n}");
        }
        // n = 107, about a bin of the panel grid: 103 of 108 gaps, where the tails rounded
        // apart held 104.
        assert_eq!(ranks(107), Some((3, 106)));
        assert_eq!(ranks_before_split(107), Some((2, 106)));
    }

    #[test]
    fn a_band_of_107_residuals_covers_a_new_one_103_times_in_108() {
        // The exact rate is 103/108 = 0.9537 on a continuous scale (the tails rounded apart
        // held 104/108 = 0.9630); 40,000 draws give it to a binomial sd of 0.0011.
        let mut rng = Rng::seed_from_u64(17);
        let draws = 40_000;
        let inside = (0..draws)
            .filter(|_| {
                let residuals: Vec<f64> = (0..107).map(|_| standard_normal(&mut rng)).collect();
                let (lo, hi) = band(residuals).unwrap();
                (lo..=hi).contains(&standard_normal(&mut rng))
            })
            .count();
        let rate = inside as f64 / f64::from(draws);
        eprintln!("a band of 107 residuals covered {rate:.4} of new ones");
        assert!((rate - 103.0 / 108.0).abs() < 0.0035, "{rate}");
    }

    #[test]
    fn versions_trained_before_the_split_keep_their_miss_law() {
        // The same bin of 107 anchors: a version that kept its ranks reads the miss law
        // Beta(5, 103) (mean 5/108, sd 0.020), one trained before reads Beta(4, 104) (mean
        // 4/108, sd 0.018); their 90% points are about 1.3 sd above the means, 7.2% and 6.0%.
        let bin = |ranks| Bin {
            from: None,
            to: None,
            anchors: 107,
            band: Some((-1.0, 1.0)),
            held_out_coverage: None,
            ties: None,
            ranks,
        };
        let version = |ranks| Intervals {
            level: LEVEL,
            source: BandSource::Conformal,
            bins: vec![bin(ranks)],
            held_out: 107,
            held_out_coverage: None,
            units: None,
        };
        let now = version(ranks(107)).miss_bound(0.1);
        let before = version(None).miss_bound(0.1);
        eprintln!("bound at δ = 0.1: {now:.4} with kept ranks, {before:.4} before");
        assert!((0.067..0.078).contains(&now), "{now}");
        assert!((0.055..0.066).contains(&before), "{before}");
        // Stored versions without the field read back as trained before.
        let json = serde_json::to_value(bin(None)).unwrap();
        assert!(json.get("ranks").is_none());
        let back: Bin = serde_json::from_value(json).unwrap();
        assert_eq!(back.ranks, None);
    }

    #[test]
    fn bins_hold_enough_anchors_and_never_split_tied_scores() {
        // Integer judge scores 1–5, 60 of each: 300 anchors allow three bins of 100, but whole
        // levels only make 1–2 (120) and 3–5 (180): a third bin would hold 60.
        let js: Vec<f64> = (0..300).map(|i| f64::from(1 + i % 5)).collect();
        let edges = cut(&js);
        assert_eq!(edges, vec![(None, Some(2.5)), (Some(2.5), None)]);
        for (from, to) in &edges {
            let n = js.iter().filter(|&&j| within((*from, *to), j)).count();
            assert!(n >= MIN_BIN && n % 60 == 0, "{from:?}..{to:?}: {n}");
        }
        assert_eq!(cut(&js[..50]), vec![(None, None)]);
        assert_eq!(cut(&vec![3.0; 900]), vec![(None, None)]);
    }

    /// Reference = judge + N(0, s(j)²), with s three times larger at the ends of [1, 5]; the
    /// "held-out predictions" are the judge score itself, so the residuals are the noise.
    fn draw(rng: &mut Rng, n: usize) -> Vec<(f64, f64)> {
        (0..n)
            .map(|_| {
                let j = 1.0 + 4.0 * rng.random::<f64>();
                let s = if !(1.8..=4.2).contains(&j) { 0.6 } else { 0.2 };
                (j, j + s * standard_normal(rng))
            })
            .collect()
    }

    #[test]
    fn binned_bands_cover_new_anchors_at_the_ends_of_the_scale() {
        // 200 replications of 1,000 anchors; each replication checks 500 new anchors against
        // the intervals. Overall and in the outer bins coverage is near 95%; one band for the
        // whole scale would cover the noisy ends far less.
        let mut rng = Rng::seed_from_u64(17);
        let (mut inside, mut outer_inside, mut outer, mut total) = (0, 0, 0, 0);
        let (mut recorded, mut reps) = (0.0, 0);
        let mut one_band_outer = 0;
        for _ in 0..200 {
            let pairs = draw(&mut rng, 1000);
            let held: Vec<Option<Corrected>> =
                pairs.iter().map(|p| Some(Corrected::score(p.0))).collect();
            let iv = Intervals::of(&pairs, &held, 3).expect("1,000 residuals");
            assert_eq!(iv.source, BandSource::Conformal);
            assert_eq!(iv.bins.len(), MAX_BINS);
            recorded += iv.held_out_coverage.unwrap();
            reps += 1;
            let single = band(pairs.iter().map(|p| p.1 - p.0).collect()).unwrap();
            for (j, y) in draw(&mut rng, 500) {
                let mut c = [Corrected::score(j)];
                iv.apply(&[j], &mut c);
                let (lo, hi) = c[0].predictive.unwrap();
                let hit = (lo..=hi).contains(&y);
                inside += usize::from(hit);
                total += 1;
                if !(1.8..=4.2).contains(&j) {
                    outer += 1;
                    outer_inside += usize::from(hit);
                    one_band_outer += usize::from((j + single.0..=j + single.1).contains(&y));
                }
            }
        }
        let rate = |a: usize, b: usize| a as f64 / b as f64;
        let (all, ends, one) = (
            rate(inside, total),
            rate(outer_inside, outer),
            rate(one_band_outer, outer),
        );
        eprintln!("coverage {all:.4}, outer {ends:.4}, one band at the ends {one:.4}");
        assert!((0.94..=0.96).contains(&all), "{all}");
        assert!((0.93..=0.97).contains(&ends), "{ends}");
        assert!(one < 0.90, "{one}");
        let recorded = recorded / reps as f64;
        assert!((0.94..=0.96).contains(&recorded), "{recorded}");
    }

    #[test]
    fn a_method_with_its_own_interval_is_conformalised_on_its_scale() {
        // The method's own predictive interval is centred right and shaped right (three times
        // wider at the noisy ends) but half as wide as it should be: it covers about 68%.
        // Scaled by the held-out band in units of its half-width, it covers 95% overall and
        // at the ends, on new anchors.
        let own = |j: f64| {
            let s = if !(1.8..=4.2).contains(&j) { 0.6 } else { 0.2 };
            Corrected {
                predictive: Some((j - 0.98 * s, j + 0.98 * s)),
                ..Corrected::score(j)
            }
        };
        let mut rng = Rng::seed_from_u64(23);
        let (mut inside, mut raw, mut ends, mut ends_inside, mut total) = (0, 0, 0, 0, 0);
        for _ in 0..100 {
            let pairs = draw(&mut rng, 1000);
            let held: Vec<Option<Corrected>> = pairs.iter().map(|p| Some(own(p.0))).collect();
            let iv = Intervals::of(&pairs, &held, 3).expect("1,000 residuals");
            assert_eq!(iv.source, BandSource::Scaled);
            let recorded = iv.held_out_coverage.unwrap();
            assert!((0.93..=0.97).contains(&recorded), "{recorded}");
            for (j, y) in draw(&mut rng, 500) {
                let mut c = [own(j)];
                let (lo, hi) = c[0].predictive.unwrap();
                raw += usize::from((lo..=hi).contains(&y));
                iv.apply(&[j], &mut c);
                let (lo, hi) = c[0].predictive.unwrap();
                let hit = (lo..=hi).contains(&y);
                inside += usize::from(hit);
                total += 1;
                if !(1.8..=4.2).contains(&j) {
                    ends += 1;
                    ends_inside += usize::from(hit);
                }
            }
        }
        let rate = |a: usize, b: usize| a as f64 / b as f64;
        let (all, at_ends, before) = (
            rate(inside, total),
            rate(ends_inside, ends),
            rate(raw, total),
        );
        eprintln!(
            "scaled: coverage {all:.4}, at the ends {at_ends:.4}, the method's own {before:.4}"
        );
        assert!((0.94..=0.96).contains(&all), "{all}");
        assert!((0.93..=0.97).contains(&at_ends), "{at_ends}");
        assert!(before < 0.75, "{before}");
    }

    #[test]
    fn a_band_never_narrower_than_the_credible_interval() {
        let intervals = |source, band| Intervals {
            level: LEVEL,
            source,
            bins: vec![Bin {
                from: None,
                to: None,
                anchors: 200,
                band: Some(band),
                held_out_coverage: Some(0.95),
                ties: None,
                ranks: None,
            }],
            held_out: 200,
            held_out_coverage: Some(0.95),
            units: None,
        };
        let corrected = || {
            [Corrected {
                credible: Some((2.09999, 2.10001)),
                predictive: Some((1.0, 3.2)),
                ..Corrected::score(2.1)
            }]
        };
        for source in [BandSource::Conformal, BandSource::Scaled] {
            // Held-out residuals all about 0 (references on an exact line of the judge score):
            // the band is the credible interval.
            let mut c = corrected();
            intervals(source, (-1e-7, 1e-7)).apply(&[2.0], &mut c);
            assert_eq!(c[0].predictive, Some((2.09999, 2.10001)), "{source:?}");
            // A band wider than it is kept as it is: 2.1 ∓ 0.5, in reference units or in the
            // method's half-width (1.1).
            let mut c = corrected();
            intervals(source, (-0.5, 0.5)).apply(&[2.0], &mut c);
            let (lo, hi) = c[0].predictive.unwrap();
            let half = if source == BandSource::Scaled {
                0.55
            } else {
                0.5
            };
            assert!((lo - (2.1 - half)).abs() < 1e-12 && (hi - (2.1 + half)).abs() < 1e-12);
        }
    }

    #[test]
    fn versions_served_before_conformalisation_keep_their_method_interval() {
        let iv = Intervals {
            level: LEVEL,
            source: BandSource::Method,
            bins: vec![Bin {
                from: None,
                to: None,
                anchors: 200,
                band: None,
                held_out_coverage: Some(0.9),
                ties: None,
                ranks: None,
            }],
            held_out: 200,
            held_out_coverage: Some(0.9),
            units: None,
        };
        let mut c = [Corrected {
            predictive: Some((1.0, 2.0)),
            ..Corrected::score(1.5)
        }];
        iv.apply(&[1.0], &mut c);
        assert_eq!(c[0].predictive, Some((1.0, 2.0)));
        // No guarantee to bound their miss rate with: the alarm tests the nominal rate.
        assert_eq!(iv.miss_bound(0.001), 1.0 - LEVEL);
        // Too few held-out anchors for a band: no intervals.
        let pairs: Vec<(f64, f64)> = (0..30).map(|i| (f64::from(i), 0.0)).collect();
        let plain: Vec<Option<Corrected>> = (0..30).map(|_| Some(Corrected::score(0.0))).collect();
        assert!(Intervals::of(&pairs, &plain, 0).is_none());
    }

    #[test]
    fn the_miss_bound_holds_for_the_stated_share_of_calibration_draws() {
        // 2,000 versions with five bins of 120 uniform residuals each (ranks 3 and 118): a
        // new anchor, equally likely in each bin, misses the bin's band with probability
        // 1 − (r₁₁₈ − r₃). The version's miss rate exceeds its bound at δ = 0.1 in about 10%
        // of versions (binomial sd 0.7%).
        let version = Intervals {
            level: LEVEL,
            source: BandSource::Conformal,
            bins: (0..5)
                .map(|_| Bin {
                    from: None,
                    to: None,
                    anchors: 120,
                    band: None,
                    held_out_coverage: None,
                    ties: None,
                    ranks: None,
                })
                .collect(),
            held_out: 600,
            held_out_coverage: None,
            units: None,
        };
        let bound = version.miss_bound(0.1);
        let mut rng = Rng::seed_from_u64(5);
        let mut over = 0;
        for _ in 0..2000 {
            let miss: f64 = (0..5)
                .map(|_| {
                    let mut r: Vec<f64> = (0..120).map(|_| rng.random::<f64>()).collect();
                    r.sort_by(f64::total_cmp);
                    (1.0 - (r[117] - r[2])) / 5.0
                })
                .sum();
            over += usize::from(miss > bound);
        }
        let share = over as f64 / 2000.0;
        eprintln!("bound {bound:.4} at δ = 0.1; exceeded by {share:.4} of versions");
        assert!((0.08..=0.12).contains(&share), "{share}");
        assert!(bound > 0.05 && bound < 0.07, "{bound}");
    }

    #[test]
    fn the_miss_bound_grows_with_fewer_anchors_per_bin() {
        let mut rng = Rng::seed_from_u64(4);
        let bound = |n: usize, rng: &mut Rng| {
            let pairs = draw(rng, n);
            let held: Vec<Option<Corrected>> =
                pairs.iter().map(|p| Some(Corrected::score(p.0))).collect();
            Intervals::of(&pairs, &held, 1).unwrap().miss_bound(0.001)
        };
        let (small, large) = (bound(300, &mut rng), bound(20_000, &mut rng));
        eprintln!("miss bound: {small:.3} at 300 anchors, {large:.3} at 20,000");
        assert!(
            small > large && large > 0.05 && large < 0.07,
            "{small} {large}"
        );
    }

    #[test]
    fn on_a_tied_scale_the_alarms_miss_rate_follows_the_conformal_law() {
        // Residuals on five integer levels (1% at ±2): 240 held-out anchors put the band's
        // edges (ranks 6 and 235) on the tied levels ±1, so the served band misses only the
        // 2% at ±2. With ties broken, a version's miss rate is Beta(12, 229) given its
        // held-out anchors (mean 12/241 = 0.0498), and its bound at δ = 0.1 is exceeded by
        // about 10% of versions (binomial sd 0.7%).
        let levels = [
            (-2.0, 0.01),
            (-1.0, 0.2),
            (0.0, 0.58),
            (1.0, 0.2),
            (2.0, 0.01),
        ];
        let mut rng = Rng::seed_from_u64(21);
        let draw = |rng: &mut Rng| {
            let mut u: f64 = rng.random();
            for &(y, p) in &levels {
                if u < p {
                    return y;
                }
                u -= p;
            }
            2.0
        };
        let (versions, n) = (2000, 240);
        let (mut randomised, mut served, mut over) = (0.0, 0.0, 0);
        let mut bound = None;
        for v in 0..versions {
            let pairs: Vec<(f64, f64)> = (0..n).map(|_| (0.0, draw(&mut rng))).collect();
            let held: Vec<Option<Corrected>> = vec![Some(Corrected::score(0.0)); n];
            let iv = Intervals::of(&pairs, &held, v).unwrap();
            let bound = *bound.get_or_insert_with(|| iv.miss_bound(0.1));
            // The exact miss rate: each level's share times its chance of missing over u,
            // read through `misses` at u just below and above the edges' tie-breaks.
            let (_, (tie_lo, tie_hi)) = (iv.bins[0].band.unwrap(), iv.bins[0].ties.unwrap());
            let raw = Corrected::score(0.0);
            let mut miss = 0.0;
            for &(y, p) in &levels {
                let chance = match (iv.misses(0.0, y, &raw, 0.0), iv.misses(0.0, y, &raw, 1.0)) {
                    (Some(true), Some(true)) => 1.0,
                    (Some(false), Some(false)) => 0.0,
                    // Missing below the lower edge's tie-break, or above the upper's.
                    (Some(true), Some(false)) => tie_lo,
                    (Some(false), Some(true)) => 1.0 - tie_hi,
                    other => panic!("{other:?}"),
                };
                miss += p * chance;
                let mut c = [raw];
                iv.apply(&[0.0], &mut c);
                let (lo, hi) = c[0].predictive.unwrap();
                served += p * f64::from(u8::from(!(lo..=hi).contains(&y))) / versions as f64;
            }
            randomised += miss / versions as f64;
            over += usize::from(miss > bound);
        }
        let share = over as f64 / versions as f64;
        eprintln!(
            "miss rate: {randomised:.4} with ties broken, {served:.4} served; bound {bound:?} \
             exceeded by {share:.4}"
        );
        assert!((randomised - 12.0 / 241.0).abs() < 0.002, "{randomised}");
        assert!(served < 0.03, "{served}");
        assert!((0.08..=0.12).contains(&share), "{share}");
    }

    #[test]
    fn tie_breaks_are_uniform_and_the_same_on_every_call() {
        let us: Vec<f64> = (0..20_000)
            .map(|i| tie_break(&format!("item-{i}"), "v1"))
            .collect();
        assert!(us.iter().all(|u| (0.0..1.0).contains(u)));
        // Deciles of 2,000 each (sd about 42).
        for d in 0..10 {
            let count = us
                .iter()
                .filter(|&&u| (u * 10.0).floor() as usize == d)
                .count();
            assert!((1850..=2150).contains(&count), "decile {d}: {count}");
        }
        assert_eq!(tie_break("item-1", "v1"), us[1]);
        assert_ne!(tie_break("item-1", "v2"), us[1]);
    }
}
