//! The pairwise family's inputs and records: a comparison batch (a pairwise judge's verdicts
//! on two systems' answers, with the people's preference where labelled), a ratings request
//! (a run of comparisons and the answer's settings) and a pairwise cell's trained version.

pub mod comparisons;
pub mod ratings;
pub mod version;
