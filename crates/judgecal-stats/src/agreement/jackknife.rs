//! Leave-one-out values of Pearson's r and Kendall's τ-b, each in one pass over the sample
//! (O(n) and O(n log n)), for the jackknife standard errors that cover with ties where the
//! closed forms for continuous data do not (issue 85).

use crate::stats::mean;

/// Pearson's r of `x` and `y` with each pair left out in turn (`None` for a leave-out whose
/// sides do not vary).
pub fn pearson_leave_outs(x: &[f64], y: &[f64]) -> Vec<Option<f64>> {
    let n = x.len() as f64;
    let (mx, my) = (mean(x), mean(y));
    let centred = |v: &[f64], m: f64| v.iter().map(|a| a - m).collect::<Vec<f64>>();
    let (dx, dy) = (centred(x, mx), centred(y, my));
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
    let (sxx, syy, sxy) = (dot(&dx, &dx), dot(&dy, &dy), dot(&dx, &dy));
    // Leaving item i out moves the mean by −d_i/(n − 1): each centred sum of products loses
    // d_i·e_i·n/(n − 1).
    let shrink = n / (n - 1.0);
    dx.iter()
        .zip(&dy)
        .map(|(a, b)| {
            let (vx, vy) = (sxx - a * a * shrink, syy - b * b * shrink);
            let scale = sxx.max(syy) * 1e-12;
            (vx > scale && vy > scale).then(|| (sxy - a * b * shrink) / (vx * vy).sqrt())
        })
        .collect()
}

/// A Fenwick tree of counts over `0..len`.
struct Counts(Vec<f64>);

impl Counts {
    fn add(&mut self, at: usize) {
        let mut i = at + 1;
        while i < self.0.len() {
            self.0[i] += 1.0;
            i += i & i.wrapping_neg();
        }
    }

    /// How many were added below `at`.
    fn below(&self, at: usize) -> f64 {
        let (mut i, mut total) = (at, 0.0);
        while i > 0 {
            total += self.0[i];
            i -= i & i.wrapping_neg();
        }
        total
    }
}

/// Each value's index among the distinct values of `v`, and how many of the others share it.
fn levels(v: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let at: Vec<usize> = v
        .iter()
        .map(|a| sorted.partition_point(|l| l.total_cmp(a).is_lt()))
        .collect();
    let mut sizes = vec![0.0; sorted.len()];
    for &k in &at {
        sizes[k] += 1.0;
    }
    let ties = at.iter().map(|&k| sizes[k] - 1.0).collect();
    (at, ties)
}

/// Kendall's τ-b of `x` and `y` with each pair left out in turn (`None` for a leave-out with a
/// constant side). Item i's part of C − D, Σ_j sign(x_i − x_j)·sign(y_i − y_j), is counted with
/// a tree over y's levels as the items are passed in x's order, once each way; leaving i out
/// takes that part from C − D and its ties from each side's tied pairs.
pub fn kendall_leave_outs(x: &[f64], y: &[f64]) -> Vec<Option<f64>> {
    let n = x.len();
    let (x_at, x_ties) = levels(x);
    let (y_at, y_ties) = levels(y);
    let y_levels = y_at.iter().max().map_or(0, |m| m + 1);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| x_at[i]);
    let mut part = vec![0.0; n];
    // Forward: the items with a smaller x; backward: those with a larger one (their sign
    // flips). Items of one x level are all read before any is added.
    for backward in [false, true] {
        let mut tree = Counts(vec![0.0; y_levels + 1]);
        let mut added = 0.0;
        let mut groups: Vec<&[usize]> = order.chunk_by(|&a, &b| x_at[a] == x_at[b]).collect();
        if backward {
            groups.reverse();
        }
        for group in groups {
            for &i in group {
                let below = tree.below(y_at[i]);
                let above = added - tree.below(y_at[i] + 1);
                part[i] += if backward {
                    above - below
                } else {
                    below - above
                };
            }
            for &i in group {
                tree.add(y_at[i]);
                added += 1.0;
            }
        }
    }
    let s: f64 = part.iter().sum::<f64>() / 2.0;
    let tied = |t: &[f64]| t.iter().sum::<f64>() / 2.0;
    let (tx, ty) = (tied(&x_ties), tied(&y_ties));
    let m = (n - 1) as f64;
    let pairs = m * (m - 1.0) / 2.0;
    (0..n)
        .map(|i| {
            let untied_x = pairs - (tx - x_ties[i]);
            let untied_y = pairs - (ty - y_ties[i]);
            (untied_x > 0.0 && untied_y > 0.0).then(|| (s - part[i]) / (untied_x * untied_y).sqrt())
        })
        .collect()
}

/// The jackknife standard error of a correlation on Fisher's z scale from its leave-one-out
/// values (`None` where one is missing).
pub fn fisher_se(leave_outs: &[Option<f64>]) -> Option<f64> {
    let z: Vec<f64> = leave_outs
        .iter()
        .map(|r| r.map(|r| r.clamp(-0.999_999_999, 0.999_999_999).atanh()))
        .collect::<Option<_>>()?;
    let n = z.len() as f64;
    let m = mean(&z);
    let se = ((n - 1.0) / n * z.iter().map(|v| (v - m).powi(2)).sum::<f64>()).sqrt();
    se.is_finite().then_some(se)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality::pearson;

    fn kendall(x: &[f64], y: &[f64]) -> Option<f64> {
        kendalls::tau_b_with_comparator(x, y, |a: &f64, b: &f64| a.total_cmp(b))
            .ok()
            .map(|(t, _)| t)
    }

    #[test]
    fn each_leave_out_equals_the_figure_recomputed_without_that_pair() {
        // Ties on both sides, a repeated pair and a discordant one.
        let x = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0, 5.0, 1.0];
        let y = [2.0, 1.0, 3.0, 3.0, 3.0, 4.0, 2.0, 5.0, 4.0, 1.0];
        let (tau, r) = (kendall_leave_outs(&x, &y), pearson_leave_outs(&x, &y));
        for i in 0..x.len() {
            let keep = |v: &[f64]| {
                v.iter()
                    .enumerate()
                    .filter(|(k, _)| *k != i)
                    .map(|(_, a)| *a)
                    .collect::<Vec<f64>>()
            };
            let (xs, ys) = (keep(&x), keep(&y));
            let t = kendall(&xs, &ys).expect("both vary");
            assert!((tau[i].expect("both vary") - t).abs() < 1e-12, "{i}");
            let p = pearson(&xs, &ys);
            assert!((r[i].expect("both vary") - p).abs() < 1e-12, "{i}");
        }
        // A side that is constant once one pair is left out: that leave-out has no value.
        let (x, y) = ([1.0, 1.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(kendall_leave_outs(&x, &y)[3], None);
        assert_eq!(pearson_leave_outs(&x, &y)[3], None);
        assert!(kendall_leave_outs(&x, &y)[0].is_some());
        assert_eq!(fisher_se(&pearson_leave_outs(&x, &y)), None);
    }
}
