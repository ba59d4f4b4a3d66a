//! Test harness: a judgecal application on a fresh database of either backend, driven
//! in-process through `tower::ServiceExt::oneshot`.
//!
//! Postgres is the real server named by JUDGECAL_TEST_POSTGRES_URL (scripts/test sets it to the
//! local one); each test gets its own database. A Postgres test fails, never skips, when the
//! server cannot be reached.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use judgecal::auth::Scope;
use judgecal::config::Settings;
use judgecal::service::Service;
use judgecal::startup::Application;
use serde_json::Value;
use sqlx::Connection;
use tower::ServiceExt;

pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn postgres_base_url() -> String {
    std::env::var("JUDGECAL_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

/// A new, empty Postgres database; returns its URL.
pub async fn fresh_postgres_database() -> String {
    sqlx::any::install_default_drivers();
    let base = postgres_base_url();
    let mut conn = sqlx::AnyConnection::connect(&base)
        .await
        .unwrap_or_else(|e| {
            panic!("cannot reach Postgres at {base} (JUDGECAL_TEST_POSTGRES_URL): {e}")
        });
    let name = format!("jc_test_{}", uuid::Uuid::new_v4().simple());
    // The name is generated here, never taken from input.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create test database");
    let cut = base.rfind('/').expect("URL has a database");
    format!("{}/{name}", &base[..cut])
}

/// Settings for an app on a new, empty database of `backend`, bound to a free port. The folder
/// holds a SQLite file and must outlive the app.
pub async fn fresh_settings(backend: Backend) -> (Settings, Option<tempfile::TempDir>) {
    let (url, dir) = match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!("sqlite://{}/judgecal.db", dir.path().display());
            (url, Some(dir))
        }
        Backend::Postgres => (fresh_postgres_database().await, None),
    };
    let mut settings = Settings::defaults_with_database(&url);
    settings.server.bind = "127.0.0.1:0".into();
    (settings, dir)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct TestApp {
    pub router: Router,
    pub service: Arc<Service>,
    pub settings: Settings,
    /// A key with every scope.
    pub admin_key: String,
    _dir: Option<tempfile::TempDir>,
}

pub struct Response {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
}

impl TestApp {
    pub async fn new(backend: Backend) -> Self {
        Self::with(backend, |_| {}).await
    }

    /// An app whose settings `tweak` may change first.
    pub async fn with(backend: Backend, tweak: impl FnOnce(&mut Settings)) -> Self {
        let (mut settings, dir) = fresh_settings(backend).await;
        tweak(&mut settings);
        Self::on(settings, dir).await
    }

    /// An app over an existing database (a restart, or a second replica).
    pub async fn on(settings: Settings, dir: Option<tempfile::TempDir>) -> Self {
        let app = Application::build(settings.clone())
            .await
            .expect("application builds");
        let admin_key = app
            .service()
            .operations()
            .create_key(&[Scope::Admin], "tests")
            .await
            .expect("admin key");
        Self {
            router: app.router(),
            service: app.service().clone(),
            settings,
            admin_key,
            _dir: dir,
        }
    }

    /// Keeps the temporary folder of a SQLite app alive for a successor app on the same file.
    pub fn take_dir(&mut self) -> Option<tempfile::TempDir> {
        self._dir.take()
    }

    pub async fn send(&self, req: Request<Body>) -> Response {
        let res = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("router is infallible");
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Response {
            status,
            headers,
            body,
        }
    }

    pub fn request(&self, method: &str, path: &str) -> axum::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.admin_key))
    }

    pub async fn get(&self, path: &str) -> Response {
        self.send(self.request("GET", path).body(Body::empty()).unwrap())
            .await
    }

    pub async fn json(&self, method: &str, path: &str, body: &Value) -> Response {
        self.send(
            self.request(method, path)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
    }

    pub async fn csv(&self, path: &str, body: &str) -> Response {
        self.send(
            self.request("POST", path)
                .header("content-type", "text/csv")
                .body(Body::from(body.to_owned()))
                .unwrap(),
        )
        .await
    }

    pub async fn cell_count(&self, judge: &str, rubric: &str) -> Option<i64> {
        let cells = self.get("/v1/cells").await.body;
        cells["cells"]
            .as_array()
            .expect("cells array")
            .iter()
            .find(|c| c["judge"] == judge && c["rubric"] == rubric)
            .map(|c| c["anchor_count"].as_i64().unwrap())
    }
}

/// Asserts the error shape and code, returning the details.
pub fn assert_error(res: &Response, status: u16, code: &str) -> Vec<Value> {
    assert_eq!(res.status.as_u16(), status, "body: {}", res.body);
    assert_eq!(res.body["error"]["code"], code, "body: {}", res.body);
    assert!(
        res.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    res.body["error"]["details"]
        .as_array()
        .expect("details array")
        .clone()
}

/// Runs each named `async fn(Backend)` once on SQLite and once on Postgres, as the tests
/// `<name>::sqlite` and `<name>::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::Backend::Postgres).await
            }
        }
    )*};
}
