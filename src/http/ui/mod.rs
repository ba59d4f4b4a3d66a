//! Report pages for people (issue 58): `GET /ui/` lists every cell and panel with its status,
//! `GET /ui/cells/{judge}/{rubric}` shows one cell: its calibration picture, the agreement
//! report's tables and its versions. Server-rendered HTML with inline SVG and inline CSS, no
//! script and no external asset, so a page works offline and behind a proxy. The numbers are
//! the API's, formatted to three decimals.
//!
//! A browser cannot send an `Authorization` header by itself: where API keys are on, the pages
//! also take the key from a `judgecal_key` cookie.

use std::fmt::Write;

use axum::extract::{FromRequestParts, State};
use axum::http::header::{AUTHORIZATION, COOKIE};
use axum::http::request::Parts;
use axum::response::Html;

use super::AppState;
use super::error::ApiError;
use super::extract::{Path, cell_key};
use crate::domain::CellKey;
use crate::domain::CellSummary;
use crate::domain::calibration::CalibratorVersion;
use crate::error::Error;
use crate::service::agreement::AgreementQuery;
use crate::service::coverage::DriftEvidence;
use judgecal_stats::agreement::Figure;

mod agreement;

use agreement::report_html;

/// The cookie a browser sends the API key in.
pub const KEY_COOKIE: &str = "judgecal_key";

/// Disagreements a cell page lists.
const PAGE_TOP: usize = 10;

/// A caller with any valid key, from the `Authorization` header or the `judgecal_key` cookie.
pub struct Reader(crate::auth::Principal);

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let cookie = parts
            .headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .find(|(name, _)| *name == KEY_COOKIE)
            .map(|(_, key)| format!("Bearer {key}"));
        let principal = state
            .service
            .operations()
            .authorize(header.or(cookie).as_deref(), None)
            .await?;
        tracing::Span::current().record("key", principal.label());
        Ok(Reader(principal))
    }
}

/// `s` with HTML's five special characters escaped.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A figure as the pages print it: its value and interval to three decimals, `–` where none.
fn num(v: f64) -> String {
    format!("{v:.3}")
}

fn figure(f: Option<&Figure>) -> String {
    match f {
        None => "–".to_owned(),
        Some(Figure {
            value,
            interval: Some([lo, hi]),
        }) => format!("{} [{}, {}]", num(*value), num(*lo), num(*hi)),
        Some(Figure { value, .. }) => num(*value),
    }
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;\
padding:0 1rem;color:#1d1d1f}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}\
table{border-collapse:collapse;margin:.5rem 0}th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd;\
text-align:right}th:first-child,td:first-child{text-align:left}thead th{background:#f4f4f6}\
.bad{color:#b00020;font-weight:600}.note{color:#555;max-width:60rem}svg{max-width:100%;height:auto}\
a{color:#0b57d0}";

/// A whole page.
fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t} · judgecal</title><style>{STYLE}</style></head><body>{body}</body></html>",
        t = esc(title)
    ))
}

/// A table of `head` and `rows` (each cell already HTML).
fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><thead><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{c}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

fn cell_link(key: &CellKey) -> String {
    format!(
        "<a href=\"/ui/cells/{j}/{r}\">{j} / {r}</a>",
        j = esc(key.judge.as_str()),
        r = esc(key.rubric.as_str())
    )
}

/// Every cell and panel with its status.
pub async fn index(State(state): State<AppState>, _r: Reader) -> Result<Html<String>, ApiError> {
    let service = &state.service;
    let mut rows = Vec::new();
    for c in service.scores().cells().await? {
        rows.push(cell_row(service, &c).await?);
    }
    let panels: Vec<Vec<String>> = service
        .panels()
        .list()
        .await?
        .iter()
        .map(|p| {
            let members: Vec<&str> = p.judges.iter().map(|j| j.as_str()).collect();
            vec![esc(p.name.as_str()), esc(&members.join(", "))]
        })
        .collect();
    let mut body = String::from("<h1>judgecal: cells</h1>");
    body.push_str(&table(
        &[
            "cell",
            "anchors",
            "active version",
            "method",
            "β canary",
            "held-out band coverage",
            "drift alarm",
            "judge versions",
        ],
        &rows,
    ));
    body.push_str("<h2>Panels</h2>");
    if panels.is_empty() {
        body.push_str("<p class=\"note\">No panels.</p>");
    } else {
        body.push_str(&table(&["panel", "members"], &panels));
    }
    body.push_str(
        "<p class=\"note\">Drift alarms and the review rate are on <code>/metrics</code>; \
         <code>judgecal openapi</code> prints the API's description.</p>",
    );
    Ok(page("cells", &body))
}

