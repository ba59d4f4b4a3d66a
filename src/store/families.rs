//! The store's families of tables, each a view of the one connection pool ([`Store`], which
//! keeps rubrics, cells and anchors itself): a family's queries live in its files, and a
//! query of another family names it, so the files' imports of this module show which tables
//! each one touches.

use super::Store;
use crate::family::family;

family!(
    Store,
    /// Calibration versions, judge settings, judge versions' scores and the checks between
    /// them (`calibrators.rs`, `judge_versions.rs`, `checks.rs`).
    VersionRows,
    version_rows
);
family!(
    Store,
    /// The drift alarm's records: coverage of stored batches, the queue of batches not yet
    /// checked, and the pairwise cells' coverage (`coverage.rs`, `pending_checks.rs`,
    /// `pairwise/drift.rs`).
    DriftRows,
    drift_rows
);
family!(
    Store,
    /// Pairwise comparisons, the calibrated preferences trained on them and their drift checks
    /// (the `pairwise/` folder).
    PairwiseRows,
    pairwise_rows
);
family!(
    Store,
    /// The leased queue of training jobs (`jobs.rs`).
    JobRows,
    job_rows
);
family!(
    Store,
    /// API keys (`keys.rs`).
    KeyRows,
    key_rows
);
family!(
    Store,
    /// Panels' definitions (`panels.rs`).
    PanelRows,
    panel_rows
);
family!(
    Store,
    /// Ranking sessions and the runs bound to them (`rank_sessions.rs`).
    SessionRows,
    session_rows
);
family!(
    Store,
    /// Webhooks and the log of their deliveries (`webhooks.rs`).
    WebhookRows,
    webhook_rows
);
