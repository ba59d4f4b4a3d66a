//! The agreement report's tables on a cell's page.

use std::fmt::Write;

use judgecal_stats::agreement::report::{Agreement, AgreementReport, Bias};
use judgecal_stats::repeats::RepeatReport;

use super::{esc, figure, num, table};

fn agreement_rows(a: &Agreement, name: &str) -> Vec<String> {
    vec![
        esc(name),
        a.n.to_string(),
        figure(a.pearson.as_ref()),
        figure(a.spearman.as_ref()),
        figure(a.kendall.as_ref()),
        figure(a.kappa.as_ref().map(|k| &k.cohen)),
        figure(a.kappa.as_ref().map(|k| &k.quadratic)),
    ]
}

fn bias_cells(b: &Bias) -> [String; 3] {
    [
        b.n.to_string(),
        figure(b.raw.as_ref()),
        figure(b.corrected.as_ref()),
    ]
}

/// The agreement report's tables.
pub(super) fn report_html(r: &AgreementReport, items_allowed: bool) -> String {
    let mut out = String::from("<h2>Agreement with the reference</h2>");
    let _ = write!(
        out,
        "<p class=\"note\">{} anchors, {} with a held-out corrected score (from a fit that did \
         not see them). 95% intervals in brackets.</p>",
        r.n, r.held_out
    );
    out.push_str(&table(
        &[
            "scores",
            "n",
            "Pearson",
            "Spearman",
            "Kendall τ-b",
            "Cohen κ",
            "quadratic κ",
        ],
        &[
            agreement_rows(&r.raw, "raw judge"),
            agreement_rows(&r.corrected, "corrected (held out)"),
        ],
    ));
    for w in &r.warnings {
        let _ = write!(out, "<p class=\"note\">{}</p>", esc(&w.message));
    }
    out.push_str(&bias_html(r));
    if let Some(rep) = &r.repeats {
        out.push_str(&repeats_html(rep));
    }
    out.push_str("<h2>Largest disagreements</h2>");
    if !items_allowed {
        out.push_str(
            "<p class=\"note\">Listing items with their references needs a key with the \
             <code>ingest</code> scope.</p>",
        );
        return out;
    }
    out.push_str(&disagreements_html(r));
    out
}

/// Bias (score − reference) by system and by judge score.
fn bias_html(r: &AgreementReport) -> String {
    let mut out = String::from("<h2>Bias (score − reference) by system</h2>");
    let mut groups: Vec<Vec<String>> = r
        .by_group
        .iter()
        .map(|g| {
            let mut row = vec![esc(&g.group)];
            row.extend(bias_cells(&g.bias));
            row
        })
        .collect();
    let mut all = vec!["all".to_owned()];
    all.extend(bias_cells(&r.bias));
    groups.push(all);
    out.push_str(&table(&["system", "n", "raw", "corrected"], &groups));
    out.push_str("<h2>Bias by judge score</h2>");
    let levels: Vec<Vec<String>> = r
        .by_level
        .iter()
        .map(|l| {
            let at = if l.from == l.to {
                num(l.from)
            } else {
                format!("{}–{}", num(l.from), num(l.to))
            };
            let mut row = vec![at];
            row.extend(bias_cells(&l.bias));
            row
        })
        .collect();
    out.push_str(&table(&["judge score", "n", "raw", "corrected"], &levels));
    out
}

/// The judge's repeat noise, where anchors carry repeats.
fn repeats_html(rep: &RepeatReport) -> String {
    let mut out = String::from("<h2>Repeat noise (the judge re-asked)</h2>");
    let _ = write!(
        out,
        "<p class=\"note\">{} anchors carry {} scores in all. Within-item variance of one \
         score {}; {:.1}% of the judge scores' variance, {:.1}% of the judge's own error.</p>",
        rep.items,
        rep.scores,
        figure(Some(&rep.within)),
        100.0 * rep.noise_share,
        100.0 * rep.share_of_judge_error
    );
    let rows: Vec<Vec<String>> = rep
        .by_repeats
        .iter()
        .map(|g| vec![g.k.to_string(), num(g.residual_ratio)])
        .collect();
    out.push_str(&table(
        &["scores per item", "error variance / one score's"],
        &rows,
    ));
    out
}

/// The largest disagreements, with their bands.
fn disagreements_html(r: &AgreementReport) -> String {
    let misses: Vec<Vec<String>> = r
        .disagreements
        .iter()
        .map(|d| {
            vec![
                esc(&d.item_id),
                esc(d.group.as_deref().unwrap_or("–")),
                num(d.judge_score),
                num(d.reference_score),
                num(d.corrected),
                d.band.map_or("–".to_owned(), |[lo, hi]| {
                    format!("[{}, {}]", num(lo), num(hi))
                }),
                match d.outside {
                    Some(true) => "<span class=\"bad\">outside</span>".to_owned(),
                    Some(false) => "inside".to_owned(),
                    None => "–".to_owned(),
                },
            ]
        })
        .collect();
    table(
        &[
            "item",
            "system",
            "judge",
            "reference",
            "corrected",
            "band",
            "reference",
        ],
        &misses,
    )
}