/// A cell's row of the index: its anchors or comparisons, the version it serves and how, its
/// canary, band coverage, drift alarm and judge versions.
async fn cell_row(
    service: &crate::service::Service,
    c: &CellSummary,
) -> Result<Vec<String>, ApiError> {
    let versions = match service.versions().list(&c.key).await {
        Ok(v) => v,
        Err(Error::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let active = versions.iter().find(|v| v.active);
    // A pairwise cell's versions are its trained calibrated preferences: the newest serves.
    // A pairwise panel's cell holds no comparisons of its own (its members do).
    let pairwise = if c.comparison_count > 0 || active.is_none() {
        service
            .pairwise()
            .preference_versions(&c.key)
            .await
            .ok()
            .and_then(|v| v.into_iter().next())
    } else {
        None
    };
    let judge_versions = service
        .versions()
        .judge_versions(&c.key)
        .await
        .map_or(0, |v| v.len());
    let canary = active.and_then(CalibratorVersion::beta).map(|b| b.canary);
    let coverage = active
        .and_then(|v| v.intervals.as_ref())
        .and_then(|i| i.held_out_coverage);
    // The drift alarm as a replay of the checks since the active version's activation.
    let drift = match service.operations().drift_evidence(&c.key).await {
        Ok(Some(e)) => e.path.last().map_or("–".to_owned(), |d| {
            if d.alarm {
                format!("<span class=\"bad\">raised</span> (e = {})", num(d.e_value))
            } else {
                format!("quiet (e = {})", num(d.e_value))
            }
        }),
        _ => "–".to_owned(),
    };
    Ok(vec![
        cell_link(&c.key),
        if let Some(p) = pairwise.as_ref().filter(|_| c.comparison_count == 0) {
            format!("{} comparisons (its members')", p.comparison_count)
        } else if c.comparison_count > 0 {
            format!("{} comparisons", c.comparison_count)
        } else {
            c.anchor_count.to_string()
        },
        match (&pairwise, active) {
            (Some(p), _) => p.version.to_string(),
            (None, Some(v)) => v.version.to_string(),
            (None, None) => "none".to_owned(),
        },
        match (&pairwise, active) {
            (Some(p), _) => esc(&p.report.chosen),
            (None, Some(v)) => v.method().as_str().to_owned(),
            (None, None) => "–".to_owned(),
        },
        match canary {
            Some(true) => "<span class=\"bad\">fired</span>".to_owned(),
            Some(false) => "quiet".to_owned(),
            None => "–".to_owned(),
        },
        coverage.map_or("–".to_owned(), |c| format!("{:.1}%", 100.0 * c)),
        drift,
        judge_versions.to_string(),
    ])
}

/// A cell's versions: each one's method, state, diagnostics, judge version, anchors and
/// held-out error.
fn versions_html(versions: &[CalibratorVersion]) -> String {
    let mut out = String::from("<h2>Versions</h2>");
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            vec![
                v.version.to_string(),
                v.method().as_str().to_owned(),
                if v.active { "active" } else { "" }.to_owned(),
                match &v.failure {
                    None => "passed".to_owned(),
                    Some(f) => format!("<span class=\"bad\">{}</span>", esc(f)),
                },
                esc(v.judge_version.as_ref().map_or("–", |j| j.as_str())),
                v.anchor_count.to_string(),
                v.evaluation.as_ref().map_or("–".to_owned(), |e| {
                    format!("{} → {}", num(e.raw.mae), num(e.calibrated.mae))
                }),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "version",
            "method",
            "state",
            "diagnostics",
            "judge version",
            "anchors",
            "held-out MAE raw → corrected",
        ],
        &rows,
    ));
    out
}

