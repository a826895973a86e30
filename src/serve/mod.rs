//! `sluice serve`: many pipelines in one process, from a watched directory of pipeline files
//! and from a Kafka Connect-compatible REST API that takes Debezium connector configurations
//! unchanged, all behind one admin endpoint.

mod connect;
mod manager;
mod offsets;
mod saved;
mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_runtime::admin::{self, AdminConfig, Directory, Serving};

use crate::import::Worker;
use connect::Connect;
use manager::{Manager, Settings};

/// What `sluice serve` was asked.
#[derive(Debug, Clone)]
pub(crate) struct Serve {
    /// The directory of pipeline files, watched.
    pub(crate) pipelines: Option<PathBuf>,
    /// The endpoint's address.
    pub(crate) bind: String,
    /// The endpoint's token, from a file.
    pub(crate) token_file: Option<PathBuf>,
    /// HTTPS: the certificate, the key, the client certificates' CAs.
    pub(crate) tls: (Option<PathBuf>, Option<PathBuf>, Option<PathBuf>),
    /// Where the API's connectors and their offsets are kept.
    pub(crate) data_dir: PathBuf,
    /// The Kafka brokers of the API's connectors (overrides the worker configuration's).
    pub(crate) bootstrap_servers: Option<String>,
    /// A Kafka Connect worker's properties file.
    pub(crate) worker_config: Option<PathBuf>,
    /// Bytes all pipelines' queues may hold together.
    pub(crate) max_queue_bytes: u64,
    /// How often the directory is looked at.
    pub(crate) watch_interval: Duration,
}

/// The worker's settings from its properties file and the command line.
fn worker(serve: &Serve) -> Result<Worker, String> {
    let mut worker = Worker::default();
    let mut bootstrap = None;
    if let Some(path) = &serve.worker_config {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the worker configuration {}: {e}",
                path.display()
            )
        })?;
        let mut ignored = Vec::new();
        for (k, v) in crate::import::properties(&text) {
            if k == "bootstrap.servers" {
                bootstrap = Some(v);
            } else if let Some(setting) = k.strip_prefix("producer.") {
                worker.producer.insert(setting.to_owned(), v);
            } else if crate::import::is_converter(&k) {
                worker.converters.insert(k, v);
            } else {
                ignored.push(k);
            }
        }
        if !ignored.is_empty() {
            tracing::info!(settings = ?ignored, "Worker settings with no use in Sluice (Kafka Connect's own: group, storage topics, REST, plugins) are not read.");
        }
    }
    worker.bootstrap = serve
        .bootstrap_servers
        .clone()
        .or(bootstrap)
        .unwrap_or_else(|| "${KAFKA_BOOTSTRAP_SERVERS:-localhost:9092}".into());
    Ok(worker)
}

/// Runs until SIGINT/SIGTERM, then stops every pipeline gracefully.
pub(crate) fn run(serve: Serve) -> Result<(), String> {
    let admin = AdminConfig {
        token: std::env::var("SLUICE_ADMIN_TOKEN")
            .ok()
            .map(sluice_engine::config::Secret::from),
        token_file: serve.token_file.clone(),
        tls_certificate: serve.tls.0.clone(),
        tls_key: serve.tls.1.clone(),
        tls_client_ca: serve.tls.2.clone(),
        ..AdminConfig::plain(&serve.bind)
    };
    admin.check()?;
    let settings = Settings {
        data_dir: serve.data_dir.clone(),
        worker: worker(&serve)?,
        max_queue_bytes: serve.max_queue_bytes,
    };
    let directory = Directory::default();
    let manager = Arc::new(Manager::new(settings, directory.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        // Before anything starts: a stop asked for while starting stops what started.
        let stop = stop_requested();
        tokio::pin!(stop);
        let connect = Arc::new(Connect::new(Arc::clone(&manager), serve.bind.clone()));
        let extension: Arc<dyn admin::Extension> = connect.clone();
        let address = admin::listen(&admin, directory, Serving::Many(Some(extension)))
            .await
            .map_err(|e| e.to_string())?;
        let scheme = if admin.tls_certificate.is_some() {
            "https"
        } else {
            "http"
        };
        eprintln!(
            "sluice: serving on {scheme}://{address} (Kafka Connect REST API, status page, metrics)"
        );
        let restored = Arc::clone(&connect);
        let dir = serve.data_dir.clone();
        let _ = tokio::task::spawn_blocking(move || restored.restore(&dir)).await;
        // Shared with the blocking scans: what a scan that panicked had seen stays.
        let watched = Arc::new(std::sync::Mutex::new(watch::Watched::default()));
        let mut first = true;
        loop {
            let (m, w) = (Arc::clone(&manager), Arc::clone(&watched));
            let dir = serve.pipelines.clone();
            let _ = tokio::task::spawn_blocking(move || {
                if let Some(dir) = dir {
                    let mut seen = w.lock().unwrap_or_else(|p| p.into_inner());
                    watch::scan(&dir, &mut seen, &m);
                }
                // The kept states of files gone while the server was down go too.
                if first {
                    m.prune_targets();
                }
            })
            .await;
            first = false;
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(serve.watch_interval) => {}
            }
        }
        tracing::info!("Stopping every pipeline.");
        let _ = tokio::task::spawn_blocking(move || manager.shutdown()).await;
        Ok(())
    })
}

/// Resolves at SIGINT or SIGTERM (the handlers are installed when this is called).
fn stop_requested() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let handlers = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    async move {
        #[cfg(unix)]
        if let (Ok(mut int), Ok(mut term)) = handlers {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
