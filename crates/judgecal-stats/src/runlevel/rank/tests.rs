use super::super::inference;
use super::pairs::*;
use super::plan::*;
use super::*;
use crate::stats::standard_normal;

fn estimate(value: f64) -> RunEstimate {
    let mut e = crate::runlevel::RunEstimate {
        path: AnswerPath::Plain,
        mean: inference::plain(&[value, value], 0.0, 0.0, None, 0.95).unwrap(),
        term: super::super::Term::Posterior,
        support: super::super::Support {
            anchor_range: (1.0, 5.0),
            outside: 0.0,
            thin: 0.0,
        },
        transport: None,
        advice: None,
        group: super::super::GroupAnswer::none(),
    };
    e.mean.estimate = value;
    e
}

#[test]
fn the_combined_answer_weighs_plain_and_labelled_by_inverse_variance() {
    // Plain 3.0 with variance 0.04 (0.03 of it the run's sampling over 1,000 items), labelled
    // 3.3 on 750 of them: at the anchors' noise the labelled variance is 0.03·(1000/750 − 1)
    // = 0.01, on a normal quantile: weight 0.01/0.05 = 0.2 on the plain one, estimate
    // 0.2·3.0 + 0.8·3.3 = 3.24, variance 0.04·0.01/0.05 = 0.008, so a 95% half-width of
    // 1.96·√0.008 = 0.1753. The labels' own variance (here 0.5) does not move the weight.
    let mut p = estimate(3.0);
    p.mean.variance = inference::Variance {
        sampling: 0.03,
        corrector: 0.0,
        group: 0.01,
    };
    let mut l = estimate(3.3);
    l.path = AnswerPath::Labelled;
    l.mean.variance = inference::Variance {
        sampling: 0.5,
        ..Default::default()
    };
    (l.mean.n, l.mean.labelled) = (1000, 750);
    l.mean.df = None;
    let w = plain_weight(&l, &p, 0.95);
    assert!((w - 0.2).abs() < 1e-12, "{w}");
    assert_eq!(plain_weight(&p, &p, 0.95), 1.0);
    // A run of a system the anchors never saw: its labels alone.
    let mut new = p.clone();
    new.group.term = crate::runlevel::groups::GroupTerm::New;
    assert_eq!(plain_weight(&l, &new, 0.95), 0.0);
    l.mean.variance.sampling = 0.01;
    // A t quantile on few labels weighs the labelled answer down: on 4 degrees of
    // freedom its variance counts (2.776445/1.959964)² = 2.006671 times, so the weight
    // is 0.020067/0.060067 = 0.33407.
    l.mean.df = Some(4.0);
    let w4 = plain_weight(&l, &p, 0.95);
    assert!((w4 - 0.33407).abs() < 1e-4, "{w4}");
    l.mean.df = None;
    let mut rng = Rng::seed_from_u64(9);
    let column: Vec<f64> = (0..DRAWS)
        .map(|_| 0.2 * 0.2 * standard_normal(&mut rng) + 0.8 * 0.1 * standard_normal(&mut rng))
        .collect();
    let c = combined(&l, &p, 0.2, &column, 0.95);
    assert_eq!(c.path, AnswerPath::Combined);
    assert!((c.mean.estimate - 3.24).abs() < 1e-12);
    assert!((c.mean.variance.total() - 0.008).abs() < 1e-12);
    let half = (c.mean.interval.1 - c.mean.interval.0) / 2.0;
    assert!((half - 0.1753).abs() < 0.005, "{half}");
}