/// The drift alarm's evidence since the active version's activation, or why there is none.
async fn drift_section(service: &crate::service::Service, key: &CellKey) -> String {
    match service.operations().drift_evidence(key).await {
        Ok(Some(e)) => drift_html(&e),
        Ok(None) => {
            "<h2>Drift alarm</h2><p class=\"note\">No anchors have been checked against the active \
             version since it was activated: upload a labelled batch to watch it.</p>"
                .to_owned()
        }
        Err(e) => format!(
            "<p class=\"note\">No drift evidence: {}</p>",
            esc(&e.to_string())
        ),
    }
}

/// The judge versions a cell has seen, and the bridge from each to the next (the newest
/// `BRIDGE_ROWS`): how far the old calibration's corrected mean moved on the items both scored.
async fn bridges_html(service: &crate::service::Service, key: &CellKey) -> String {
    let mut versions = match service.versions().judge_versions(key).await {
        Ok(v) => v,
        Err(e) => {
            return format!(
                "<p class=\"note\">No judge versions: {}</p>",
                esc(&e.to_string())
            );
        }
    };
    if versions.len() < 2 {
        return String::new();
    }
    versions.sort_by_key(|v| v.anchors.first_at_ms);
    let mut out = String::from("<h2>Judge versions and bridges</h2>");
    let label =
        |v: Option<&crate::domain::JudgeVersion>| esc(v.map_or("(unversioned)", |j| j.as_str()));
    let seen: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            vec![
                label(v.anchors.judge_version.as_ref()),
                v.anchors.anchor_count.to_string(),
                v.calibrated.map_or("–".to_owned(), |c| c.to_string()),
            ]
        })
        .collect();
    out.push_str(&table(
        &["judge version", "anchors", "calibrated by version"],
        &seen,
    ));
    let mut rows = Vec::new();
    let from = versions.len().saturating_sub(BRIDGE_ROWS + 1);
    for pair in versions[from..].windows(2) {
        let (a, b) = (
            pair[0].anchors.judge_version.as_ref(),
            pair[1].anchors.judge_version.as_ref(),
        );
        let mut row = vec![format!("{} → {}", label(a), label(b))];
        match service.versions().bridge(key, a, b, None).await {
            Ok(answer) => {
                let br = &answer.bridge;
                row.extend([
                    br.items.to_string(),
                    br.raw.as_ref().map_or("–".to_owned(), |r| num(r.mean)),
                    br.corrected.as_ref().map_or("–".to_owned(), |c| {
                        format!("{} [{}, {}]", num(c.mean), num(c.lo), num(c.hi))
                    }),
                    num(br.tolerance),
                    br.verdict.as_str().to_owned(),
                    esc(&br.reason),
                ]);
            }
            Err(e) => {
                row.extend([
                    "–".to_owned(),
                    "–".to_owned(),
                    "–".to_owned(),
                    "–".to_owned(),
                    "–".to_owned(),
                ]);
                row.push(esc(&e.to_string()));
            }
        }
        rows.push(row);
    }
    out.push_str(&table(
        &[
            "bridge",
            "shared items",
            "raw shift",
            "corrected shift",
            "tolerance",
            "verdict",
            "why",
        ],
        &rows,
    ));
    out
}

/// A pairwise cell's page: its trained versions (the calibrated preference each chose, and
/// what it was trained on), and where its judge's biases and ratings are read.
async fn pairwise_html(
    service: &crate::service::Service,
    key: &CellKey,
) -> Result<String, ApiError> {
    let versions = match service.pairwise().preference_versions(key).await {
        Ok(v) => v,
        Err(Error::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut out = format!(
        "<p class=\"note\">A pairwise cell: its judge compares two systems' answers. Its judge's biases \
         beside the people's are at <code>GET /v1/cells/{0}/{1}/preferences</code>; a run of its verdicts is \
         rated with <code>POST /v1/ratings</code>. The agreement report and the calibration picture are of \
         cells of scores.</p><h2>Versions</h2>",
        esc(key.judge.as_str()),
        esc(key.rubric.as_str())
    );
    if versions.is_empty() {
        out.push_str(
            "<p class=\"note\">No trained version: ratings choose the calibrated preference at each \
             request; train one with <code>POST /v1/judges/&lt;judge&gt;/calibrations</code>.</p>",
        );
        return Ok(out);
    }
    // Newest first: the newest of each judge version serves that version's requests.
    let mut seen = Vec::new();
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            let serves = !seen.contains(&&v.judge_version);
            seen.push(&v.judge_version);
            vec![
                v.version.to_string(),
                if serves { "serves" } else { "" }.to_owned(),
                esc(&v.report.chosen),
                esc(v.judge_version.as_ref().map_or("–", |j| j.as_str())),
                v.comparison_count.to_string(),
                v.labelled_count.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "version",
            "state",
            "calibrated preference",
            "judge version",
            "comparisons",
            "labelled",
        ],
        &rows,
    ));
    Ok(out)
}

