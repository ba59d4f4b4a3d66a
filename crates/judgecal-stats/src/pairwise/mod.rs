//! Pairwise judgements: two systems' answers to one prompt, and which is better.
//!
//! An outcome is the probability that the first system's answer is better: 1 (it won), 0 (it
//! lost), ½ (a tie, counted one half for each side as Chatbot Arena counts them), or any
//! number between (a share of raters, a judge's log-probabilities). `ratings` fits
//! Bradley–Terry ratings to such outcomes, with intervals and rank intervals that hold jointly.

pub mod ratings;
