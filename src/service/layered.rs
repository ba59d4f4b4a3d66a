//! Run-level items read through a version's covariate layer: each item's judge score becomes
//! its layer score at the item's covariates (or those held), and the run carries its loading
//! on the layer's coefficient errors.

use judgecal_stats::covariates::Misfit;
use judgecal_stats::runlevel::RunItems;

use crate::domain::Problem;
use crate::domain::calibration::CalibratorVersion;
use crate::domain::covariates::Covariates;

/// Replaces each item's judge score of `run` by `version`'s layer score at the item's
/// covariates, those named in `hold` at their held value; gives the covariates the items
/// carried that the version does not read, and the layer's misfit where the run's items lie.
/// Problems name the row and `{prefix}covariates.{name}` (or `{prefix}items` where the run
/// gave none).
pub(super) fn layered(
    version: &CalibratorVersion,
    run: &mut RunItems,
    covariates: Option<&[Covariates]>,
    hold: &Covariates,
    prefix: &str,
) -> std::result::Result<(Vec<String>, Option<Misfit>), Vec<Problem>> {
    let Some(layer) = &version.covariate_layer else {
        return Ok((Vec::new(), None));
    };
    if !hold.is_empty() && run.labelled() > 0 {
        return Err(vec![Problem::at(
            None,
            "hold",
            format!(
                "{prefix}items carry references, which are the people's scores at the items' own covariates: a held answer \
                 has no labelled path; send the labelled items without `hold`"
            ),
        )]);
    }
    let needed: Vec<&str> = layer.inputs.iter().map(|i| i.name.as_str()).collect();
    // A held covariate the version does not read (a typo, or one it did not keep) would hold
    // nothing while the answer says `held`.
    let unread: Vec<Problem> = hold
        .keys()
        .filter(|k| !needed.contains(&k.as_str()))
        .map(|k| {
            Problem::at(
                None,
                &format!("hold.{k}"),
                format!(
                    "version {} of {} does not read covariate {k} (it reads: {}); hold one of those",
                    version.version,
                    version.key,
                    if needed.is_empty() { "none".to_owned() } else { needed.join(", ") }
                ),
            )
        })
        .collect();
    if !unread.is_empty() {
        return Err(unread);
    }
    let all_held = needed.iter().all(|n| hold.keys().any(|k| k.as_str() == *n));
    let given: Vec<Covariates> = match covariates {
        Some(c) => c.to_vec(),
        None if all_held => vec![Covariates::new(); run.scores.len()],
        None => {
            return Err(vec![Problem::at(
                None,
                &format!("{prefix}items"),
                format!(
                    "version {} of {} corrects at the judge score and covariates ({}): send items {{\"score\", \"covariates\"}}, or hold them at one value (`hold`)",
                    version.version,
                    version.key,
                    needed.join(", ")
                ),
            )]);
        }
    };
    // Covariates the items carry that the version does not read: answered without them, and
    // said so (a typo such as `lenght` would otherwise pass unseen).
    let mut unread: Vec<String> = given
        .iter()
        .flat_map(|c| c.keys().map(|k| k.as_str().to_owned()))
        .filter(|k| !needed.contains(&k.as_str()))
        .collect();
    unread.sort_unstable();
    unread.dedup();
    let read: Vec<Covariates> = given
        .into_iter()
        .map(|mut c| {
            c.extend(hold.iter().map(|(k, v)| (k.clone(), *v)));
            c
        })
        .collect();
    let scores = version.layer_scores(&run.scores, &read, prefix.trim_end_matches('.'))?;
    let misfit = layer_errors(layer, run, &read);
    run.conditional = !hold.is_empty();
    if let Some(scores) = scores {
        run.scores = scores;
    }
    Ok((unread, misfit))
}

/// What a run read through `layer` at covariates `read` carries beyond its items' noise: its
/// loading on the layer's coefficient errors (from the run's mean design row) and, where its
/// items lie where the layer's held-out residuals sit off zero, that misfit (returned, to be
/// said).
fn layer_errors(
    layer: &judgecal_stats::covariates::Layer,
    run: &mut RunItems,
    read: &[Covariates],
) -> Option<Misfit> {
    let mut mean_row: Vec<f64> = Vec::new();
    for (&j, c) in run.scores.iter().zip(read) {
        let value = |name: &str| c.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| *v);
        if let Ok(x) = layer.design(j, &value) {
            if mean_row.is_empty() {
                mean_row = vec![0.0; x.len()];
            }
            for (m, v) in mean_row.iter_mut().zip(x) {
                *m += v;
            }
        }
    }
    let n = run.scores.len().max(1) as f64;
    mean_row.iter_mut().for_each(|m| *m /= n);
    run.input_loading = layer.loading(&mean_row);
    let misfit = layer.misfit(&|name| {
        read.iter()
            .filter_map(|c| c.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| *v))
            .collect()
    });
    run.misfit_variance = misfit.as_ref().map_or(0.0, Misfit::variance);
    misfit
}
