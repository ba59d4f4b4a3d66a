//! Pairwise judgements: two systems' answers to one prompt, and which is better.
//!
//! An outcome is the probability that the first system's answer is better: 1 (it won), 0 (it
//! lost), ½ (a tie, counted one half for each side as Chatbot Arena counts them), or any
//! number between (a share of raters, a judge's log-probabilities). `ratings` fits
//! Bradley–Terry ratings to such outcomes, with intervals and rank intervals that hold jointly;
//! `preference` maps a judge's verdicts (both orders, covariates, the systems) to the
//! probability that people prefer a; `powered` rates systems by people's preferences from
//! many such predictions and a few labels (prediction-powered).

pub mod bias;
pub mod choice;
pub mod powered;
pub mod preference;
pub mod rate;
pub mod ratings;
pub mod win_rate;

/// The logistic function, without overflow.
pub(crate) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// ln σ(x), without overflow.
pub(crate) fn log_sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        -(-x).exp().ln_1p()
    } else {
        x - x.exp().ln_1p()
    }
}
