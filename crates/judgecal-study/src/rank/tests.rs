use super::*;

#[test]
fn a_ranking_of_weak_and_biased_judges_makes_few_wrong_claims() {
    // The hard corners of the grid, 40 replications each: K = 12, τ = 0.2, slope 0.2 and
    // 0.8, and the weak judge on a skewed integer scale (K = 4, to keep the test quick);
    // ten labels a run answer pairs on 10 shared items, and the labelling user's second
    // look on 20. A family-wise error of 5% over 40 replications has a binomial sd of 3.4
    // points: more than 6 wrong claims in a cell (15%) would be a real excess. The full
    // grid (`judgecal-study rank --reps 400`, docs/run-level.md) measures the rates.
    let worlds =
        [(12, 0.2, false), (12, 0.8, false), (4, 0.2, true)].map(|(systems, slope, discrete)| {
            RankWorld {
                systems,
                tau: 0.2,
                slope,
                discrete,
            }
        });
    for w in worlds {
        let (_, c) = run(&[w], 40, 2, &|_| {}).unwrap().remove(0);
        eprintln!("{}\n", table(&[(w, c.clone())]));
        assert!(
            c.wrong_once <= 6 && c.wrong_few <= 6 && c.wrong_labelled <= 6,
            "{c:?}"
        );
        assert!(
            c.covered_once >= 34 && c.covered_few >= 34 && c.covered_labelled >= 34,
            "{c:?}"
        );
        // The labels resolve more of the gapped pairs than the judge alone.
        assert!(c.resolved_last > c.resolved_first, "{c:?}");
        // Every run in an open pair is labelled, and its own interval covers at about
        // its level (of dozens of runs, at most 15% short).
        assert!(c.first_combined > 0 && c.combined > 0, "{c:?}");
        assert!(
            c.first_covered as f64 >= 0.85 * c.first_combined as f64,
            "{c:?}"
        );
        assert!(
            c.combined_covered as f64 >= 0.85 * c.combined as f64,
            "{c:?}"
        );
    }
}

#[test]
fn the_pair_bound_settles_a_pair_at_the_closed_form_count() {
    // Two runs 0.5 apart whose residual difference is ±0.5 about the gap: the count that
    // settles is the least m with c²·v·(1/m − 1/N) ≤ gap², c the two-sided normal quantile
    // at the look's family level (one pair).
    let n = 100;
    let corrected = vec![vec![0.0; n]; 2];
    let a: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 1.0 } else { 0.0 }).collect();
    let references = vec![a, vec![0.0; n]];
    let v = 0.25 * n as f64 / (n - 1) as f64;
    let closed = |family: f64| {
        let c = normal_quantile(1.0 - (1.0 - family) / 2.0);
        (1.0 / (1.0 / n as f64 + 0.25 / (c * c * v))).ceil() as usize
    };
    let (plan, uniform) = (closed(1.0 - 0.05 / 4.0), closed(0.975));
    assert!(plan > uniform && plan < n, "{plan} {uniform}");
    assert_eq!(
        pair_bound(&corrected, &references, 4),
        (2 * plan, 2 * uniform)
    );
    // A gap under MIN_GAP asks for nothing.
    let close = vec![vec![0.05; n], vec![0.0; n]];
    assert_eq!(pair_bound(&corrected, &close, 4), (0, 0));
}

#[test]
fn the_floor_is_below_every_design_that_settles() {
    // The floor counts each run's fewest labels with every other run fully labelled, at
    // one look at 0.95: a uniform count that settles at a stricter level with fewer labels
    // elsewhere gives every run at least its floor, and so does the plan; where the judge
    // alone settles, the floor is 0.
    let w = RankWorld {
        systems: 4,
        tau: 0.2,
        slope: 0.8,
        discrete: false,
    };
    let design = LabelDesign {
        floor: true,
        ..LabelDesign::default()
    };
    for x in labels(&w, 0..2, 2, design).unwrap() {
        let (Some(floor), Some(uniform), Some(planned)) = (x.floor, x.uniform, x.planned) else {
            panic!("every design settles: {x:?}");
        };
        assert!(floor <= uniform && floor <= planned, "{x:?}");
        assert!(uniform > 0 || floor == 0, "{x:?}");
    }
}
