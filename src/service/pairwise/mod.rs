//! The pairwise family (`Pairwise`): comparison uploads, a pairwise cell's training and its
//! trained versions, its drift alarm, a pairwise judge's versions and bridges, panels of
//! pairwise judges, and ratings (`POST /v1/ratings`) with the checks of what they rest on.

pub mod answer;
pub(super) mod checks;
pub(super) mod comparisons;
pub(super) mod drift;
pub(super) mod judge_versions;
pub mod panels;
pub(super) mod ratings;
pub(super) mod training;
