//! The report pages (issue 58): the key from a cookie, every cell listed, and a cell page
//! printing the numbers the agreement report gives for the same cell. The browser test
//! (clients/python/tests/test_pages.py) loads them in headless Chromium.

use axum::body::Body;
use serde_json::json;

use super::*;
use crate::common::{Backend, TestApp, assert_error};

/// A figure as the pages print it.
fn printed(f: &serde_json::Value) -> String {
    let v = |x: &serde_json::Value| format!("{:.3}", x.as_f64().unwrap());
    format!(
        "{} [{}, {}]",
        v(&f["value"]),
        v(&f["interval"][0]),
        v(&f["interval"][1])
    )
}

async fn the_pages_show_the_apis_numbers(backend: Backend) {
    let app = TestApp::new(backend).await;
    let rows: Vec<serde_json::Value> = anchors(200, 0.5, 0.8)
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r["group"] = json!(if i % 2 == 0 { "sys-a" } else { "sys-b" });
            if i == 0 {
                // Item ids may hold markup: the page must print it, not run it.
                r["item_id"] = json!("<b>planted</b>");
                r["reference_score"] = json!(5.0);
            }
            r
        })
        .collect();
    stored(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "anchors": rows}),
    )
    .await;
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // No key: refused. The key in the cookie a browser sends: served.
    let bare = app
        .send(
            axum::http::Request::get("/ui/")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&bare, 401, "unauthorized");
    let index = app
        .send(
            axum::http::Request::get("/ui/")
                .header(
                    "cookie",
                    format!("theme=dark; judgecal_key={}", app.admin_key),
                )
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(index.status, 200, "{}", index.body);
    assert!(
        index.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = index.body.as_str().unwrap();
    assert!(html.contains("href=\"/ui/cells/j1/coherence\""), "{html}");
    assert!(
        html.contains("<td>bayes</td>") && html.contains("<td>quiet</td>"),
        "{html}"
    );

    let page = app.get("/ui/cells/j1/coherence").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let html = page.body.as_str().unwrap();
    let report = app.get("/v1/cells/j1/coherence/agreement").await.body;
    for side in ["raw", "corrected"] {
        for name in ["pearson", "spearman", "kendall"] {
            let f = printed(&report[side][name]);
            assert!(html.contains(&f), "{side} {name}: {f} missing");
        }
    }
    let bias = printed(&report["bias"]["corrected"]);
    assert!(html.contains(&bias), "{bias} missing");
    // The picture is inline, the planted miss listed with its id escaped, and no script or
    // external asset.
    assert!(html.contains("<svg") && !html.contains("<?xml"));
    assert!(html.contains("&lt;b&gt;planted&lt;/b&gt;") && !html.contains("<b>planted"));
    assert!(html.contains("<td>sys-a</td>"), "{html}");
    assert!(!html.contains("<script") && !html.contains("src=\"http"));
    let missing = app.get("/ui/cells/j1/nothing").await;
    assert_error(&missing, 404, "not_found");

    // A trained pairwise cell: its version and the calibrated preference it chose, on the
    // index and its page, and no agreement report or picture of a cell of scores.
    let labelled = crate::ratings::run(crate::ratings::world(400, 10_000, 400, 7));
    let res = app.json("POST", "/v1/comparisons", &labelled).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let job = finished(
        &app,
        &train(&app, "pair-judge", json!({"method": "auto"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let index = app.get("/ui/").await.body.as_str().unwrap().to_owned();
    let row = index
        .split("<tr>")
        .find(|r| r.contains("/ui/cells/pair-judge/overall"))
        .unwrap_or_else(|| panic!("no pairwise row in {index}"));
    assert!(
        row.contains("<td>1</td>") && row.contains("both orders"),
        "{row}"
    );
    let page = app
        .get("/ui/cells/pair-judge/overall")
        .await
        .body
        .as_str()
        .unwrap()
        .to_owned();
    assert!(page.contains("<td>serves</td>"), "{page}");
    assert!(
        !page.contains("No agreement report") && !page.contains("No picture"),
        "{page}"
    );
}

on_both_backends!(the_pages_show_the_apis_numbers);