#[test]
fn a_paired_difference_of_labelled_runs_loses_what_the_items_share() {
    // Plain answers too wide to count (weights ≈ 0); residual noise 1 per item, correlation
    // 0.5 between the runs on one item, 100 labels each of 1,000 on the same items: the
    // difference's variance is 2·(1/100 − 1/1000)·(t excess − 0.5), the t excess on 98
    // degrees of freedom (1.98447/1.95996)² = 1.02516.
    let run = Planned {
        plain: 1e12,
        labelled: 0,
        n: 1000,
        noise: 1.0,
    };
    let model = PlanModel {
        runs: vec![run; 2],
        plain_cov: vec![1e12, 0.0, 0.0, 1e12],
        rho: 0.5,
        rho_measured: true,
        paired: false,
        difference_noise: vec![0.0, 1.0, 1.0, 0.0],
        level: 0.95,
    };
    let want = 2.0 * (0.01 - 0.001) * (1.02516 - 0.5);
    let got = model.pair(&[100, 100], 0, 1);
    assert!((got / want - 1.0).abs() < 1e-3, "{got} vs {want}");
    // With no labels the plain answers' own covariance rules: 1e12 + 1e12.
    assert!((model.pair(&[0, 0], 0, 1) / 2e12 - 1.0).abs() < 1e-12);
    // Uneven counts, 100 and 400, residuals correlated 0.8: the runs' answers share only
    // ρ·(1/400 − 1/1000), so their difference has 1.02516·0.009 + 1.00614·0.0015 −
    // 2·0.8·0.0015 = 0.0083356 (t excess on 398 degrees of freedom (1.96597/1.95996)²).
    let model = PlanModel {
        rho: 0.8,
        difference_noise: vec![0.0, 0.4, 0.4, 0.0],
        ..model
    };
    let uneven = model.pair(&[100, 400], 0, 1);
    let want = 1.02516 * 0.009 + 1.00614 * 0.0015 - 1.6 * 0.0015;
    assert!((uneven / want - 1.0).abs() < 1e-3, "{uneven} vs {want}");
    // Answered on the 100 items both labelled, the pair keeps what they share: the
    // residual difference's noise 2·(1 − 0.8) = 0.4 per item, 0.4·1.02516·0.009 =
    // 0.0036906 (its plain difference, 2e12, adds nothing).
    let model = PlanModel {
        paired: true,
        ..model
    };
    let own = model.pair(&[100, 400], 0, 1);
    let want = 0.4 * 1.02516 * 0.009;
    assert!((own / want - 1.0).abs() < 1e-3, "{own} vs {want}");
    assert!(own < uneven);
}

#[test]
fn before_any_labels_a_ranking_the_judge_cannot_order_gets_one_count_per_run_or_a_first_sample() {
    // Three runs 0.05 apart, every pair open (plain variance 0.01 each, independent):
    // the plan labels all three, as many each, and reaches every target.
    let estimates: Vec<RunEstimate> = [3.0, 3.05, 3.1].into_iter().map(estimate).collect();
    let mut rng = Rng::seed_from_u64(2);
    let errors: Vec<f64> = (0..DRAWS * 3)
        .map(|_| 0.1 * standard_normal(&mut rng))
        .collect();
    let (pairs, critical) = pair_intervals(
        &drafts(&estimates),
        &errors,
        3,
        ErrorRate::Familywise,
        0.975,
    );
    let ranking = Ranking {
        runs: estimates
            .into_iter()
            .map(|estimate| RankedRun {
                estimate,
                rank: (1, 3),
            })
            .collect(),
        pairs,
        critical,
        family_level: 0.975,
        allocation: None,
    };
    let runs: Vec<RunItems> = (0..3).map(|_| RunItems::scores(vec![3.0; 1000])).collect();
    let run = Planned {
        plain: 0.01,
        labelled: 0,
        n: 1000,
        noise: 1.0,
    };
    let mut model = PlanModel {
        runs: vec![run; 3],
        plain_cov: vec![0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01],
        rho: 0.0,
        rho_measured: false,
        paired: false,
        difference_noise: vec![2.0; 9],
        level: 0.975,
    };
    let a = allocate(&ranking, &runs, &model, &LabelGoal::default(), 1);
    assert_eq!(a.open, 3);
    assert_eq!(a.reached, 3, "{a:?}");
    assert!(
        a.add[0] > 0 && a.add.iter().all(|&x| x == a.add[0]),
        "{:?}",
        a.add
    );
    // Once a correlation is measured the plan may spend unevenly; it still reaches them.
    model.rho_measured = true;
    let b = allocate(&ranking, &runs, &model, &LabelGoal::default(), 1);
    assert_eq!(b.reached, 3, "{b:?}");
    assert!(!a.pilot && !b.pilot);
    // Runs paired by id, nothing measured yet and two looks to spare: a first sample of
    // PILOT_LABELS on each run in an open pair, and no more; with one look left, the plan.
    model.rho_measured = false;
    model.paired = true;
    let ids: Vec<String> = (0..1000).map(|i| format!("p{i}")).collect();
    let runs: Vec<RunItems> = runs
        .into_iter()
        .map(|r| RunItems {
            ids: Some(ids.clone()),
            ..r
        })
        .collect();
    let pilot = allocate(&ranking, &runs, &model, &LabelGoal::default(), 2);
    assert!(pilot.pilot && pilot.paired);
    assert_eq!(pilot.add, vec![PILOT_LABELS; 3]);
    // The same items on every run.
    assert!(pilot.items.iter().all(|i| *i == pilot.items[0]));
    let last = allocate(&ranking, &runs, &model, &LabelGoal::default(), 1);
    assert!(!last.pilot && last.reached == 3 && last.total() > 3 * PILOT_LABELS);
}

