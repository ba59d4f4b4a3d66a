//! The binary as an operator runs it: configuration errors, key creation, the demo over a real
//! socket, graceful shutdown on SIGTERM, and the committed OpenAPI document.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn judgecal(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_judgecal"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("JUDGECAL_ENV")
        .env(
            "JUDGECAL__DATABASE__URL",
            format!("sqlite://{}/jc.db", dir.display()),
        );
    cmd
}

#[test]
fn openapi_yaml_matches_the_code() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml at the top level");
    let generated = judgecal::http::openapi::yaml();
    assert!(
        committed == generated,
        "openapi.yaml differs from the code's spec: run `cargo run -- openapi > openapi.yaml`"
    );
}

/// One vocabulary of warnings: every code the statistics can give is in the OpenAPI
/// document's `WarningCode` and in docs/api.md's table, and nothing else is.
#[test]
fn every_warning_code_is_documented_once() {
    use judgecal_stats::warning::CODES;
    let spec = serde_json::to_value(judgecal::http::openapi::document()).unwrap();
    let listed: Vec<&str> = spec["components"]["schemas"]["WarningCode"]["enum"]
        .as_array()
        .expect("WarningCode is an enum")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let codes: Vec<&str> = CODES.iter().map(|(_, name)| *name).collect();
    assert_eq!(listed, codes);
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md"))
        .expect("docs/api.md");
    let table = &docs[docs.find("## Warnings").expect("a Warnings section")..];
    for code in codes {
        assert!(
            table.contains(&format!("`{code}`")),
            "{code} is not in docs/api.md's table of warnings"
        );
    }
}

#[test]
fn a_bad_setting_stops_the_process_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = judgecal(dir.path())
        .env("JUDGECAL__SERVER__BIND", "nowhere")
        .arg("migrate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.bind"), "{err}");

    let out = judgecal(dir.path())
        .env("JUDGECAL__AUTH__DISABLED", "maybe")
        .arg("migrate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("auth.disabled"), "{err}");

    let out = judgecal(dir.path())
        .env("JUDGECAL_ENV", "nonexistent")
        .arg("migrate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nonexistent.toml"));
}

#[tokio::test]
async fn a_created_key_opens_the_demo_and_sigterm_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = judgecal(dir.path())
        .args(["keys", "create", "--scope", "ingest,correct"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(key.starts_with("jc_"));

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = judgecal(dir.path())
        .env("JUDGECAL__SERVER__BIND", format!("127.0.0.1:{port}"))
        .args(["serve", "--demo"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .ok()
        != Some(200)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "service did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The demo is loaded before the service listens.
    let res = client.get(format!("{base}/v1/cells")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let cells: serde_json::Value = client
        .get(format!("{base}/v1/cells"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cells = cells["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 30, "5 HANNA judges x 6 rubrics");
    assert!(
        cells
            .iter()
            .all(|c| c["anchor_count"].as_i64().unwrap() > 900)
    );

    // The demo trains every judge in the background; a correction with intervals follows.
    let started = Instant::now();
    let body = serde_json::json!({"judge": "ChatGPT", "rubric": "coherence", "scores": [2.0, 4.5]});
    let corrected: serde_json::Value = loop {
        let res = client
            .post(format!("{base}/v1/correct"))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .await
            .unwrap();
        if res.status() == 200 {
            break res.json().await.unwrap();
        }
        assert_eq!(res.status(), 404, "only 'not trained yet' is expected");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the demo never served a correction"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(corrected["version"], 1);
    let r = &corrected["results"][1];
    let c = r["corrected"].as_f64().unwrap();
    assert!(r["predictive"][0].as_f64().unwrap() < c && c < r["predictive"][1].as_f64().unwrap());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_help_lists_the_servers_commands_and_no_study() {
    let dir = tempfile::tempdir().unwrap();
    let out = judgecal(dir.path()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .expect("a command list")
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        commands,
        [
            "serve", "migrate", "openapi", "evaluate", "keys", "webhooks", "help"
        ],
        "{help}"
    );
}

#[test]
fn a_study_run_under_the_servers_binary_names_the_study_binary() {
    let dir = tempfile::tempdir().unwrap();
    let out = judgecal(dir.path())
        .args(["experiment", "--seeds", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("judgecal-study experiment"), "{err}");
    // Anything else is clap's own answer.
    let out = judgecal(dir.path()).arg("experimnt").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("judgecal-study"));
}

#[test]
fn evaluate_cross_validates_every_cell_and_names_a_bad_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anchors.csv");
    let mut csv = "judge,rubric,item_id,judge_score,reference_score\n".to_owned();
    for i in 0..80 {
        let j = 1.0 + (i % 40) as f64 / 10.0;
        // References with a little noise (±0.15): on an exact line σ's posterior piles up at
        // 0, where NUTS needs the longest trajectories, and this test spent 90 s there.
        let noise = 0.3 * (((i * 7) % 11) as f64 / 10.0 - 0.5);
        csv += &format!("g,fluency,i{i},{j},{}\n", (0.8 + 0.8 * j + noise).min(5.0));
        csv += &format!("g,depth,i{i},{j},{}\n", if i % 3 == 0 { 5.0 } else { j });
    }
    std::fs::write(&path, &csv).unwrap();
    let out = judgecal(dir.path())
        .args([
            "evaluate",
            "--methods",
            "raw,quantile_map,bayes",
            "--anchors",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // Two cells x three methods, one winner each.
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("g ")).count(),
        6,
        "{stdout}"
    );
    assert_eq!(stdout.matches(" * ").count(), 2, "{stdout}");
    // On the ceiling cell the raw judge wins.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("depth") && l.contains("identity *")),
        "{stdout}"
    );

    std::fs::write(&path, csv + "g,fluency,bad,abc,3\n").unwrap();
    let out = judgecal(dir.path())
        .args(["evaluate", "--anchors"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("row 161") && err.contains("judge_score"),
        "{err}"
    );
}

#[test]
fn keys_are_listed_and_revoked_by_name_or_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let create = |name: &str| {
        let out = judgecal(dir.path())
            .args(["keys", "create", "--scope", "correct", "--name", name])
            .args(["--expires-in-days", "30"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let (platform, labellers) = (create("platform"), create("labellers"));
    let list = || {
        let out = judgecal(dir.path())
            .args(["keys", "list"])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = list();
    // Prefixes and names, never the keys themselves.
    assert!(
        listed.contains(&platform[..11]) && listed.contains("labellers"),
        "{listed}"
    );
    assert!(!listed.contains(&platform) && !listed.contains(&labellers));
    let row = |listed: &str, prefix: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap()
            .split('\t')
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(row(&listed, &platform[..11])[5], "-", "not revoked yet");
    assert_ne!(row(&listed, &platform[..11])[4], "-", "it expires");
    // By name...
    let out = judgecal(dir.path())
        .args(["keys", "revoke", "platform"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&platform[..11]));
    // ...and by prefix; a second revocation names nothing live.
    let out = judgecal(dir.path())
        .args(["keys", "revoke", &labellers[..11]])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = judgecal(dir.path())
        .args(["keys", "revoke", "platform"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no live key"));
    let listed = list();
    for key in [&platform, &labellers] {
        assert_ne!(row(&listed, &key[..11])[5], "-", "{listed}");
    }
}
