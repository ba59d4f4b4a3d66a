//! Two judgecal processes (the real binary, started as operators start it) on one Postgres
//! database, talking HTTP over loopback. While labelling clients keep uploading through both:
//! a training job running in one is finished by the other after that one is killed with
//! SIGKILL; every job runs exactly once; an activation through one is served by the other
//! within seconds; and every anchor either process acknowledged is stored. A job read as
//! `succeeded` through either process is served by that process at once.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;

/// One `judgecal serve` process on its own loopback port.
struct Replica {
    child: Child,
    base: String,
}

impl Replica {
    /// Starts the binary on `database` and waits until it answers /readyz.
    async fn start(database: &str) -> Self {
        Self::start_with(database, &[]).await
    }

    /// As `start`, with settings (`JUDGECAL__…` variables) over the test's own.
    async fn start_with(database: &str, settings: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_judgecal"))
            .arg("serve")
            .env("JUDGECAL__DATABASE__URL", database)
            .env("JUDGECAL__SERVER__BIND", format!("127.0.0.1:{port}"))
            .env("JUDGECAL__AUTH__DISABLED", "true")
            // A short lease, so a dead process's job moves on within seconds.
            .env("JUDGECAL__JOBS__LEASE_SECS", "2")
            .env("JUDGECAL__JOBS__POLL_MILLIS", "100")
            .env("JUDGECAL__CALIBRATORS__REFRESH_MILLIS", "300")
            .env("JUDGECAL__LOG__LEVEL", "error")
            .envs(settings.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .expect("the judgecal binary starts");
        let replica = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(res) = client.get(replica.url("/readyz")).send().await
                && res.status() == 200
            {
                return replica;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "replica on port {port} never became ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn kill(&mut self) {
        // Child::kill sends SIGKILL: no shutdown hook runs, the lease is not given back.
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn send(client: &reqwest::Client, method: &str, url: String, body: Value) -> (u16, Value) {
    let req = match method {
        "GET" => client.get(url),
        _ => client.post(url).json(&body),
    };
    let res = req.send().await.expect("the replica answers");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// `n` anchors of y = 0.5 + 0.8·j + a fixed noise pattern, ids `{prefix}-{i}`.
fn anchors(prefix: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % n) as f64 / n as f64;
            let noise = ((i * 104_729) % 1000) as f64 / 1000.0 - 0.5;
            json!({
                "item_id": format!("{prefix}-{i:05}"),
                "judge_score": j,
                "reference_score": (0.5 + 0.8 * j + noise).clamp(1.0, 5.0),
            })
        })
        .collect()
}

async fn queue(client: &reqwest::Client, via: &Replica, judge: &str, body: Value) -> String {
    let (status, job) = send(
        client,
        "POST",
        via.url(&format!("/v1/judges/{judge}/calibrations")),
        body,
    )
    .await;
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

/// Polls the job through `via` until `done` holds; panics after `limit`.
async fn wait_for(
    client: &reqwest::Client,
    via: &Replica,
    id: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let (status, job) =
            send(client, "GET", via.url(&format!("/v1/jobs/{id}")), json!({})).await;
        assert_eq!(status, 200, "{job}");
        if done(&job) {
            return job;
        }
        assert!(started.elapsed() < limit, "job is still {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn finished(job: &Value) -> bool {
    ["succeeded", "failed", "cancelled"].contains(&job["state"].as_str().unwrap_or(""))
}

/// Keeps uploading 20-anchor batches for cell (`judge`, "load") through `base` until `stop`;
/// returns the item ids of every batch the replica acknowledged with 200. A batch whose
/// request failed (its replica was killed) is not acknowledged.
async fn keep_uploading(base: String, judge: String, stop: Arc<AtomicBool>) -> BTreeSet<String> {
    let client = reqwest::Client::new();
    let mut acknowledged = BTreeSet::new();
    let mut batch = 0;
    while !stop.load(Ordering::Relaxed) {
        let rows = anchors(&format!("b{batch}"), 20);
        batch += 1;
        let res = client
            .post(format!("{base}/v1/anchors"))
            .json(&json!({"judge": judge, "rubric": "load", "anchors": rows}))
            .send()
            .await;
        match res {
            Ok(res) if res.status() == 200 => {
                acknowledged.extend(
                    rows.iter()
                        .map(|r| r["item_id"].as_str().unwrap().to_owned()),
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(res) => panic!("upload refused: {} {:?}", res.status(), res.text().await),
            // The replica is gone; nothing was acknowledged.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    acknowledged
}

/// Every item id of a cell, read through `via` page by page.
async fn stored_ids(client: &reqwest::Client, via: &Replica, judge: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/cells/{judge}/load/anchors?limit=1000");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = send(client, "GET", via.url(&path), json!({})).await;
        assert_eq!(status, 200, "{page}");
        ids.extend(
            page["anchors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["item_id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return ids,
        }
    }
}

/// The process that holds a running job's lease: workers are named `{pid}-…`.
async fn lease_owner_pid(database: &str, id: &str) -> u32 {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(database).await.unwrap();
    let owner: String = sqlx::query_scalar("SELECT lease_owner FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    owner.split('-').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_survive_a_sigkill_and_lose_no_acknowledged_anchor() {
    let database = crate::common::fresh_postgres_database().await;
    let a = Replica::start(&database).await;
    let b = Replica::start(&database).await;
    let client = reqwest::Client::new();

    // Labelling clients upload through both replicas for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let via_a = tokio::spawn(keep_uploading(a.base.clone(), "via-a".into(), stop.clone()));
    let via_b = tokio::spawn(keep_uploading(b.base.clone(), "via-b".into(), stop.clone()));

    // A flow job long enough to be killed in the middle.
    let (status, body) = send(
        &client,
        "POST",
        a.url("/v1/anchors"),
        json!({"judge": "slow", "rubric": "coherence", "anchors": anchors("s", 300)}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let slow = queue(
        &client,
        &a,
        "slow",
        json!({"method": "flow", "options": {"preset": "paper", "epochs": 400, "learning_rate": 0.01}}),
    )
    .await;
    let running = wait_for(&client, &a, &slow, Duration::from_secs(60), |j| {
        j["state"] == "running" && j["progress"].as_f64().unwrap_or(0.0) > 0.05
    })
    .await;
    assert_eq!(running["attempts"], 1, "{running}");
    let holder = lease_owner_pid(&database, &slow).await;
    let (mut dead, survivor) = if holder == a.child.id() {
        (a, b)
    } else {
        assert_eq!(holder, b.child.id(), "the job runs in neither replica");
        (b, a)
    };
    dead.kill();
    // The survivor takes the job over once the 2 s lease has run out and finishes it.
    let job = wait_for(&client, &survivor, &slow, Duration::from_secs(90), finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 2, "{job}");
    assert_eq!(job["versions"][0]["version"], 1, "{job}");

    // The killed replica comes back, as an orchestrator would restart it.
    let revived = Replica::start(&database).await;
    let uploads_revived = tokio::spawn(keep_uploading(
        revived.base.clone(),
        "via-revived".into(),
        stop.clone(),
    ));

    // Jobs queued alternately through both run exactly once each.
    for judge in ["j1", "j2"] {
        let (status, body) = send(
            &client,
            "POST",
            survivor.url("/v1/anchors"),
            json!({"judge": judge, "rubric": "coherence", "anchors": anchors(judge, 80)}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let mut ids = Vec::new();
    for round in 0..2 {
        for judge in ["j1", "j2"] {
            let via = if ids.len() % 2 == 0 {
                &survivor
            } else {
                &revived
            };
            let options = json!({"warmup": 200, "draws": 400, "seed": round});
            ids.push(
                queue(
                    &client,
                    via,
                    judge,
                    json!({"method": "bayes", "options": options}),
                )
                .await,
            );
        }
    }
    for id in &ids {
        let job = wait_for(&client, &revived, id, Duration::from_secs(90), finished).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        assert_eq!(job["attempts"], 1, "ran more than once: {job}");
    }
    for judge in ["j1", "j2"] {
        let (_, list) = send(
            &client,
            "GET",
            survivor.url(&format!("/v1/cells/{judge}/coherence/calibrators")),
            json!({}),
        )
        .await;
        let numbers: Vec<i64> = list["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_i64().unwrap())
            .collect();
        assert_eq!(numbers, [2, 1], "{list}");
    }

    // Version 1 activated through one replica is served by the other within seconds.
    let (status, body) = send(
        &client,
        "POST",
        revived.url("/v1/cells/j1/coherence/calibrators/1/activate?force=true"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let activated = Instant::now();
    loop {
        let (status, res) = send(
            &client,
            "POST",
            survivor.url("/v1/correct"),
            json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
        )
        .await;
        assert_eq!(status, 200, "{res}");
        if res["version"] == 1 {
            break;
        }
        assert!(
            activated.elapsed() < Duration::from_secs(3),
            "the other replica still serves {res}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Every acknowledged anchor is stored, including those acknowledged by the killed replica
    // moments before it died.
    stop.store(true, Ordering::Relaxed);
    for (judge, uploads) in [
        ("via-a", via_a),
        ("via-b", via_b),
        ("via-revived", uploads_revived),
    ] {
        let acknowledged = uploads.await.unwrap();
        assert!(
            !acknowledged.is_empty(),
            "no upload through {judge} succeeded"
        );
        let stored = stored_ids(&client, &revived, judge).await;
        let lost: Vec<&String> = acknowledged.difference(&stored).collect();
        assert!(
            lost.is_empty(),
            "{judge}: {} acknowledged anchors lost: {lost:?}",
            lost.len()
        );
    }
    drop(dead);
}

/// A client that polls a job through a replica that did not run it, then corrects at once,
/// gets what the job made, for untagged and versioned requests. That replica's refresh timer
/// is an hour here, so only the job read can have brought the versions: before it did, the
/// client got a 404 ("no calibration") after the first job and the previous version after the
/// others. The same holds in the process that ran the job, which loads its versions only after
/// the commit that makes the job read `succeeded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_read_as_succeeded_is_served_by_the_process_that_answered() {
    let database = crate::common::fresh_postgres_database().await;
    let runner = Replica::start(&database).await;
    let server = Replica::start_with(
        &database,
        &[
            ("JUDGECAL__JOBS__ENABLED", "false"),
            ("JUDGECAL__CALIBRATORS__REFRESH_MILLIS", "3600000"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let rows = anchors("late", 80);
    let rescored: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["judge_score"] = json!(r["judge_score"].as_f64().unwrap() - 0.5);
            r
        })
        .collect();
    let upload = |judge_version: Option<&str>, rows: &[Value]| {
        let mut body = json!({"judge": "late", "rubric": "coherence", "anchors": rows});
        if let Some(v) = judge_version {
            body["judge_version"] = json!(v);
        }
        send(&client, "POST", server.url("/v1/anchors"), body)
    };
    let (status, res) = upload(None, &rows).await;
    assert_eq!(status, 200, "{res}");
    let trainings = [
        (json!({"method": "isotonic"}), None),
        (json!({"method": "quantile_map"}), None),
        (
            json!({"method": "isotonic", "judge_version": "v2"}),
            Some("v2"),
        ),
    ];
    for (number, (training, judge_version)) in (1..).zip(trainings) {
        if let Some(v) = judge_version {
            let (status, res) = upload(Some(v), &rescored).await;
            assert_eq!(status, 200, "{res}");
        }
        let id = queue(&client, &server, "late", training).await;
        let job = wait_for(&client, &server, &id, Duration::from_secs(60), finished).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        let mut body = json!({"judge": "late", "rubric": "coherence", "scores": [3.0]});
        if let Some(v) = judge_version {
            body["judge_version"] = json!(v);
        }
        let (status, res) = send(&client, "POST", server.url("/v1/correct"), body).await;
        assert_eq!(status, 200, "job {number}: {res}");
        assert_eq!(res["version"], number, "job {number}: {res}");
        assert!(res["warnings"] == json!([]), "job {number}: {res}");
    }
    drop(runner);
}

/// A process killed with SIGKILL at random moments while a client keeps uploading to a watched
/// cell (issue 87): an upload commits its anchors and queues their drift check in one
/// transaction, so a kill between the commit and the check leaves the check queued, and the
/// next start takes it. Afterwards nothing is left queued, and every anchor stored after the
/// training was checked exactly once, in one check per stored batch.
async fn every_stored_batch_is_checked_once_across_sigkills(database: &str, kills: usize) {
    let client = reqwest::Client::new();
    let mut replica = Replica::start(database).await;
    let (status, res) = send(
        &client,
        "POST",
        replica.url("/v1/anchors"),
        json!({"judge": "watched", "rubric": "load", "anchors": anchors("seed", 200)}),
    )
    .await;
    assert_eq!(status, 200, "{res}");
    let id = queue(&client, &replica, "watched", json!({"method": "identity"})).await;
    let job = wait_for(&client, &replica, &id, Duration::from_secs(60), finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(database).await.unwrap();
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let mut left_queued = 0;
    // A seeded stream of moments to kill at, 50 to 650 ms into each round.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..kills {
        let stop = Arc::new(AtomicBool::new(false));
        let uploader = tokio::spawn(keep_uploading_from(
            replica.base.clone(),
            "watched".into(),
            round,
            stop.clone(),
        ));
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        tokio::time::sleep(Duration::from_millis(50 + state % 600)).await;
        replica.kill();
        stop.store(true, Ordering::Relaxed);
        uploader.await.unwrap();
        left_queued += count("SELECT COUNT(*) FROM pending_checks")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        // The restart checks what the killed process stored and did not check.
        replica = Replica::start(database).await;
    }
    eprintln!(
        "{kills} kills: {left_queued} stored batches were left unchecked by a kill and checked by the restart"
    );
    let pending = count("SELECT COUNT(*) FROM pending_checks")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let stored = count("SELECT COUNT(*) FROM anchors WHERE item_id NOT LIKE 'seed-%'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let checked = count("SELECT CAST(COALESCE(SUM(checked), 0) AS BIGINT) FROM anchor_coverage")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let checks = count("SELECT COUNT(*) FROM anchor_coverage")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let batches = stored_ids(&client, &replica, "watched")
        .await
        .iter()
        .filter(|id| !id.starts_with("seed-"))
        .map(|id| id.rsplit_once('-').unwrap().0.to_owned())
        .collect::<BTreeSet<_>>()
        .len() as i64;
    assert_eq!(pending, 0, "checks left queued after the restart");
    assert!(stored > 0, "no batch was stored between the kills");
    assert_eq!(checked, stored, "anchors checked against anchors stored");
    assert_eq!(checks, batches, "checks against batches stored");
}

/// As `keep_uploading` to cell (`judge`, "load"), with batch ids of `round` (so each round
/// stores new items).
async fn keep_uploading_from(base: String, judge: String, round: usize, stop: Arc<AtomicBool>) {
    let client = reqwest::Client::new();
    let mut batch = 0;
    while !stop.load(Ordering::Relaxed) {
        let rows = anchors(&format!("r{round}b{batch}"), 20);
        batch += 1;
        let sent = client
            .post(format!("{base}/v1/anchors"))
            .json(&json!({"judge": judge, "rubric": "load", "anchors": rows}))
            .send()
            .await;
        match sent {
            Ok(res) => assert!(res.status().as_u16() < 500, "{}", res.status()),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_batches_are_checked_once_across_sigkills_on_postgres() {
    let database = crate::common::fresh_postgres_database().await;
    every_stored_batch_is_checked_once_across_sigkills(&database, kills()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_batches_are_checked_once_across_sigkills_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}/judgecal.db", dir.path().display());
    every_stored_batch_is_checked_once_across_sigkills(&database, kills()).await;
}

/// Kills per backend: 8 in the suite, `JUDGECAL_TEST_KILLS` for a longer replay.
fn kills() -> usize {
    std::env::var("JUDGECAL_TEST_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(8)
}