/// The most recent bridges the page lists.
const BRIDGE_ROWS: usize = 10;

/// The most recent batches the drift table lists.
const DRIFT_ROWS: usize = 30;

/// The drift alarm's evidence over time: each checked batch with the e-value after it.
fn drift_html(e: &DriftEvidence) -> String {
    let mut out = String::from("<h2>Drift alarm</h2>");
    let last = e.path.last();
    let _ = write!(
        out,
        "<p class=\"note\">Version {}: {} anchors in {} batches checked against its 95% \
         bands since it was activated, tested against a miss rate of {}. The alarm fires when \
         the e-value reaches {}; it now stands at {} (peak {}){}.</p>",
        e.version,
        last.map_or(0, |d| d.anchors),
        e.batches.len(),
        num(last.map_or(0.0, |d| d.miss_bound)),
        num(e.threshold),
        num(last.map_or(1.0, |d| d.e_value)),
        num(last.map_or(1.0, |d| d.peak)),
        if last.is_some_and(|d| d.alarm) {
            ": <span class=\"bad\">raised</span>"
        } else {
            ""
        }
    );
    let from = e.path.len().saturating_sub(DRIFT_ROWS);
    let rows: Vec<Vec<String>> = e
        .batches
        .iter()
        .zip(&e.path)
        .enumerate()
        .skip(from)
        .map(|(i, (&(checked, missed), d))| {
            vec![
                (i + 1).to_string(),
                checked.to_string(),
                missed.to_string(),
                num(d.e_value),
                if d.alarm {
                    "<span class=\"bad\">raised</span>".to_owned()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    out.push_str(&table(
        &["batch", "anchors", "missed", "e-value after", "alarm"],
        &rows,
    ));
    out
}

/// One cell: its picture, its agreement report and its versions.
pub async fn cell(
    State(state): State<AppState>,
    Reader(caller): Reader,
    Path((judge, rubric)): Path<(String, String)>,
) -> Result<Html<String>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let service = &state.service;
    let mut body = format!(
        "<p><a href=\"/ui/\">all cells</a></p><h1>{} / {}</h1>",
        esc(key.judge.as_str()),
        esc(key.rubric.as_str())
    );
    let pairwise = service
        .scores()
        .cells()
        .await?
        .into_iter()
        .any(|c| c.key == key && c.comparison_count > 0)
        || service
            .pairwise()
            .preference_versions(&key)
            .await
            .is_ok_and(|v| !v.is_empty());
    if pairwise {
        body.push_str(&pairwise_html(service, &key).await?);
        return Ok(page(&format!("{judge} / {rubric}"), &body));
    }
    let versions = service.versions().list(&key).await?;
    match service.scores().report_svg(&key, None).await {
        // The picture is the service's own SVG: inline, with no XML prologue.
        Ok(svg) => {
            let start = svg.find("<svg").unwrap_or(0);
            body.push_str("<h2>Calibration</h2>");
            body.push_str(&svg[start..]);
        }
        Err(e) => {
            let _ = write!(
                body,
                "<p class=\"note\">No picture: {}</p>",
                esc(&e.to_string())
            );
        }
    }
    // Items with their references only for a key that may list anchors, as the API.
    let items_allowed = caller.allows(crate::auth::Scope::Ingest);
    let query = AgreementQuery {
        top: if items_allowed { PAGE_TOP } else { 0 },
        ..AgreementQuery::default()
    };
    match service.scores().agreement(&key, &query).await {
        Ok(a) => body.push_str(&report_html(&a.report, items_allowed)),
        Err(e) => {
            let _ = write!(
                body,
                "<p class=\"note\">No agreement report: {}</p>",
                esc(&e.to_string())
            );
        }
    }
    body.push_str(&drift_section(service, &key).await);
    body.push_str(&bridges_html(service, &key).await);
    body.push_str(&versions_html(&versions));
    Ok(page(&format!("{judge} / {rubric}"), &body))
}
