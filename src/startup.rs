//! Building and running the application: what `judgecal serve` and the tests share.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;

use crate::config::Settings;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::service::Service;
use crate::store::Store;

pub struct Application {
    listener: TcpListener,
    address: SocketAddr,
    router: Router,
    service: Arc<Service>,
    background: Vec<tokio::task::JoinHandle<()>>,
    bounds: crate::serve::AcceptBounds,
}

impl Application {
    /// Connects the store, migrates it (database.migrate_on_start), restores the gauges and
    /// the calibrator cache, starts the background tasks (training workers, cache refresh) and
    /// binds `server.bind` (port 0 picks a free port; `address()` tells which).
    pub async fn build(settings: Settings) -> Result<Self> {
        let store = Store::connect(
            &settings.database.url,
            settings.database.max_connections,
            settings.acquire_timeout(),
        )
        .await?;
        if settings.database.migrate_on_start {
            store.migrate().await?;
        }
        let service = Service::new(store, Metrics::new(), &settings);
        service.export_evaluations(crate::otel::Evaluations::start(&settings.otel)?);
        if service.store().ready().await? {
            service.webhooks().configure().await?;
            service.operations().refresh_gauges().await?;
        } else {
            tracing::warn!(
                "migrations are pending: /readyz answers 503 until `judgecal migrate` runs"
            );
        }
        if settings.auth.disabled {
            tracing::warn!(
                "auth.disabled = true: every request is allowed without an API key; for local use only"
            );
        }
        let background = crate::jobs::spawn(
            &service,
            std::time::Duration::from_millis(settings.calibrators.refresh_millis),
        );
        let router = crate::http::router(service.clone(), &settings);
        let bind = settings.bind_addr();
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| Error::Internal(format!("cannot listen on {bind} (server.bind): {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::Internal(format!("cannot read the bound address: {e}")))?;
        let bounds = crate::serve::AcceptBounds {
            header_read_timeout: std::time::Duration::from_secs(
                settings.server.header_read_timeout_secs,
            ),
            max_connections: settings.server.max_connections,
            shutdown_timeout: std::time::Duration::from_secs(settings.server.shutdown_timeout_secs),
        };
        Ok(Self {
            listener,
            address,
            router,
            service,
            background,
            bounds,
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The router, for driving the application in-process (`tower::ServiceExt::oneshot`).
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    /// Serves until `shutdown` resolves, then lets requests in flight finish (for at most
    /// `server.shutdown_timeout_secs`).
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        tracing::info!(address = %self.address, "judgecal listening");
        let store = self.service.store().clone();
        crate::serve::serve(self.listener, self.router, self.bounds, shutdown).await;
        // Workers put running jobs back in the queue for another process.
        self.service.stop_background();
        if let Some(e) = self.service.evaluations() {
            e.shutdown().await;
        }
        for handle in self.background {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), handle).await;
        }
        store.close().await;
        tracing::info!("judgecal stopped");
        Ok(())
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received; finishing requests in flight");
}
