//! Background work of a process: training workers that share the store's job queue with every
//! other process on the same database, and the refresh of the calibrator cache and training
//! metrics.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::Instrument;

mod deliveries;

use crate::service::{Progress, Service};
use crate::store::{ClaimedJob, Lease};

/// Starts the refresh task, the webhook sender and, when `jobs.enabled`, `jobs.workers` training workers. They
/// run until [`Service::stop_background`]; a worker then puts its running job back in the
/// queue.
pub fn spawn(service: &Arc<Service>, refresh_every: Duration) -> Vec<JoinHandle<()>> {
    let mut handles = vec![
        tokio::spawn(refresh(service.clone(), refresh_every)),
        tokio::spawn(deliveries::send_due(service.clone())),
    ];
    let settings = service.job_settings().clone();
    if settings.enabled {
        for n in 0..settings.workers {
            let owner = format!(
                "{}-{}-{n}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            handles.push(tokio::spawn(work(service.clone(), owner)));
        }
    }
    handles
}

async fn refresh(service: Arc<Service>, every: Duration) {
    let mut stop = service.stopping();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = service.versions().refresh_calibrators().await {
            tracing::warn!(error = ?e, "calibrator refresh failed; serving the cached versions");
        }
        // Batches whose upload's process stopped before checking them, given the upload time
        // to check its own.
        let stalled = crate::domain::now_ms() - crate::service::PENDING_CHECK_GRACE_MS;
        if let Err(e) = service.operations().drain_pending_checks(stalled).await {
            tracing::warn!(error = ?e, "queued drift checks not drained");
        }
        if let Err(e) = service.operations().refresh_coverage().await {
            tracing::warn!(error = ?e, "anchor coverage refresh failed");
        }
        if let Err(e) = service.versions().refresh_checks().await {
            tracing::warn!(error = ?e, "silent-change check gauges not refreshed");
        }
        if let Err(e) = service.pairwise().refresh_preference_metrics().await {
            tracing::warn!(error = ?e, "pairwise bias gauges not refreshed");
        }
        if let Err(e) = service.operations().count_finished_jobs().await {
            tracing::warn!(error = ?e, "training metrics refresh failed");
        }
    }
}

/// One worker: claim the oldest job (queued, or abandoned by a process whose lease ran out),
/// run it, repeat; sleep `jobs.poll_millis` (or until a job is queued here) when idle.
async fn work(service: Arc<Service>, owner: String) {
    let settings = service.job_settings().clone();
    let lease_ms = (settings.lease_secs * 1000) as i64;
    let poll = Duration::from_millis(settings.poll_millis);
    let mut stop = service.stopping();
    loop {
        if *stop.borrow() {
            return;
        }
        match service.store().job_rows().claim_job(&owner, lease_ms).await {
            Ok(Some(job)) => {
                let span = tracing::info_span!(
                    "job",
                    job_id = %job.id,
                    judge = %job.judge,
                    method = %job.kind,
                    attempt = job.attempts,
                );
                run(&service, &owner, job).instrument(span).await;
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = ?e, "cannot look for training jobs"),
        }
        tokio::select! {
            _ = stop.changed() => return,
            () = service.job_queued() => {}
            () = tokio::time::sleep(poll) => {}
        }
    }
}

async fn run(service: &Service, owner: &str, job: ClaimedJob) {
    let settings = service.job_settings();
    if job.attempts > settings.max_attempts {
        let e = crate::Error::Internal(format!(
            "gave up after {} attempts: each time, the process running it stopped before it finished",
            settings.max_attempts
        ));
        tracing::error!("{e}");
        if let Err(e) = service
            .operations()
            .fail_training(&job, owner, &e, false)
            .await
        {
            tracing::error!(error = ?e, "cannot mark the job failed");
        }
        return;
    }
    tracing::info!("training started");
    let lease_ms = (settings.lease_secs * 1000) as i64;
    let progress = Arc::new(Progress::default());
    let operations = service.operations();
    let training = operations.run_training(&job, progress.clone());
    tokio::pin!(training);
    // Renew the lease three times per lease period, so one slow write does not lose it.
    let mut renew = tokio::time::interval(Duration::from_millis((lease_ms / 3).max(1) as u64));
    renew.tick().await;
    let mut stop = service.stopping();
    let result = loop {
        tokio::select! {
            result = &mut training => break result,
            _ = renew.tick() => {
                let lease = service
                    .store()
                    .job_rows().renew_lease(job.id, owner, lease_ms, progress.share(), &progress.detail())
                    .await;
                match lease {
                    Ok(Lease::Held) => {}
                    Ok(Lease::CancelRequested) => {
                        // The training thread checks this between epochs (flow) or finishes
                        // its short fit (bayes); the job then ends as cancelled.
                        progress.cancel.store(true, Ordering::Relaxed);
                    }
                    Ok(Lease::Lost) => {
                        progress.cancel.store(true, Ordering::Relaxed);
                        tracing::warn!("lost the job's lease to another process; abandoning it");
                        return;
                    }
                    Err(e) => tracing::warn!(error = ?e, "cannot renew the job's lease"),
                }
            }
            _ = stop.changed() => {
                progress.cancel.store(true, Ordering::Relaxed);
                tracing::info!("shutting down: putting the job back in the queue");
                if let Err(e) = service.store().job_rows().release_job(job.id, owner).await {
                    tracing::warn!(error = ?e, "cannot release the job; it resumes when its lease runs out");
                }
                return;
            }
        }
    };
    let cancelled = progress.cancel.load(Ordering::Relaxed);
    match result {
        Ok(_) if cancelled => {
            let e = crate::Error::Internal("cancelled".into());
            if let Err(e) = service
                .operations()
                .fail_training(&job, owner, &e, true)
                .await
            {
                tracing::error!(error = ?e, "cannot mark the job cancelled");
            }
        }
        Ok(trained) => {
            // What the job last reported, for its caller; then the versions.
            let _ = service
                .store()
                .job_rows()
                .renew_lease(job.id, owner, lease_ms, 1.0, &progress.detail())
                .await;
            finish(service, owner, &job, &trained).await;
        }
        Err(e) => {
            tracing::warn!(error = ?e, cancelled, "training stopped");
            if let Err(e) = service
                .operations()
                .fail_training(&job, owner, &e, cancelled)
                .await
            {
                tracing::error!(error = ?e, "cannot mark the job failed");
            }
        }
    }
}

async fn finish(
    service: &Service,
    owner: &str,
    job: &ClaimedJob,
    trained: &crate::service::Trained,
) {
    match service
        .operations()
        .finish_training(job, owner, trained)
        .await
    {
        Ok(true) => tracing::info!(
            versions = trained.versions.len(),
            passed = trained
                .versions
                .iter()
                .filter(|v| v.model.failure().is_none())
                .count(),
            "training finished"
        ),
        Ok(false) => tracing::warn!("lost the job's lease before storing; another process has it"),
        Err(e) => {
            tracing::error!(error = ?e, "cannot store the trained versions");
            if let Err(e) = service
                .operations()
                .fail_training(job, owner, &e, false)
                .await
            {
                tracing::error!(error = ?e, "cannot mark the job failed");
            }
        }
    }
}
