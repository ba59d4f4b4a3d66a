//! The drift alarm through the service where labellers name no rater and each uploads five
//! consecutive batches (issue 85): healthy cells whose new anchors miss at each version's own
//! miss-rate bound, the worst a healthy cell's guarantee allows.

use judgecal_stats::stats::normal_cdf;
use serde_json::json;

use super::*;
use crate::common::{Backend, TestApp};

const RUBRICS: usize = 60;
/// Anchors of each rubric in each upload.
const BATCH: usize = 50;
/// Consecutive uploads one labeller makes for a rubric.
const PER_LABELLER: usize = 5;
/// The labeller's share of a reference's variance around the judge score.
const SHARE: f64 = 0.2;
/// The references' sd around the judge score in the training anchors.
const SD: f64 = 0.3;
/// The judge scores the watched anchors carry (their bands are read from the service).
const SCORES: [f64; 5] = [2.5, 2.75, 3.0, 3.25, 3.5];

/// One upload as CSV: [`BATCH`] anchors of every rubric `r`, at judge scores `score(i)`, each
/// reference the judge score plus rubric r's labeller's offset `offsets[r]` plus its own noise,
/// the two of sd `sd[r]` together.
fn upload(
    tag: &str,
    (offsets, sd): (&[f64], &[f64]),
    score: impl Fn(usize, &mut Normals) -> f64,
    rng: &mut Normals,
) -> String {
    let mut csv = String::from("judge,rubric,item_id,judge_score,reference_score\n");
    for (r, (o, s)) in offsets.iter().zip(sd).enumerate() {
        for i in 0..BATCH {
            let j = score(i, rng);
            let y = (j + o + s * (1.0 - SHARE).sqrt() * rng.next()).clamp(1.0, 5.0);
            csv.push_str(&format!("j1,r{r:02},{tag}-{i},{j},{y}\n"));
        }
    }
    csv
}

/// Per rubric, the labeller's offset (in units of the rubric's sd) before upload `b`: a new
/// labeller every [`PER_LABELLER`] uploads, each rubric's turns starting at its own phase.
fn offsets(b: usize, current: &mut [f64], rng: &mut Normals) {
    for (r, o) in current.iter_mut().enumerate() {
        if b == 0 || (b + r).is_multiple_of(PER_LABELLER) {
            *o = SHARE.sqrt() * rng.next();
        }
    }
}

async fn posted(app: &TestApp, csv: &str) {
    let res = app.csv("/v1/anchors", csv).await;
    assert_eq!(res.status, 200, "{}", res.body);
}

/// The sd at which references around judge scores [`SCORES`] miss the bands `bands` (one per
/// score) at rate `bound` on average.
fn sd_at(bound: f64, bands: &[(f64, f64)]) -> f64 {
    let rate = |sd: f64| {
        SCORES
            .iter()
            .zip(bands)
            .map(|(j, (lo, hi))| normal_cdf((lo - j) / sd) + 1.0 - normal_cdf((hi - j) / sd))
            .sum::<f64>()
            / SCORES.len() as f64
    };
    let (mut lo, mut hi) = (0.01, 5.0);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if rate(mid) < bound {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// 60 rubrics trained on 24 uploads of 50 anchors each, then watched over 5,000 anchors (100
/// uploads of 50), the labeller naming no rater and changing every five uploads, the references'
/// spread set so that each rubric's anchors miss its version's band at its version's miss-rate
/// bound. The chain that expected an upload from the one before alone alarmed in 10 of 60 in
/// the review's replay; with five uploads' wealth capped together and the next expected from
/// the last four, 3 of 60 (11 of 240 with 240 rubrics); with the training uploads' misses
/// counted against bands made without their labeller's reach, bursts giving back what they
/// won and an exact cap, 1 of 60 (2 of 240). Issue 85 asks for at most 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_uploads_of_one_unnamed_labeller_seldom_alarm_a_healthy_cell() {
    let app = TestApp::new(Backend::Sqlite).await;
    let mut rng = Normals(0x4c_61_62_65);
    let mut current = vec![0.0; RUBRICS];
    let training_sd = vec![SD; RUBRICS];
    for b in 0..24 {
        offsets(b, &mut current, &mut rng);
        let scaled: Vec<f64> = current.iter().map(|o| o * SD).collect();
        let spread = |_: usize, rng: &mut Normals| 2.0 + 2.0 * rng.uniform();
        posted(
            &app,
            &upload(&format!("t{b}"), (&scaled, &training_sd), spread, &mut rng),
        )
        .await;
        // Each upload's anchors share its time in the store: keep the uploads apart.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let job = finished_within(
        &app,
        &train(&app, "j1", json!({"method": "identity"})).await,
        Duration::from_secs(300),
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // Each rubric's version: its bound, and its bands at the watched judge scores.
    let list = app.get("/v1/cells/j1/r00/calibrators").await;
    assert_eq!(list.status, 200, "{}", list.body);
    let mut sd = Vec::with_capacity(RUBRICS);
    for r in 0..RUBRICS {
        let rubric = format!("r{r:02}");
        let list = app.get(&format!("/v1/cells/j1/{rubric}/calibrators")).await;
        let bound = list.body["versions"][0]["intervals"]["miss_bound"]
            .as_f64()
            .unwrap_or_else(|| panic!("{}", list.body));
        let res = correct(
            &app,
            json!({"judge": "j1", "rubric": rubric, "scores": SCORES}),
        )
        .await;
        assert_eq!(res.status, 200, "{}", res.body);
        let bands: Vec<(f64, f64)> = res.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let band = &x["predictive"];
                (band[0].as_f64().unwrap(), band[1].as_f64().unwrap())
            })
            .collect();
        sd.push(sd_at(bound, &bands));
    }

    for b in 0..100 {
        offsets(b, &mut current, &mut rng);
        let scaled: Vec<f64> = current.iter().zip(&sd).map(|(o, s)| o * s).collect();
        let at = |i: usize, _: &mut Normals| SCORES[i % SCORES.len()];
        posted(
            &app,
            &upload(&format!("w{b}"), (&scaled, &sd), at, &mut rng),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let text = metrics(&app).await;
    let alarmed: Vec<usize> = (0..RUBRICS)
        .filter(|r| {
            let name = format!("judgecal_drift_alarm{{judge=\"j1\",rubric=\"r{r:02}\"}}");
            metric(&text, &name) == Some(1.0)
        })
        .collect();
    let checked = (0..RUBRICS)
        .filter_map(|r| {
            let name = format!("judgecal_drift_anchors{{judge=\"j1\",rubric=\"r{r:02}\"}}");
            metric(&text, &name)
        })
        .collect::<Vec<_>>();
    eprintln!(
        "five uploads a labeller, not named: {} of {RUBRICS} healthy cells alarmed ({alarmed:?})",
        alarmed.len()
    );
    assert_eq!(checked, vec![5000.0; RUBRICS]);
    assert!(alarmed.len() <= 2, "{alarmed:?}");
}
