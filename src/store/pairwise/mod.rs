//! The pairwise family's tables: comparisons (written as anchors are), a pairwise cell's
//! trained versions (`preference_versions`) and its drift checks.

pub(super) mod comparisons;
pub(super) mod drift;
pub(super) mod versions;
