//! The service's families of use cases, each a view of the shared core ([`Service`]: the
//! store, the metrics, the caches and the settings). A family's methods live in its files; a
//! call into another family names it (`Versions(self.0).served(…)`), so the files' imports of
//! this module show which families each one uses.

use super::Service;
use crate::family::family;

family!(
    Service,
    /// Anchors, rubrics and cells, corrections of judge scores, agreement reports and report
    /// pictures (`service/anchors.rs`, `corrections.rs`, `agreement.rs`, `report.rs`).
    Scores,
    scores
);
family!(
    Service,
    /// Calibration versions: which one serves a request, activation, the cache of loaded
    /// versions and scales, judge versions and their bridges and checks (`versions.rs`,
    /// `bridges.rs`).
    Versions,
    versions
);
family!(
    Service,
    /// Panels of judges: definitions, their trainings and served versions, and which judges
    /// to call (`panels.rs`, `panel_members.rs`).
    Panels,
    panels
);
family!(
    Service,
    /// Run-level answers: estimates, compares, rankings and ranking sessions, and the repeats
    /// they read (`runlevel.rs`, `repeat_noise.rs`, `rank_sessions.rs`).
    Runs,
    runs
);
family!(
    Service,
    /// Pairwise judgements: comparison uploads, calibrated preferences and their versions,
    /// pairwise panels, drift, and ratings (the `pairwise/` folder).
    Pairwise,
    pairwise
);
family!(
    Service,
    /// Operations: training jobs, drift alarms and coverage, API keys and gauges (`jobs.rs`,
    /// `coverage.rs`, `keys.rs`).
    Operations,
    operations
);
family!(
    Service,
    /// Webhooks: the hooks keys make and the configured one, the alarms raised to them and
    /// their delivery log (`webhooks.rs`).
    Webhooks,
    webhooks
);
