//! The accept loop: HTTP/1.1 over hyper, with the bounds `axum::serve` does not set. A
//! connection must send a whole request header within `server.header_read_timeout_secs`
//! (hyper's timer also closes a kept-alive connection idle that long), at most
//! `server.max_connections` are open at once (past it new ones wait in the kernel's backlog),
//! and at shutdown requests in flight get `server.shutdown_timeout_secs` to finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The bounds of the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct AcceptBounds {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
    pub shutdown_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets requests in flight finish
/// for at most `bounds.shutdown_timeout`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    bounds: AcceptBounds,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_read_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        // A slot first, so that past the cap connections wait unaccepted.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a moment instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    tracing::info!(
        connections = graceful.count(),
        "shutting down: finishing requests in flight"
    );
    if tokio::time::timeout(bounds.shutdown_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            seconds = bounds.shutdown_timeout.as_secs(),
            "requests still in flight after server.shutdown_timeout_secs; stopping anyway"
        );
    }
}