#[test]
fn two_estimates_of_a_pair_blend_by_their_joint_errors() {
    // Independent errors of variance 1 and 4: w = 4/5 on the first, variance 4/5. With
    // the second's error the first's plus independent noise of variance 3 (so Var 4,
    // Cov 1), the first alone is best: w = (4 − 1)/(1 + 4 − 2) = 1. 20,000 draws: the
    // weights within 0.02, the variance within 4% (about 5 standard errors).
    let mut rng = Rng::seed_from_u64(11);
    let z: Vec<(f64, f64)> = (0..DRAWS)
        .map(|_| (standard_normal(&mut rng), standard_normal(&mut rng)))
        .collect();
    let b = blend((1.0, &|x| z[x].0), (2.0, &|x| 2.0 * z[x].1), DRAWS);
    assert!(
        (b.estimate - (0.8 + 0.2 * 2.0)).abs() < 0.02,
        "{}",
        b.estimate
    );
    assert!((b.square / 0.8 - 1.0).abs() < 0.04, "{}", b.square);
    let nested = blend(
        (1.0, &|x| z[x].0),
        (2.0, &|x| z[x].0 + 3f64.sqrt() * z[x].1),
        DRAWS,
    );
    assert!((nested.estimate - 1.0).abs() < 0.02, "{}", nested.estimate);
    assert_eq!(nested.shared, 0);
}

#[test]
fn the_max_t_critical_value_matches_known_quantiles() {
    // Independent N(0, 1) errors. Two runs: one pair, whose 95% point is 1.96. Three runs:
    // three pairs of correlation ±0.5, whose max-|t| 95% point (Tukey's studentised range
    // for 3 means at infinite df, 3.314/√2 = 2.343) lies between the single pair's and
    // Bonferroni's 2.394. Monte Carlo error of 20,000 draws: about ±0.02.
    let mut rng = Rng::seed_from_u64(5);
    for (k, want) in [(2, 1.960), (3, 2.343)] {
        let errors: Vec<f64> = (0..DRAWS * k).map(|_| standard_normal(&mut rng)).collect();
        let estimates: Vec<RunEstimate> = (0..k).map(|i| estimate(i as f64)).collect();
        let (pairs, c) =
            pair_intervals(&drafts(&estimates), &errors, k, ErrorRate::Familywise, 0.95);
        assert!((c - want).abs() < 0.03, "{k} runs: {c}");
        assert!((pairs[0].standard_error - 2f64.sqrt()).abs() < 0.03);
        // Per pair, each pair's own 95% point.
        let (_, c) = pair_intervals(&drafts(&estimates), &errors, k, ErrorRate::PerPair, 0.95);
        assert!((c - 1.96).abs() < 0.05, "{k} runs per pair: {c}");
    }
}
