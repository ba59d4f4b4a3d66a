//! The pairwise family's routes: comparison uploads (`POST /v1/comparisons`), a pairwise
//! cell's trained versions (`GET /v1/cells/{judge}/{rubric}/preferences`) and ratings
//! (`POST /v1/ratings`).

pub(super) mod comparisons;
pub(super) mod ratings;
pub(super) mod versions;
