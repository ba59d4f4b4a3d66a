//! The `judgecal-study` binary as a researcher runs it: a study prints its tables, writes its
//! JSON and figures, and refuses bad arguments before it runs.

use std::process::Command;

fn study(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_judgecal-study"));
    cmd.current_dir(dir);
    cmd
}

#[test]
fn the_help_lists_the_studies() {
    let dir = tempfile::tempdir().unwrap();
    let out = study(dir.path()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for name in judgecal::cli::MOVED_TO_STUDY {
        assert!(
            help.contains(&format!("  {name} ")),
            "{name} missing:\n{help}"
        );
    }
    assert!(!help.contains("  serve "), "{help}");
}

/// Every study is one the server's binary points to when someone runs it there.
#[test]
fn the_server_points_every_study_here() {
    use clap::CommandFactory;
    let studies: Vec<String> = judgecal_study::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .filter(|n| n != "help")
        .collect();
    assert!(!studies.is_empty());
    for name in &studies {
        assert!(
            judgecal::cli::moved_to_study(Some(name))
                .is_some_and(|hint| hint.contains(&format!("judgecal-study {name}"))),
            "{name}"
        );
    }
    assert_eq!(studies.len(), judgecal::cli::MOVED_TO_STUDY.len());
}

#[test]
fn the_experiment_prints_its_tables_and_writes_json_and_figures() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("exp.json");
    let figures = dir.path().join("figs");
    let out = study(dir.path())
        .args(["experiment", "--methods", "raw,bayes,flow,quantile_map"])
        .args(["--pool", "300", "--budgets", "50,300", "--sweep", "100"])
        .args(["--seeds", "2", "--flow-epochs", "30"])
        .arg("--json")
        .arg(&json)
        .arg("--figures")
        .arg(&figures)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for text in [
        "Table 1",
        "Table 2",
        "Bayesian linear",
        "neural-ODE flow",
        "quantile map",
    ] {
        assert!(stdout.contains(text), "{text} missing:\n{stdout}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Raw plus 3 methods at 2 budgets; Table 2 the same 7 rows over 2 seeds.
    assert_eq!(report["table1"].as_array().unwrap().len(), 7);
    let table2 = report["table2"].as_array().unwrap();
    assert_eq!(table2.len(), 7);
    assert!(table2.iter().all(|r| r["seeds"] == 2));
    for n in 1..=4 {
        for ext in ["svg", "png"] {
            let found = std::fs::read_dir(&figures).unwrap().any(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.starts_with(&format!("figure{n}_")) && name.ends_with(ext)
            });
            assert!(found, "figure {n} .{ext} missing");
        }
    }

    // A budget larger than the pool is refused before anything runs.
    let out = study(dir.path())
        .args(["experiment", "--pool", "100", "--budgets", "500"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("budget 500"));
}
